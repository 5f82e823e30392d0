package etcdbackup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// liveEtcd starts the real etcd (bin/etcd, as the rig runs it) and returns a client of it.
func liveEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	url := rig.EtcdForTest(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// putKeys writes n keys under prefix with values of about a Kubernetes object's size.
func putKeys(ctx context.Context, t testing.TB, kv clientv3.KV, prefix string, n int) {
	t.Helper()
	for i := range n {
		_, err := kv.Put(ctx, fmt.Sprintf("%s/%06d", prefix, i), value(i))
		require.NoError(t, err)
	}
}

// value is 150 bytes, different for each i.
func value(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(i)))
	return fmt.Sprintf("%x%x%x", sum, sum, sum)[:150]
}

// assertScratchGone checks that no scratch dir (and so no socket or data) is left in parent.
func assertScratchGone(t *testing.T, parent string) {
	t.Helper()
	left, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, left, "the scratch etcd's dir is removed")
}

// TestBackupVerifies: a snapshot of a real etcd restores, and the scratch etcd serves the
// canary written just before it, the keys of the live etcd, and nothing is left behind.
func TestBackupVerifies(t *testing.T) {
	ctx := testContext(t)
	cli := liveEtcd(t)
	putKeys(ctx, t, cli, "/registry/things", 200)
	scratchParent := t.TempDir()
	path := filepath.Join(t.TempDir(), "snap.db")

	res, err := Backup(ctx, cli, path, scratchParent, zaptest.NewLogger(t))
	require.NoError(t, err)

	assert.True(t, res.Verified)
	assert.Equal(t, "snap.db", res.Name)
	assert.EqualValues(t, 201, res.Keys, "the 200 keys and the canary")
	live, err := cli.Get(ctx, CanaryKey)
	require.NoError(t, err)
	require.Len(t, live.Kvs, 1)
	assert.Equal(t, string(live.Kvs[0].Value), res.Canary.Value, "the canary is the live etcd's")
	assert.Len(t, res.Canary.Value, 32, "16 random bytes, in hex")
	assert.GreaterOrEqual(t, res.Revision, res.Canary.Revision)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(sum[:]), res.SHA256, "the whole file's sha256")
	assert.EqualValues(t, len(data), res.Size)
	assert.NotEmpty(t, res.EtcdVersion)
	assert.WithinDuration(t, time.Now(), res.TakenAt, time.Minute)
	assert.Positive(t, res.Timings.Restore)
	assert.Positive(t, res.Timings.Start)
	assertScratchGone(t, scratchParent)
	_, err = os.Stat(path + ".part")
	assert.True(t, os.IsNotExist(err), "no .part file left")
	t.Logf("verified %d keys, %d bytes, revision %d in %s: %+v", res.Keys, res.Size, res.Revision, res.Timings.Total(), res.Timings)
}

// TestVerifyLeavesNothingRunning: after Verify, the scratch etcd's goroutines (its raft
// loop, gRPC server, listeners) and file descriptors (its database, WAL, sockets) are gone.
func TestVerifyLeavesNothingRunning(t *testing.T) {
	ctx := testContext(t)
	cli := liveEtcd(t)
	path := filepath.Join(t.TempDir(), "snap.db")
	canary, err := WriteCanary(ctx, cli)
	require.NoError(t, err)
	_, err = Save(ctx, cli, path)
	require.NoError(t, err)
	// What runs now (the live client's goroutines among them) may stay.
	ignore := goleak.IgnoreCurrent()
	fds := openFDs(t)

	_, err = Verify(ctx, path, canary, t.TempDir(), nil)
	require.NoError(t, err)

	goleak.VerifyNone(t, ignore)
	assert.LessOrEqual(t, openFDs(t), fds, "the scratch etcd's files and sockets are closed")
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(fds)
}

