package verify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// writeCerts puts simcerts' files for h (named node) where h sees them.
func writeCerts(t *testing.T, h *simhost.Host, node string, controlPlane bool, validity time.Duration) map[string][]byte {
	t.Helper()
	files, err := simcerts.Files(node, controlPlane, validity, time.Now())
	require.NoError(t, err)
	for path, data := range files {
		f := h.File(path)
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, data, 0o600))
	}
	return files
}

// TestRunReadsCertificates runs verify against real sshd: master-1 has kubeadm's control-plane
// certificates and the kubelet's, master-2 only the kubelet's, worker-1 is down. The output
// lists each component once per master, the earliest first; the worker and the served chain
// (no API server listens) are reported, and the step still succeeds.
func TestRunReadsCertificates(t *testing.T) {
	e := newEnv(t, healthyNodes...)
	writeCerts(t, e.masters[0], "master-1", true, 40*24*time.Hour)
	writeCerts(t, e.masters[1], "master-2", false, 20*24*time.Hour)
	start := time.Now()
	require.NoError(t, e.o.run(context.Background(), e.c))
	t.Logf("verify with certificates against sshd took %v", time.Since(start))
	for _, l := range e.logs {
		if strings.HasPrefix(l, "certificates") {
			t.Log(l)
		}
	}

	var r stepio.Certificates
	data, err := os.ReadFile(e.o.certificatesFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &r))
	assert.NotContains(t, string(data), "PRIVATE KEY")
	got := map[string]time.Time{}
	for _, c := range r.Certificates {
		got[c.Node+"/"+c.Component] = c.NotAfter.Time
	}
	for _, k := range []string{"master-1/ca", "master-1/apiserver", "master-1/apiserver-kubelet-client", "master-1/front-proxy-ca",
		"master-1/front-proxy-client", "master-1/kubelet-client", "master-2/kubelet-client"} {
		assert.Contains(t, got, k)
	}
	assert.Len(t, r.Certificates, 7, "admin.conf here embeds no client certificate: %v", got)
	first := r.Certificates[0]
	assert.Equal(t, "master-2/kubelet-client", first.Node+"/"+first.Component, "sorted by notAfter")
	assert.WithinDuration(t, time.Now().Add(20*24*time.Hour), first.NotAfter.Time, time.Hour)
	assert.Equal(t, "system:node:master-2", first.Subject)
	assert.WithinDuration(t, time.Now().Add(10*365*24*time.Hour), got["master-1/ca"], time.Hour)
	problems := strings.Join(r.Problems, "\n")
	assert.Contains(t, problems, "worker-1 (127.0.1.42")
	assert.Contains(t, problems, "served chain of master-1")
	assert.False(t, r.CheckedAt.IsZero())
}

// TestReadCertsNeverCarriesKeys: what leaves the host is certificates and file names only,
// though the kubelet's file bundles its key and admin.conf embeds one.
func TestReadCertsNeverCarriesKeys(t *testing.T) {
	sim := simhost.NewCluster(t)
	h := sim.Start("master-1", "127.0.1.44")
	writeCerts(t, h, "master-1", true, time.Hour)
	conf := fmt.Sprintf("apiVersion: v1\nusers:\n- name: admin\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n",
		base64.StdEncoding.EncodeToString(mustFile(t, h, simcerts.KubeletClient)), base64.StdEncoding.EncodeToString([]byte("-----BEGIN EC PRIVATE KEY-----\nc2VjcmV0\n-----END EC PRIVATE KEY-----\n")))
	h.WriteAdminConf([]byte(conf))
	c, err := sshexec.Dial(context.Background(), h.IP, sshexec.Config{Port: h.Port, KeyFile: sim.ClientKeyPath(), KnownHostsFile: sim.KnownHostsPath()})
	require.NoError(t, err)
	defer c.Close()
	out, err := readCerts(context.Background(), c, "master-1")
	require.NoError(t, err)
	assert.NotContains(t, out, "PRIVATE KEY")
	assert.NotContains(t, out, "client-key-data")
	certs, err := ParseCerts("master-1", certFiles("master-1"), []byte(out))
	require.NoError(t, err)
	components := map[string]bool{}
	for _, c := range certs {
		components[c.Component] = true
	}
	assert.True(t, components["admin.conf"] && components["kubelet-client"] && components["front-proxy-client"], "%v", components)
	assert.Len(t, certs, 7)
}

func mustFile(t *testing.T, h *simhost.Host, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(h.File(path))
	require.NoError(t, err)
	return data
}

