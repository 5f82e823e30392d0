package sim

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/s3test"
)

// BackupServer is the site's etcd backup server: a real `bpa serve` (artifacts.Server)
// over HTTPS at the rig's service address, which the backup-etcd pods reach.
type BackupServer struct {
	URL string
	CA  []byte
	// Dir is the server's store: backups/<namespace>/<cluster>/ unless S3 is set.
	Dir string
	// S3, when set, is the S3 service the server keeps the snapshots in, under S3Prefix.
	S3 *s3test.Server
}

// S3Prefix is where a BackupServer in S3 keeps its snapshots in s3test.Bucket.
const S3Prefix = "e2e"

// StartBackupServer starts an etcd backup server for every site of b and names it in the
// site policy (an artifactServers entry with its CA, and spec.etcdBackupServer), as an admin
// would; it stops with t. Day-2 runs then take their verified etcd snapshot first. It keeps
// the snapshots on its disk.
func (b *Base) StartBackupServer(t *testing.T) *BackupServer {
	return b.startBackupServer(t, nil)
}

// StartS3BackupServer is StartBackupServer keeping the snapshots in a real S3 service
// (s3test: versitygw over TLS), as `bpa serve --backup-s3-endpoint` does.
func (b *Base) StartS3BackupServer(t *testing.T) *BackupServer {
	return b.startBackupServer(t, s3test.Start(t))
}

func (b *Base) startBackupServer(t *testing.T, gw *s3test.Server) *BackupServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &BackupServer{Dir: t.TempDir(), S3: gw}
	var store artifacts.BackupStore
	if gw != nil {
		var err error
		store, err = artifacts.NewS3Backups(ctx, gw.Options(S3Prefix))
		must(t, err, "connecting the backup server to S3")
	}
	s.URL, s.CA, _ = artifactstest.Server(ctx, t, b.Rig, func(o *artifacts.Options) { o.Dir, o.Backups = s.Dir, store })
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pol := &bpav1.BPAPolicy{}
		if err := b.Client.Get(ctx, client.ObjectKey{Name: bpav1.PolicyName}, pol); err != nil {
			return err
		}
		pol.Spec.ArtifactServers = append(pol.Spec.ArtifactServers, bpav1.ArtifactServer{URL: s.URL, CABundle: string(s.CA)})
		pol.Spec.EtcdBackupServer = s.URL
		return b.Client.Update(ctx, pol)
	}), "naming the etcd backup server in the site policy")
	return s
}

// Stored lists the snapshots the server holds for a cluster, read from its store (its disk,
// or the bucket with S3's own client), not through the server: no record, no leftover.
func (s *BackupServer) Stored(t testing.TB, namespace, cluster string) []string {
	t.Helper()
	var names []string
	if s.S3 == nil {
		entries, err := os.ReadDir(filepath.Join(s.Dir, "backups", namespace, cluster))
		must(t, err, "reading the backup server's store")
		for _, e := range entries {
			names = append(names, e.Name())
		}
	} else {
		prefix := s.key(namespace, cluster, "")
		for o := range s.S3.Client.ListObjects(context.Background(), s3test.Bucket, minio.ListObjectsOptions{Prefix: prefix}) {
			must(t, o.Err, "listing the bucket")
			names = append(names, strings.TrimPrefix(o.Key, prefix))
		}
	}
	return slices.DeleteFunc(names, func(n string) bool { return strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") })
}

// Snapshot is the file of one stored snapshot, read from the store as Stored reads it.
func (s *BackupServer) Snapshot(t testing.TB, namespace, cluster, name string) string {
	t.Helper()
	if s.S3 == nil {
		return filepath.Join(s.Dir, "backups", namespace, cluster, name)
	}
	file := filepath.Join(t.TempDir(), name)
	must(t, s.S3.Client.FGetObject(context.Background(), s3test.Bucket, s.key(namespace, cluster, name), file, minio.GetObjectOptions{}),
		"reading the snapshot from the bucket")
	return file
}

func (s *BackupServer) key(namespace, cluster, name string) string {
	return path.Join(S3Prefix, "backups", namespace, cluster) + "/" + name
}
