package runkubespray

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// offlineHosts is a run-kubespray step (its ansible-playbook a recorder) for an offline
// cluster on url whose inventory holds two real sshd hosts, master-1 and worker-1, the vars
// naming caPath in containerd's mirrors ("" for none).
func offlineHosts(t *testing.T, url, caPath string) (o kubespray.RunOptions, record string, master, worker *simhost.Host) {
	c := simhost.NewCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.Port = l.Addr().(*net.TCPAddr).Port // one port for every host, as a CR names one
	l.Close()
	master, worker = c.Start("master-1", "127.0.1.61"), c.Start("worker-1", "127.0.1.62")
	o, record = fixture(t, "0")
	o.SSHPort, o.SSHKey, o.KnownHosts = c.Port, c.ClientKeyPath(), c.KnownHostsPath()
	require.NoError(t, os.WriteFile(o.Inventory, []byte("[kube_control_plane]\nmaster-1 ansible_host=127.0.1.61\n[kube_node]\nworker-1 ansible_host=127.0.1.62\n"), 0o644))
	vars, err := inventory.ExtraVarsWithCA(&bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: url}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}}, caPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(o.ExtraVars, vars, 0o644))
	return o, record, master, worker
}

// An offline run checks a real bpa serve (anonymous reads, over HTTPS, its certificate
// trusted through the site policy's CA, not the container's trust store) before any host is
// changed, for the architectures of the hosts that download (asked with uname -m): with one
// file uploaded the step fails listing the other 22 artifacts, and ansible-playbook never
// runs; with every amd64 artifact uploaded and worker-1 an arm64 host, it lists worker-1's
// arm64 files; a step that downloads nothing checks nothing.
func TestOfflinePreflight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, ca, up, d := artifactstest.OfflineSite(ctx, t)
	const kubelet = "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet"
	artifactstest.Upload(ctx, t, up, []string{kubelet}, nil)

	o, record, _, worker := offlineHosts(t, url, "")
	err := Run(ctx, o)
	require.Error(t, err, "without the CA the container does not trust the server")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")

	o.ArtifactsCA = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(o.ArtifactsCA, ca, 0o644))
	err = Run(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lacks 22 of the 23 artifacts kubespray v2.28.0 downloads for amd64 hosts")
	assert.Contains(t, err.Error(), "\n  file  "+d.Files[0]+"\n")
	assert.Contains(t, err.Error(), "\n  image registry.k8s.io/pause:3.10")
	assert.NotContains(t, err.Error(), "amd64/kubelet")
	assert.NoFileExists(t, record, "ansible-playbook ran before the pre-flight passed")

	// An arm64 worker needs the arm64 files too.
	artifactstest.Upload(ctx, t, up, slices.DeleteFunc(slices.Clone(d.Files), func(f string) bool { return f == kubelet }), d.Images)
	worker.SetMachine("aarch64")
	arm, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "arm64")
	require.NoError(t, err)
	var armOnly []string
	for _, f := range arm.Files {
		if !slices.Contains(d.Files, f) {
			armOnly = append(armOnly, f)
		}
	}
	require.NotEmpty(t, armOnly)
	err = Run(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("lacks %d of the %d artifacts kubespray v2.28.0 downloads for amd64 and arm64 hosts", len(armOnly), len(d.Files)+len(armOnly)+len(d.Images)))
	assert.Contains(t, err.Error(), "dl.k8s.io/release/v1.32.5/bin/linux/arm64/kubelet")
	assert.NotContains(t, err.Error(), "linux/amd64/")
	assert.NoFileExists(t, record)
	artifactstest.Upload(ctx, t, up, armOnly, nil)
	out := captureStdout(t, func() { require.NoError(t, Run(ctx, o)) })
	assert.Contains(t, out, "holds all")
	assert.FileExists(t, record)

	// remove-node.yml downloads nothing: nothing is checked.
	require.NoError(t, os.WriteFile("remove-node.yml", []byte("- hosts: all\n"), 0o644))
	o.Playbook, o.PlaybookVars = "remove-node.yml", `{"node":"worker-1","skip_confirmation":true}`
	out = captureStdout(t, func() { require.NoError(t, Run(ctx, o)) })
	assert.NotContains(t, out, "offline:")
	assert.FileExists(t, record)

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

	o, record, master, worker := offlineHosts(t, url, nodetrust.Path)
	require.NoError(t, os.WriteFile("scale.yml", []byte("- hosts: all\n"), 0o644))
	o.Playbook, o.Limit = "scale.yml", "worker-1"
	o.ArtifactsCA = filepath.Join(t.TempDir(), "ca.pem")

	// The attack: a payload after a valid certificate.
	pwned := filepath.Join(t.TempDir(), "pwned")
	require.NoError(t, os.WriteFile(o.ArtifactsCA, append(bytes.Clone(ca), []byte("$(touch "+pwned+")\n")...), 0o644))
	err := Run(ctx, o)
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
