package nodetrust_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// The artifact server's name in these tests, and names the same CA signs certificates for
// that are not its: another DNS name, one given only as the subject's common name (which
// OpenSSL and GnuTLS still match when a certificate has no DNS name), and an IP address.
const (
	artifactsHost = "artifacts.bpa.test"
	otherHost     = "kubernetes.example"
	cnOnlyHost    = "cn-only.example"
	ipHost        = "127.0.0.1"
)

// site is a TLS server that presents, by SNI, a certificate ca issued for each of the names
// above, behind an HTTP proxy that tunnels every CONNECT to it (the names resolve nowhere,
// and a proxy is how every client here can be pointed at a name without touching the
// machine's /etc/hosts). It returns the proxy's URL.
func site(t *testing.T, ca *nodetrusttest.CA) string {
	certs := map[string]tls.Certificate{
		artifactsHost: ca.Issue(t, "", artifactsHost),
		otherHost:     ca.Issue(t, "", otherHost),
		cnOnlyHost:    ca.Issue(t, cnOnlyHost),
		"":            ca.Issue(t, "", ipHost), // no SNI: an address was asked for
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	// Go's server asks GetCertificate only for a hello with SNI; without, it takes the first
	// of Certificates (which httptest would otherwise fill with its own).
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{certs[""]}, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c := certs[hello.ServerName]
		return &c, nil
	}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	target := ts.Listener.Addr().String()

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		tunnel(conn, buf, up)
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// tunnel answers a CONNECT on conn and copies both ways until either side closes.
func tunnel(conn net.Conn, buf *bufio.ReadWriter, up net.Conn) {
	defer conn.Close()
	defer up.Close()
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, buf.Reader); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

// client is a program on a node fetching url through proxy; it returns its output and
// whether the fetch succeeded.
type client struct {
	name string // the program, and the TLS library it verifies with
	argv func(proxy, url, dest string) []string
	// refused is what the program says when a name constraint refuses a certificate.
	refused string
}

var clients = []client{
	{"curl (OpenSSL)", func(proxy, url, _ string) []string {
		return []string{"curl", "-fsS", "-o", "/dev/null", "--proxy", proxy, url}
	}, "subtree violation"},
	{"python3 urllib (OpenSSL)", func(proxy, url, _ string) []string {
		return []string{"env", "https_proxy=" + proxy, "python3", "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read()", url}
	}, "subtree violation"},
	// kubespray's downloads: roles/download/tasks/download_file.yml's get_url, which is given
	// no ca_path and so trusts the system store.
	{"ansible get_url (OpenSSL)", func(proxy, url, dest string) []string {
		tmp := filepath.Dir(dest) // not the machine's ~/.ansible
		return []string{"env", "LC_ALL=C.UTF-8", "ANSIBLE_LOCAL_TEMP=" + tmp, "ANSIBLE_REMOTE_TMP=" + tmp, "https_proxy=" + proxy, "ansible", "localhost", "-c", "local", "-o", "-m", "get_url", "-a", "url=" + url + " dest=" + dest + " force=true"}
	}, "subtree violation"},
	{"apt (GnuTLS)", func(proxy, url, dest string) []string {
		return []string{"/usr/lib/apt/apt-helper", "-o", "Acquire::https::Proxy=" + proxy, "-o", "APT::Sandbox::User=root", "download-file", url, dest}
	}, "violates the signer's constraints"},
	{"wget (GnuTLS)", func(proxy, url, _ string) []string {
		return []string{"wget", "-O", "/dev/null", "-e", "use_proxy=on", "-e", "https_proxy=" + proxy, url}
	}, "is not trusted"}, // wget gives no reason; the artifact server's certificate from the same CA is trusted
}

// fetch runs c on the node cl is connected to; it returns what c printed and whether it
// fetched the page.
func (c client) fetch(ctx context.Context, t *testing.T, cl *sshexec.Client, proxy, host string) (string, bool) {
	dest := filepath.Join(t.TempDir(), "fetched")
	stdout, stderr, code, err := cl.Run(ctx, c.argv(proxy, "https://"+host+"/", dest))
	require.NoError(t, err)
	return strings.Join(strings.Fields(string(stdout)+" "+string(stderr)), " "), code == 0
}

// goFetch is containerd's side: Go's verifier with the node's CA file as its roots, as the
// hosts.toml `ca` of BPA's mirrors names it.
func goFetch(ctx context.Context, caFile, proxy, host string) error {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data)
	p, _ := url.Parse(proxy)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(p), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Issue 26, item 7: the BPAPolicy's CA goes into each node's whole OS trust store (kubespray's
// get_url can be given no other), where every program trusts it for every name. The attack:
// with a CA as sites had it (no name constraints), whoever holds its key (the artifact
// server's operator, or whoever steals it from there) is trusted by every program on every
// node for any name, e.g. the cluster's apiserver or the OS archive. Before, BPA took that CA
// and installed it; now the policy refuses it, naming the field, and installs nothing.
//
// The fix holds because every verifier on a node honours name constraints in a trust anchor:
// with a constrained CA installed by BPA, curl, Python, Ansible's get_url, apt, wget and Go
// accept the artifact server and refuse certificates the same CA signed for another DNS
// name, a name in the common name only, and an IP address.
func TestPolicyCAOnRealNode(t *testing.T) {
	c := simhost.NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dial := func(h *simhost.Host) *sshexec.Client {
		cl, err := sshexec.Dial(ctx, h.IP, sshexec.Config{KeyFile: c.ClientKeyPath(), KnownHostsFile: c.KnownHostsPath(), Port: h.Port})
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	// BPA's path: the policy picks the CA for the Provisioning's server (the controller and
	// the ad-hoc lookup step both ask it), and run-kubespray installs it on the node.
	install := func(h *simhost.Host, ca *nodetrusttest.CA) error {
		pol := policy.Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{
			{URL: "https://" + artifactsHost + ":443", CABundle: string(ca.PEM)}}}}
		bundle, err := pol.ArtifactsCA(&bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"},
			Spec: bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: "https://" + artifactsHost + ":443"}}})
		if err != nil {
			return err
		}
		certs, err := nodetrust.Parse([]byte(bundle))
		require.NoError(t, err)
		return nodetrust.Install(ctx, []nodetrust.Host{{Name: h.Name, Addr: h.IP}},
			sshexec.Config{KeyFile: c.ClientKeyPath(), KnownHostsFile: c.KnownHostsPath(), Port: h.Port}, certs, io.Discard)
	}

	t.Run("a CA without name constraints is refused", func(t *testing.T) {
		h := c.Start("master-1", "127.0.1.46")
		ca := nodetrusttest.Unconstrained(t)
		proxy := site(t, ca)
		if err := install(h, ca); assert.Error(t, err, "BPA installed a CA that every program on the node trusts for every name") {
			assert.Contains(t, err.Error(), "BPAPolicy default spec.artifactServers[0].caBundle: certificate 1 (CN=BPA test unconstrained CA): no X.509 name constraints")
		}
		for _, prog := range clients {
			out, ok := prog.fetch(ctx, t, dial(h), proxy, otherHost)
			assert.False(t, ok, "%s on the node trusts the CA for %s: %s", prog.name, otherHost, out)
		}
		assert.NoFileExists(t, h.File(nodetrust.DebianPath))
	})

	t.Run("a constrained CA vouches for the artifact server only", func(t *testing.T) {
		h := c.Start("master-2", "127.0.1.47")
		ca := nodetrusttest.NewCA(t, []string{artifactsHost})
		proxy := site(t, ca)
		require.NoError(t, install(h, ca))
		cl := dial(h)
		for _, prog := range clients {
			out, ok := prog.fetch(ctx, t, cl, proxy, artifactsHost)
			assert.True(t, ok, "%s refuses the artifact server: %s", prog.name, out)
			for _, other := range []string{otherHost, cnOnlyHost, ipHost} {
				out, ok := prog.fetch(ctx, t, cl, proxy, other)
				assert.False(t, ok, "%s trusts the CA for %s", prog.name, other)
				assert.Contains(t, out, prog.refused, "%s, %s", prog.name, other)
			}
		}
		assert.NoError(t, goFetch(ctx, h.File(nodetrust.Path), proxy, artifactsHost), "Go (containerd)")
		// Go never reads the common name: only the names it could hold are constraints'.
		for other, refused := range map[string]string{otherHost: `DNS name "` + otherHost + `" is not permitted by any constraint`,
			cnOnlyHost: "certificate relies on legacy Common Name field", ipHost: `IP address "127.0.0.1" is excluded by constraint "0.0.0.0/0"`} {
			assert.ErrorContains(t, goFetch(ctx, h.File(nodetrust.Path), proxy, other), refused, "Go (containerd)")
		}
	})
}
