package sim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// renewBridge is this file's own bridge (see etcdBridge).
const (
	renewBridge     = "bpasimrenew0"
	renewBridgeCIDR = "10.215.0.1/24"
)

// TestCertRenewalScriptOnHost: after the stand-in's cluster.yml, every control-plane host has
// admin.conf and kubespray's k8s-certs-renew.sh, and a worker neither. Run over SSH on m2,
// the script re-signs m2's kubeadm leaves (CA kept) for BPA_SIM_CERT_VALIDITY, restarts its
// control-plane pods through crictl, and m2's apiserver, away meanwhile, serves the new
// certificate on its 127.0.0.1 (verified by m2's ca.crt) and the application apiserver on
// its address again; m1 was never away and still serves its old certificate. With m2's CA
// key gone, the script still exits as kubespray's does (no set -e), and the served
// certificate stays the old one.
func TestCertRenewalScriptOnHost(t *testing.T) {
	t.Setenv("BPA_SIM_CERT_VALIDITY", "48h")
	t.Setenv(EnvAPIServerRestart, "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := StartCluster(t, ctx, ClusterOptions{Bridge: renewBridge, CIDR: renewBridgeCIDR, Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true}, {Name: "m2", Roles: []string{"master"}, Etcd: true},
		{Name: "m3", Roles: []string{"master"}, Etcd: true}, {Name: "w1", Roles: []string{"worker"}},
	}})
	m1, m2, w1 := c.Machines["m1"], c.Machines["m2"], c.Machines["w1"]
	for _, m := range []*simhost.Host{m1, m2} {
		assert.FileExists(t, m.File("/etc/kubernetes/admin.conf"), "%s: kubeadm join --control-plane writes admin.conf", m.Name)
		fi, err := os.Stat(m.File("/usr/local/bin/k8s-certs-renew.sh"))
		if assert.NoError(t, err, m.Name) {
			assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
		}
	}
	assert.NoFileExists(t, w1.File("/usr/local/bin/k8s-certs-renew.sh"), "a worker has no control plane to renew")

	before1, before2 := served(t, ctx, m1), served(t, ctx, m2)
	assert.WithinDuration(t, time.Now().Add(48*time.Hour), before2.NotAfter, time.Hour, "BPA_SIM_CERT_VALIDITY")
	files, err := simcerts.Check(m2.File(simcerts.CertDir))
	require.NoError(t, err)
	ca, err := os.ReadFile(m2.File(simcerts.CertDir + "/ca.crt"))
	require.NoError(t, err)

	time.Sleep(1100 * time.Millisecond) // NotAfter has seconds: a renewal must be later
	t.Setenv("BPA_SIM_CERT_VALIDITY", "")
	conn := sshClient(t, ctx, m2)
	m2.ResetCalls()
	start := time.Now()
	stdout, stderr, code, err := conn.Run(ctx, []string{"/usr/local/bin/k8s-certs-renew.sh"})
	require.NoError(t, err)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	t.Logf("the script on m2 took %s:\n%s", time.Since(start).Round(time.Millisecond), stdout)
	assert.Contains(t, string(stdout), "certificate apiserver.crt renewed")
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the script waits for the apiserver, away for BPA_SIM_APISERVER_RESTART")
	var crictl []string
	for _, call := range m2.CallsTo("crictl") {
		crictl = append(crictl, strings.Join(call.Args[:1], " "))
	}
	assert.Equal(t, []string{"pods", "rmp"}, crictl)

	after, err := simcerts.Check(m2.File(simcerts.CertDir))
	require.NoError(t, err)
	for i := range after {
		assert.True(t, after[i].NotAfter.After(files[i].NotAfter), "%s renewed", after[i].Name)
		assert.WithinDuration(t, time.Now().Add(48*time.Hour), after[i].NotAfter, time.Hour, "the validity cluster.yml installed the script with")
	}
	caAfter, err := os.ReadFile(m2.File(simcerts.CertDir + "/ca.crt"))
	require.NoError(t, err)
	assert.Equal(t, ca, caAfter, "the CA is kept")
	assert.True(t, served(t, ctx, m2).NotAfter.After(before2.NotAfter), "m2 serves its renewed certificate")
	assert.Equal(t, before1.NotAfter, served(t, ctx, m1).NotAfter, "m1 was not restarted")

	require.NoError(t, os.Remove(m2.File(simcerts.CertDir+"/ca.key")))
	renewed := served(t, ctx, m2)
	stdout, _, code, err = conn.Run(ctx, []string{"/usr/local/bin/k8s-certs-renew.sh"})
	require.NoError(t, err)
	assert.Equal(t, 0, code, "kubespray's script has no set -e: its status is the last check-expiration's")
	assert.NotContains(t, string(stdout), "renewed")
	assert.Equal(t, renewed.NotAfter, served(t, ctx, m2).NotAfter, "nothing renewed: the old certificate again")
}

// served is the certificate h's apiserver presents on its own 127.0.0.1, reached through SSH
// and verified by h's kubeadm CA, once it answers (within 30 s).
func served(t *testing.T, ctx context.Context, h *simhost.Host) *x509.Certificate {
	t.Helper()
	conn := sshClient(t, ctx, h)
	ca, err := conn.ReadFile(ctx, simcerts.CertDir+"/ca.crt")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	port := strconv.Itoa(apiserverPort(t, h))
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := conn.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
		if err == nil {
			s := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
			err = s.HandshakeContext(ctx)
			if err == nil {
				defer s.Close()
				return s.ConnectionState().PeerCertificates[0]
			}
			raw.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no apiserver on its 127.0.0.1:%s: %v", h.Name, port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiserverPort is the port of the server admin.conf names on h.
func apiserverPort(t *testing.T, h *simhost.Host) int {
	t.Helper()
	data, err := os.ReadFile(h.File("/etc/kubernetes/admin.conf"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if _, server, ok := strings.Cut(line, "server: "); ok {
			_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimSpace(server), "https://"))
			require.NoError(t, err)
			p, err := strconv.Atoi(port)
			require.NoError(t, err)
			return p
		}
	}
	t.Fatalf("%s: admin.conf names no server", h.Name)
	return 0
}
