package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts/artifactstest"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// ---- scenario k: an air-gapped site ----
//
// A real bpa serve holds every file and image kubespray v2.28.0 fetches for Kubernetes
// 1.32.5 (tiny stand-ins, uploaded with tus and pushed with go-containerregistry). A
// Provisioning with spec.offline builds its cluster: run-kubespray's pre-flight finds
// everything, and the SIMULATED kubespray downloads every file from the server over HTTPS
// (trusting it through the trust store, as a site's image would). With one file deleted, the
// next run fails before touching a host, naming it.
func (e *env) scenarioOffline(t *testing.T) {
	url, up := artifactstest.Server(e.ctx, t, e.Rig)
	e.SetKubesprayEnv("SSL_CERT_FILE=" + os.Getenv("SSL_CERT_FILE"))
	t.Cleanup(func() { e.SetKubesprayEnv() })
	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	for _, f := range d.Files {
		file := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(file, []byte(f), 0o600))
		_, err := up.Push(e.ctx, file, f)
		require.NoError(t, err)
	}
	for _, i := range d.Images {
		ref, err := up.ImageRef(i)
		require.NoError(t, err)
		img, err := random.Image(64, 1)
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img, remote.WithContext(e.ctx), remote.WithTransport(up.HTTP.Transport)), i)
	}

	p := e.newCluster(t, "offline", 250, 1, 0)
	p.Spec.Offline = &bpav1.OfflineConfig{URL: url}
	p.Spec.Kubernetes = &bpav1.KubernetesConfig{Version: "1.32.5"}
	e.create(t, p)
	got := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	logs := e.argoLogs(t, got.Status.Workflow.Name)
	assertLogLines(t, logs, "run-kubespray",
		`offline: the artifact server \S+ holds all 23 artifacts kubespray v2.28.0 downloads`,
		`offline: downloaded 11 files \(\d+ bytes\) from \S+/files`)

	require.NoError(t, up.Remove(e.ctx, d.Files[0]))
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(p), p))
	p.Annotations = map[string]string{bpav1.RerunAnnotation: "after-delete"}
	require.NoError(t, e.Client.Update(e.ctx, p))
	failed := e.waitPhase(t, p.Name, bpav1.PhaseFailed)
	assert.Contains(t, failed.Status.Message, "lacks 1 of the 23 artifacts")
	assert.Contains(t, failed.Status.Message, d.Files[0])
	e.deleteAndCheckCleanup(t, failed)
}
