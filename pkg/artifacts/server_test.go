package artifacts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// env is one real apiserver with two ServiceAccounts: uploader has config/serve's
// bpa-artifacts-uploader role (get, create and delete artifacts), other too; stranger has nothing.
type env struct {
	rig                       *rig.Rig
	auth                      *artifacts.Auth
	uploader, stranger, admin string
	other                     string // another uploader
	// uploaderAPI is a token of uploader's for the Kubernetes API, not the server.
	uploaderAPI string
	kube        client.Client
}

func newEnv(t *testing.T) *env {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	artifactstest.InstallRoles(ctx, t, r)
	uploader := artifactstest.Token(ctx, t, r, "uploader", "bpa-artifacts-uploader")
	stranger := artifactstest.Token(ctx, t, r, "stranger", "")
	other := artifactstest.Token(ctx, t, r, "other", "bpa-artifacts-uploader")
	uploaderAPI := artifactstest.TokenFor(ctx, t, r, "uploader", "")
	admin := artifactstest.Token(ctx, t, r, "admin", "cluster-admin")
	auth, err := artifacts.NewAuth(r.RESTConfig, false, "")
	require.NoError(t, err)
	kube, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	return &env{rig: r, auth: auth, uploader: uploader, stranger: stranger, other: other, uploaderAPI: uploaderAPI, admin: admin, kube: kube}
}

// server is a `bpa serve` on a loopback port, counting the upload bytes it receives.
type server struct {
	URL, dir string
	srv      *artifacts.Server
	received atomic.Int64
	http     *http.Server
	listener net.Listener
}

func (e *env) serve(t *testing.T, dir, addr string, anonReads bool) *server {
	t.Helper()
	return e.serveOpts(t, addr, anonReads, artifacts.Options{Dir: dir})
}

// serveOpts is serve with more of the server's Options set.
func (e *env) serveOpts(t *testing.T, addr string, anonReads bool, opts artifacts.Options) *server {
	t.Helper()
	auth := *e.auth
	auth.AnonymousReads = anonReads
	opts.Auth, opts.MaxSize, opts.Status = &auth, 1<<30, e.kube
	srv, err := artifacts.NewServer(context.Background(), opts)
	require.NoError(t, err)
	dir := opts.Dir
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := &server{URL: "http://" + l.Addr().String(), dir: dir, listener: l, srv: srv}
	s.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			r.Body = countingBody{r.Body, &s.received}
		}
		srv.ServeHTTP(w, r)
	})}
	go func() { _ = s.http.Serve(l) }()
	t.Cleanup(func() { _ = s.http.Close() })
	return s
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// bearer adds a token; cut, when positive, breaks the next PATCH body after that many bytes
// have reached the server (received), as a connection dropped then would.
type bearer struct {
	token    string
	cut      atomic.Int64
	received *atomic.Int64
}

