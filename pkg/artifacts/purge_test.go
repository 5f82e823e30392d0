package artifacts_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
)

// TestPurgeAbandonedUploads: an interrupted upload stays resumable for UploadTTL after its
// last byte, then its data, info and hash state are deleted; published files stay.
func TestPurgeAbandonedUploads(t *testing.T) {
	dir := t.TempDir()
	srv, ts, received := countingServer(t, artifacts.Options{Dir: dir, Auth: allowAll, UploadTTL: time.Hour})
	bt := &bearer{received: received}
	c := &artifacts.Client{URL: ts.URL, HTTP: &http.Client{Transport: bt}, StateDir: t.TempDir()}
	done, _ := randomFile(t, 1000)
	_, err := c.Push(context.Background(), done, "example.org/done")
	require.NoError(t, err)
	cut, _ := randomFile(t, 1<<20)
	bt.cut.Store(1 << 19)
	_, err = c.Push(context.Background(), cut, "example.org/cut")
	require.Error(t, err)
	uploads := func() []string {
		l, _ := filepath.Glob(filepath.Join(dir, "uploads", "*"))
		return l
	}
	require.Eventually(t, func() bool { return len(uploads()) == 3 }, 10*time.Second, 10*time.Millisecond, "data, info, hash state")

	srv.Purge(time.Now().Add(59 * time.Minute))
	assert.Len(t, uploads(), 3, "still resumable within the TTL")
	srv.Purge(time.Now().Add(61 * time.Minute))
	assert.Empty(t, uploads())
	_, err = os.Stat(filepath.Join(dir, "files", "example.org", "done"))
	assert.NoError(t, err, "published files are not uploads")
}
