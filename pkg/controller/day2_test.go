package controller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func planned(t *testing.T, c *translator.ChangePlan) *wfv1.Workflow {
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	yes := true
	return &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Labels: map[string]string{translator.GenerationLabel: "3"},
		Annotations:     map[string]string{translator.PlanAnnotation: string(raw)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Name: "p", UID: "uid-p", Controller: &yes}}}}
}

// TestAppliedFollowsSucceededSteps: a node is applied once the step that adds it succeeded,
// and leaves once the one that removes it did and verify found its Node gone; folding the same observation twice changes
// nothing; the versions move only when the whole run succeeded.
func TestAppliedFollowsSucceededSteps(t *testing.T) {
	c := &translator.ChangePlan{KubesprayVersion: "v2.28.0", KubernetesVersion: "1.31.4", Settings: "new", Immutable: map[string]string{"kube_pods_subnet": "10.244.0.0/16"},
		Steps: []translator.Step{
			{Name: translator.StepRemoveWorkers, Nodes: []string{"w1"}, Operations: []kubespray.Operation{{Playbook: kubespray.Remove}}, Removes: true},
			{Name: translator.StepScaleWorkers, Nodes: []string{"w3"}, Operations: []kubespray.Operation{{Playbook: kubespray.Facts}, {Playbook: kubespray.Scale}}, Adds: true},
		}}
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p"}}
	p.Status.Applied = &bpav1.AppliedState{KubesprayVersion: "v2.28.0", KubernetesVersion: "1.30.4", Settings: "old",
		Hosts: []bpav1.HostStatus{{Name: "m1"}, {Name: "w1"}, {Name: "w2"}}}
	hosts := []bpav1.HostStatus{{Name: "m1"}, {Name: "w1", Removing: true}, {Name: "w2"}, {Name: "w3", IP: "10.0.0.3"}}
	now := metav1.NewTime(time.Now())
	o := observe.Observation{Phase: bpav1.PhaseRunning, Hosts: hosts, Steps: []bpav1.StepStatus{
		{Name: translator.StepRemoveWorkers, Phase: "Succeeded", StartedAt: &now, FinishedAt: &now},
		{Name: translator.StepScaleWorkers, Phase: "Failed", StartedAt: &now, FinishedAt: &now},
	}}
	wf := planned(t, c)
	observePlan(p, wf, o)
	names := func() []string {
		var out []string
		for _, h := range p.Status.Applied.Hosts {
			out = append(out, h.Name)
		}
		return out
	}
	assert.Equal(t, []string{"m1", "w1", "w2"}, names(), "w1 stays until verify saw it leave; w3 is not applied while its step failed")
	assert.Equal(t, "1.30.4", p.Status.Applied.KubernetesVersion)
	require.Len(t, p.Status.Operations, 2)
	assert.Equal(t, "Failed", p.Status.Operations[1].Result)
	assert.Equal(t, []bpav1.OperationStatus{
		{Name: "remove-workers", Playbooks: []string{"remove-node"}, Nodes: []string{"w1"}, Phase: "Succeeded"},
		{Name: "scale-workers", Playbooks: []string{"facts", "scale"}, Nodes: []string{"w3"}, Phase: "Failed"},
	}, p.Status.Plan)

	rec := record.NewFakeRecorder(10)
	before := append([]bpav1.OperationRecord(nil), p.Status.Operations...)
	// argo retry: the failed step runs again and succeeds, and so does verify.
	o.Phase, o.Steps[1].Phase = bpav1.PhaseSucceeded, "Succeeded"
	o.Steps = append(o.Steps, bpav1.StepStatus{Name: translator.StepVerify, Phase: "Succeeded"})
	observePlan(p, wf, o)
	observePlan(p, wf, o)
	assert.Equal(t, []string{"m1", "w2", "w3"}, names())
	assert.Equal(t, "10.0.0.3", p.Status.Applied.Hosts[2].IP)
	assert.Equal(t, "1.31.4", p.Status.Applied.KubernetesVersion, "the run succeeded: the plan's versions apply")
	assert.Equal(t, "new", p.Status.Applied.Settings)
	assert.Equal(t, map[string]string{"kube_pods_subnet": "10.244.0.0/16"}, p.Status.Applied.Immutable, "the values the cluster now has, for the next plan to keep")
	assert.Equal(t, int64(3), p.Status.Applied.Generation)
	require.Len(t, p.Status.Operations, 2, "a retried step updates its record")
	reportOperations(rec, p, before)
	require.Len(t, rec.Events, 1, "one event: the retried step now succeeded")
	assert.Contains(t, <-rec.Events, "OperationSucceeded scale-workers succeeded (w3)")

	// A Workflow this Provisioning did not make says nothing about its cluster, whatever its
	// labels and plan say.
	forged := planned(t, &translator.ChangePlan{Steps: []translator.Step{{Name: translator.StepRemoveWorkers, Nodes: []string{"m1", "w2", "w3"}, Removes: true}}})
	forged.OwnerReferences = nil
	observePlan(p, forged, observe.Observation{Phase: bpav1.PhaseSucceeded, Hosts: hosts, Steps: []bpav1.StepStatus{{Name: translator.StepRemoveWorkers, Phase: "Succeeded"}, {Name: translator.StepVerify, Phase: "Succeeded"}}})
	assert.Equal(t, []string{"m1", "w2", "w3"}, names(), "a forged plan removes nothing")
}

