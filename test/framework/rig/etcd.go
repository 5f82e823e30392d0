package rig

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/akraino-edge-stack/bpa/test/framework"
)

// runEtcd starts a single-member etcd on dataDir through spawn (given etcd's arguments,
// extra last) on free loopback ports, and waits for its /health. --unsafe-no-fsync: the
// data is thrown away with the test, and fsync dominates write latency otherwise.
func runEtcd(ctx context.Context, dataDir string, spawn func(args []string) (*Process, error), extra ...string) (url string, err error) {
	err = retryPorts(func() error {
		client, peer := freePort(), freePort()
		url = "http://127.0.0.1:" + strconv.Itoa(client)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
		args := append([]string{
			"--name=rig",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + url,
			"--advertise-client-urls=" + url,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=rig=" + peerURL,
			"--unsafe-no-fsync",
			"--log-level=warn",
		}, extra...)
		p, err := spawn(args)
		if err != nil {
			return err
		}
		return waitFor(ctx, p, 30*time.Second, func(ctx context.Context) error {
			return httpGetOK(ctx, nil, url+"/health", "")
		})
	})
	return url, err
}

// EtcdForTest starts the rig's etcd (bin/etcd) alone, without an apiserver, for tests of
// etcd itself (pkg/etcdbackup): data and log in a temp dir of t's, stopped at t's cleanup,
// the log's tail logged when t failed. It returns the client URL (http on 127.0.0.1).
func EtcdForTest(t framework.T, extra ...string) string {
	t.Helper()
	RequireTools(t)
	bin, err := DefaultBinDir()
	if err != nil {
		t.Fatalf("%v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := runEtcd(ctx, filepath.Join(dir, "etcd"), func(args []string) (*Process, error) {
		p, err := spawn(dir, "etcd", nil, nil, filepath.Join(bin, "etcd"), args...)
		if err == nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("--- last lines of %s ---\n%s", p.LogPath(), p.tail(40))
				}
				p.Stop()
			})
		}
		return p, err
	}, extra...)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	return url
}
