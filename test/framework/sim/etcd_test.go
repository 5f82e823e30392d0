package sim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// etcdBridge is a bridge of the test's own, for machines in network namespaces without a
// node (whose bridge, node.Bridge, only one test on the machine may have at a time); its
// subnet is none of the node's.
const (
	etcdBridge     = "bpasimetcd0"
	etcdBridgeCIDR = "10.214.0.1/24"
)

// TestEtcdHostsServeTheApplicationEtcd: after the stand-in's cluster.yml, the first etcd host
// has kubespray's etcd CA and admin certificate, and a client made of those three files
// alone, read over SSH, reaches the application etcd at the host's 127.0.0.1:2379 through
// the SSH connection (as an operator's backup would) and reads what the application
// apiserver wrote. A host outside group etcd has neither the files nor an etcd; after
// reset.yml the etcd host has neither either.
func TestEtcdHostsServeTheApplicationEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEtcdSite(t, ctx)
	sim, ini, container, app := e.sim, e.ini, e.container, e.app
	m1, w1 := e.hosts["m1"], e.hosts["w1"]
	ca, cert, key := kubespraysim.EtcdFiles("m1")
	for _, f := range []string{ca, cert, key} {
		fi, err := os.Stat(m1.File(f))
		if assert.NoError(t, err, "m1 has %s", f) {
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "%s: kubespray's check certificate permissions makes it 0700", f)
		}
	}
	fi, err := os.Stat(m1.File(kubespraysim.EtcdCertDir))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), kubespraysim.EtcdCertDir)
	assert.NoDirExists(t, w1.File(kubespraysim.EtcdCertDir), "w1 is no etcd host: it has no etcd certificates")

	c := sshClient(t, ctx, m1)
	etcd := etcdThroughSSH(t, ctx, c, m1)
	resp, err := etcd.Get(ctx, "/registry/namespaces/kube-system")
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1, "the application apiserver's kube-system namespace, read from the application etcd through m1")

	assert.False(t, etcdAnswers(ctx, w1.IP, app.Etcd), "w1 serves no etcd")
	assert.True(t, etcdAnswers(ctx, m1.IP, app.Etcd), "m1 serves the application etcd on its address too, with a certificate for it")

	runPlaybook(t, ctx, sim, ini, container, "reset.yml", `{"reset_confirmation":"yes"}`)
	assert.NoDirExists(t, m1.File(kubespraysim.EtcdCertDir), "reset removes etcd's certificates")
	assert.False(t, etcdAnswers(ctx, m1.IP, app.Etcd), "after the reset m1 serves no etcd")
}

// etcdSite is a site of two machines, m1 (control plane and etcd) and w1 (worker), on the
// test's own bridge, after the stand-in's cluster.yml.
type etcdSite struct {
	app       *rig.AppAPIServer
	sim       *simhost.Cluster
	hosts     map[string]*simhost.Host
	ini       string
	container kubespraysim.Container
}

func startEtcdSite(t *testing.T, ctx context.Context) *etcdSite {
	t.Helper()
	c := StartCluster(t, ctx, ClusterOptions{Bridge: etcdBridge, CIDR: etcdBridgeCIDR, Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true},
		{Name: "w1", Roles: []string{"worker"}},
	}})
	return &etcdSite{app: c.App, sim: c.SSH, hosts: c.Machines, ini: c.Ini, container: c.Container}
}

// sshClient logs in to h with pkg/sshexec, as a step would.
func sshClient(t *testing.T, ctx context.Context, h *simhost.Host) *sshexec.Client {
	t.Helper()
	c, err := sshexec.Dial(ctx, h.IP, sshexec.Config{Port: h.Port, KeyFile: h.ClientKeyPath(), KnownHostsFile: h.KnownHostsPath()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// etcdThroughSSH is an etcd client made only of the files kubespray leaves on the etcd host
// h, read over c (logged in to h), that dials 127.0.0.1:2379 on h through c.
func etcdThroughSSH(t *testing.T, ctx context.Context, c *sshexec.Client, h *simhost.Host) *clientv3.Client {
	t.Helper()
	caPath, certPath, keyPath := kubespraysim.EtcdFiles(h.Name)
	read := func(p string) []byte {
		data, err := c.ReadFile(ctx, p)
		require.NoError(t, err)
		return data
	}
	ca, cert, key := read(caPath), read(certPath), read(keyPath)
	pair, err := tls.X509KeyPair(cert, key)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://127.0.0.1:" + strconv.Itoa(EtcdPort)},
		TLS:         &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialTimeout: 10 * time.Second,
		// Every connection is opened by the host, through the SSH connection: the endpoint
		// is the host's own loopback.
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return c.DialContext(ctx, "tcp", addr)
		})},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = etcd.Close() })
	return etcd
}

// etcdAnswers reports whether an etcd answers a TLS client with e's admin certificate at
// ip:EtcdPort, the server's certificate verified for ip.
func etcdAnswers(ctx context.Context, ip string, e *rig.AppEtcd) bool {
	tlsConfig, err := e.ClientTLS()
	if err != nil {
		return false
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + net.JoinHostPort(ip, strconv.Itoa(EtcdPort))}, TLS: tlsConfig, DialTimeout: 3 * time.Second})
	if err != nil {
		return false
	}
	defer c.Close()
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = c.Get(short, "/registry/namespaces/kube-system")
	return err == nil
}
