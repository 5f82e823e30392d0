package runkubespray

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts/artifactstest"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/test/simhost"
)

// An offline run checks a real bpa serve (anonymous reads, over HTTPS, its certificate
// trusted through the site policy's CA, not the container's trust store) before any host is
// touched: with one file uploaded the step fails listing the other 22 artifacts, and
// ansible-playbook never runs.
func TestOfflinePreflight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, ca, up, d := artifactstest.OfflineSite(ctx, t)
	artifactstest.Upload(ctx, t, up, []string{"dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet"}, nil)

	o, record := fixture(t, "0")
	vars, err := inventory.ExtraVars(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: url}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(o.ExtraVars, vars, 0o644))
	err = Run(ctx, o)
	require.Error(t, err, "without the CA the container does not trust the server")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")

	o.ArtifactsCA = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(o.ArtifactsCA, ca, 0o644))
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

// Before a playbook that downloads, the step installs the policy's CA on the hosts it runs
// on (real sshd hosts with their own trust stores), only those: scale.yml limited to
// worker-1 leaves master-1 alone. What reaches a host is BPA's re-encoding of the
// certificates, whatever the bundle's line ends; a bundle carrying a shell payload is
// refused before any host is touched.
func TestInstallsTheCABeforeDownloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, ca, up, d := artifactstest.OfflineSite(ctx, t)
	artifactstest.Upload(ctx, t, up, d.Files, d.Images)

	c := simhost.NewCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.Port = l.Addr().(*net.TCPAddr).Port // one port for every host, as a CR names one
	l.Close()
	master, worker := c.Start("master-1", "127.0.1.61"), c.Start("worker-1", "127.0.1.62")
	o, record := fixture(t, "0")
	require.NoError(t, os.WriteFile("scale.yml", []byte("- hosts: all\n"), 0o644))
	o.Playbook, o.Limit, o.SSHPort = "scale.yml", "worker-1", c.Port
	o.SSHKey, o.KnownHosts = c.ClientKeyPath(), c.KnownHostsPath()
	require.NoError(t, os.WriteFile(o.Inventory, []byte("[kube_control_plane]\nmaster-1 ansible_host=127.0.1.61\n[kube_node]\nworker-1 ansible_host=127.0.1.62\n"), 0o644))
	vars, err := inventory.ExtraVarsWithCA(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: url}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}}, nodetrust.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(o.ExtraVars, vars, 0o644))
	o.ArtifactsCA = filepath.Join(t.TempDir(), "ca.pem")

	// The attack: a payload after a valid certificate.
	pwned := filepath.Join(t.TempDir(), "pwned")
	require.NoError(t, os.WriteFile(o.ArtifactsCA, append(bytes.Clone(ca), []byte("$(touch "+pwned+")\n")...), 0o644))
	err = Run(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BPAPolicy spec.artifactServers[].caBundle")
	assert.NoFileExists(t, pwned)
	assert.NoFileExists(t, worker.File(nodetrust.Path))
	assert.NoFileExists(t, record)

	// Line ends a node would keep as they are: the host gets the re-encoding.
	require.NoError(t, os.WriteFile(o.ArtifactsCA, bytes.ReplaceAll(ca, []byte("\n"), []byte("\r\n")), 0o644))
	out := captureStdout(t, func() { require.NoError(t, Run(ctx, o)) })
	assert.Contains(t, out, "artifact server CA: installed on worker-1 (127.0.1.62")
	assert.Contains(t, out, "installed on 1 hosts, already current on 0, failed on 0")
	assert.FileExists(t, record)
	for _, f := range []string{nodetrust.Path, nodetrust.DebianPath} {
		got, err := os.ReadFile(worker.File(f))
		require.NoError(t, err)
		assert.Equal(t, string(ca), string(got), "the host's %s is not BPA's re-encoding", f)
	}
	assert.NoFileExists(t, master.File(nodetrust.Path), "scale.yml --limit worker-1 does not touch master-1")

	// A rerun (or argo retry) changes no host.
	out = captureStdout(t, func() { require.NoError(t, Run(ctx, o)) })
	assert.Contains(t, out, "installed on 0 hosts, already current on 1, failed on 0")
	assert.NotContains(t, out, "installed on worker-1")
}

// captureStdout returns what f prints on stdout (the step's log).
func captureStdout(t *testing.T, f func()) string {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = old }()
	f()
	w.Close()
	return <-done
}
