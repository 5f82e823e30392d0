package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Epoch is the time of every entry, layer and image: an image depends on its inputs only.
var Epoch = time.Unix(0, 0).UTC()

// Entry is one file, directory or symlink of a layer. Owners and modes are the entry's
// own, never the build machine's.
type Entry struct {
	// Path inside the image, without a leading slash: usr/local/bin/bpa.
	Path string
	// Mode holds the permission bits (with setuid, setgid, sticky) and fs.ModeDir or
	// fs.ModeSymlink for those.
	Mode     fs.FileMode
	UID, GID int
	// Data is a regular file's content.
	Data []byte
	// Link is a symlink's target.
	Link string
}

// Dir is a directory entry.
func Dir(p string, perm fs.FileMode, uid, gid int) Entry {
	return Entry{Path: p, Mode: fs.ModeDir | perm, UID: uid, GID: gid}
}

// File is a regular file owned by root.
func File(p string, perm fs.FileMode, data []byte) Entry {
	return Entry{Path: p, Mode: perm, Data: data}
}

// Symlink is a symlink owned by root.
func Symlink(p, target string) Entry {
	return Entry{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target}
}

// ReadFile is File with the content of a file of the build machine.
func ReadFile(p string, perm fs.FileMode, src string) (Entry, error) {
	data, err := os.ReadFile(src)
	return File(p, perm, data), err
}

// header is e's tar header, at Epoch, with numeric owners only (no user names: they
// would be the build machine's).
func (e Entry) header() (*tar.Header, error) {
	h := &tar.Header{Name: e.Path, Mode: int64(e.Mode.Perm()), Uid: e.UID, Gid: e.GID, ModTime: Epoch}
	if e.Mode&fs.ModeSetuid != 0 {
		h.Mode |= 0o4000
	}
	if e.Mode&fs.ModeSetgid != 0 {
		h.Mode |= 0o2000
	}
	if e.Mode&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
	switch {
	case e.Mode.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, e.Path+"/"
	case e.Mode&fs.ModeSymlink != 0:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
	case e.Mode.IsRegular():
		h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
	default:
		return nil, fmt.Errorf("%s: only files, directories and symlinks go in a layer", e.Path)
	}
	return h, nil
}

// withParents adds every missing parent directory (0755, root) and sorts by path, so a
// layer's order never depends on how its entries were listed.
func withParents(entries []Entry) ([]Entry, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		if e.Path == "" || strings.HasPrefix(e.Path, "/") || path.Clean(e.Path) != e.Path {
			return nil, fmt.Errorf("entry path %q: want a clean path without a leading slash", e.Path)
		}
		if _, dup := byPath[e.Path]; dup {
			return nil, fmt.Errorf("entry %s listed twice", e.Path)
		}
		byPath[e.Path] = e
	}
	for _, e := range entries {
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Dir(d, 0o755, 0, 0)
			}
		}
	}
	out := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Tar writes entries (with their parents, sorted) as an uncompressed layer.
func Tar(entries []Entry) ([]byte, error) {
	all, err := withParents(entries)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range all {
		h, err := e.header()
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layerFromTar is an uncompressed tar as a gzip layer; go-containerregistry compresses it
// with no name or time in the gzip header, so the digest is the content's.
func layerFromTar(data []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// layerFromTarFile is layerFromTar for a tar on disk (the Debian root filesystem).
func layerFromTarFile(p string) (v1.Layer, error) {
	return tarball.LayerFromFile(p)
}

// sha256Hex is the hex sha256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
