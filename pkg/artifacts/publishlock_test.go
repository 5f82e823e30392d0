package artifacts_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

// Issue 26, item 7: two uploads of one path finishing together once left one upload's
// sha256 and uploader on the other's bytes (1 round in 300). Here the first writer to have
// its metadata in place is held there until the second either waits for the path's lock
// (as it must) or has published all of its own (as it did without the lock), so the
// interleaving that broke it is tried every time.
func testPublishLock(t *testing.T, e *env) {
	ctx := context.Background()
	admin1 := artifactstest.Token(ctx, t, e.rig, "publisher-1", "bpa-artifacts-admin")
	admin2 := artifactstest.Token(ctx, t, e.rig, "publisher-2", "bpa-artifacts-admin")
	sa := func(name string) string { return "system:serviceaccount:" + e.rig.Namespace + ":" + name }
	for name, tc := range map[string]struct{ tokens, by [2]string }{
		"two uploaders with override":           {[2]string{admin1, admin2}, [2]string{sa("publisher-1"), sa("publisher-2")}},
		"one uploader with two different files": {[2]string{admin1, admin1}, [2]string{sa("publisher-1"), sa("publisher-1")}},
	} {
		t.Run(name, func(t *testing.T) {
			s := e.serve(t, t.TempDir(), "", false)
			const p = "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm"
			h := newHolder()
			s.srv.SetRaceHooks(artifacts.RaceHooks{Contended: h.free, Published: h.free, MetaWritten: h.hold})
			type pushed struct {
				sum, by string
				err     error
			}
			results := make([]pushed, 2)
			var wg sync.WaitGroup
			for i, tok := range tc.tokens {
				file, sum := randomFile(t, 64<<10)
				c, _ := s.client(t, tok)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer h.free("") // a writer refused before publishing must not hold the other forever
					_, err := c.Push(ctx, file, p)
					results[i] = pushed{sum: sum, by: tc.by[i], err: err}
				}()
			}
			wg.Wait()
			require.True(t, h.held.Load(), "a writer reached the point between metadata and file")
			for _, r := range results {
				require.NoError(t, r.err)
			}

			status, body := get(t, s.URL+"/files/"+p, tc.tokens[0])
			require.Equal(t, http.StatusOK, status)
			served, err := artifacts.FileSHA256(writeTemp(t, body))
			require.NoError(t, err)
			raw, err := os.ReadFile(filepath.Join(s.dir, "meta", p+".json"))
			require.NoError(t, err)
			var meta artifacts.FileMeta
			require.NoError(t, json.Unmarshal(raw, &meta))
			assert.Equal(t, served, meta.SHA256, "the recorded sha256 is that of the bytes served")
			var author *pushed
			for i := range results {
				if results[i].sum == served {
					author = &results[i]
				}
			}
			require.NotNil(t, author, "the bytes served are one upload's")
			assert.Equal(t, author.by, meta.UploadedBy, "and the recorded uploader is who sent them")
			assert.Equal(t, int64(len(body)), meta.Size)
		})
	}
}

func writeTemp(t *testing.T, b []byte) string {
	f := filepath.Join(t.TempDir(), "served")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	return f
}

// holder holds the first caller of hold until anyone calls free, and frees it when a
// second caller comes to hold.
type holder struct {
	held    atomic.Bool
	once    sync.Once
	release chan struct{}
}

func newHolder() *holder { return &holder{release: make(chan struct{})} }

func (h *holder) free(string) { h.once.Do(func() { close(h.release) }) }

func (h *holder) hold(string) {
	if h.held.CompareAndSwap(false, true) {
		<-h.release
	} else {
		h.free("")
	}
}