var errCut = errors.New("connection cut by the test")

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if r.Method != http.MethodPatch {
		return http.DefaultTransport.RoundTrip(r)
	}
	if n := b.cut.Swap(0); n > 0 {
		r.Body = io.NopCloser(io.MultiReader(io.LimitReader(r.Body, n), cutReader{n, b.received}))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// cutReader fails once the server has what was sent before it, so the cut is at a known
// offset rather than wherever the socket buffers happened to be.
type cutReader struct {
	at       int64
	received *atomic.Int64
}

func (c cutReader) Read([]byte) (int, error) {
	for deadline := time.Now().Add(10 * time.Second); c.received.Load() < c.at && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return 0, errCut
}

func (s *server) client(t *testing.T, token string) (*artifacts.Client, *bearer) {
	b := &bearer{token: token, received: &s.received}
	return &artifacts.Client{URL: s.URL, HTTP: &http.Client{Transport: b}, StateDir: t.TempDir()}, b
}

func randomFile(t *testing.T, size int) (string, string) {
	b := make([]byte, size)
	_, _ = rand.Read(b)
	f := filepath.Join(t.TempDir(), "blob")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	sum := sha256.Sum256(b)
	return f, hex.EncodeToString(sum[:])
}

func get(t *testing.T, url, token string, hdr ...string) (int, []byte) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// tusRequest sends one raw tus request, for the cases the client never sends.
func tusRequest(t *testing.T, method, url, token string, body []byte, hdr map[string]string) *http.Response {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestArtifactServer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const path = "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet"

	t.Run("resume after a cut sends only the rest", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		const size = 8 << 20
		file, sum := randomFile(t, size)
		c, b := s.client(t, e.uploader)
		b.cut.Store(size / 2)
		_, err := c.Push(ctx, file, path)
		require.ErrorContains(t, err, "run the same command again to resume")
		first := s.received.Load()
		require.Equal(t, int64(size/2), first, "the server received the first half")
		var upload string
		require.Eventually(t, func() bool {
			infos, _ := filepath.Glob(filepath.Join(s.dir, "uploads", "*.info"))
			if len(infos) == 1 {
				upload = strings.TrimSuffix(filepath.Base(infos[0]), ".info")
			}
			return upload != ""
		}, 10*time.Second, 10*time.Millisecond)
		for _, m := range []string{http.MethodHead, http.MethodPatch} {
			resp := tusRequest(t, m, s.URL+"/files/"+upload, e.other, []byte("x"), map[string]string{
				"Upload-Offset": strconv.FormatInt(first, 10), "Content-Type": "application/offset+octet-stream"})
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "another uploader may not %s this upload", m)
		}
		status, _ := get(t, s.URL+"/files/"+path, e.uploader)
		require.Equal(t, http.StatusNotFound, status, "an unfinished upload is not served")

		s.received.Store(0)
		m, err := c.Push(ctx, file, path)
		require.NoError(t, err)
		assert.Equal(t, int64(size)-first, s.received.Load(), "only the bytes the server lacked were sent again")
		assert.Equal(t, sum, m.SHA256)
		assert.Equal(t, int64(size), m.Size)
		assert.Equal(t, "system:serviceaccount:"+e.rig.Namespace+":uploader", m.UploadedBy)
		status, body := get(t, s.URL+"/files/"+path, e.uploader)
		require.Equal(t, http.StatusOK, status)
		got := sha256.Sum256(body)
		assert.Equal(t, sum, hex.EncodeToString(got[:]))

		status, part := get(t, s.URL+"/files/"+path, e.uploader, "Range", "bytes=100-199")
		assert.Equal(t, http.StatusPartialContent, status)
		assert.Equal(t, body[100:200], part)
	})

	t.Run("a restarted server resumes from its disk", func(t *testing.T) {
		dir := t.TempDir()
		s := e.serve(t, dir, "", false)
		const size = 4 << 20
		file, sum := randomFile(t, size)
		c, b := s.client(t, e.uploader)
		b.cut.Store(size / 2)
		_, err := c.Push(ctx, file, "github.com/containerd/containerd/releases/download/v2.0.5/containerd.tgz")
		require.Error(t, err)
		first := s.received.Load()
		// Without the saved hash state (lost in a crash) the server hashes the file instead.
		var states []string
		require.Eventually(t, func() bool {
			states, _ = filepath.Glob(filepath.Join(dir, "uploads", "*.sha256"))
			return len(states) == 1
		}, 10*time.Second, 10*time.Millisecond, "the server saves the hash of what it received")
		require.NoError(t, s.http.Close())
		require.NoError(t, os.Remove(states[0]))

		s2 := e.serve(t, dir, s.listener.Addr().String(), false)
		m, err := c.Push(ctx, file, "github.com/containerd/containerd/releases/download/v2.0.5/containerd.tgz")
		require.NoError(t, err)
		assert.Equal(t, sum, m.SHA256)
		assert.Equal(t, int64(size)-first, s2.received.Load())
		assert.LessOrEqual(t, s2.received.Load(), int64(size*52/100), "at most 52% sent again")
	})

	t.Run("20 concurrent 100 MiB uploads arrive intact in bounded memory", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		elapsed, growth := concurrentPushes(t, s.URL, func() *http.Client { return &http.Client{Transport: &bearer{token: e.uploader}} })
		t.Logf("2000 MiB in %s, RSS rose by %d MiB at most", elapsed.Round(time.Millisecond), growth/1024)
		assert.Less(t, growth, int64(128<<10), "RSS rose by %d KiB while moving 2000 MiB", growth)
	})

	t.Run("checksum mismatch is refused and never served", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		body := []byte("not what was declared")
		wrong := strings.Repeat("ab", 32)
		resp := tusRequest(t, http.MethodPost, s.URL+"/files/", e.uploader, nil, map[string]string{
			"Upload-Length": strconv.Itoa(len(body)), "Upload-Metadata": artifacts.EncodeMetadata(map[string]string{"path": path, "sha256": wrong})})
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		resp = tusRequest(t, http.MethodPatch, resp.Header.Get("Location"), e.uploader, body, map[string]string{
			"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
		assert.Equal(t, 460, resp.StatusCode)
		status, _ := get(t, s.URL+"/files/"+path, e.uploader)
		assert.Equal(t, http.StatusNotFound, status)
		c, _ := s.client(t, e.uploader)
		l, err := c.List(ctx, "")
		require.NoError(t, err)
		assert.Empty(t, l)
		left, _ := filepath.Glob(filepath.Join(s.dir, "uploads", "*"))
		assert.Empty(t, left, "the refused upload is deleted")
	})

	t.Run("a sum declared at the end is checked on the request that completes the upload", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		body := []byte("the first part, then the rest")
		good := sha256.Sum256(body)
		create := func() string {
			resp := tusRequest(t, http.MethodPost, s.URL+"/files/", e.uploader, nil, map[string]string{
				"Upload-Length": strconv.Itoa(len(body)), "Upload-Metadata": artifacts.EncodeMetadata(map[string]string{"path": path, "sha256-deferred": "1"})})
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			return resp.Header.Get("Location")
		}
		patch := func(loc string, from, to int, hdr map[string]string) int {
			h := map[string]string{"Upload-Offset": strconv.Itoa(from), "Content-Type": "application/offset+octet-stream"}
			maps.Copy(h, hdr)
			return tusRequest(t, http.MethodPatch, loc, e.uploader, body[from:to], h).StatusCode
		}
		served := func() int { status, _ := get(t, s.URL+"/files/"+path, e.uploader); return status }
		for name, tc := range map[string]struct {
			hdr  map[string]string
			want int
		}{
			"no sum":    {nil, http.StatusBadRequest},
			"not a sum": {map[string]string{artifacts.DeclareHeader: "sha256:" + hex.EncodeToString(good[:])}, http.StatusBadRequest},
			"wrong sum": {map[string]string{artifacts.DeclareHeader: strings.Repeat("ab", 32)}, 460},
		} {
			loc := create()
			// A sum on a request that does not complete the upload counts for nothing.
			require.Equal(t, http.StatusNoContent, patch(loc, 0, 10, map[string]string{artifacts.DeclareHeader: hex.EncodeToString(good[:])}))
			assert.Equal(t, tc.want, patch(loc, 10, len(body), tc.hdr), name)
			assert.Equal(t, http.StatusNotFound, served(), name)
			left, _ := filepath.Glob(filepath.Join(s.dir, "uploads", "*"))
			assert.Empty(t, left, "%s: the refused upload is deleted", name)
		}
		loc := create()
		require.Equal(t, http.StatusNoContent, patch(loc, 0, 10, nil))
		require.Equal(t, http.StatusNoContent, patch(loc, 10, len(body), map[string]string{artifacts.DeclareHeader: hex.EncodeToString(good[:])}))
		status, got := get(t, s.URL+"/files/"+path, e.uploader)
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, body, got)
	})

	t.Run("writes need a token the apiserver accepts and RBAC allows", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		file, _ := randomFile(t, 1000)
		for who, tok := range map[string]string{"anonymous": "", "invalid token": "not-a-token", "forbidden": e.stranger} {
			c, _ := s.client(t, tok)
			_, err := c.Push(ctx, file, path)
			want := "401 Unauthorized"
			if who == "forbidden" {
				want = "403 Forbidden"
			}
			assert.ErrorContains(t, err, want, who)
			// The registry is guarded the same way.
			img, _ := random.Image(100, 1)
			ref, _ := name.ParseReference(strings.TrimPrefix(s.URL, "http://")+"/x/y:1", name.Insecure)
			assert.Error(t, remote.Write(ref, img, remote.WithTransport(&bearer{token: tok})), who)
		}
		img, _ := random.Image(100, 1)
		ref, _ := name.ParseReference(strings.TrimPrefix(s.URL, "http://")+"/x/y:1", name.Insecure)
		assert.ErrorContains(t, remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "any", Password: "not-a-token"})), "401 Unauthorized")
		assert.ErrorContains(t, remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "any", Password: e.stranger})), "403 Forbidden")
		c, _ := s.client(t, e.stranger)
		assert.ErrorContains(t, c.Remove(ctx, path), "403")
		status, _ := get(t, s.URL+"/files/"+path, "")
		assert.Equal(t, http.StatusUnauthorized, status, "reads need a token unless anonymous reads are on")

		c, _ = s.client(t, e.uploader)
		m, err := c.Push(ctx, file, path)
		require.NoError(t, err)
		assert.Equal(t, int64(1000), m.Size)
		status, _ = get(t, s.URL+"/files/"+path, e.stranger)
		assert.Equal(t, http.StatusForbidden, status)
		require.NoError(t, c.Remove(ctx, path))
		status, _ = get(t, s.URL+"/files/"+path, e.uploader)
		assert.Equal(t, http.StatusNotFound, status)

		anon := e.serve(t, s.dir, "", true)
		_, err = c.Push(ctx, file, path)
		require.NoError(t, err)
		status, _ = get(t, anon.URL+"/files/"+path, "")
		assert.Equal(t, http.StatusOK, status, "anonymous reads when configured")
		ac, _ := anon.client(t, "")
		assert.ErrorContains(t, ac.Remove(ctx, path), "401", "but never anonymous writes")
	})

	// Issue 26, item 5: a token the server accepts is one the apiserver refuses, so the server
	// holds nothing a thief could replay against the Kubernetes API; and the reverse.
	t.Run("only tokens minted for the server's audience are accepted", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		file, _ := randomFile(t, 100)
		for who, tok := range map[string]string{"the uploader's Kubernetes API token": e.uploaderAPI, "the rig's admin token": e.rig.AdminToken} {
			c, _ := s.client(t, tok)
			_, err := c.Push(ctx, file, path)
			assert.ErrorContains(t, err, "401 Unauthorized", who)
			assert.ErrorContains(t, err, `a Kubernetes token for audience "bpa-artifacts" is required`, who)
			status, _ := get(t, s.URL+"/files/"+path, tok)
			assert.Equal(t, http.StatusUnauthorized, status, who)
		}
		c, _ := s.client(t, e.uploader)
		_, err := c.Push(ctx, file, path)
		require.NoError(t, err, "the same ServiceAccount's token for the server's audience")

		kc := kubernetes.NewForConfigOrDie(&rest.Config{Host: e.rig.URL, BearerToken: e.uploader,
			TLSClientConfig: rest.TLSClientConfig{CAData: e.rig.CAData}})
		_, err = kc.CoreV1().Secrets(e.rig.Namespace).List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsUnauthorized(err), "the apiserver refuses a token for the artifact server: %v", err)

		other := *e.auth
		other.Audience = "another-server"
		srv, err := artifacts.NewServer(ctx, artifacts.Options{Dir: t.TempDir(), Auth: &other})
		require.NoError(t, err)
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/files", nil)
		req.Header.Set("Authorization", "Bearer "+e.uploader)
		srv.ServeHTTP(w, req)
		assert.Equal(t, http.StatusUnauthorized, w.Code, "--token-audience decides: %s", w.Body)
	})

	t.Run("one uploader cannot replace or delete another's artifacts", func(t *testing.T) { testImmutable(t, e) })
	t.Run("writes are authorized per domain and repository", func(t *testing.T) { testScopedWrites(t, e) })
	t.Run("a .deb is authorized by its package too", func(t *testing.T) { testPackageWrites(t, e) })
	t.Run("concurrent uploads of one path publish one upload's bytes with its own record", func(t *testing.T) { testPublishLock(t, e) })
	t.Run("quotas per uploader and in total", func(t *testing.T) { testQuotas(t, e) })
	t.Run("quotas admit as many concurrent uploads as fit", func(t *testing.T) { testQuotaRaces(t, e) })
	t.Run("metrics need the reader role and count requests, uploads and storage", func(t *testing.T) { testMetrics(t, e) })

	t.Run("bad input is refused", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		sum := strings.Repeat("0", 64)
		create := func(meta map[string]string, length int) *http.Response {
			return tusRequest(t, http.MethodPost, s.URL+"/files/", e.uploader, nil, map[string]string{
				"Upload-Length": strconv.Itoa(length), "Upload-Metadata": artifacts.EncodeMetadata(meta)})
		}
		for _, p := range []string{"../etc/passwd", "/etc/passwd", "dl.k8s.io/../../etc/passwd", "dl.k8s.io/a/../../../x",
			"dl.k8s.io%2F..%2F..%2Fx", "dl.k8s.io\\..\\x", "kubelet", "dl.k8s.io/.hidden", "",
			// Issue 26, item 7: C1 controls (CSI, NEL), bidi overrides and isolates, zero-width.
			"dl.k8s.io/a\u009b2Jb", "dl.k8s.io/a\u0085b", "dl.k8s.io/kube\u202edaeh", "dl.k8s.io/a\u2066b", "dl.k8s.io/a\u200bb", "dl.k8s.io/a\xffb"} {
			assert.Equal(t, http.StatusBadRequest, create(map[string]string{"path": p, "sha256": sum}, 10).StatusCode, p)
		}
		assert.Equal(t, http.StatusBadRequest, create(map[string]string{"path": path, "sha256": "nothex"}, 10).StatusCode)
		assert.Equal(t, http.StatusBadRequest, create(map[string]string{"path": path}, 10).StatusCode, "no sum, and none deferred")
		assert.Equal(t, http.StatusBadRequest, create(map[string]string{"path": path, "sha256": sum, "sha256-deferred": "1"}, 10).StatusCode,
			"a sum both declared and deferred")
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge,
			create(map[string]string{"path": path, "sha256": sum, "x": strings.Repeat("a", artifacts.MaxMetadata)}, 10).StatusCode)
		assert.Equal(t, http.StatusRequestEntityTooLarge, create(map[string]string{"path": path, "sha256": sum}, 2<<30).StatusCode)

		resp := create(map[string]string{"path": path, "sha256": sum}, 10)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		resp = tusRequest(t, http.MethodPatch, resp.Header.Get("Location"), e.uploader, make([]byte, 20), map[string]string{
			"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "more bytes than declared")

		for _, p := range []string{"/files/dl.k8s.io%2F..%2F..%2Fmeta", "/files/dl.k8s.io/..%2f..%2fmeta", "/files/dl.k8s.io/../../meta",
			"/files/..%5c..%5cetc", "/api/v1/files/dl.k8s.io/../../x",
			"/files/dl.k8s.io/release%2Fv1.32.5%2Fkubelet"} { // one file, one URL: no encoded alias
			req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
			req.URL.Opaque = p // sent as written, neither cleaned nor re-encoded
			req.Header.Set("Authorization", "Bearer "+e.uploader)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, p)
		}
	})

	t.Run("an image pushed with go-containerregistry is pulled back by digest", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		c, _ := s.client(t, e.uploader)
		img, err := random.Image(1<<20, 3)
		require.NoError(t, err)
		dst, err := c.ImageRef("registry.k8s.io/pause:3.10")
		require.NoError(t, err)
		assert.Equal(t, strings.TrimPrefix(s.URL, "http://")+"/registry.k8s.io/pause:3.10", dst.String())
		// As after `crane auth login -u any -p TOKEN` (or docker login): basic auth, on challenge.
		require.NoError(t, remote.Write(dst, img, remote.WithAuth(&authn.Basic{Username: "any", Password: e.uploader})))
		want, _ := img.Digest()
		byDigest, err := name.NewDigest(dst.Context().String()+"@"+want.String(), name.Insecure)
		require.NoError(t, err)
		_, err = remote.Image(byDigest, remote.WithTransport(&bearer{token: e.stranger}))
		require.Error(t, err, "pulls need get on artifacts")
		got, err := remote.Image(byDigest, remote.WithTransport(&bearer{token: e.uploader}))
		require.NoError(t, err)
		gotDigest, err := got.Digest()
		require.NoError(t, err)
		assert.Equal(t, want, gotDigest)
		layers, err := got.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 3)
		rc, err := layers[2].Compressed()
		require.NoError(t, err)
		n, err := io.Copy(io.Discard, rc) // blobs verify their digest as they are read
		require.NoError(t, err)
		assert.Positive(t, n)
	})

	t.Run("mirror uploads a kubespray offline directory and check lists what is missing", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		c, _ := s.client(t, e.uploader)
		dir := t.TempDir()
		files := []string{"dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm", "get.helm.sh/helm-v3.16.4-linux-amd64.tar.gz"}
		for _, f := range files {
			p := filepath.Join(dir, "offline-files", f)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte("content of "+f), 0o644))
		}
		lp, err := layout.Write(filepath.Join(dir, "images"), empty.Index)
		require.NoError(t, err)
		img, _ := random.Image(1000, 1)
		require.NoError(t, lp.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": "quay.io/calico/node:v3.29.3"})))
		var log bytes.Buffer
		require.NoError(t, c.Mirror(ctx, dir, &log))
		assert.Contains(t, log.String(), "pushed   dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm")
		log.Reset()
		require.NoError(t, c.Mirror(ctx, dir, &log), "a second mirror skips what is there")
		assert.Contains(t, log.String(), "present  get.helm.sh/helm-v3.16.4-linux-amd64.tar.gz")

		missing, err := c.Missing(ctx,
			[]string{"https://dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm", "https://dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet"},
			[]string{"quay.io/calico/node:v3.29.3", "registry.k8s.io/pause:3.10"})
		require.NoError(t, err)
		assert.Equal(t, []string{"file  dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet", "image registry.k8s.io/pause:3.10"}, missing)
	})

	t.Run("an OS image shows what a BareMetalHost's spec.image takes", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		c, _ := s.client(t, e.uploader)
		file, sum := randomFile(t, 4096)
		m, err := c.Push(ctx, file, "cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.qcow2")
		require.NoError(t, err)
		require.NotNil(t, m.Image)
		assert.Equal(t, artifacts.OSImage{URL: s.URL + "/files/cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.qcow2",
			Checksum: sum, ChecksumType: "sha256", DiskFormat: "qcow2"}, *m.Image)
	})

	t.Run("apt repository", func(t *testing.T) { testAptRepository(t, e) })

	t.Run("installation status needs list on the cluster's CRs in its namespace", func(t *testing.T) {
		s := e.serve(t, t.TempDir(), "", false)
		p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: e.rig.Namespace, Labels: map[string]string{bpav1.ClusterLabel: "edge"}},
			Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": {MACAddress: "52:54:00:00:00:01"}}}}}
		require.NoError(t, e.kube.Create(ctx, p))
		p.Status.Phase = "Running"
		p.Status.Message = "installing"
		require.NoError(t, e.kube.Status().Update(ctx, p))
		url := fmt.Sprintf("%s/api/v1/status/%s/edge", s.URL, e.rig.Namespace)
		status, _ := get(t, url, e.uploader)
		assert.Equal(t, http.StatusForbidden, status)
		status, body := get(t, url, e.admin)
		require.Equal(t, http.StatusOK, status, string(body))
		var got artifacts.ClusterStatus
		require.NoError(t, json.Unmarshal(body, &got))
		require.Len(t, got.Provisionings, 1)
		assert.Equal(t, "edge", got.Provisionings[0].Name)
		assert.Equal(t, "installing", got.Provisionings[0].Status.Message)
		assert.Empty(t, got.Softwares)
	})
}

