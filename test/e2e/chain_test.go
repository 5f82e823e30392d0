package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ---- scenario l: a chained upgrade of two hops ----
//
// The cluster "ch" (a master and a worker) is built by kubespray v2.27.1 at Kubernetes
// 1.30.4, then asked for kubespray v2.28.0 and Kubernetes 1.32.5: two minors, so two hops,
// upgrade (v2.27.1's image, to 1.31.9, the newest 1.31 it installs) and upgrade-2 (v2.28.0's,
// to 1.32.5). The second hop fails once (SIMULATED, for v2.28.0's upgrade-cluster.yml only):
// status.applied holds the first, and `argo retry` runs only the second.

const chainBase = 170

func (e *env) scenarioChain(t *testing.T) {
	d := e.newDay2(t)
	var bmhs []metal3v1.BareMetalHost
	entry := func(name string, i int) bpav1.NodeEntry {
		n := chainBase + i
		h, mac := d.dayTwoHost("ch-"+name, n)
		d.hosts[name], bmhs = h, append(bmhs, h)
		return bpav1.NodeEntry{name: {MACAddress: mac}}
	}
	d.p = &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "ch", Labels: map[string]string{"cluster": "ch"}},
		Spec: bpav1.ProvisioningSpec{
			Masters:    []bpav1.NodeEntry{entry("chm1", 0)},
			Workers:    []bpav1.NodeEntry{entry("chw1", 1)},
			Kubernetes: &bpav1.KubernetesConfig{Version: "1.30.4"},
			Kubespray:  &bpav1.KubesprayConfig{Version: "v2.27.1"},
		},
	}
	e.AddHosts(e.ctx, bmhs)
	e.create(t, d.p)
	got := e.waitPhase(t, d.p.Name, bpav1.PhaseSucceeded)
	require.Equal(t, [2]string{"v2.27.1", "1.30.4"}, releasesOf(got))
	d.assertKubelets(t, "v1.30.4")

	// The second hop's upgrade-cluster.yml fails, at v2.28.0 only.
	require.NoError(t, os.WriteFile(d.FailFile, []byte("upgrade-cluster@v2.28.0\n"), 0o644))
	t.Cleanup(func() { _ = os.Remove(d.FailFile) })
	before, logs := len(d.kubesprayRuns(t)), d.hostLogs(t)
	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.Kubespray.Version, p.Spec.Kubernetes.Version = "v2.28.0", "1.32.5" })
	assert.Contains(t, plan, "## Step 1/5 backup-etcd: ")
	assert.Contains(t, plan, "## Step 3/5 upgrade: upgrade kubespray v2.27.1 → v2.28.0 and Kubernetes 1.30.4 → 1.32.5, hop 1 of 2: Kubernetes 1.30.4 → 1.31.9 with kubespray v2.27.1\n")
	assert.Contains(t, plan, "## runs in "+bpav1.DefaultKubesprayImage+":v2.27.1:")
	assert.Contains(t, plan, "## Step 4/5 backup-etcd-2: ")
	assert.Contains(t, plan, "## Step 5/5 upgrade-2:")
	failed := d.waitGeneration(t, p.Generation, bpav1.PhaseFailed)
	assert.Contains(t, failed.Status.Message, "upgrade-2")
	assert.Equal(t, [2]string{"v2.27.1", "1.31.9"}, releasesOf(failed), "the first hop is checkpointed in status.applied")
	assert.Equal(t, []string{"upgrade-cluster", "upgrade-cluster"}, d.runsSince(t, before))
	runs := d.kubesprayRuns(t)[before:]
	assert.Equal(t, "v1.31.9", kubeVersionArg(t, runs[0]), "the first hop's Kubernetes, in v2.27's format")
	assert.Empty(t, kubeVersionArg(t, runs[1]), "the last hop's comes from the vars file")
	for host, did := range d.touched(t, logs) {
		assert.Equal(t, []string{"upgrade-cluster.yml: upgraded, kubelet v1.30.4 -> v1.31.9, drained (grace period 300, timeout 360s, retries 3)"}, did, host)
	}
	d.assertKubelets(t, "v1.31.9")
	// Each hop ran in its release's image, as the stand-in kubespray says when it starts.
	wfLogs := e.argoLogs(t, failed.Status.Workflow.Name)
	assertLogLines(t, wfLogs, "run-kubespray", "SIMULATED kubespray v2.27.1 upgrade-cluster.yml", "SIMULATED kubespray v2.28.0 upgrade-cluster.yml")

	// `argo retry` resumes at the second hop: the first is not run again.
	require.NoError(t, os.Remove(d.FailFile))
	before, logs = len(d.kubesprayRuns(t)), d.hostLogs(t)
	out, err := d.Argo(d.ctx, "retry", failed.Status.Workflow.Name)
	require.NoError(t, err, out)
	e.waitPhase(t, d.p.Name, bpav1.PhaseRunning)
	got = e.waitPhase(t, d.p.Name, bpav1.PhaseSucceeded)
	assert.Equal(t, failed.Status.Workflow.Name, got.Status.Workflow.Name, "retried in place")
	assert.Equal(t, []string{"upgrade-cluster"}, d.runsSince(t, before))
	for host, did := range d.touched(t, logs) {
		assert.Equal(t, []string{"upgrade-cluster.yml: upgraded, kubelet v1.31.9 -> v1.32.5, drained (grace period 300, timeout 360s, retries 3)"}, did, host)
	}
	assert.Equal(t, [2]string{"v2.28.0", "1.32.5"}, releasesOf(got))
	assert.Equal(t, p.Generation, got.Status.Applied.Generation)
	d.assertKubelets(t, "v1.32.5")
	var phases []string
	for _, s := range got.Status.Plan {
		phases = append(phases, s.Name+" "+s.Phase)
	}
	assert.Equal(t, []string{"backup-etcd Succeeded", "preflight Succeeded", "upgrade Succeeded", "backup-etcd-2 Succeeded", "upgrade-2 Succeeded"}, phases,
		"a verified snapshot before the first hop and before the second")
	assert.Len(t, got.Status.Backups, 2, "one snapshot per hop, stored and listed")
}

func releasesOf(p *bpav1.Provisioning) [2]string {
	return [2]string{p.Status.Applied.KubesprayVersion, p.Status.Applied.KubernetesVersion}
}

// kubeVersionArg is the kube_version of a recorded run's playbook -e object, "" for none.
func kubeVersionArg(t *testing.T, run string) string {
	data, err := os.ReadFile(filepath.Join(run, "argv.json"))
	require.NoError(t, err)
	var argv []string
	require.NoError(t, json.Unmarshal(data, &argv))
	for i, a := range argv {
		var vars map[string]any
		if i > 0 && argv[i-1] == "-e" && json.Unmarshal([]byte(a), &vars) == nil {
			if v, ok := vars["kube_version"].(string); ok {
				return v
			}
		}
	}
	return ""
}

// assertKubelets checks every node of the cluster reports kubelet version.
func (d *day2) assertKubelets(t *testing.T, version string) {
	t.Helper()
	for name := range d.hosts {
		n, err := d.app.CoreV1().Nodes().Get(d.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, version, n.Status.NodeInfo.KubeletVersion, "kubelet version of %s", name)
	}
}