// TestRemovalThatRemovedNothingStaysApplied: kubespray's remove-node exits 0 on a name that
// matches no host. verify then fails (the Node is still there), and the node must stay
// applied so that the next run removes it again; folding it out on the step's success alone
// would leave a Node no plan ever removes.
func TestRemovalThatRemovedNothingStaysApplied(t *testing.T) {
	masters := []bpav1.NodeEntry{{"m1": {MACAddress: "52:54:00:00:00:01"}}}
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 3, Labels: map[string]string{"cluster": "c"}},
		Spec: bpav1.ProvisioningSpec{Masters: masters, Workers: []bpav1.NodeEntry{{"w2": {MACAddress: "52:54:00:00:00:03"}}}}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true, IP: "10.0.0.1"}, {Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.2"}, {Name: "w2", Roles: []string{"worker"}, IP: "10.0.0.3"}}}
	c, err := translator.PlanChange(p)
	require.NoError(t, err)
	// The cluster is as the plan leaves it in everything but its nodes.
	a := p.Status.Applied
	a.KubesprayVersion, a.KubernetesVersion, a.Settings, a.Immutable = c.KubesprayVersion, c.KubernetesVersion, c.Settings, c.Immutable
	p.Spec.EtcdBackup = &bpav1.EtcdBackup{BeforeDay2: bpav1.BackupSkip} // the removal alone
	c, err = translator.PlanChange(p)
	require.NoError(t, err)
	require.Len(t, c.Steps, 1)
	require.True(t, c.Steps[0].Removes)
	hosts := []bpav1.HostStatus{{Name: "m1"}, {Name: "w1", Removing: true}, {Name: "w2"}}
	observePlan(p, planned(t, c), observe.Observation{Phase: bpav1.PhaseFailed, Hosts: hosts, Steps: []bpav1.StepStatus{
		{Name: c.Steps[0].Name, Phase: "Succeeded"},
		{Name: translator.StepVerify, Phase: "Failed", Message: "removal did not take effect: node w1: still registered, but the run removed it"},
	}})
	var names []string
	for _, h := range p.Status.Applied.Hosts {
		names = append(names, h.Name)
	}
	assert.Equal(t, []string{"m1", "w1", "w2"}, names, "w1 is still in the cluster")
	again, err := translator.PlanChange(p)
	require.NoError(t, err)
	require.Len(t, again.Steps, 1, "the next run removes w1 again")
	assert.Equal(t, c.Steps[0].Nodes, again.Steps[0].Nodes)
}

