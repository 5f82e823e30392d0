package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestChainedUpgradeCheckpoints runs the controller against a real kube-apiserver with
// BPA's and Argo's CRDs but no workflow-controller: the test plays Argo by writing the
// Workflow's status. A cluster that kubespray v2.27.1 built at Kubernetes 1.30.4 is asked
// for kubespray v2.28.0 and Kubernetes 1.32.5: the Workflow runs two hops, upgrade (v2.27.1's
// image, to 1.31.9) and upgrade-2 (v2.28.0's, to 1.32.5). Once the first succeeded,
// status.applied records it, and still does after the controller restarts; the second fails
// and status.applied stays at the first hop; a rerun then plans only the second hop, and
// once it succeeded status.applied is the spec's.
func TestChainedUpgradeCheckpoints(t *testing.T) {
	ctx, r, c := crdsOnRig(t, rig.Options{MinimalArgoCRDs: true})
	ns := r.Namespace
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ssh",
		Labels: map[string]string{bpav1.ClusterNameLabel: "c1"}}, Data: map[string][]byte{"ssh-privatekey": []byte("k"), "known_hosts": []byte("h")}}))

	// The cluster as generation 1's run left it.
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "up", Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}},
			Kubespray: &bpav1.KubesprayConfig{Version: "v2.27.1"}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.30.4"},
			// No backup server on this rig: the hops alone (the snapshots between them:
			// translator's TestPlanBackups).
			EtcdBackup: &bpav1.EtcdBackup{BeforeDay2: bpav1.BackupSkip}}}
	built := builtAsSpecified(ctx, t, c, p)
	edit := func(change func(p *bpav1.Provisioning)) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p = getProvisioning(ctx, t, c, ns, "up")
			change(p)
			return c.Update(ctx, p)
		}))
	}
	edit(func(p *bpav1.Provisioning) { p.Spec.Kubespray.Version, p.Spec.Kubernetes.Version = "v2.28.0", "1.32.5" })

	stop, stopped := startController(ctx, t, r, controller.Options{ArgoPollInterval: time.Hour})
	runs := func() []wfv1.Workflow {
		l := &wfv1.WorkflowList{}
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{bpav1.ProvisioningNameLabel: "up"}))
		return l.Items
	}
	eventually(t, "the chain's Workflow", func() bool { return len(runs()) == 1 })
	wf := runs()[0]
	plan := observe.PlanOf(&wf)
	require.NotNil(t, plan)
	var hops [][3]string
	for _, s := range plan.Steps {
		hops = append(hops, [3]string{s.Name, s.Release, s.Kubernetes})
	}
	require.Equal(t, [][3]string{{"preflight", "", ""}, {"upgrade", "v2.27.1", "1.31.9"}, {"upgrade-2", "v2.28.0", "1.32.5"}}, hops,
		"the preflight checks once, then a step per hop")
	tasks := wf.Spec.Templates[0].DAG.Tasks
	image := func(task string) string {
		i := slices.IndexFunc(tasks, func(t wfv1.DAGTask) bool { return t.Name == task })
		require.GreaterOrEqual(t, i, 0, task)
		return tasks[i].Arguments.GetParameterByName("kubespray-image").Value.String()
	}
	assert.Equal(t, bpav1.DefaultKubesprayImage+":v2.27.1", image("upgrade"))
	assert.Equal(t, "{{workflow.parameters.kubespray-image}}", image("upgrade-2"), "the run's image: v2.28.0")
	assert.Equal(t, "upgrade", tasks[slices.IndexFunc(tasks, func(t wfv1.DAGTask) bool { return t.Name == "upgrade-2" })].Depends)

	applied := func() (string, string, string) {
		a := getProvisioning(ctx, t, c, ns, "up").Status.Applied
		return a.KubesprayVersion, a.KubernetesVersion, a.Settings
	}
	// Argo's part: the first hop succeeded, the second runs.
	playArgo(ctx, t, c, &wf, wfv1.WorkflowRunning, map[string]wfv1.NodePhase{"preflight": wfv1.NodeSucceeded, "upgrade": wfv1.NodeSucceeded, "upgrade-2": wfv1.NodeRunning})
	eventually(t, "the first hop in status.applied", func() bool { k, v, _ := applied(); return k == "v2.27.1" && v == "1.31.9" })
	_, _, settings := applied()
	assert.Equal(t, built.Settings, settings, "the settings are the last hop's to apply")

	// A controller restart mid-chain keeps the checkpoint and starts nothing.
	stop()
	require.NoError(t, <-stopped)
	stop, stopped = startController(ctx, t, r, controller.Options{ArgoPollInterval: time.Hour})
	defer func() { stop(); require.NoError(t, <-stopped) }()
	time.Sleep(2 * time.Second)
	k, v, _ := applied()
	assert.Equal(t, [2]string{"v2.27.1", "1.31.9"}, [2]string{k, v})
	assert.Len(t, runs(), 1)

	// The second hop fails: the cluster stays at the first.
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&wf), &wf))
	playArgo(ctx, t, c, &wf, wfv1.WorkflowFailed, map[string]wfv1.NodePhase{"preflight": wfv1.NodeSucceeded, "upgrade": wfv1.NodeSucceeded, "upgrade-2": wfv1.NodeFailed})
	eventually(t, "Failed", func() bool { return getProvisioning(ctx, t, c, ns, "up").Status.Phase == bpav1.PhaseFailed })
	k, v, _ = applied()
	assert.Equal(t, [2]string{"v2.27.1", "1.31.9"}, [2]string{k, v})

	// A rerun resumes at the second hop: the first is not run again.
	edit(func(p *bpav1.Provisioning) { p.Annotations = map[string]string{bpav1.RerunAnnotation: "1"} })
	eventually(t, "the rerun's Workflow", func() bool { return len(runs()) == 2 })
	rerun := runs()[slices.IndexFunc(runs(), func(w wfv1.Workflow) bool { return w.Name != wf.Name })]
	plan = observe.PlanOf(&rerun)
	require.Len(t, plan.Steps, 2, "the preflight checks again, then the second hop only")
	assert.Equal(t, "preflight", plan.Steps[0].Name)
	hop := plan.Steps[1]
	assert.Equal(t, [3]string{"upgrade", "v2.28.0", "1.32.5"}, [3]string{hop.Name, hop.Release, hop.Kubernetes})
	assert.Contains(t, hop.Reason, "kubespray v2.27.1 → v2.28.0 and Kubernetes 1.31.9 → 1.32.5")
	assert.NotContains(t, hop.Operations[0].Vars, "kube_version", "the last hop's version is the vars file's")
	playArgo(ctx, t, c, &rerun, wfv1.WorkflowSucceeded, map[string]wfv1.NodePhase{"preflight": wfv1.NodeSucceeded, "upgrade": wfv1.NodeSucceeded})
	eventually(t, "the spec's releases in status.applied", func() bool { k, v, _ := applied(); return k == "v2.28.0" && v == "1.32.5" })
	_, _, settings = applied()
	assert.Equal(t, plan.Settings, settings)
}

