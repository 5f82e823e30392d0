package artifacts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

const kib = 1 << 10

// create starts a tus upload of size bytes at path, sending none of them.
func create(t *testing.T, s *server, token, path string, size int) (status int, body, location string) {
	req, err := http.NewRequest(http.MethodPost, s.URL+"/files/", nil)
	require.NoError(t, err)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Upload-Length", strconv.Itoa(size))
	req.Header.Set("Upload-Metadata", artifacts.EncodeMetadata(map[string]string{"path": path, "sha256": strings.Repeat("ab", 32)}))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

// registryRequest sends one registry request; a body of unknown length goes chunked.
func registryRequest(t *testing.T, method, url, token string, body io.Reader, length int64) *http.Response {
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.ContentLength = length
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// startBlob starts a registry blob upload and returns where its bytes go.
func startBlob(t *testing.T, s *server, token, repo string) string {
	resp := registryRequest(t, http.MethodPost, s.URL+"/v2/"+repo+"/blobs/uploads/", token, nil, 0)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	loc := resp.Header.Get("Location")
	if strings.HasPrefix(loc, "/") {
		loc = s.URL + loc
	}
	return loc
}

// Issue 26, item 7: storage quotas, per uploader and in total. A tus upload reserves its
// declared length at creation, so one that would not fit is refused before any byte is
// sent, and two cannot both squeeze into the same room; registry bytes are admitted as
// they arrive. What counts is read from disk when the server starts.
func testQuotas(t *testing.T, e *env) {
	ctx := context.Background()
	third := artifactstest.Token(ctx, t, e.rig, "third", "bpa-artifacts-uploader")
	dir := t.TempDir()
	opts := artifacts.Options{Dir: dir, QuotaPerUploader: 1024 * kib, QuotaTotal: 2048 * kib}
	s := e.serveOpts(t, "", false, opts)
	up, _ := s.client(t, e.uploader)
	a, _ := randomFile(t, 600*kib)
	b, _ := randomFile(t, 600*kib)
	const pathA, pathB = "dl.k8s.io/a", "dl.k8s.io/b"

	_, err := up.Push(ctx, a, pathA)
	require.NoError(t, err)
	s.received.Store(0)
	_, err = up.Push(ctx, b, pathB)
	require.ErrorContains(t, err, "507 Insufficient Storage", "600 KiB published and 600 KiB more")
	assert.ErrorContains(t, err, "the per-uploader quota of 1.0 MiB (bpa serve --quota-per-uploader) for system:serviceaccount:"+e.rig.Namespace+":uploader")
	assert.ErrorContains(t, err, "published files 600.0 KiB")
	assert.Zero(t, s.received.Load(), "refused at creation, before any byte")

	status, _, _ := create(t, s, e.other, "dl.k8s.io/c", 500*kib)
	require.Equal(t, http.StatusCreated, status, "another uploader has a quota of its own")
	status, body, _ := create(t, s, e.other, "dl.k8s.io/d", 600*kib)
	assert.Equal(t, http.StatusInsufficientStorage, status, "an upload in progress holds its whole declared length")
	assert.Contains(t, body, "uploads in progress 500.0 KiB")
	status, body, _ = create(t, s, third, "dl.k8s.io/e", 1000*kib)
	assert.Equal(t, http.StatusInsufficientStorage, status, "600 + 500 + 1000 KiB is more than the total")
	assert.Contains(t, body, "the store's total quota of 2.0 MiB (bpa serve --quota-total)")

	t.Run("what counts is read from disk at start", func(t *testing.T) {
		s := e.serveOpts(t, "", false, opts)
		up, _ := s.client(t, e.uploader)
		_, err := up.Push(ctx, b, pathB)
		assert.ErrorContains(t, err, "507 Insufficient Storage", "a published file")
		status, _, _ := create(t, s, e.other, "dl.k8s.io/d", 600*kib)
		assert.Equal(t, http.StatusInsufficientStorage, status, "an upload in progress")
		status, _, _ = create(t, s, third, "dl.k8s.io/e", 1000*kib)
		assert.Equal(t, http.StatusInsufficientStorage, status, "the total")
	})

	t.Run("expiry, refusal and deletion give the room back", func(t *testing.T) {
		s.srv.Purge(time.Now().Add(artifacts.DefaultUploadTTL + time.Hour))
		status, _, loc := create(t, s, e.other, "dl.k8s.io/d", 600*kib)
		require.Equal(t, http.StatusCreated, status, "the expired upload no longer holds its 500 KiB")
		resp := tusRequest(t, http.MethodPatch, loc, e.other, make([]byte, 600*kib), map[string]string{
			"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
		require.Equal(t, 460, resp.StatusCode, "not the declared sum: discarded")
		status, _, _ = create(t, s, e.other, "dl.k8s.io/d", 1000*kib)
		assert.Equal(t, http.StatusCreated, status, "the discarded upload no longer holds its 600 KiB")
		s.srv.Purge(time.Now().Add(artifacts.DefaultUploadTTL + time.Hour))

		require.NoError(t, up.Remove(ctx, pathA))
		_, err := up.Push(ctx, b, pathB)
		assert.NoError(t, err, "the deleted file no longer counts")
	})

	t.Run("registry bytes count, per uploader and after a restart", func(t *testing.T) {
		// The uploader holds pathB's 600 KiB.
		big, err := random.Image(500*kib, 1)
		require.NoError(t, err)
		ref, err := up.ImageRef("registry.k8s.io/big:1")
		require.NoError(t, err)
		err = remote.Write(ref, big, remote.WithTransport(&bearer{token: e.uploader}))
		assert.ErrorContains(t, err, "507 Insufficient Storage", "a 500 KiB layer")
		assert.ErrorContains(t, err, "--quota-per-uploader")
		small, err := random.Image(300*kib, 1)
		require.NoError(t, err)
		ref, err = up.ImageRef("registry.k8s.io/small:1")
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, small, remote.WithTransport(&bearer{token: e.uploader})), "a 300 KiB layer fits")

		loc := startBlob(t, s, e.uploader, "registry.k8s.io/chunked")
		resp := registryRequest(t, http.MethodPatch, loc, e.uploader, io.LimitReader(rand.Reader, 200*kib), -1)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "a body of unknown length is cut where it stops fitting")
		assert.Contains(t, string(msg), "--quota-per-uploader")

		s := e.serveOpts(t, "", false, opts)
		loc = startBlob(t, s, third, "registry.k8s.io/other")
		resp = registryRequest(t, http.MethodPatch, loc, third, io.LimitReader(rand.Reader, 200*kib), 200*kib)
		resp.Body.Close()
		assert.Equal(t, http.StatusAccepted, resp.StatusCode, "another uploader's room")
		status, body, _ := create(t, s, e.uploader, "dl.k8s.io/f", 200*kib)
		assert.Equal(t, http.StatusInsufficientStorage, status, "after a restart, the registry blobs are still the uploader's")
		assert.Regexp(t, `registry [1-9]\d*\.\d KiB`, body)
		status, body, _ = create(t, s, e.other, "dl.k8s.io/g", 1000*kib)
		assert.Equal(t, http.StatusInsufficientStorage, status, "and in the total")
		assert.Contains(t, body, "--quota-total")
	})
}

// testQuotaRaces: many uploads created, and registry bodies sent, at once by one uploader;
// as many are admitted as fit, whichever order they come in.
func testQuotaRaces(t *testing.T, e *env) {
	// The first upload admitted is held before its reservation is written until the second
	// waits for the quota's lock (as it must) or is admitted too (as it would be without it).
	s := e.serveOpts(t, "", false, artifacts.Options{Dir: t.TempDir(), QuotaPerUploader: 1024 * kib})
	h := newHolder()
	s.srv.SetRaceHooks(artifacts.RaceHooks{Contended: h.free, Admitted: h.hold})
	statuses := make([]int, 2)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer h.free("") // one refused before the hook must not hold the other forever
			statuses[i], _, _ = create(t, s, e.uploader, "dl.k8s.io/pair/"+strconv.Itoa(i), 600*kib)
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []int{http.StatusCreated, http.StatusInsufficientStorage}, statuses, "two 600 KiB uploads in 1 MiB")

	s = e.serveOpts(t, "", false, artifacts.Options{Dir: t.TempDir(), QuotaPerUploader: 1024 * kib})
	parallel := func(n int, f func(i int) int) map[int]int {
		var mu sync.Mutex
		got := map[int]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				status := f(i)
				mu.Lock()
				got[status]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		return got
	}
	got := parallel(8, func(i int) int {
		status, _, _ := create(t, s, e.uploader, "dl.k8s.io/race/"+strconv.Itoa(i), 300*kib)
		return status
	})
	assert.Equal(t, map[int]int{http.StatusCreated: 3, http.StatusInsufficientStorage: 5}, got, "3 x 300 KiB fit in 1 MiB, 4 do not")
	infos, _ := filepath.Glob(filepath.Join(s.dir, "uploads", "*.info"))
	assert.Len(t, infos, 3)

	locs := make([]string, 4)
	for i := range locs {
		locs[i] = startBlob(t, s, e.other, "registry.k8s.io/race")
	}
	var sent atomic.Int64
	got = parallel(4, func(i int) int {
		body := make([]byte, 300*kib)
		_, _ = rand.Read(body)
		resp := registryRequest(t, http.MethodPatch, locs[i], e.other, bytes.NewReader(body), int64(len(body)))
		resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			sent.Add(int64(len(body)))
		}
		return resp.StatusCode
	})
	assert.Equal(t, map[int]int{http.StatusAccepted: 3, http.StatusInsufficientStorage: 1}, got, "3 x 300 KiB fit in 1 MiB, 4 do not")
	assert.Equal(t, int64(900*kib), sent.Load())
}