func TestParseCertsRefusesGarbage(t *testing.T) {
	files := certFiles("m1")
	for name, out := range map[string]string{
		"not DER":      "/etc/kubernetes/ssl/apiserver.crt\n" + pemBegin + "\nZ2FyYmFnZQ==\n" + pemEnd + "\n",
		"not base64":   "/etc/kubernetes/admin.conf\n    client-certificate-data: !!!\n",
		"no end":       "/etc/kubernetes/ssl/ca.crt\n" + pemBegin + "\nZ2FyYmFnZQ==\n",
		"no file name": pemBegin + "\n" + pemEnd + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCerts("m1", files, []byte(out))
			require.Error(t, err)
			if name != "no file name" {
				assert.Contains(t, err.Error(), "/etc/kubernetes/")
				assert.Contains(t, err.Error(), "on m1")
			}
		})
	}
}

// TestParseCertsKeepsEarliest: two certificates in one component's file (a bundle) count
// by the one that expires first; a key block inside client-certificate-data is skipped.
func TestParseCertsKeepsEarliest(t *testing.T) {
	now := time.Now()
	long, err := simcerts.Files("n", false, 300*24*time.Hour, now)
	require.NoError(t, err)
	short, err := simcerts.Files("n", false, 3*24*time.Hour, now)
	require.NoError(t, err)
	bundle := append(append([]byte{}, long[simcerts.KubeletClient]...), short[simcerts.KubeletClient]...) // cert, key, cert, key
	out := "/etc/kubernetes/admin.conf\n    client-certificate-data: " + base64.StdEncoding.EncodeToString(bundle) + "\n"
	certs, err := ParseCerts("n", certFiles("n"), []byte(out))
	require.NoError(t, err)
	require.Len(t, certs, 1)
	assert.WithinDuration(t, now.Add(3*24*time.Hour), certs[0].NotAfter.Time, time.Minute)
	assert.Equal(t, "admin.conf", certs[0].Component)
}

// TestAggregateIsBounded: the largest cluster (15 masters with every component, 985 workers)
// fits MaxCertificates, each master keeps its entries, the workers one per component (the
// earliest, with its node), and the list is sorted earliest first.
func TestAggregateIsBounded(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var hosts []bpav1.HostStatus
	var per [][]bpav1.CertificateStatus
	for i := range bpav1.MaxNodes {
		h := bpav1.HostStatus{Name: fmt.Sprintf("w%d", i), Roles: []string{"worker"}}
		if i < 15 {
			h = bpav1.HostStatus{Name: fmt.Sprintf("m%d", i), Roles: []string{"master"}}
		}
		var certs []bpav1.CertificateStatus
		for j, f := range certFiles(h.Name) {
			certs = keepEarliest(certs, bpav1.CertificateStatus{Node: h.Name, Component: f.component,
				NotAfter: metav1.NewTime(base.Add(time.Duration((i*7919+j*104729)%100000) * time.Minute))})
		}
		hosts, per = append(hosts, h), append(per, certs)
	}
	served := []bpav1.CertificateStatus{{Node: "m0", Component: ServedComponent, NotAfter: metav1.NewTime(base)}}
	out := Aggregate(hosts, per, served)
	components := map[string]bool{}
	for _, f := range certFiles("x") {
		components[f.component] = true
	}
	worst := len(components)*(15+1) + 1
	assert.LessOrEqual(t, worst, bpav1.MaxCertificates, "the bound must hold without truncating")
	assert.Len(t, out, worst)
	for i := 1; i < len(out); i++ {
		assert.False(t, out[i].NotAfter.Before(&out[i-1].NotAfter), "not sorted at %d", i)
	}
	// The workers' kubelet-client entry is the earliest of all 985.
	var want bpav1.CertificateStatus
	for i := 15; i < len(hosts); i++ {
		for _, c := range per[i] {
			if c.Component == "kubelet-client" && (want.Node == "" || c.NotAfter.Before(&want.NotAfter)) {
				want = c
			}
		}
	}
	found := false
	for _, c := range out {
		if c.Component == "kubelet-client" && !strings.HasPrefix(c.Node, "m") {
			assert.Equal(t, want, c)
			found = true
		}
	}
	assert.True(t, found)
}

// TestServedChain reads the chain a TLS server presents, trusting the kubeconfig's CA.
func TestServedChain(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	got, err := servedChain(context.Background(), &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, "m1")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, ServedComponent, got[0].Component)
	assert.Equal(t, "m1", got[0].Node)
	assert.True(t, got[0].NotAfter.Time.Equal(srv.Certificate().NotAfter))

	// Another CA: the handshake fails, and says so.
	files, err := simcerts.Files("m1", true, time.Hour, time.Now())
	require.NoError(t, err)
	_, err = servedChain(context.Background(), &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: files["/etc/kubernetes/ssl/ca.crt"]}}, "m1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TLS handshake")
}
