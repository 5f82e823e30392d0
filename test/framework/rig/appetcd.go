package rig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// AppEtcd is the etcd of one application apiserver, as kubespray runs a cluster's: clients
// over TLS only, each with a certificate its CA signed (roles/etcd/templates/etcd.env.j2:
// ETCD_CLIENT_CERT_AUTH, ETCD_TRUSTED_CA_FILE), and a CA of its own. It holds that
// application cluster and nothing else, so a snapshot of it is that cluster's, and restoring
// it rolls back that cluster only, never the rig's.
//
// It listens on 127.0.0.1 only; the simulated hosts of a site serve it on their addresses
// and their own 127.0.0.1 at port 2379 (test/framework/sim), as an etcd host does.
type AppEtcd struct {
	// Endpoint is the client URL, https://127.0.0.1:<Port>.
	Endpoint string
	Port     int
	// CAFile verifies the server and signed every client certificate it accepts: kubespray's
	// ca.pem. CertFile and KeyFile are an admin client certificate and key (CN etcd-admin):
	// what kubespray leaves on each etcd host as admin-<host>.pem and admin-<host>-key.pem.
	CAFile, CertFile, KeyFile string
	// DataDir is etcd's --data-dir. A restore replaces it while etcd is stopped (Stop, Start)
	// with one of a single member MemberName at PeerURL (etcdutl snapshot restore --name
	// <MemberName> --initial-cluster <MemberName>=<PeerURL> --initial-advertise-peer-urls
	// <PeerURL> --initial-cluster-token <ClusterToken>), or StartFrom starts etcd on another.
	DataDir             string
	MemberName, PeerURL string
	// ClusterToken is etcd's --initial-cluster-token: kubespray's (AppEtcdClusterToken).
	ClusterToken string

	rig     *Rig
	run     restartable // "<app>-etcd"
	apiCert string      // the apiserver's client certificate and key
	apiKey  string
	spec    etcdSpec
}

// AppEtcdClusterToken is the --initial-cluster-token of every application etcd: the one
// kubespray's roles/etcd/templates/etcd.env.j2 writes (ETCD_INITIAL_CLUSTER_TOKEN).
const AppEtcdClusterToken = "k8s_etcd"

// EtcdServerDNSNames are the DNS names of an application etcd's serving certificate; its IP
// addresses are 127.0.0.1 and those of the simulated hosts that front it.
var EtcdServerDNSNames = []string{"localhost"}

// startAppEtcd makes the CA and certificates of an application etcd named name (its folder
// "<name>-etcd" in the rig's Dir) whose serving certificate holds ips, and starts it.
func (r *Rig) startAppEtcd(ctx context.Context, name string, ips []net.IP) (*AppEtcd, error) {
	dir := filepath.Join(r.Dir, name+"-etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	e := &AppEtcd{
		CAFile: f("ca.pem"), CertFile: f("admin.pem"), KeyFile: f("admin-key.pem"), DataDir: f("data"),
		rig: r, run: restartable{name: name + "-etcd"}, apiCert: f("apiserver-etcd-client.pem"), apiKey: f("apiserver-etcd-client-key.pem"),
	}
	if err := e.writeCerts(dir, ips); err != nil {
		return nil, err
	}
	client, err := e.ClientTLS()
	if err != nil {
		return nil, err
	}
	e.spec = etcdSpec{dataDir: e.DataDir, token: AppEtcdClusterToken, tls: &etcdTLS{caFile: e.CAFile, certFile: f("server.pem"), keyFile: f("server-key.pem"), client: client}}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	e.Port, e.Endpoint, e.MemberName, e.PeerURL = e.spec.clientPort, e.spec.url(), etcdMember, e.spec.peerURL()
	e.ClusterToken = e.spec.token
	return e, nil
}