// Issue 26, item 1: what one holder of bpa-artifacts-uploader published, another cannot
// overwrite, re-tag or delete; the same bytes again are a success; only override
// (bpa-artifacts-admin) replaces.
func testImmutable(t *testing.T, e *env) {
	ctx := context.Background()
	siteAdmin := artifactstest.Token(ctx, t, e.rig, "site-admin", "bpa-artifacts-admin")
	s := e.serve(t, t.TempDir(), "", false)
	const kubeadm = "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm"
	up, _ := s.client(t, e.uploader)
	attacker, _ := s.client(t, e.other)
	good, goodSum := randomFile(t, 5<<20) // declared at the end (deferred)
	evil, _ := randomFile(t, 5<<20)
	small, smallSum := randomFile(t, 1000) // declared at creation
	_, err := up.Push(ctx, good, kubeadm)
	require.NoError(t, err)
	_, err = up.Push(ctx, small, "dl.k8s.io/small")
	require.NoError(t, err)

	_, err = attacker.Push(ctx, evil, kubeadm)
	assert.ErrorContains(t, err, "409 Conflict", "other bytes, at the end")
	assert.ErrorContains(t, err, "published files are immutable")
	_, err = attacker.Push(ctx, evil, "dl.k8s.io/small")
	assert.ErrorContains(t, err, "409 Conflict", "other bytes, refused at creation")
	status, body := get(t, s.URL+"/files/"+kubeadm, e.uploader)
	require.Equal(t, http.StatusOK, status)
	got := sha256.Sum256(body)
	assert.Equal(t, goodSum, hex.EncodeToString(got[:]), "the first upload is still what is served")

	m, err := attacker.Push(ctx, good, kubeadm)
	require.NoError(t, err, "the same bytes again: idempotent")
	assert.Equal(t, "system:serviceaccount:"+e.rig.Namespace+":uploader", m.UploadedBy, "and the first uploader stays on record")
	assert.Equal(t, goodSum, m.SHA256)

	assert.ErrorContains(t, attacker.Remove(ctx, kubeadm), "403 Forbidden", "another's file")
	status, _ = get(t, s.URL+"/files/"+kubeadm, e.uploader)
	assert.Equal(t, http.StatusOK, status)

	admin, _ := s.client(t, siteAdmin)
	m, err = admin.Push(ctx, evil, "dl.k8s.io/small")
	require.NoError(t, err, "override replaces")
	assert.NotEqual(t, smallSum, m.SHA256)
	require.NoError(t, admin.Remove(ctx, kubeadm), "override deletes another's file")
	require.NoError(t, admin.Remove(ctx, "dl.k8s.io/small"), "and its own")

	// Images: a tag, once pushed, names that manifest.
	ref, err := up.ImageRef("registry.k8s.io/kube-apiserver:v1.32.5")
	require.NoError(t, err)
	first, _ := random.Image(100, 1)
	require.NoError(t, remote.Write(ref, first, remote.WithTransport(&bearer{token: e.uploader})))
	second, _ := random.Image(100, 1)
	err = remote.Write(ref, second, remote.WithTransport(&bearer{token: e.other}))
	assert.ErrorContains(t, err, "409 Conflict", "another manifest under the tag")
	require.NoError(t, remote.Write(ref, first, remote.WithTransport(&bearer{token: e.other})), "the same manifest again")
	pulled, err := remote.Image(ref, remote.WithTransport(&bearer{token: e.uploader}))
	require.NoError(t, err)
	want, _ := first.Digest()
	gotDigest, _ := pulled.Digest()
	assert.Equal(t, want, gotDigest, "the tag still names the first image")
	byDigest, err := name.NewDigest(ref.Context().String()+"@"+want.String(), name.Insecure)
	require.NoError(t, err)
	assert.ErrorContains(t, remote.Delete(byDigest, remote.WithTransport(&bearer{token: e.uploader})), "403", "images are not deleted without override")
	require.NoError(t, remote.Write(ref, second, remote.WithTransport(&bearer{token: siteAdmin})), "override re-tags")
}

