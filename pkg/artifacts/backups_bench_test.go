package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/s3test"
)

// BenchmarkBackupS3OverDisk stores a 25 MiB snapshot (the size of an etcd of 100,000 keys,
// BenchmarkBackupOverEtcdctl's) through `bpa serve`'s backup PUT, with its record, into
// versitygw (over TLS, posix backend on the same disk) and into the server's disk store,
// in alternating pairs, each after a sync, after one untimed pair; ratio is the median pair's
// S3 time over the disk store's (the floor). The server's auth is allowAll's, the same for both.
func BenchmarkBackupS3OverDisk(b *testing.B) {
	const size = 25 << 20
	dir := b.TempDir()
	src := benchFile(b, dir, size)
	data, err := os.ReadFile(src)
	require.NoError(b, err)
	sum := sha256.Sum256(data)
	gw := s3test.Start(b)
	s3, err := artifacts.NewS3Backups(context.Background(), gw.Options("bench"))
	require.NoError(b, err)
	put := func(opts artifacts.Options) func(int) {
		_, ts, _ := countingServer(b, opts)
		c := &artifacts.Client{URL: ts.URL, HTTP: http.DefaultClient, StateDir: b.TempDir()}
		return func(i int) {
			// A cluster each: under MaxBackupsPerCluster without a delete in the timing.
			cluster := fmt.Sprintf("c%d", i+1)
			m, err := c.PutBackup(context.Background(), "ns", cluster, "etcd.db", src, hex.EncodeToString(sum[:]), []byte(`{"verified":true}`))
			require.NoError(b, err)
			require.Equal(b, int64(size), m.Size)
		}
	}
	disk := put(artifacts.Options{Dir: b.TempDir(), Auth: allowAll})
	inS3 := put(artifacts.Options{Dir: b.TempDir(), Auth: allowAll, Backups: s3})
	disk(-1)
	inS3(-1)
	tS3, tDisk, ratio := alternating(b, inS3, disk)
	b.ReportMetric(0, "ns/op") // the figures are per pair, below
	b.ReportMetric(float64(tDisk.Microseconds())/1000, "disk-ms")
	b.ReportMetric(float64(tS3.Microseconds())/1000, "s3-ms")
	b.ReportMetric(ratio, "ratio")
}
