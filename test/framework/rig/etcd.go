package rig

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strconv"
	"time"

	"github.com/akraino-edge-stack/bpa/test/framework"
)

// etcdSpec is one etcd runEtcd starts: the rig's own (plain http), or an application
// cluster's (TLS with client certificates required, as kubespray's etcd.env sets it).
type etcdSpec struct {
	dataDir string
	// clientPort and peerPort are its loopback ports. Zero picks free ones (picked again when
	// another process takes one first); runEtcd fills them in, so a restart finds the same.
	clientPort, peerPort int
	// tls, when set, serves clients over TLS only and requires their certificates.
	tls *etcdTLS
	// token is --initial-cluster-token, which a restore must be given too (empty: etcd's
	// default).
	token string
	// extra are more of etcd's arguments, last.
	extra []string
}

// etcdTLS is an etcd's server side (files) and the client the readiness check is.
type etcdTLS struct {
	caFile, certFile, keyFile string
	client                    *tls.Config // verifies the server and presents a client certificate
}

func (s *etcdSpec) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// url is the client URL on 127.0.0.1.
func (s *etcdSpec) url() string {
	return s.scheme() + "://127.0.0.1:" + strconv.Itoa(s.clientPort)
}

// etcdMember is the name of the one member of the rig's etcds.
const etcdMember = "rig"

func (s *etcdSpec) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.peerPort) }

// args are etcd's arguments for s: a single member on loopback. --unsafe-no-fsync: the data
// is thrown away with the test, and fsync dominates write latency otherwise.
func (s *etcdSpec) args() []string {
	peerURL := s.peerURL()
	args := []string{
		"--name=" + etcdMember,
		"--data-dir=" + s.dataDir,
		"--listen-client-urls=" + s.url(),
		"--advertise-client-urls=" + s.url(),
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + etcdMember + "=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	if s.token != "" {
		args = append(args, "--initial-cluster-token="+s.token)
	}
	if t := s.tls; t != nil {
		args = append(args, "--cert-file="+t.certFile, "--key-file="+t.keyFile,
			"--client-cert-auth", "--trusted-ca-file="+t.caFile)
	}
	return append(args, s.extra...)
}

// runEtcd starts the etcd spec describes through spawn (given etcd's arguments) and waits
// for its /health; it returns the client URL.
func runEtcd(ctx context.Context, spec *etcdSpec, spawn func(args []string) (*Process, error)) (url string, err error) {
	fixed := spec.clientPort != 0
	start := func() error {
		if !fixed {
			spec.clientPort, spec.peerPort = freePort(), freePort()
		}
		p, err := spawn(spec.args())
		if err != nil {
			return err
		}
		var client *tls.Config
		if spec.tls != nil {
			client = spec.tls.client
		}
		return waitFor(ctx, p, 30*time.Second, func(ctx context.Context) error {
			return httpGet(ctx, client, spec.url()+"/health", "")
		})
	}
	if fixed {
		err = start() // a restart: its ports, or none
	} else {
		err = retryPorts(start)
	}
	return spec.url(), err
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
	url, err := runEtcd(ctx, &etcdSpec{dataDir: filepath.Join(dir, "etcd"), extra: extra}, func(args []string) (*Process, error) {
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
	})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	return url
}