// builtAsSpecified creates p (one master, m1) and records in its status that generation 1's
// run built it as its spec says, and returns that run's plan.
func builtAsSpecified(ctx context.Context, t *testing.T, c client.Client, p *bpav1.Provisioning) *translator.ChangePlan {
	t.Helper()
	require.NoError(t, c.Create(ctx, p))
	built, err := translator.PlanChange(p.DeepCopy())
	require.NoError(t, err)
	p.Status.ObservedGeneration, p.Status.Phase = 1, bpav1.PhaseSucceeded
	p.Status.Applied = &bpav1.AppliedState{Generation: 1, Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master", "worker"}, Etcd: true, IP: "10.0.0.1"}},
		KubesprayVersion: built.KubesprayVersion, KubernetesVersion: built.KubernetesVersion, Settings: built.Settings, Immutable: built.Immutable}
	require.NoError(t, c.Status().Update(ctx, p))
	return built
}

// playArgo writes wf's status as Argo would: phase, resolve-leases' hosts, and the given
// phases of the planned tasks.
func playArgo(ctx context.Context, t *testing.T, c client.Client, wf *wfv1.Workflow, phase wfv1.WorkflowPhase, steps map[string]wfv1.NodePhase) {
	t.Helper()
	now := metav1.Now()
	node := func(name string, phase wfv1.NodePhase) wfv1.NodeStatus {
		n := wfv1.NodeStatus{ID: wf.Name + "-" + name, Name: wf.Name + "." + name, DisplayName: name, Type: wfv1.NodeTypePod, Phase: phase, StartedAt: now}
		if phase.Fulfilled(nil) {
			n.FinishedAt = now
		}
		return n
	}
	leases := node("resolve-leases", wfv1.NodeSucceeded)
	leases.Outputs = &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: "hosts", Value: wfv1.AnyStringPtr(`[{"name":"m1","roles":["master","worker"],"etcd":true,"ip":"10.0.0.1"}]`)}}}
	wf.Status = wfv1.WorkflowStatus{Phase: phase, StartedAt: now, Nodes: wfv1.Nodes{leases.ID: leases}}
	if phase.Completed() {
		wf.Status.FinishedAt = now
	}
	for name, ph := range steps {
		n := node(name, ph)
		wf.Status.Nodes[n.ID] = n
	}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		status := wf.Status
		if err := c.Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return err
		}
		wf.Status = status
		return c.Update(ctx, wf)
	}))
}