// savedWithCanary writes a canary, snapshots the live etcd, and returns the file.
func savedWithCanary(ctx context.Context, t *testing.T, cli *clientv3.Client) (string, Canary) {
	t.Helper()
	putKeys(ctx, t, cli, "/registry/things", 100)
	canary, err := WriteCanary(ctx, cli)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "snap.db")
	_, err = Save(ctx, cli, path)
	require.NoError(t, err)
	return path, canary
}

// TestCorruptSnapshotFailsVerification: a snapshot with bytes flipped in the middle, or cut
// short, is not verified, and the error says why.
func TestCorruptSnapshotFailsVerification(t *testing.T) {
	ctx := testContext(t)
	cli := liveEtcd(t)
	path, canary := savedWithCanary(ctx, t, cli)
	_, err := Verify(ctx, path, canary, t.TempDir(), nil)
	require.NoError(t, err, "the intact snapshot verifies")
	data, err := os.ReadFile(path)
	require.NoError(t, err)

	flipped := filepath.Join(t.TempDir(), "flipped.db")
	bad := append([]byte(nil), data...)
	for i := len(bad) / 2; i < len(bad)/2+16; i++ {
		bad[i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(flipped, bad, 0o600))
	_, err = Verify(ctx, flipped, canary, t.TempDir(), nil)
	require.ErrorIs(t, err, ErrNotVerified)
	assert.ErrorContains(t, err, "expected sha256")

	truncated := filepath.Join(t.TempDir(), "truncated.db")
	require.NoError(t, os.WriteFile(truncated, data[:len(data)/2], 0o600))
	_, err = Verify(ctx, truncated, canary, t.TempDir(), nil)
	require.ErrorIs(t, err, ErrNotVerified)
	assert.ErrorContains(t, err, "does not restore")
}

// TestCanaryNotInSnapshotFailsVerification: a snapshot that does not hold the canary's
// write (deleted before the snapshot), or holds an older canary (a stale snapshot checked
// against a newer write), is not verified.
func TestCanaryNotInSnapshotFailsVerification(t *testing.T) {
	ctx := testContext(t)
	cli := liveEtcd(t)

	canary, err := WriteCanary(ctx, cli)
	require.NoError(t, err)
	_, err = cli.Delete(ctx, canary.Key)
	require.NoError(t, err)
	deleted := filepath.Join(t.TempDir(), "deleted.db")
	_, err = Save(ctx, cli, deleted)
	require.NoError(t, err)
	_, err = Verify(ctx, deleted, canary, t.TempDir(), nil)
	require.ErrorIs(t, err, ErrNotVerified)
	assert.ErrorContains(t, err, "is missing")

	stale, _ := savedWithCanary(ctx, t, cli)
	newer, err := WriteCanary(ctx, cli)
	require.NoError(t, err)
	_, err = Verify(ctx, stale, newer, t.TempDir(), nil)
	require.ErrorIs(t, err, ErrNotVerified)
	assert.ErrorContains(t, err, "not the")
}

// TestSaveChecksTheTrailer: a stream whose last 32 bytes are not the sha256 of what came
// before (a torn or corrupted stream) fails the save, and no file is left.
func TestSaveChecksTheTrailer(t *testing.T) {
	db := []byte("not much of a database, but bytes all the same")
	sum := sha256.Sum256(db)
	dir := t.TempDir()
	for name, stream := range map[string][]byte{
		"good":  append(append([]byte(nil), db...), sum[:]...),
		"bad":   append(append([]byte(nil), db...), make([]byte, sha256.Size)...),
		"short": sum[:20],
	} {
		path := filepath.Join(dir, name)
		d, err := writeChecked(path, bytes.NewReader(stream))
		if name == "good" {
			require.NoError(t, err)
			whole := sha256.Sum256(stream)
			assert.Equal(t, hex.EncodeToString(whole[:]), d.file)
			continue
		}
		require.ErrorIs(t, err, ErrNotVerified, name)
		_, err = os.Stat(path)
		assert.True(t, os.IsNotExist(err), name)
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, left, 1, "only the good file, no .part")
}

// TestTrailerHashAnyChunking: the trailer is found however the stream is cut into writes,
// also when it spans several.
func TestTrailerHashAnyChunking(t *testing.T) {
	db := bytes.Repeat([]byte("etcd"), 100)
	sum := sha256.Sum256(db)
	stream := append(append([]byte(nil), db...), sum[:]...)
	whole := sha256.Sum256(stream)
	for _, size := range []int{1, 7, 31, 32, 33, 100, len(stream)} {
		h := &trailerHash{db: sha256.New()}
		for rest := stream; len(rest) > 0; {
			n := min(size, len(rest))
			_, _ = h.Write(rest[:n])
			rest = rest[n:]
		}
		file, err := h.check()
		require.NoError(t, err, "writes of %d bytes", size)
		assert.Equal(t, hex.EncodeToString(whole[:]), file, "writes of %d bytes", size)
	}
	h := &trailerHash{db: sha256.New()}
	_, _ = h.Write(stream[:len(stream)-1])
	_, _ = h.Write([]byte{stream[len(stream)-1] ^ 1})
	_, err := h.check()
	require.ErrorIs(t, err, ErrNotVerified, "one bit off in the trailer")
}

// TestBackupWantsOneMember: a client of several members is refused before any write, as
// etcdctl refuses it: the snapshot would be whichever member answers.
func TestBackupWantsOneMember(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}})
	require.NoError(t, err)
	defer cli.Close()
	_, err = Backup(testContext(t), cli, filepath.Join(t.TempDir(), "snap.db"), "", nil)
	require.ErrorContains(t, err, "exactly one member, not 2")
}

