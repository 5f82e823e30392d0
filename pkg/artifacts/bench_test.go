package artifacts_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
)

// The benchmarks measure data paths, so they allow every request with stub decisions; the
// tests above use the apiserver's real TokenReview and SubjectAccessReview, whose answers
// are cached for a minute, so one upload costs one review either way.
var allowAll = &artifacts.Auth{
	Authn: authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "bench"}}, true, nil
	}),
	Authz: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	}),
}

func benchServer(b *testing.B, dir string) (*httptest.Server, *atomic.Int64) {
	_, ts, received := countingServer(b, artifacts.Options{Dir: dir, Auth: allowAll})
	return ts, received
}

// countingServer serves opts on loopback, counting the upload bytes it receives.
func countingServer(tb testing.TB, opts artifacts.Options) (*artifacts.Server, *httptest.Server, *atomic.Int64) {
	srv, err := artifacts.NewServer(context.Background(), opts)
	require.NoError(tb, err)
	var received atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			r.Body = countingBody{r.Body, &received}
		}
		srv.ServeHTTP(w, r)
	}))
	tb.Cleanup(ts.Close)
	return srv, ts, &received
}

func benchFile(b testing.TB, dir string, size int64) string {
	f, err := os.Create(filepath.Join(dir, "src-"+strconv.FormatInt(size, 10)+"-"+strconv.Itoa(int(time.Now().UnixNano()%1e6))))
	require.NoError(b, err)
	_, err = io.CopyN(f, rand.Reader, size)
	require.NoError(b, err)
	require.NoError(b, f.Close())
	return f.Name()
}

// BenchmarkUpload compares a full `bpa artifacts push` of 256 MiB (the client hashes the
// file while sending it with tus, the server hashes what it writes, checks the sum the
// client declared and publishes the file) with a plain io.Copy HTTP PUT into the same
// directory, on loopback. Each iteration runs both, in alternating order, each after a
// sync, so neither inherits the other's dirty pages; ratio is the median over the pairs of
// tus's throughput over the plain PUT's (target >= 0.7). One untimed pair goes first (the
// first upload of each kind pays for lazy set-up), and at least uploadPairs pairs are
// measured whatever b.N is: one pair alone swings by a quarter on a shared VM.
func BenchmarkUpload(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	src := benchFile(b, dir, size)
	store := filepath.Join(dir, "plain")
	require.NoError(b, os.MkdirAll(store, 0o750))
	plainServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(filepath.Join(store, "f"))
		if err == nil {
			_, err = io.Copy(f, r.Body)
			f.Close()
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
		}
	}))
	defer plainServer.Close()
	plain := func() {
		f, err := os.Open(src)
		require.NoError(b, err)
		defer f.Close()
		req, _ := http.NewRequest(http.MethodPut, plainServer.URL, f)
		req.ContentLength = size
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
	}
	ts, _ := benchServer(b, filepath.Join(dir, "tus"))
	c := &artifacts.Client{URL: ts.URL, HTTP: http.DefaultClient, StateDir: b.TempDir()}
	push := func() {
		m, err := c.Push(context.Background(), src, "bench.example.org/blob")
		require.NoError(b, err)
		require.Equal(b, int64(size), m.Size)
	}
	plain()
	push()
	tPlain, tTus, ratio := alternating(b, func(int) { plain() }, func(int) { push() })
	b.ReportMetric(0, "ns/op") // the figures are per pair, below
	b.ReportMetric(float64(size)/(1<<20)/tPlain.Seconds(), "plain-MiB/s")
	b.ReportMetric(float64(size)/(1<<20)/tTus.Seconds(), "tus-MiB/s")
	b.ReportMetric(ratio, "ratio")
}

// alternating times x and y (given the pair's number) in pairs, alternating which goes
// first, each after a sync so neither inherits the other's dirty pages; at least uploadPairs
// pairs whatever b.N is (one pair alone swings by a quarter on a shared VM). It returns their
// mean times and the median pair's ratio of x's time over y's.
func alternating(b *testing.B, x, y func(int)) (meanX, meanY time.Duration, ratio float64) {
	timed := func(f func(int), i int) time.Duration {
		b.StopTimer()
		syscall.Sync()
		b.StartTimer()
		start := time.Now()
		f(i)
		return time.Since(start)
	}
	var ratios []float64
	pair := func(i int) {
		var tx, ty time.Duration
		if i%2 == 0 {
			tx, ty = timed(x, i), timed(y, i)
		} else {
			ty, tx = timed(y, i), timed(x, i)
		}
		meanX, meanY, ratios = meanX+tx, meanY+ty, append(ratios, tx.Seconds()/ty.Seconds())
	}
	i := 0
	for b.Loop() {
		pair(i)
		i++
	}
	for ; i < uploadPairs; i++ {
		pair(i)
	}
	slices.Sort(ratios)
	return meanX / time.Duration(i), meanY / time.Duration(i), ratios[len(ratios)/2]
}

