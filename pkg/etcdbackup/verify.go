package etcdbackup

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// scratchName names the scratch etcd's only member.
const scratchName = "bpa-verify"

// scratchStartTimeout bounds the scratch etcd's start: a restored single member elects
// itself within a few ticks.
const scratchStartTimeout = time.Minute

// Verification is what the scratch etcd showed, and how long each part took.
type Verification struct {
	// Keys is how many keys the scratch etcd holds; Revision its store's revision.
	Keys, Revision           int64
	Restore, Start, ReadBack time.Duration
}

// Verify proves the snapshot at path: etcd's restore (which checks the snapshot's sha256
// trailer) into a scratch data dir, a scratch etcd started on it in this process, serving
// only on unix sockets in that dir, and the canary read back from it at the revision it
// was written. The dir and the scratch etcd are gone when Verify returns. Every failure
// wraps ErrNotVerified.
func Verify(ctx context.Context, path string, c Canary, scratchParent string, lg *zap.Logger) (Verification, error) {
	var v Verification
	if lg == nil {
		lg = zap.NewNop()
	}
	dir, err := mkScratch(scratchParent, "bpa-etcd-verify-")
	if err != nil {
		return v, fmt.Errorf("%w: scratch dir: %w", ErrNotVerified, err)
	}
	defer os.RemoveAll(dir)
	s := scratch{dir: dir, lg: lg}
	start := time.Now()
	if err := s.restore(path); err != nil {
		return v, fmt.Errorf("%w: %s does not restore: %w", ErrNotVerified, path, err)
	}
	v.Restore = time.Since(start)
	start = time.Now()
	e, cli, err := s.start(ctx)
	if err != nil {
		return v, fmt.Errorf("%w: the scratch etcd on %s does not start: %w", ErrNotVerified, path, err)
	}
	defer e.Close()
	defer cli.Close()
	v.Start = time.Since(start)
	start = time.Now()
	err = readBack(ctx, cli, c, &v)
	v.ReadBack = time.Since(start)
	if err != nil {
		return v, fmt.Errorf("%w: %s: %w", ErrNotVerified, path, err)
	}
	return v, nil
}

// maxSocketPath is the longest path a unix socket may have (sun_path's 108 bytes, less the
// terminating NUL).
const maxSocketPath = 107

// mkScratch makes the scratch dir under parent, or under /tmp when a socket in it would have
// a path longer than a unix socket may ("bind: invalid argument" otherwise, as under a
// test's long temp dir).
func mkScratch(parent, pattern string) (string, error) {
	dir, err := os.MkdirTemp(parent, pattern)
	if err != nil || len(filepath.Join(dir, "client.sock")) <= maxSocketPath {
		return dir, err
	}
	_ = os.Remove(dir)
	return os.MkdirTemp("/tmp", pattern)
}

// scratch is the throw-away member a snapshot is restored into.
type scratch struct {
	dir string
	lg  *zap.Logger
}

func (s scratch) dataDir() string { return filepath.Join(s.dir, "data") }

// socket is a unix URL in the scratch dir: no port to pick or race for, nothing reachable
// from the network, and gone with the dir.
func (s scratch) socket(name string) url.URL {
	return url.URL{Scheme: "unix", Path: filepath.Join(s.dir, name+".sock")}
}

// peerSocket is the peer listener's URL. etcd listens for peers on a unix URL's host alone
// (embed's configurePeerListeners passes u.Host, where its client listeners take host and
// path), so the path goes in the host: with it in the path, the peer listener was an
// abstract socket named by the kernel ("@..."), which etcd's unixListener.Close first tries
// to os.Remove relative to the working directory; in a step pod, whose working directory is
// the read-only root, that fails with EROFS, the listener is never closed, and the scratch
// etcd's Close hangs for good (http.Server.Shutdown waits for a Serve that never returns).
func (s scratch) peerSocket() url.URL {
	return url.URL{Scheme: "unix", Host: filepath.Join(s.dir, "peer.sock")}
}

// advertised is the URL the scratch member advertises, to its peers and clients: etcd wants
// a host:port there, and nothing dials it (the member is alone; the client dials the
// socket).
var advertised = url.URL{Scheme: "unix", Host: "localhost:0"}

// restore runs etcd's own restore (what `etcdutl snapshot restore` runs): the sha256 check,
// then a data dir of one member, s's.
func (s scratch) restore(path string) error {
	return snapshot.NewV3(s.lg).Restore(snapshot.RestoreConfig{
		SnapshotPath:        path,
		Name:                scratchName,
		OutputDataDir:       s.dataDir(),
		PeerURLs:            []string{advertised.String()},
		InitialCluster:      scratchName + "=" + advertised.String(),
		InitialClusterToken: scratchName,
	})
}

// start starts the scratch etcd on the restored data dir, and a client of it, once it
// serves.
func (s scratch) start(ctx context.Context) (*embed.Etcd, *clientv3.Client, error) {
	client, peer := s.socket("client"), s.peerSocket()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = scratchName, s.dataDir()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{advertised}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{advertised}
	cfg.InitialCluster = scratchName + "=" + advertised.String()
	cfg.ListenMetricsUrls = nil
	// Thrown away after one read: no fsync, and short ticks so that the lone member elects
	// itself at once.
	cfg.UnsafeNoFsync = true
	cfg.TickMs, cfg.ElectionMs = 2, 20
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(s.lg.Named("scratch-etcd"))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := ready(ctx, e); err != nil {
		e.Close()
		return nil, nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{client.String()}, DialTimeout: 10 * time.Second, Logger: s.lg.Named("scratch-client"), Context: ctx,
	})
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return e, cli, nil
}

// ready waits for the scratch etcd to serve, to fail, or for ctx.
func ready(ctx context.Context, e *embed.Etcd) error {
	timeout := time.NewTimer(scratchStartTimeout)
	defer timeout.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-timeout.C:
		return fmt.Errorf("not ready in %s", scratchStartTimeout)
	}
}

// readBack reads the canary (value and revision must match) and counts the keys.
func readBack(ctx context.Context, cli *clientv3.Client, c Canary, v *Verification) error {
	resp, err := cli.Get(ctx, c.Key)
	if err != nil {
		return fmt.Errorf("read the canary %s: %w", c.Key, err)
	}
	v.Revision = resp.Header.Revision
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("the canary %s is missing: the snapshot does not hold the write made just before it (revision %d)", c.Key, c.Revision)
	}
	kv := resp.Kvs[0]
	if string(kv.Value) != c.Value || kv.ModRevision != c.Revision {
		return fmt.Errorf("the canary %s holds %q at revision %d, not the %q written at revision %d just before the snapshot",
			c.Key, kv.Value, kv.ModRevision, c.Value, c.Revision)
	}
	count, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("count the keys: %w", err)
	}
	v.Keys = count.Count
	return nil
}

// Open restores the snapshot at path into a scratch etcd, as Verify does, and hands back a
// client of it for reading what the snapshot holds; close stops the scratch etcd and
// removes its dir.
func Open(ctx context.Context, path, scratchParent string, lg *zap.Logger) (_ *clientv3.Client, closeFn func(), err error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	dir, err := mkScratch(scratchParent, "bpa-etcd-open-")
	if err != nil {
		return nil, nil, err
	}
	s := scratch{dir: dir, lg: lg}
	if err := s.restore(path); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("%s does not restore: %w", path, err)
	}
	e, cli, err := s.start(ctx)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cli, func() { cli.Close(); e.Close(); os.RemoveAll(dir) }, nil
}
