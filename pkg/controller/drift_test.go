package controller

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// builtWithDriftCheck is a Provisioning whose generation's run succeeded, checked every 10m.
func builtWithDriftCheck() *bpav1.Provisioning {
	p := newProvisioning()
	p.Spec.DriftCheck = &bpav1.DriftCheck{Interval: metav1.Duration{Duration: 10 * time.Minute}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts, Generation: 1, KubernetesVersion: "1.31.4"}
	p.Status.Phase, p.Status.ObservedGeneration = bpav1.PhaseSucceeded, 1
	return p
}

type driftRig struct {
	t   *testing.T
	c   client.Client
	r   *driftChecker
	rec *record.FakeRecorder
	now time.Time
}

func newDriftRig(t *testing.T, p *bpav1.Provisioning, more ...client.Object) *driftRig {
	d := &driftRig{t: t, rec: record.NewFakeRecorder(10), now: time.Date(2026, 1, 1, 13, 34, 0, 0, time.UTC)}
	d.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(more, p)...).
		WithStatusSubresource(&bpav1.Provisioning{}, &bpav1.Software{}).Build()
	d.r = &driftChecker{Client: d.c, Recorder: d.rec, now: func() time.Time { return d.now }}
	return d
}

func (d *driftRig) run() (*bpav1.Provisioning, []wfv1.Workflow, ctrl.Result) {
	d.t.Helper()
	ctx := context.Background()
	res, err := d.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.NoError(d.t, err)
	got := &bpav1.Provisioning{}
	require.NoError(d.t, d.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "p"}, got))
	return got, workflows(d.t, d.c), res
}

// finish ends the drift check wf as check-drift would, having found fields.
func (d *driftRig) finish(wf wfv1.Workflow, phase wfv1.WorkflowPhase, fields ...string) {
	d.t.Helper()
	d.finishWith(wf, phase, stepio.Drift{Fields: fields})
}

// finishWith ends the drift check wf as check-drift would, with its output.
func (d *driftRig) finishWith(wf wfv1.Workflow, phase wfv1.WorkflowPhase, drift stepio.Drift) {
	d.t.Helper()
	drift.CheckedAt, drift.Generation, drift.Nodes = metav1.NewTime(d.now), 1, []stepio.NodeReadiness{{Name: "m1", Ready: "True"}}
	out, _ := json.Marshal(drift)
	node := observetest.Node("c", translator.StepCheckDrift, wfv1.NodeTypePod, wfv1.NodeSucceeded, 0)
	if phase != wfv1.WorkflowSucceeded {
		node = observetest.Node("c", translator.StepCheckDrift, wfv1.NodeTypePod, wfv1.NodeFailed, 0)
		node.Message = "cannot ask the cluster's API: master m1: connection refused"
	} else {
		node = observetest.WithOutput(node, "drift", string(out))
	}
	wf.Status = wfv1.WorkflowStatus{Phase: phase, StartedAt: metav1.NewTime(d.now), FinishedAt: metav1.NewTime(d.now.Add(time.Minute)), Nodes: wfv1.Nodes{"c": node}}
	require.NoError(d.t, d.c.Update(context.Background(), &wf))
}

