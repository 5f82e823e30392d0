package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// BackupStore keeps the snapshots of the backup area, each beside its record (BackupMeta).
// The HTTP handlers (backups.go) authenticate and authorize every request and check the
// names; a store only stores. Two implement it: the server's own disk (the default) and an
// S3 bucket the admin names (backups3.go). Either way steps talk to `bpa serve` only.
type BackupStore interface {
	// Put stores size bytes of body as the snapshot name of namespace/cluster, with m as
	// its record (m.Size set here), only when their sha256 is m.SHA256 (else ErrChecksum;
	// io.ErrUnexpectedEOF for a body cut short). It never replaces a snapshot
	// (ErrBackupExists) and keeps at most MaxBackupsPerCluster (ErrBackupsFull), refused
	// before any byte is read. A snapshot is listed only once all of it is stored, and a
	// failed Put leaves nothing.
	Put(ctx context.Context, namespace, cluster, name string, body io.Reader, size int64, m *BackupMeta) error
	// List returns the cluster's snapshots, oldest first.
	List(ctx context.Context, namespace, cluster string) ([]BackupMeta, error)
	// Open reads one snapshot, with its time for conditional requests (ErrNoBackup).
	Open(ctx context.Context, namespace, cluster, name string) (io.ReadSeekCloser, time.Time, error)
	// Delete removes one snapshot and its record (ErrNoBackup).
	Delete(ctx context.Context, namespace, cluster, name string) error
}

// Errors of a BackupStore, which the handlers answer with 409, 507 and 404.
var (
	ErrBackupExists = errors.New("snapshots are never replaced")
	ErrBackupsFull  = errors.New("the cluster holds the most backups the server keeps; delete old ones first")
	ErrNoBackup     = errors.New("no such backup")
	// ErrBackupStoreBusy: the store takes no more uploads at once now (503, Retry-After).
	ErrBackupStoreBusy = errors.New("the backup store takes no more large uploads at once; try again shortly")
)

// diskBackups keeps each cluster's snapshots in <dir>/<namespace>/<cluster>/, each with
// <name>.json beside it. lock is the server's publishing lock: it serializes the checks and
// the link into place of one cluster's snapshots, never an upload.
type diskBackups struct {
	dir  string
	lock func(key string) (unlock func())
}

func (d *diskBackups) clusterDir(ns, cluster string) string { return filepath.Join(d.dir, ns, cluster) }

// Put hashes the body as it writes it to a temp file, which is synced and linked into place
// only when its sha256 is the declared one. The upload runs without the cluster's lock (a
// slow writer of gigabytes must not hold up any other); the lock covers only the checks and
// the link, which never replaces a snapshot.
func (d *diskBackups) Put(_ context.Context, ns, cluster, name string, body io.Reader, size int64, m *BackupMeta) error {
	dir := d.clusterDir(ns, cluster)
	// Refused early, before any byte is read; checked again under the lock.
	if err := admitDiskBackup(dir, name); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := receiveBackup(dir, io.LimitReader(body, size), m)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer d.lock("backups/" + ns + "/" + cluster)()
	if err := admitDiskBackup(dir, name); err != nil {
		return err
	}
	return publishBackup(dir, name, tmp, m)
}

func (d *diskBackups) List(_ context.Context, ns, cluster string) ([]BackupMeta, error) {
	return listBackups(d.clusterDir(ns, cluster))
}

func (d *diskBackups) Open(_ context.Context, ns, cluster, name string) (io.ReadSeekCloser, time.Time, error) {
	f, err := os.Open(filepath.Join(d.clusterDir(ns, cluster), name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, time.Time{}, ErrNoBackup
	} else if err != nil {
		return nil, time.Time{}, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, time.Time{}, ErrNoBackup
	}
	return f, st.ModTime(), nil
}

// Delete removes the snapshot first: a record without its file is not listed.
func (d *diskBackups) Delete(_ context.Context, ns, cluster, name string) error {
	defer d.lock("backups/" + ns + "/" + cluster)()
	dir := d.clusterDir(ns, cluster)
	if err := os.Remove(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
		return ErrNoBackup
	} else if err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, name+metaSuffix))
	return nil
}

// admitDiskBackup refuses a name taken, or a cluster that holds the most snapshots the
// server keeps.
func admitDiskBackup(dir, name string) error {
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return fmt.Errorf("backup %s exists: %w", name, ErrBackupExists)
	}
	list, err := listBackups(dir)
	if err != nil {
		return err
	}
	return admitCount(len(list))
}

func admitCount(n int) error {
	if n >= MaxBackupsPerCluster {
		return fmt.Errorf("%d backups: %w", n, ErrBackupsFull)
	}
	return nil
}

// receiveBackup writes body to a temp file in dir, synced, and returns its path once its
// sha256 is m's; m.Size is set. On an error nothing is left.
func receiveBackup(dir string, body io.Reader, m *BackupMeta) (_ string, err error) {
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	m.Size, err = io.Copy(io.MultiWriter(tmp, h), body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return tmp.Name(), checkSum(h.Sum(nil), m)
}

// checkSum compares the sha256 of the bytes received with the declared one.
func checkSum(sum []byte, m *BackupMeta) error {
	if got := hex.EncodeToString(sum); got != m.SHA256 {
		return fmt.Errorf("%w: received %d bytes with sha256 %s, not the declared %s", ErrChecksum, m.Size, got, m.SHA256)
	}
	return nil
}

// publishBackup writes the metadata, then links the received file in as name: a link never
// replaces a file, so even a writer that slipped past the checks cannot overwrite one.
func publishBackup(dir, name, tmp string, m *BackupMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+metaSuffix), b, 0o640); err != nil {
		return err
	}
	return os.Link(tmp, filepath.Join(dir, name))
}

// listBackups lists a cluster's snapshots, oldest first.
func listBackups(dir string) ([]BackupMeta, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []BackupMeta{}, nil
	} else if err != nil {
		return nil, err
	}
	out := []BackupMeta{}
	for _, e := range entries {
		name, ok := recordOf(e.Name())
		if !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			continue // a crash between the two writes: not a backup
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m, err := parseRecord(name, b)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sortBackups(out)
	return out, nil
}

// recordOf is the snapshot a file (or object) name is the record of, if it is one.
func recordOf(file string) (string, bool) {
	name, ok := strings.CutSuffix(file, metaSuffix)
	return name, ok && validBackupName(name)
}

func parseRecord(name string, b []byte) (BackupMeta, error) {
	var m BackupMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("metadata of backup %s: %w", name, err)
	}
	return m, nil
}

// sortBackups orders snapshots oldest first, by name for equal times.
func sortBackups(l []BackupMeta) {
	sort.SliceStable(l, func(i, j int) bool {
		if !l[i].UploadedAt.Equal(l[j].UploadedAt) {
			return l[i].UploadedAt.Before(l[j].UploadedAt)
		}
		return l[i].Name < l[j].Name
	})
}