// writeCerts writes the CA (as kubespray's make-ssl-etcd.sh names it, etcd-ca), the
// serving certificate for ips, the admin client certificate and the apiserver's.
func (e *AppEtcd) writeCerts(dir string, ips []net.IP) error {
	ca, err := newCA("etcd-ca")
	if err != nil {
		return err
	}
	if err := os.WriteFile(e.CAFile, ca.pem, 0o600); err != nil {
		return err
	}
	for _, c := range []struct {
		cn        string
		usage     x509.ExtKeyUsage
		ips       []net.IP
		cert, key string
	}{
		{"etcd-server", x509.ExtKeyUsageServerAuth, ips, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")},
		{"etcd-admin", x509.ExtKeyUsageClientAuth, nil, e.CertFile, e.KeyFile},
		{"kube-apiserver-etcd-client", x509.ExtKeyUsageClientAuth, nil, e.apiCert, e.apiKey},
	} {
		der, key, err := ca.issue(c.cn, c.usage, c.ips, EtcdServerDNSNames...)
		if err != nil {
			return err
		}
		if err := writeCertAndKey(c.cert, c.key, der, key); err != nil {
			return err
		}
	}
	return nil
}

// ClientTLS is a TLS client configuration with the admin certificate that verifies the
// server against CAFile, for any of the addresses its certificate holds.
func (e *AppEtcd) ClientTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(e.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", e.CAFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Start starts etcd again after Stop, on the same ports and DataDir, and waits for its
// /health. (The rig starts it first.)
func (e *AppEtcd) Start(ctx context.Context) error {
	return e.run.start(func(name string) (p *Process, err error) {
		_, err = runEtcd(ctx, &e.spec, func(args []string) (*Process, error) {
			p, err = e.rig.Spawn(name, nil, "etcd", args...)
			return p, err
		})
		return p, err
	})
}

// StartFrom starts etcd as Start does, on dataDir from now on, as the member name at peerURL
// says it must run: the etcd of an etcd host whose data dir and /etc/etcd.env are dataDir
// and those. This etcd runs as MemberName at PeerURL only, so other values are refused
// rather than ignored: a data dir restored for another member is not one it can run.
func (e *AppEtcd) StartFrom(ctx context.Context, dataDir, name, peerURL string) error {
	if name != e.MemberName || peerURL != e.PeerURL {
		return fmt.Errorf("etcd runs as member %s at %s, not %s at %s", e.MemberName, e.PeerURL, name, peerURL)
	}
	if e.Running() {
		return nil
	}
	e.spec.dataDir, e.DataDir = dataDir, dataDir
	return e.Start(ctx)
}

// Running reports whether etcd's process runs.
func (e *AppEtcd) Running() bool { return e.run.running() }

// Stop stops etcd (SIGTERM, then SIGKILL after a grace period) and waits for it to exit.
func (e *AppEtcd) Stop() { e.run.stop() }

// restartable is a process of the rig's that a test stops and starts again. Each start
// after the first logs to a file of its own ("<name>-2", ...), so the earlier runs' logs
// stay.
type restartable struct {
	name   string
	mu     sync.Mutex
	proc   *Process
	starts int
}

// start runs a start of the process, given the name of its log, unless it is running.
func (r *restartable) start(run func(name string) (*Process, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil && !r.proc.Exited() {
		return errors.New(r.name + " is running")
	}
	r.starts++
	name := r.name
	if r.starts > 1 {
		name += "-" + strconv.Itoa(r.starts)
	}
	p, err := run(name)
	if p != nil {
		r.proc = p
	}
	return err
}

func (r *restartable) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil && !r.proc.Exited()
}

func (r *restartable) stop() {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// apiServerArgs are the flags that make an apiserver store its objects in e.
func (e *AppEtcd) apiServerArgs() []string {
	return []string{
		"--etcd-servers=" + e.Endpoint,
		"--etcd-cafile=" + e.CAFile,
		"--etcd-certfile=" + e.apiCert,
		"--etcd-keyfile=" + e.apiKey,
	}
}