// TestLegacyClusterIsSeeded: a cluster built before status.applied existed gets the hosts of
// its last successful run as its applied state, so its first day-2 edit is planned as a
// change, not as a new cluster.
func TestLegacyClusterIsSeeded(t *testing.T) {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p"}}
	o := observe.Observation{Phase: bpav1.PhaseSucceeded, Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}}, {Name: "w1", Roles: []string{"worker"}}}}
	observePlan(p, &wfv1.Workflow{}, o)
	require.NotNil(t, p.Status.Applied)
	assert.Len(t, p.Status.Applied.Hosts, 2)
	o.Hosts = o.Hosts[:1]
	observePlan(p, &wfv1.Workflow{}, o)
	assert.Len(t, p.Status.Applied.Hosts, 2, "seeded once, never overwritten by an unplanned run")
}

func TestOperationsKeepTheLastTen(t *testing.T) {
	p := &bpav1.Provisioning{}
	for i := range 12 {
		recordOperation(p, bpav1.OperationRecord{Name: "scale-workers", Workflow: "wf-" + string(rune('a'+i)), Result: "Succeeded"})
	}
	require.Len(t, p.Status.Operations, maxOperations)
	assert.Equal(t, "wf-c", p.Status.Operations[0].Workflow)
	assert.Equal(t, "wf-l", p.Status.Operations[9].Workflow)
}

// finish marks the CR's Workflow name as ended in phase, every planned task with it, and
// resolve-leases reporting hosts.
func finish(t *testing.T, c client.Client, name string, phase wfv1.WorkflowPhase, hosts string) {
	t.Helper()
	wf := &wfv1.Workflow{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, wf))
	np := wfv1.NodePhase(phase)
	wf.Status = wfv1.WorkflowStatus{Phase: phase, StartedAt: observetest.At(0), FinishedAt: observetest.At(1), Nodes: wfv1.Nodes{
		"r": observetest.WithOutput(observetest.Node("r", "resolve-leases", wfv1.NodeTypePod, wfv1.NodeSucceeded, 0), "hosts", hosts)}}
	for _, s := range observe.PlanOf(wf).Steps {
		wf.Status.Nodes[s.Name] = observetest.Node(s.Name, s.Name, wfv1.NodeTypePod, np, 0)
	}
	require.NoError(t, c.Update(context.Background(), wf))
}

func setSpec(t *testing.T, c client.Client, gen int64, workers ...string) {
	t.Helper()
	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	p.Generation, p.Spec.Workers = gen, nil
	for _, w := range workers {
		p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{w: nil})
	}
	require.NoError(t, c.Update(context.Background(), p))
}

