package kubespraysim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts/artifactstest"
	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/rig"
)

// TestOfflineDownloads: with spec.offline, the SIMULATED kubespray downloads every file the
// release fetches from a real bpa serve over HTTPS (the vars render-inventory writes, read
// as Ansible would), and fails naming the one that is missing.
func TestOfflineDownloads(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, up := artifactstest.Server(ctx, t, r)

	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	for _, f := range d.Files[1:] {
		file := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(file, []byte(f), 0o600))
		_, err := up.Push(ctx, file, f)
		require.NoError(t, err)
	}
	data, err := bpainventory.ExtraVars(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: url}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}})
	require.NoError(t, err)
	vars, err := bpainventory.ReadVars(data)
	require.NoError(t, err)
	p, patch, err := kubespray.ProfileFor("v2.28.0")
	require.NoError(t, err)
	play := &Play{profile: p, patch: patch, op: kubespray.CreateCluster(""), vars: vars}

	var out strings.Builder
	err = play.download(ctx, &out)
	require.Error(t, err, "a file is missing")
	assert.Contains(t, err.Error(), "1 of 11 files could not be downloaded")
	assert.Contains(t, err.Error(), d.Files[0]+" (HTTP 404)")

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, []byte(d.Files[0]), 0o600))
	_, err = up.Push(ctx, file, d.Files[0])
	require.NoError(t, err)
	require.NoError(t, play.download(ctx, &out))
	assert.Contains(t, out.String(), "offline: downloaded 11 files")

	// Without spec.offline nothing is downloaded from anywhere.
	data, err = bpainventory.ExtraVars(&bpav1.ProvisioningSpec{})
	require.NoError(t, err)
	play.vars, err = bpainventory.ReadVars(data)
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, play.download(ctx, &out))
	assert.Empty(t, out.String())
}