// testScopedWrites: a ClusterRole with resourceNames limits an uploader to the domains and
// repositories it names.
func testScopedWrites(t *testing.T, e *env) {
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(e.rig.RESTConfig)
	_, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dl-k8s-io-uploader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{bpav1.GroupVersion.Group}, Resources: []string{artifacts.Resource}, Verbs: []string{"get"}},
			{APIGroups: []string{bpav1.GroupVersion.Group}, Resources: []string{artifacts.Resource}, Verbs: []string{"create", "delete"},
				ResourceNames: []string{"dl.k8s.io", "registry.k8s.io/pause"}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	scoped := artifactstest.Token(ctx, t, e.rig, "scoped", "dl-k8s-io-uploader")
	s := e.serve(t, t.TempDir(), "", false)
	c, _ := s.client(t, scoped)
	file, _ := randomFile(t, 1000)
	_, err = c.Push(ctx, file, "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubectl")
	require.NoError(t, err, "its domain")
	_, err = c.Push(ctx, file, "github.com/containerd/containerd/releases/download/v2.0.5/containerd.tgz")
	assert.ErrorContains(t, err, `403 Forbidden`, "another domain")
	assert.ErrorContains(t, err, `named "github.com"`)

	img, _ := random.Image(100, 1)
	for ref, ok := range map[string]bool{"registry.k8s.io/pause:3.10": true, "registry.k8s.io/kube-apiserver:v1.32.5": false, "quay.io/calico/node:v3.29.3": false} {
		dst, err := c.ImageRef(ref)
		require.NoError(t, err)
		err = remote.Write(dst, img, remote.WithTransport(&bearer{token: scoped}))
		if ok {
			assert.NoError(t, err, ref)
		} else {
			assert.ErrorContains(t, err, "403", ref)
		}
	}
}