// One check per slot of the interval, after a crash too; one at a time; what it found lands
// in status.drift and Drifted, with an event when drift is first found.
func TestDriftCheckPerSlot(t *testing.T) {
	d := newDriftRig(t, builtWithDriftCheck())
	got, wfs, res := d.run()
	require.Len(t, wfs, 1)
	slot := time.Date(2026, 1, 1, 13, 30, 0, 0, time.UTC)
	assert.Equal(t, translator.DriftCheckWorkflowName("p", slot), wfs[0].Name)
	assert.Equal(t, "p", wfs[0].Labels[bpav1.DriftCheckOfLabel])
	assert.Empty(t, wfs[0].Labels[bpav1.ProvisioningNameLabel], "not a run of the spec")
	assert.Equal(t, "bpa-cluster-c1", wfs[0].Spec.Synchronization.Mutexes[0].Name)
	assert.Equal(t, 6*time.Minute+time.Second, res.RequeueAfter)
	assert.Nil(t, meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted), "nothing found yet")

	// Again, as after a crash (status holds nothing of it): still one.
	_, wfs, _ = d.run()
	require.Len(t, wfs, 1, "no second Workflow for one slot")

	// The next slot comes while this one runs: it waits.
	d.now = d.now.Add(10 * time.Minute)
	_, wfs, _ = d.run()
	require.Len(t, wfs, 1, "one check at a time")

	// It ends having found drift: the condition names the field, one event; the next starts.
	d.finish(wfs[0], wfv1.WorkflowSucceeded, "node m1: label example.com/role=edge missing")
	got, wfs, _ = d.run()
	require.Len(t, wfs, 2, "13:40's check starts")
	c := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, bpav1.ReasonDriftFound, c.Reason)
	assert.Equal(t, "1 field differs from what BPA applied: node m1: label example.com/role=edge missing", c.Message)
	assert.Equal(t, []string{"node m1: label example.com/role=edge missing"}, got.Status.Drift.Fields)
	assert.Equal(t, wfs[0].Name, got.Status.Drift.Workflow)
	assert.EqualValues(t, 1, got.Status.Drift.ObservedGeneration)
	require.Len(t, d.rec.Events, 1)
	assert.Contains(t, <-d.rec.Events, "Warning DriftFound 1 field differs")

	// The same drift again: no second event. Then none: False, NoDrift.
	d.finish(newestUnfinished(t, wfs), wfv1.WorkflowSucceeded, "node m1: label example.com/role=edge missing")
	d.run()
	assert.Empty(t, d.rec.Events, "drift already reported")
	d.now = d.now.Add(10 * time.Minute)
	_, wfs, _ = d.run()
	require.Len(t, wfs, 3)
	d.now = d.now.Add(time.Minute)
	d.finish(newestUnfinished(t, wfs), wfv1.WorkflowSucceeded)
	got, _, _ = d.run()
	c = meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, bpav1.ReasonNoDrift, c.Reason)
	assert.Empty(t, got.Status.Drift.Fields)

	// Turned off: no more checks, and no finding left to go stale.
	got.Spec.DriftCheck = nil
	require.NoError(t, d.c.Update(context.Background(), got))
	d.now = d.now.Add(time.Hour)
	got, wfs, _ = d.run()
	assert.Len(t, wfs, 3)
	assert.Nil(t, got.Status.Drift)
	assert.Nil(t, meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted))
}

func newestUnfinished(t *testing.T, wfs []wfv1.Workflow) wfv1.Workflow {
	t.Helper()
	for _, wf := range wfs {
		if !wf.Status.Phase.Completed() {
			return wf
		}
	}
	t.Fatal("no unfinished check")
	return wfv1.Workflow{}
}

// A check that could not read the cluster makes Drifted Unknown, saying why.
func TestDriftCheckFailed(t *testing.T) {
	d := newDriftRig(t, builtWithDriftCheck())
	_, wfs, _ := d.run()
	require.Len(t, wfs, 1)
	d.finish(wfs[0], wfv1.WorkflowFailed)
	got, _, _ := d.run()
	c := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Equal(t, bpav1.ReasonDriftCheckFailed, c.Reason)
	assert.Contains(t, c.Message, "connection refused")
}

// A failed check is kept longer than a succeeded one: once the newer succeeded check is
// collected, the older failed one is not folded again as news.
func TestDriftCheckOlderNotFoldedAgain(t *testing.T) {
	d := newDriftRig(t, builtWithDriftCheck())
	_, wfs, _ := d.run()
	require.Len(t, wfs, 1)
	d.finish(wfs[0], wfv1.WorkflowFailed)
	d.run()
	d.now = d.now.Add(10 * time.Minute)
	_, wfs, _ = d.run()
	require.Len(t, wfs, 2)
	newer := wfs[0]
	if newer.Name < wfs[1].Name {
		newer = wfs[1]
	}
	d.finish(newer, wfv1.WorkflowSucceeded)
	got, _, _ := d.run()
	require.Equal(t, newer.Name, got.Status.Drift.Workflow)
	require.NoError(t, d.c.Delete(context.Background(), &newer)) // its keep time is over
	got, _, _ = d.run()
	assert.Equal(t, newer.Name, got.Status.Drift.Workflow, "the older check is not folded again")
	c := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted)
	require.NotNil(t, c)
	assert.Equal(t, bpav1.ReasonNoDrift, c.Reason)
}