// TestPlansWaitForTheRunAndFoldItFirst: an edit made while a run is going is planned only
// once that run has ended and been folded into status.applied, so reverting an edit mid-run
// undoes it (a plan made against the cluster as it was would see nothing to do), and a run
// that ended while nobody watched is never redone.
func TestPlansWaitForTheRunAndFoldItFirst(t *testing.T) {
	p := newProvisioning()
	p.Spec.Workers = []bpav1.NodeEntry{{"w1": nil}}
	p.Spec.EtcdBackup = &bpav1.EtcdBackup{BeforeDay2: bpav1.BackupSkip} // no backup server here (TestDay2RunTakesABackupFirst)
	r, c, _ := newTestReconciler(p)
	reconcile(t, r)
	finish(t, c, "p-provision-1", wfv1.WorkflowSucceeded, `[{"name":"m1","roles":["master"],"etcd":true,"ip":"10.0.0.1"},{"name":"w1","roles":["worker"],"ip":"10.0.0.2"}]`)
	got := reconcile(t, r)
	require.Equal(t, []string{"m1", "w1"}, hostNames(got.Status.Applied.Hosts))

	// Generation 2 adds w2; while its run goes, generation 3 takes it back out.
	setSpec(t, c, 2, "w1", "w2")
	got = reconcile(t, r)
	require.Equal(t, "p-provision-2", got.Status.Workflow.Name)
	setSpec(t, c, 3, "w1")
	got = reconcile(t, r)
	assert.Equal(t, int64(2), got.Status.ObservedGeneration, "generation 3 is not planned while generation 2 runs")
	assert.Equal(t, bpav1.ReasonWaitingForRun, condition(got, bpav1.ConditionReconciling).Reason)

	// Generation 2 ends (the controller looked away): it is folded in, then generation 3 is
	// planned against it: w2 is removed, not left behind as "nothing to do".
	finish(t, c, "p-provision-2", wfv1.WorkflowSucceeded, `[{"name":"m1","roles":["master"],"etcd":true,"ip":"10.0.0.1"},{"name":"w1","roles":["worker"],"ip":"10.0.0.2"},{"name":"w2","roles":["worker"],"ip":"10.0.0.3"}]`)
	got = reconcile(t, r)
	require.Equal(t, "p-provision-3", got.Status.Workflow.Name, "%+v %v", got.Status.Conditions, hostNames(got.Status.Applied.Hosts))
	wf := &wfv1.Workflow{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p-provision-3"}, wf))
	plan := observe.PlanOf(wf)
	require.Len(t, plan.Steps, 1)
	assert.Equal(t, translator.StepRemoveWorkers, plan.Steps[0].Name)
	assert.Equal(t, []string{"w2"}, plan.Steps[0].Nodes)
}

func hostNames(hs []bpav1.HostStatus) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	return out
}

// TestHostsThatLeftAreReleasedOncePerRun: after a successful run, the hosts this
// Provisioning claimed that are neither applied nor in the run (a node removed; a member a
// failed scale-up claimed, then scaled back) are released, and nothing else; then nothing
// is listed again until another run succeeds.
func TestHostsThatLeftAreReleasedOncePerRun(t *testing.T) {
	mine := provisioningRef("p", "uid-p")
	lists := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		host("applied", mine, "c1"), host("removed", mine, "c1"), host("abandoned", mine, "c1"),
		host("others", provisioningRef("q", "uid-q"), "c1"),
	).WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		if _, ok := l.(*metal3v1.BareMetalHostList); ok {
			lists++
		}
		return c.List(ctx, l, o...)
	}}).Build()
	p := newProvisioning()
	p.Status.Phase = bpav1.PhaseSucceeded
	p.Status.Workflow = &bpav1.WorkflowReference{Name: "p-provision-2", UID: "wf-2"}
	p.Status.Applied = &bpav1.AppliedState{Hosts: []bpav1.HostStatus{{Name: "m1", BareMetalHost: "applied"}}}
	p.Status.Hosts = []bpav1.HostStatus{{Name: "m1", BareMetalHost: "applied"}, {Name: "w1", BareMetalHost: "removed", Removing: true}}

	require.NoError(t, releaseRemoved(context.Background(), c, c, p, "c1"))
	assert.True(t, claimed(t, c, "applied"))
	assert.False(t, claimed(t, c, "removed"))
	assert.False(t, claimed(t, c, "abandoned"))
	assert.True(t, claimed(t, c, "others"), "another Provisioning's host is never released")
	assert.Equal(t, "wf-2", p.Status.ReleasedAfter)

	require.NoError(t, releaseRemoved(context.Background(), c, c, p, "c1"))
	assert.Equal(t, 1, lists, "settled once per run, not on every reconcile")
	p.Status.Phase = bpav1.PhaseRunning
	p.Status.Workflow = &bpav1.WorkflowReference{Name: "p-provision-3", UID: "wf-3"}
	require.NoError(t, releaseRemoved(context.Background(), c, c, p, "c1"))
	assert.Equal(t, 1, lists, "nothing while a run goes")
}
