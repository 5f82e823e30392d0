package kubespraysim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts/artifactstest"
	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/test/simhost"
)

// TestOfflineDownloads: with spec.offline, the SIMULATED kubespray fetches every file and
// image manifest the release needs from a real bpa serve ON the host (a real sshd), with the
// host's curl and trust: it fails with an unknown-authority error until the CA is
// installed (mirrors naming a ca file that is not there, too), then succeeds, and names
// a missing file with the host; an arm64 host wants the arm64 builds.
func TestOfflineDownloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, ca, up, d := artifactstest.OfflineSite(ctx, t)
	artifactstest.Upload(ctx, t, up, d.Files[1:], d.Images)
	p, patch, err := kubespray.ProfileFor("v2.28.0")
	require.NoError(t, err)
	play := func(caPath string) *Play {
		data, err := bpainventory.ExtraVarsWithCA(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: url}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}}, caPath)
		require.NoError(t, err)
		vars, err := bpainventory.ReadVars(data)
		require.NoError(t, err)
		return &Play{profile: p, patch: patch, op: kubespray.CreateCluster(""), vars: vars}
	}
	c := simhost.NewCluster(t)
	h := c.Start("worker-1", "127.0.1.51")
	cfg := sshexec.Config{KeyFile: c.ClientKeyPath(), KnownHostsFile: c.KnownHostsPath(), Port: h.Port}
	client, err := sshexec.Dial(ctx, h.IP, cfg)
	require.NoError(t, err)
	defer client.Close()

	_, err = play("").offlineFetch(ctx, h.Name, client)
	require.Error(t, err, "the host does not trust the server yet")
	assert.Contains(t, err.Error(), "could not be fetched from "+url+"/files on worker-1")
	assert.Contains(t, err.Error(), "SSL certificate problem: self-signed certificate")
	_, err = play(nodetrust.Path).offlineFetch(ctx, h.Name, client)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the mirror's ca "+nodetrust.Path+" does not exist on the host")

	certs, err := nodetrust.Parse(ca)
	require.NoError(t, err)
	require.NoError(t, nodetrust.Install(ctx, []nodetrust.Host{{Name: h.Name, Addr: h.IP}}, cfg, certs, &testWriter{t}))
	_, err = play(nodetrust.Path).offlineFetch(ctx, h.Name, client)
	require.Error(t, err, "a file is missing")
	assert.Contains(t, err.Error(), "1 of 23 files and images could not be fetched")
	assert.Contains(t, err.Error(), url+"/files/"+d.Files[0]+": curl: (22) The requested URL returned error: 404")

	artifactstest.Upload(ctx, t, up, d.Files[:1], nil)
	n, err := play(nodetrust.Path).offlineFetch(ctx, h.Name, client)
	require.NoError(t, err)
	assert.Positive(t, n)

	// An arm64 host fetches the arm64 builds, which the server does not have.
	h.SetMachine("aarch64")
	_, err = play(nodetrust.Path).offlineFetch(ctx, h.Name, client)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "10 of 23 files and images could not be fetched")
	assert.Contains(t, err.Error(), "/linux/arm64/")

	// Without spec.offline nothing is fetched from anywhere.
	data, err := bpainventory.ExtraVars(&bpav1.ProvisioningSpec{})
	require.NoError(t, err)
	pl := play("")
	pl.vars, err = bpainventory.ReadVars(data)
	require.NoError(t, err)
	n, err = pl.offlineFetch(ctx, h.Name, client)
	require.NoError(t, err)
	assert.Zero(t, n)
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