// No check for a cluster never built, nor while a run of the spec is pending or running,
// nor after it failed; none without spec.driftCheck.
func TestDriftCheckWaits(t *testing.T) {
	for name, change := range map[string]func(p *bpav1.Provisioning){
		"never built":           func(p *bpav1.Provisioning) { p.Status.Applied = nil },
		"no host applied":       func(p *bpav1.Provisioning) { p.Status.Applied.Hosts = nil },
		"a new generation":      func(p *bpav1.Provisioning) { p.Generation = 2 },
		"a run running":         func(p *bpav1.Provisioning) { p.Status.Phase = bpav1.PhaseRunning },
		"a run pending":         func(p *bpav1.Provisioning) { p.Status.Phase = bpav1.PhasePending },
		"the last run failed":   func(p *bpav1.Provisioning) { p.Status.Phase = bpav1.PhaseFailed },
		"a rerun asked":         func(p *bpav1.Provisioning) { p.Annotations = map[string]string{bpav1.RerunAnnotation: "again"} },
		"no spec.driftCheck":    func(p *bpav1.Provisioning) { p.Spec.DriftCheck = nil },
		"an interval too short": func(p *bpav1.Provisioning) { p.Spec.DriftCheck.Interval.Duration = time.Second },
	} {
		t.Run(name, func(t *testing.T) {
			p := builtWithDriftCheck()
			change(p)
			_, wfs, _ := newDriftRig(t, p).run()
			assert.Empty(t, wfs)
		})
	}
}

