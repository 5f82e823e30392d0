package artifacts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/test/framework/s3test"
)

// TestS3BackupStoreChecksItsTarget: `bpa serve` does not start with an S3 target it could
// not use, and says why: wrong keys, a CA that did not sign the service's certificate (or
// none, the system's), plain HTTP, a bucket that is not there. The keys are read for each
// request, so a rotated Secret takes effect, and a wrong one fails there too.
func TestS3BackupStoreChecksItsTarget(t *testing.T) {
	gw := s3test.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file := func(content string) string {
		f := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		return f
	}
	otherCA := file(string(nodetrusttest.NewCA(t, nil).PEM))
	for _, c := range []struct {
		name, want string
		change     func(*artifacts.S3BackupOptions)
	}{
		{"a wrong secret key", "signature", func(o *artifacts.S3BackupOptions) { o.SecretKeyFile = file("not-the-secret") }},
		{"an unknown access key", "access key", func(o *artifacts.S3BackupOptions) { o.AccessKeyFile = file("nobody") }},
		{"another CA", "certificate signed by unknown authority", func(o *artifacts.S3BackupOptions) { o.CAFile = otherCA }},
		{"the system's CAs", "certificate signed by unknown authority", func(o *artifacts.S3BackupOptions) { o.CAFile = "" }},
		{"plain HTTP", "want https://host[:port]", func(o *artifacts.S3BackupOptions) { o.Endpoint = "http" + gw.URL[len("https"):] }},
		// A key in the URL would be printed with the server's start line.
		{"credentials in the URL", "want https://host[:port]", func(o *artifacts.S3BackupOptions) { o.Endpoint = "https://key:secret@" + gw.URL[len("https://"):] }},
		{"no such bucket", "no such bucket", func(o *artifacts.S3BackupOptions) { o.Bucket = "not-there" }},
		{"a CA file that is not one", "no PEM certificate", func(o *artifacts.S3BackupOptions) { o.CAFile = file("hello") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := gw.Options("")
			c.change(&o)
			_, err := artifacts.NewS3Backups(ctx, o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	t.Run("the keys are read for each request", func(t *testing.T) {
		o := gw.Options("")
		secret, err := os.ReadFile(o.SecretKeyFile)
		require.NoError(t, err)
		o.SecretKeyFile = file(string(secret))
		store, err := artifacts.NewS3Backups(ctx, o)
		require.NoError(t, err)
		_, err = store.List(ctx, "ns", "c1")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(o.SecretKeyFile, []byte("rotated-elsewhere"), 0o600))
		_, err = store.List(ctx, "ns", "c1")
		require.ErrorContains(t, err, "signature")
	})
}
