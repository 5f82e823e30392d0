package kubespraysim

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/steps/runkubespray"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// keyMount reads, from the WorkflowTemplate itself, how the kubelet writes the SSH key into
// template's container: the mode (the key's item mode, else the volume's defaultMode, else
// the kubelet's 0644) and the pod's fsGroup (nil when unset), so this test and the template
// cannot drift apart.
func keyMount(t *testing.T, template string) (os.FileMode, *int64) {
	t.Helper()
	all, err := workflowtemplates.All()
	require.NoError(t, err)
	for _, wft := range all {
		for _, tmpl := range wft.Spec.Templates {
			if tmpl.Name != template {
				continue
			}
			var fsGroup *int64
			if tmpl.SecurityContext != nil {
				fsGroup = tmpl.SecurityContext.FSGroup
			}
			for _, v := range tmpl.Volumes {
				if v.Secret == nil || v.Name != "ssh" {
					continue
				}
				mode := os.FileMode(0o644)
				if v.Secret.DefaultMode != nil {
					mode = os.FileMode(*v.Secret.DefaultMode)
				}
				for _, item := range v.Secret.Items {
					if item.Key == "ssh-privatekey" && item.Mode != nil {
						mode = os.FileMode(*item.Mode)
					}
				}
				return mode, fsGroup
			}
		}
	}
	t.Fatalf("no template %s with an ssh Secret volume", template)
	return 0, nil
}

// writeAsKubelet writes data as a kubelet writes a Secret's file: owned by root (the tests
// run as root, as the kubelet does), with mode, and with an fsGroup the file's group becomes
// it and the mode is widened to group-readable (pkg/volume SetVolumeOwnership: |0440 for a
// read-only volume).
func writeAsKubelet(t *testing.T, data []byte, mode os.FileMode, fsGroup *int64) string {
	t.Helper()
	require.Zero(t, os.Geteuid(), "the key test writes root-owned files, as a kubelet does: run it as root")
	path := filepath.Join(t.TempDir(), "ssh-privatekey")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	if fsGroup != nil {
		require.NoError(t, os.Chown(path, 0, int(*fsGroup)))
		mode |= 0o440
	}
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// twoHosts starts a control-plane host and a worker, and writes BPA's inventory and vars for
// them (as render-inventory does).
func twoHosts(t *testing.T) (*simhost.Cluster, string, string) {
	t.Helper()
	sim := simhost.NewCluster(t)
	// One port for every host, as a CR names one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sim.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	m1, w1 := sim.Start("m1", "127.0.1.201"), sim.Start("w1", "127.0.1.202")
	dir := writeInputs(t, []bpav1.HostStatus{h("m1", m1.IP, true, "master"), h("w1", w1.IP, false, "worker")}, map[string]any{})
	return sim, filepath.Join(dir, "hosts.ini"), filepath.Join(dir, "vars.yaml")
}

// TestSSHKeyAsTheTemplateMountsIt is the attack on the key's mode: the real ansible-playbook,
// over real OpenSSH, with run-kubespray's own argv (kubespray.Build) and the key file
// exactly as a kubelet writes it for the run-kubespray template. OpenSSH ignores a private
// key its group may read ("UNPROTECTED PRIVATE KEY FILE"), so a 0440 mount fails every run
// at its first host.
func TestSSHKeyAsTheTemplateMountsIt(t *testing.T) {
	mode, fsGroup := keyMount(t, "run-kubespray")
	sim, ini, vars := twoHosts(t)
	clientKey, err := os.ReadFile(sim.ClientKeyPath())
	require.NoError(t, err)
	key := writeAsKubelet(t, clientKey, mode, fsGroup)

	o := kubespray.DefaultRunOptions()
	o.Inventory, o.ExtraVars, o.SSHKey, o.KnownHosts = ini, vars, key, sim.KnownHostsPath()
	o.SSHPort, o.Playbook = sim.Hosts()[0].Port, "playbooks/facts.yml"
	inv, err := kubespray.Build(o, "ansible-playbook", os.Environ())
	require.NoError(t, err)
	control, err := NewControlDir()
	require.NoError(t, err)
	t.Cleanup(func() { StopSSHMasters(control) })
	env, err := Container{Image: o.KubesprayImage, Tmp: t.TempDir(), ControlDir: control}.Env()
	require.NoError(t, err)
	tree, err := Tree()
	require.NoError(t, err)
	cmd := exec.CommandContext(context.Background(), "ansible-playbook", inv.Args[1:]...)
	cmd.Dir, cmd.Env = tree, slices.Concat(inv.Env, env)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the key mounted with mode %#o (fsGroup %v) must be one OpenSSH uses:\n%s", mode, fsGroup, out)
	require.Contains(t, string(out), "ok=2", "facts gathered over SSH on each host")
}

// TestRunKubesprayHandsAnsibleAPrivateKey: whatever the cluster does to the pod spec (here
// an fsGroup a site's admission injects, which makes the kubelet widen the key to 0440),
// `bpa step run-kubespray` hands ansible-playbook a copy only it can read, so the real
// OpenSSH still logs in.
func TestRunKubesprayHandsAnsibleAPrivateKey(t *testing.T) {
	sim, ini, vars := twoHosts(t)
	clientKey, err := os.ReadFile(sim.ClientKeyPath())
	require.NoError(t, err)
	fsGroup := int64(65532)
	key := writeAsKubelet(t, clientKey, 0o400, &fsGroup)
	fi, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o440), fi.Mode().Perm(), "the kubelet's widening, as the test writes it")

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	control, err := NewControlDir()
	require.NoError(t, err)
	t.Cleanup(func() { StopSSHMasters(control) })
	env, err := Container{Image: "quay.io/kubespray/kubespray:v2.28.1", Tmp: tmp, ControlDir: control}.Env()
	require.NoError(t, err)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	tree, err := Tree()
	require.NoError(t, err)
	t.Chdir(tree)
	o := kubespray.DefaultRunOptions()
	o.Inventory, o.ExtraVars, o.SSHKey, o.KnownHosts = ini, vars, key, sim.KnownHostsPath()
	o.SSHPort, o.Playbook, o.KubesprayImage = sim.Hosts()[0].Port, "playbooks/facts.yml", "quay.io/kubespray/kubespray:v2.28.1"
	require.NoError(t, runkubespray.Run(context.Background(), o))
	require.NoDirExists(t, filepath.Dir(kubespray.PrivateKey(tmp)), "the private copy is removed when the step ends")
}