// With reconcile: Apply, drift a run puts back asks, once, for those runs: the rerun
// annotation on the Provisioning and on the Software whose packages drifted. No check runs
// until they finished; the same drift found after them is left to a person (a Warning, no
// second request); drift no run puts back is only reported; Report asks for nothing.
func TestDriftReconcileApply(t *testing.T) {
	label := "node m1: label example.com/role=edge missing"
	pkg := "node m1: package jq: installed 1.6-1, wanted 1.6-2 (Software tools)"
	taint := "node m1: taint example.com/x=y:NoSchedule not applied by BPA"
	found := stepio.Drift{Fields: []string{label, taint, pkg},
		Rerun: &stepio.DriftRerun{Provisioning: []string{label}, Softwares: map[string][]string{"tools": {pkg}}}}
	tools := &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "ns", Generation: 1, Labels: map[string]string{"cluster": "c1"}},
		Status: bpav1.SoftwareStatus{RunStatus: bpav1.RunStatus{Phase: bpav1.PhaseSucceeded, ObservedGeneration: 1}}}
	p := builtWithDriftCheck()
	p.Spec.DriftCheck.Reconcile = bpav1.DriftApply
	d := newDriftRig(t, p, tools)
	ctx := context.Background()
	software := func() *bpav1.Software {
		sw := &bpav1.Software{}
		require.NoError(t, d.c.Get(ctx, client.ObjectKeyFromObject(tools), sw))
		return sw
	}

	_, wfs, _ := d.run()
	require.Len(t, wfs, 1)
	d.finishWith(wfs[0], wfv1.WorkflowSucceeded, found)
	got, _, _ := d.run()
	got2, wfs, _ := d.run() // again, as after a lost status write: the same request
	assert.Equal(t, got.Status.Drift, got2.Status.Drift)
	request := "drift-" + strconv.FormatInt(time.Date(2026, 1, 1, 13, 30, 0, 0, time.UTC).Unix(), 10)
	rec := got.Status.Drift.Reconcile
	require.NotNil(t, rec)
	assert.Equal(t, request, rec.Request)
	assert.True(t, rec.Provisioning)
	assert.Equal(t, []string{"tools"}, rec.Softwares)
	assert.Equal(t, []string{label, pkg}, rec.Fields, "the taint is no run's")
	assert.Equal(t, request, got.Annotations[bpav1.RerunAnnotation], "the spec runs again, through the normal plan")
	assert.Equal(t, request, software().Annotations[bpav1.RerunAnnotation])
	assert.Len(t, wfs, 1, "no check while the rerun is pending")
	<-d.rec.Events // DriftFound
	assert.Contains(t, <-d.rec.Events, "Normal DriftReconcile rerun Provisioning p, Software tools ("+request+") to put back: "+label+"; "+pkg)

	// The spec's run has succeeded; the Software's still runs: still no check.
	got.Status.LastHandledRerun = request
	require.NoError(t, d.c.Status().Update(ctx, got))
	sw := software()
	sw.Status.LastHandledRerun, sw.Status.Phase = request, bpav1.PhaseRunning
	require.NoError(t, d.c.Status().Update(ctx, sw))
	d.now = d.now.Add(10 * time.Minute)
	_, wfs, _ = d.run()
	assert.Len(t, wfs, 1, "the Software's run putting packages back finishes first")
	sw.Status.Phase = bpav1.PhaseSucceeded
	require.NoError(t, d.c.Status().Update(ctx, sw))
	_, wfs, _ = d.run()
	require.Len(t, wfs, 2, "then the next check")

	// The same drift after the runs: left to a person, once; no new request.
	d.finishWith(newestUnfinished(t, wfs), wfv1.WorkflowSucceeded, found)
	got, _, _ = d.run()
	require.True(t, got.Status.Drift.Reconcile.NotPutBack)
	assert.Equal(t, request, got.Status.Drift.Reconcile.Request)
	assert.Contains(t, <-d.rec.Events, "Warning DriftNotPutBack the runs of "+request+" did not put back")
	d.now = d.now.Add(10 * time.Minute)
	_, wfs, _ = d.run()
	require.Len(t, wfs, 3)
	d.finishWith(newestUnfinished(t, wfs), wfv1.WorkflowSucceeded, found)
	got, _, _ = d.run()
	assert.True(t, got.Status.Drift.Reconcile.NotPutBack)
	assert.Empty(t, d.rec.Events, "said once")
	assert.Equal(t, request, got.Annotations[bpav1.RerunAnnotation], "asked once")

	// Only drift no run puts back: the record goes (a later label drift is applied anew).
	d.now = d.now.Add(10 * time.Minute)
	_, wfs, _ = d.run()
	require.Len(t, wfs, 4)
	d.finishWith(newestUnfinished(t, wfs), wfv1.WorkflowSucceeded, stepio.Drift{Fields: []string{taint}})
	got, _, _ = d.run()
	assert.Nil(t, got.Status.Drift.Reconcile)
	assert.Equal(t, []string{taint}, got.Status.Drift.Fields)

	// Report: found, never asked.
	p = builtWithDriftCheck()
	d = newDriftRig(t, p, tools.DeepCopy())
	_, wfs, _ = d.run()
	d.finishWith(wfs[0], wfv1.WorkflowSucceeded, found)
	got, _, _ = d.run()
	assert.Nil(t, got.Status.Drift.Reconcile)
	assert.Empty(t, got.Annotations[bpav1.RerunAnnotation])
	assert.Empty(t, software().Annotations[bpav1.RerunAnnotation])
}

// A reconcile whose status write is refused decides again: the request is the same, and its
// event is recorded once, when the status saying so was written.
func TestDriftReconcileEventOnceAfterAConflict(t *testing.T) {
	p := builtWithDriftCheck()
	p.Spec.DriftCheck.Reconcile = bpav1.DriftApply
	d := newDriftRig(t, p)
	_, wfs, _ := d.run()
	label := "node m1: label example.com/role=edge missing"
	d.finishWith(wfs[0], wfv1.WorkflowSucceeded, stepio.Drift{Fields: []string{label}, Rerun: &stepio.DriftRerun{Provisioning: []string{label}}})
	refused := 0
	d.r.Client = interceptor.NewClient(d.c.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if refused == 0 {
				refused++
				return apierrors.NewConflict(bpav1.GroupVersion.WithResource("provisionings").GroupResource(), obj.GetName(), nil)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}})
	_, err := d.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.Error(t, err, "the write refused")
	got, _, _ := d.run()
	require.Equal(t, 1, refused)
	require.NotNil(t, got.Status.Drift.Reconcile)
	var reconciles int
	for len(d.rec.Events) > 0 {
		if strings.Contains(<-d.rec.Events, bpav1.EventDriftReconcile) {
			reconciles++
		}
	}
	assert.Equal(t, 1, reconciles)
}
