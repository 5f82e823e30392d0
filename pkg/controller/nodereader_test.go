package controller

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

// kubeconfigFor is a token kubeconfig of server, with cmd as an exec credential plugin if
// not empty.
func kubeconfigFor(t *testing.T, server, cmd string) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("ca")}
	user := &clientcmdapi.AuthInfo{Token: "t"}
	if cmd != "" {
		user = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: cmd, APIVersion: "client.authentication.k8s.io/v1"}}
	}
	cfg.AuthInfos["u"] = user
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The node-reader Secret is the only credential the remediator uses, and it is refused when
// it is missing, asks to run a command, or names a server that is no host BPA built (anyone
// who may write Secrets in the namespace could otherwise point the controller anywhere).
func TestNodeReaderSourceRefuses(t *testing.T) {
	p := newProvisioning()
	p.Status.Applied = &bpav1.AppliedState{Hosts: remediatedHosts}
	for _, x := range []struct {
		name string
		data []byte
		want string
	}{
		{"missing", nil, "node-reader"},
		{"exec plugin", kubeconfigFor(t, "https://10.0.0.1:6443", "/bin/sh"), "kubeconfig"},
		{"another server", kubeconfigFor(t, "https://192.0.2.7:6443", ""), "no control-plane host of status.applied"},
		{"a name, not the host's address", kubeconfigFor(t, "https://kubernetes.default.svc:443", ""), "no control-plane host of status.applied"},
		{"a worker's address", kubeconfigFor(t, "https://10.0.0.2:6443", ""), "no control-plane host of status.applied"},
		{"plain http", kubeconfigFor(t, "http://10.0.0.1:6443", ""), "is not https"},
	} {
		t.Run(x.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.New())
			if x.data != nil {
				b = b.WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-node-reader"}, Data: map[string][]byte{"value": x.data}})
			}
			_, err := NodeReaderSource(b.Build())(context.Background(), p)
			assert.ErrorContains(t, err, x.want)
		})
	}
}

// readWith reads with p's node-reader Secret naming srv (a TLS test server on 127.0.0.1, a master
// of status.applied), read by NodeReaderSource.
func readWith(t *testing.T, srv *httptest.Server) ([]corev1.Node, error) {
	t.Helper()
	p := newProvisioning()
	p.Status.Applied = &bpav1.AppliedState{Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}, IP: "127.0.0.1"}}}
	cfg := clientcmdapi.NewConfig()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-node-reader"}, Data: map[string][]byte{"value": data}}).Build()
	return NodeReaderSource(c)(context.Background(), p)
}

// A server the Secret names (one the Secret's writer runs on a host of the cluster) must not
// send the controller elsewhere: a redirect followed would reach, from the controller's
// network, any address, and the answer's text would come back in the Remediating condition.
func TestNodeReaderSourceRefusesRedirects(t *testing.T) {
	var reached atomic.Bool
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Store(true)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("inside-only-answer"))
	}))
	defer inside.Close()
	srv := httptest.NewTLSServer(http.RedirectHandler(inside.URL+"/latest/meta-data", http.StatusFound))
	defer srv.Close()
	_, err := readWith(t, srv)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "inside-only-answer")
	assert.False(t, reached.Load(), "the redirect was followed")
}

// An answer larger than maxNodeListBytes is cut off: a hostile cluster must not fill the
// controller's memory (its timeout alone lets gigabytes through on a fast link).
func TestNodeReaderSourceBoundsTheAnswer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","items":[],"x":"`))
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for i := 0; i <= maxNodeListBytes>>20; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`"}`))
	}))
	defer srv.Close()
	_, err := readWith(t, srv)
	assert.ErrorContains(t, err, "larger than")
}

// An honest server's Nodes are read.
func TestNodeReaderSourceReads(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"w1"}}]}`))
	}))
	defer srv.Close()
	nodes, err := readWith(t, srv)
	require.NoError(t, err)
	assert.Len(t, nodes, 1)
}
