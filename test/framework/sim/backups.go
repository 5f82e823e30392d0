package sim

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

// BackupServer is the site's etcd backup server: a real `bpa serve` (artifacts.Server)
// over HTTPS at the rig's service address, which the backup-etcd pods reach.
type BackupServer struct {
	URL string
	CA  []byte
	// Dir is the server's store: backups/<namespace>/<cluster>/.
	Dir string
}

// StartBackupServer starts an etcd backup server for every site of b and names it in the
// site policy (an artifactServers entry with its CA, and spec.etcdBackupServer), as an admin
// would; it stops with t. Day-2 runs then take their verified etcd snapshot first.
func (b *Base) StartBackupServer(t *testing.T) *BackupServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &BackupServer{Dir: t.TempDir()}
	s.URL, s.CA, _ = artifactstest.Server(ctx, t, b.Rig, func(o *artifacts.Options) { o.Dir = s.Dir })
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