// Open shows what a snapshot holds: the keys written before it, not those after.
func TestOpenReadsTheSnapshot(t *testing.T) {
	ctx := testContext(t)
	cli := liveEtcd(t)
	_, err := cli.Put(ctx, "/registry/configmaps/default/before", "1")
	require.NoError(t, err)
	res, err := Backup(ctx, cli, filepath.Join(t.TempDir(), "s.db"), t.TempDir(), nil)
	require.NoError(t, err)
	_, err = cli.Put(ctx, "/registry/configmaps/default/after", "2")
	require.NoError(t, err)
	snap, closeFn, err := Open(ctx, res.Path, t.TempDir(), nil)
	require.NoError(t, err)
	defer closeFn()
	got, err := snap.Get(ctx, "/registry/configmaps/default/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, "/registry/configmaps/default/before", string(got.Kvs[0].Key))
}

// The scratch etcd's peer listener is the socket in its dir, not an abstract socket whose
// Close tries to remove "@..." from the working directory (and, where that is read-only,
// as in a step pod, never closes it: Close hung).
func TestScratchPeerSocketIsInItsDir(t *testing.T) {
	dir := t.TempDir()
	s := scratch{dir: dir, lg: zap.NewNop()}
	cli := liveEtcd(t)
	ctx := testContext(t)
	res, err := Save(ctx, cli, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	require.NoError(t, s.restore(res.Path))
	e, c, err := s.start(ctx)
	require.NoError(t, err)
	defer e.Close()
	defer c.Close()
	require.Len(t, e.Peers, 1)
	assert.Equal(t, filepath.Join(dir, "peer.sock"), e.Peers[0].Listener.Addr().String())
}

// A scratch parent too long for a unix socket's path still verifies and opens (the scratch
// etcd's sockets then go under /tmp).
func TestLongScratchParent(t *testing.T) {
	ctx := testContext(t)
	cli := liveEtcd(t)
	parent := filepath.Join(t.TempDir(), strings.Repeat("a-long-folder-name-", 5))
	require.NoError(t, os.MkdirAll(parent, 0o755))
	res, err := Backup(ctx, cli, filepath.Join(t.TempDir(), "s.db"), parent, nil)
	require.NoError(t, err)
	snap, closeFn, err := Open(ctx, res.Path, parent, nil)
	require.NoError(t, err)
	defer closeFn()
	got, err := snap.Get(ctx, CanaryKey)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, res.Canary.Value, string(got.Kvs[0].Value), "the opened snapshot holds the backup's canary")
}
