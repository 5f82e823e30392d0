package etcdbackup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
)

// digests are a snapshot file's size and sha256.
type digests struct {
	size int64
	file string // hex sha256 of the whole file
}

// writeChecked copies a snapshot stream into path (via path.part, synced, then renamed) and
// checks its last 32 bytes: etcd appends the sha256 of the database it streamed, which
// etcdctl's save only looks for (a size of 512n+32) and etcdutl's restore checks. Checking
// it here fails a torn or corrupted stream at once, not at restore time.
func writeChecked(path string, r io.Reader) (digests, error) {
	part := path + ".part"
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return digests{}, err
	}
	defer os.Remove(part) // a no-op once renamed
	defer f.Close()
	h := &trailerHash{db: sha256.New()}
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	n, err := io.Copy(w, r)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return digests{}, err
	}
	file, err := h.check()
	if err != nil {
		return digests{}, fmt.Errorf("%w (%d bytes streamed)", err, n)
	}
	if err := f.Sync(); err != nil {
		return digests{}, err
	}
	if err := f.Close(); err != nil {
		return digests{}, err
	}
	return digests{size: n, file: file}, os.Rename(part, path)
}

// trailerHash hashes everything written to it but the last sha256.Size bytes, which it
// keeps: the database, then etcd's digest of it.
type trailerHash struct {
	db   hash.Hash
	tail [sha256.Size]byte // the last bytes seen: tail[:n]
	n    int
}

func (t *trailerHash) Write(p []byte) (int, error) {
	if len(p) >= sha256.Size {
		cut := len(p) - sha256.Size
		t.db.Write(t.tail[:t.n])
		t.db.Write(p[:cut])
		t.n = copy(t.tail[:], p[cut:])
		return len(p), nil
	}
	if over := t.n + len(p) - sha256.Size; over > 0 {
		t.db.Write(t.tail[:over])
		t.n = copy(t.tail[:], t.tail[over:t.n])
	}
	t.n += copy(t.tail[t.n:], p)
	return len(p), nil
}

// check compares the trailer with the database's digest, and returns the whole file's
// digest (the database's hash state continued with the trailer: one pass over the data).
func (t *trailerHash) check() (string, error) {
	if t.n < sha256.Size {
		return "", fmt.Errorf("%w: shorter than etcd's sha256 trailer", ErrNotVerified)
	}
	if sum := t.db.Sum(nil); !bytes.Equal(sum, t.tail[:]) {
		return "", fmt.Errorf("%w: sha256 of the database %x, etcd's trailer says %x", ErrNotVerified, sum, t.tail)
	}
	t.db.Write(t.tail[:])
	return hex.EncodeToString(t.db.Sum(nil)), nil
}
