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
	"github.com/akraino-edge-stack/bpa/pkg/artifacts/artifactstest"
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
			var first atomic.Bool
			var once sync.Once
			release := make(chan struct{})
			go1 := func(string) { once.Do(func() { close(release) }) }
			s.srv.SetPublishHooks(artifacts.PublishHooks{
				Contended: go1,
				Published: go1,
				MetaWritten: func(string) {
					if first.CompareAndSwap(false, true) {
						<-release
					}
				},
			})
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
					defer go1("") // a writer refused before publishing must not hold the other forever
					_, err := c.Push(ctx, file, p)
					results[i] = pushed{sum: sum, by: tc.by[i], err: err}
				}()
			}
			wg.Wait()
			require.True(t, first.Load(), "a writer reached the point between metadata and file")
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
