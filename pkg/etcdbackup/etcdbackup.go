// Package etcdbackup takes etcd snapshots that are proven to restore (issue 30, item 1): it
// writes a canary key with a fresh random value, takes a snapshot from the same member over
// the etcd v3 API (the sha256 etcd appends checked as it streams), then restores the
// snapshot with etcd's own restore code (etcdutl's snapshot package) into a scratch data dir,
// starts a scratch etcd on it in this process, and reads the canary back. A snapshot is
// verified only when the scratch etcd serves that canary at the revision it was written.
//
// It is a library without Kubernetes: the step that runs it on an etcd member, where the
// snapshot is stored, the API and the schedule are its callers.
package etcdbackup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// CanaryKey is the key written just before every snapshot, under a prefix of BPA's own
// (kube-apiserver stores under /registry). Each backup overwrites it.
const CanaryKey = "/bpa.akraino.org/backup-canary"

// Canary is the write a snapshot must contain.
type Canary struct {
	Key   string
	Value string
	// Revision is the etcd revision of the write: the scratch etcd must serve the key at
	// exactly this modification revision.
	Revision int64
}

// Result is one verified (or failed) backup.
type Result struct {
	// Name is the snapshot file's base name; Path the file.
	Name, Path string
	// Size is the file's size in bytes, etcd's sha256 trailer included.
	Size int64
	// SHA256 is the hex sha256 of the whole file (what `sha256sum` prints), for whoever
	// stores or moves it; etcd's own digest of the database is its last 32 bytes.
	SHA256 string
	// Revision is the revision of the store the snapshot holds, as the scratch etcd serves
	// it (the snapshot stream's header carries none).
	Revision int64
	// EtcdVersion is the storage version the member reported for the snapshot; etcd before
	// 3.6 reports none.
	EtcdVersion string
	// TakenAt is when the snapshot stream started.
	TakenAt time.Time
	// Verified is set only when the scratch etcd served the canary back.
	Verified bool
	// Canary is the key and value the snapshot must contain.
	Canary Canary
	// Keys is how many keys the scratch etcd holds (the canary included).
	Keys int64
	// Timings are the parts of the backup.
	Timings Timings
}

// Timings are the durations of a backup's parts.
type Timings struct {
	Canary   time.Duration // the canary's write
	Snapshot time.Duration // the snapshot stream into the file
	Restore  time.Duration // etcd's restore into the scratch data dir
	Start    time.Duration // the scratch etcd's start, until ready
	ReadBack time.Duration // the canary's and the key count's reads
}

// Total is the sum of the parts.
func (t Timings) Total() time.Duration {
	return t.Canary + t.Snapshot + t.Restore + t.Start + t.ReadBack
}

// Backup writes a canary through cli (a client of one member: the snapshot is that
// member's state), snapshots the member into path, and verifies the snapshot. On a failed
// verification the Result comes back (Verified false) with the error; the file stays for
// the caller to inspect or delete. scratchParent is where the scratch etcd's temp dir goes
// ("" is os.TempDir()).
func Backup(ctx context.Context, cli *clientv3.Client, path, scratchParent string, lg *zap.Logger) (Result, error) {
	if n := len(cli.Endpoints()); n != 1 {
		// As etcdctl: a snapshot is one member's state, and the canary must be in it.
		return Result{}, fmt.Errorf("etcd snapshot: the client must name exactly one member, not %d", n)
	}
	start := time.Now()
	canary, err := WriteCanary(ctx, cli)
	if err != nil {
		return Result{}, err
	}
	wrote := time.Since(start)
	res, err := Save(ctx, cli, path)
	res.Canary, res.Timings.Canary = canary, wrote
	if err != nil {
		return res, err
	}
	v, err := Verify(ctx, path, canary, scratchParent, lg)
	res.Verified, res.Keys, res.Revision = err == nil, v.Keys, v.Revision
	res.Timings.Restore, res.Timings.Start, res.Timings.ReadBack = v.Restore, v.Start, v.ReadBack
	return res, err
}

// WriteCanary puts CanaryKey with a fresh random value.
func WriteCanary(ctx context.Context, kv clientv3.KV) (Canary, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails (Go 1.24)
	c := Canary{Key: CanaryKey, Value: hex.EncodeToString(b)}
	resp, err := kv.Put(ctx, c.Key, c.Value)
	if err != nil {
		return c, fmt.Errorf("etcd snapshot: write the canary %s: %w", c.Key, err)
	}
	c.Revision = resp.Header.Revision
	return c, nil
}

// Save streams a snapshot of the member m reaches into path (through path.part, renamed
// once complete), checking the sha256 etcd appends. It fills the Result's file fields,
// EtcdVersion, TakenAt and Timings.Snapshot.
func Save(ctx context.Context, m clientv3.Maintenance, path string) (Result, error) {
	res := Result{Name: filepath.Base(path), Path: path, TakenAt: time.Now()}
	resp, err := m.SnapshotWithVersion(ctx)
	if err != nil {
		return res, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer resp.Snapshot.Close()
	res.EtcdVersion = resp.Version
	sum, err := writeChecked(path, resp.Snapshot)
	res.Timings.Snapshot = time.Since(res.TakenAt)
	if err != nil {
		return res, fmt.Errorf("etcd snapshot into %s: %w", path, err)
	}
	res.Size, res.SHA256 = sum.size, sum.file
	return res, nil
}

// ErrNotVerified wraps every reason a snapshot failed its verification.
var ErrNotVerified = errors.New("etcd snapshot not verified")
