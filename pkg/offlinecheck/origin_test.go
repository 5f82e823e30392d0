package offlinecheck

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
)

// preflightAgainst runs the offline pre-flight against server (its certificate trusted as
// the site policy's CA would make it) for one amd64 host.
func preflightAgainst(t *testing.T, server *httptest.Server) error {
	t.Helper()
	vars, err := inventory.ExtraVarsWithCA(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: server.URL},
		Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}}, "")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "extra-vars.yaml")
	require.NoError(t, os.WriteFile(file, vars, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return Preflight(ctx, file, "quay.io/kubespray/kubespray:v2.28.0", []*x509.Certificate{server.Certificate()},
		func() ([]string, error) { return []string{"amd64"}, nil })
}

// elsewhere is another origin that counts what reaches it.
func elsewhere(t *testing.T, tls bool) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) })
	s := httptest.NewUnstartedServer(h)
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, &hits
}

// spec.offline.url is the CR author's: the pre-flight never leaves its origin. A file or
// registry request redirected to another origin, https or plain http (a node's metadata
// service, an internal API), fails the step naming the redirect, and the other origin is
// never contacted.
func TestPreflightFollowsNoRedirect(t *testing.T) {
	for name, tc := range map[string]struct {
		tls    bool
		prefix string // the requests that redirect
	}{
		"file to another https origin": {true, "/files/"},
		"file from https to http":      {false, "/files/"},
		"registry to another origin":   {false, "/v2/"},
	} {
		t.Run(name, func(t *testing.T) {
			other, hits := elsewhere(t, tc.tls)
			server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, tc.prefix) {
					http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer server.Close()
			err := preflightAgainst(t, server)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "offline: checking the artifact server "+server.URL+": ")
			assert.Contains(t, err.Error(), "the offline pre-flight talks to the artifact server's origin only")
			if tc.prefix == "/files/" {
				assert.Contains(t, err.Error(), "answered HTTP 302, a redirect to \""+strings.TrimSuffix(other.URL, "/")+"\", which is not followed")
			}
			assert.NotContains(t, err.Error(), other.URL+"/", "the redirect's path is the server's text")
			assert.Zero(t, hits.Load(), "the other origin was contacted")
		})
	}
}

// What the server (or whatever answers at its address) says never reaches the error, which
// the CR's status shows: only BPA's request and the HTTP status code.
func TestPreflightRepeatsNoStatusLine(t *testing.T) {
	const secret = "SECRET-internal-banner"
	for name, path := range map[string]string{"file": "/files/", "registry": "/v2/"} {
		t.Run(name, func(t *testing.T) {
			server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.URL.Path, path) {
					w.WriteHeader(http.StatusOK)
					return
				}
				// A status line of the server's own words, and a body in the registry's
				// error format, which go-containerregistry would repeat.
				conn, buf, err := w.(http.Hijacker).Hijack()
				require.NoError(t, err)
				defer conn.Close()
				body := `{"errors":[{"code":"UNKNOWN","message":"` + secret + `-body"}]}`
				_, _ = buf.WriteString("HTTP/1.1 500 " + secret + "\r\nContent-Type: application/json\r\nContent-Length: " +
					strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
				_ = buf.Flush()
			}))
			defer server.Close()
			err := preflightAgainst(t, server)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret)
			assert.Contains(t, err.Error(), "the server answered HTTP 500")
		})
	}
}
