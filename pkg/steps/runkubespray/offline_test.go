package runkubespray

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts/artifactstest"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/rig"
)

// An offline run checks a real bpa serve (anonymous reads, over HTTPS, its certificate
// trusted through the trust store) before any host is touched: with one file uploaded the
// step fails listing the other 22 artifacts, and ansible-playbook never runs.
func TestOfflinePreflight(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, up := artifactstest.Server(ctx, t, r)

	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "kubelet")
	require.NoError(t, os.WriteFile(file, []byte("kubelet"), 0o600))
	_, err = up.Push(ctx, file, "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet")
	require.NoError(t, err)

	o, record := fixture(t, "0")
	vars, err := inventory.ExtraVars(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: url}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(o.ExtraVars, vars, 0o644))
	err = Run(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lacks 22 of the 23 artifacts kubespray v2.28.0 downloads")
	assert.Contains(t, err.Error(), "\n  file  "+d.Files[0]+"\n")
	assert.Contains(t, err.Error(), "\n  image registry.k8s.io/pause:3.10")
	assert.NotContains(t, err.Error(), "amd64/kubelet")
	assert.NoFileExists(t, record, "ansible-playbook ran before the pre-flight passed")

	// Without offline, nothing is checked.
	o, record = fixture(t, "0")
	require.NoError(t, Run(ctx, o))
	assert.FileExists(t, record)
}