// uploadPairs is the fewest pairs BenchmarkUpload measures; odd, so that the median is a
// pair's own ratio.
const uploadPairs = 5

// BenchmarkResume cuts a push at half and resumes it; resent-% is the share of the file
// sent again (target <= 52).
func BenchmarkResume(b *testing.B) {
	const size = 64 << 20
	dir := b.TempDir()
	src := benchFile(b, dir, size)
	ts, received := benchServer(b, filepath.Join(dir, "store"))
	var resent float64
	for b.Loop() {
		bt := &bearer{received: received}
		c := &artifacts.Client{URL: ts.URL, HTTP: &http.Client{Transport: bt}, StateDir: b.TempDir()}
		received.Store(0)
		bt.cut.Store(size / 2)
		_, err := c.Push(context.Background(), src, "bench.example.org/resume")
		require.Error(b, err)
		received.Store(0)
		_, err = c.Push(context.Background(), src, "bench.example.org/resume")
		require.NoError(b, err)
		resent = float64(received.Load()) * 100 / size
	}
	b.ReportMetric(resent, "resent-%")
}

// BenchmarkImagePush pushes a ~100 MB image (4 random 25 MiB layers) with
// go-containerregistry to the embedded distribution registry, and to go-containerregistry's
// in-memory test registry as the floor.
func BenchmarkImagePush(b *testing.B) {
	img, err := random.Image(25<<20, 4)
	require.NoError(b, err)
	// A new, empty registry for each push: both registries skip blobs they already hold.
	push := func(b *testing.B, newHost func() (string, func())) {
		b.SetBytes(100 << 20)
		for b.Loop() {
			b.StopTimer()
			host, stop := newHost()
			ref, err := name.ParseReference(host+"/bench/img:v1", name.Insecure)
			require.NoError(b, err)
			b.StartTimer()
			require.NoError(b, remote.Write(ref, img))
			b.StopTimer()
			stop()
			b.StartTimer()
		}
	}
	b.Run("ggcr-test-registry", func(b *testing.B) {
		push(b, func() (string, func()) {
			ts := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			return strings.TrimPrefix(ts.URL, "http://"), ts.Close
		})
	})
	b.Run("bpa-serve", func(b *testing.B) {
		push(b, func() (string, func()) {
			ts, _ := benchServer(b, b.TempDir())
			return strings.TrimPrefix(ts.URL, "http://"), ts.Close
		})
	})
}

// BenchmarkLoad is the load test of TestArtifactServer with stub decisions, for its figures.
func BenchmarkLoad(b *testing.B) {
	ts, _ := benchServer(b, b.TempDir())
	var elapsed time.Duration
	var growth int64
	for b.Loop() {
		elapsed, growth = concurrentPushes(b, ts.URL, func() *http.Client { return http.DefaultClient })
	}
	b.ReportMetric(float64(growth)/1024, "peak-rss-growth-MiB")
	b.ReportMetric(float64(loadN*loadSize)/(1<<20)/elapsed.Seconds(), "MiB/s")
}

const loadN, loadSize = 20, 100 << 20

// concurrentPushes pushes 20 distinct 100 MiB files at once, checks every sha256 the
// server reports and every served byte against the source, and returns how long the
// pushes took and how far the process's RSS rose above where it was before (sampled):
// uploads stream, so it must not grow with the 2 GiB moved.
func concurrentPushes(tb testing.TB, url string, newHTTP func() *http.Client) (time.Duration, int64) {
	dir := tb.TempDir()
	srcs, sums := make([]string, loadN), make([]string, loadN)
	for i := range srcs {
		srcs[i] = benchFile(tb, dir, loadSize)
		sum, err := artifacts.FileSHA256(srcs[i])
		require.NoError(tb, err)
		sums[i] = sum
	}
	runtime.GC()
	before := procStatus(tb, "VmRSS")
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss := procStatus(tb, "VmRSS"); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, loadN)
	for i := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &artifacts.Client{URL: url, HTTP: newHTTP(), StateDir: filepath.Join(dir, "state")}
			m, err := c.Push(context.Background(), srcs[i], fmt.Sprintf("load.example.org/f%d", i))
			if err == nil && m.SHA256 != sums[i] {
				err = fmt.Errorf("f%d: stored sha256 %s, source %s", i, m.SHA256, sums[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	for _, err := range errs {
		require.NoError(tb, err)
	}
	for i := range srcs { // what is served is what was sent
		resp, err := newHTTP().Get(fmt.Sprintf("%s/files/load.example.org/f%d", url, i))
		require.NoError(tb, err)
		h := sha256.New()
		_, err = io.Copy(h, resp.Body)
		resp.Body.Close()
		require.NoError(tb, err)
		require.Equal(tb, sums[i], hex.EncodeToString(h.Sum(nil)))
	}
	return elapsed, peak.Load() - before
}

// procStatus reads one kB field of /proc/self/status.
func procStatus(b testing.TB, field string) int64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(b, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(b, err)
			return kb
		}
	}
	b.Fatalf("%s not in /proc/self/status", field)
	return 0
}
