package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/remediation"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// remediatedHosts are a master and three workers.
var remediatedHosts = []bpav1.HostStatus{
	{Name: "m1", Roles: []string{"master"}, Etcd: true, IP: "10.0.0.1"},
	{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.2"}, {Name: "w2", Roles: []string{"worker"}, IP: "10.0.0.3"}, {Name: "w3", Roles: []string{"worker"}, IP: "10.0.0.4"},
}

type remediationRig struct {
	t     *testing.T
	c     client.Client
	rec   *record.FakeRecorder
	now   time.Time
	nodes map[string]corev1.ConditionStatus // Ready of each Node ("": none posted); absent: no Node
	since map[string]time.Time
	err   error
}

func newRemediationRig(t *testing.T) *remediationRig {
	p := newProvisioning()
	p.Spec.Workers = []bpav1.NodeEntry{{"w1": nil}, {"w2": nil}, {"w3": nil}}
	// Restart, and Reboot where a test grants it: these tests do not climb to Replace
	// (replace_test.go does).
	p.Spec.Remediation = &bpav1.Remediation{Rungs: []bpav1.RemediationRung{bpav1.RungRestart, bpav1.RungReboot}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: remediatedHosts, Generation: 1, KubernetesVersion: "1.31.4"}
	p.Status.Phase, p.Status.ObservedGeneration = bpav1.PhaseSucceeded, 1
	m := &remediationRig{t: t, rec: record.NewFakeRecorder(20), now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC),
		nodes: map[string]corev1.ConditionStatus{"m1": "True", "w1": "True", "w2": "True", "w3": "True"}, since: map[string]time.Time{}}
	m.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(&bpav1.Provisioning{}).Build()
	return m
}

// down makes node's Ready status s since d ago.
func (m *remediationRig) down(node string, s corev1.ConditionStatus, d time.Duration) {
	m.nodes[node], m.since[node] = s, m.now.Add(-d)
}

func (m *remediationRig) list(context.Context, *bpav1.Provisioning) ([]corev1.Node, error) {
	var out []corev1.Node
	for name, s := range m.nodes {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if s != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(m.since[name])}}
		}
		out = append(out, n)
	}
	return out, m.err
}

// run is one reconcile of a remediator made afresh (as after a controller restart).
func (m *remediationRig) run() (*bpav1.Provisioning, []wfv1.Workflow) {
	m.t.Helper()
	r := &remediator{Client: m.c, Reader: m.c, Recorder: m.rec, Nodes: m.list, now: func() time.Time { return m.now }}
	ctx := context.Background()
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.NoError(m.t, err)
	if got := m.get(); got.Spec.Remediation != nil {
		assert.Equal(m.t, remediationPoll, res.RequeueAfter)
	}
	return m.get(), workflows(m.t, m.c)
}

func (m *remediationRig) get() *bpav1.Provisioning {
	got := &bpav1.Provisioning{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, got))
	return got
}

func (m *remediationRig) events() []string {
	var out []string
	for {
		select {
		case e := <-m.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A worker Unknown for unhealthyFor gets one Restart Workflow, named after its episode, with
// an event and its record; a remediator made afresh (a controller restart) makes no second
// one while it runs; once it succeeded and the node is still down after the cooldown, the
// node is RemediationExhausted (the only rung listed is taken), with one Warning event; Ready
// again, its record goes.
func TestRemediationRestartsOnce(t *testing.T) {
	m := newRemediationRig(t)
	m.down("w2", corev1.ConditionUnknown, 4*time.Minute)
	p, wfs := m.run()
	assert.Empty(t, wfs, "not yet unhealthy for 5m")
	assert.Equal(t, bpav1.ReasonWorkersHealthy, remediating(p).Reason)
	require.NotNil(t, p.Status.Remediation)
	require.Len(t, p.Status.Remediation.Nodes, 1, "the episode is recorded from the start")
	since := m.since["w2"]

	m.now = m.now.Add(time.Minute)
	p, wfs = m.run()
	require.Len(t, wfs, 1)
	wf := wfs[0]
	assert.Equal(t, translator.RemediationWorkflowName("p", "w2", bpav1.RungRestart, since), wf.Name)
	assert.True(t, metav1.IsControlledBy(&wf, p))
	assert.Equal(t, []string{"Normal RemediationRestart Restart of node w2, unhealthy since 2026-11-28T11:56:00Z (attempt 1): Workflow " + wf.Name}, m.events())
	c := remediating(p)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	rec := p.Status.Remediation.Nodes[0]
	assert.Equal(t, bpav1.RungRestart, rec.Rung)
	assert.EqualValues(t, 1, rec.Attempts)
	assert.Equal(t, wf.Name, rec.Workflow)
	assert.True(t, since.Equal(rec.Since.Time))

	m.now = m.now.Add(time.Hour)
	p, wfs = m.run()
	assert.Len(t, wfs, 1, "a rung in flight: no second Workflow")
	assert.Equal(t, bpav1.ReasonRemediationInProgress, remediating(p).Reason)

	wf.Status.Phase = wfv1.WorkflowSucceeded
	require.NoError(t, m.c.Update(context.Background(), &wf))
	p, wfs = m.run()
	assert.Len(t, wfs, 1)
	assert.Equal(t, bpav1.ReasonRemediationExhausted, remediating(p).Reason)
	assert.True(t, p.Status.Remediation.Nodes[0].Exhausted)
	events := m.events()
	require.Len(t, events, 1)
	assert.True(t, strings.HasPrefix(events[0], "Warning RemediationExhausted node w2: no rung left after Restart"), events[0])
	m.run()
	assert.Empty(t, m.events(), "once")

	m.down("w2", corev1.ConditionTrue, 0)
	p, _ = m.run()
	assert.Empty(t, p.Status.Remediation.Nodes)
	assert.Equal(t, bpav1.ReasonWorkersHealthy, remediating(p).Reason)
}

// Two of three workers down is more than 40% allows: no Workflow, a Warning event once; a
// control-plane node is never acted on; Nodes that cannot be read decide nothing; turned
// off, the record and condition go.
func TestRemediationGuards(t *testing.T) {
	m := newRemediationRig(t)
	m.down("w1", corev1.ConditionUnknown, time.Hour)
	m.down("w3", corev1.ConditionFalse, time.Hour)
	p, wfs := m.run()
	assert.Empty(t, wfs)
	assert.Equal(t, bpav1.ReasonRemediationHeld, remediating(p).Reason)
	assert.Contains(t, remediating(p).Message, "2 of 3 workers unhealthy")
	assert.Len(t, m.events(), 1)
	m.run()
	assert.Empty(t, m.events(), "the hold's event once")

	m.down("w1", corev1.ConditionTrue, 0)
	m.down("w3", corev1.ConditionTrue, 0)
	m.down("m1", corev1.ConditionUnknown, time.Hour)
	p, wfs = m.run()
	assert.Empty(t, wfs, "never a control-plane node")
	assert.Equal(t, bpav1.ReasonWorkersHealthy, remediating(p).Reason)

	m.err = errors.New("no node-reader kubeconfig")
	p, _ = m.run()
	assert.Equal(t, bpav1.ReasonNodesUnread, remediating(p).Reason)

	p.Spec.Remediation = nil
	require.NoError(t, m.c.Update(context.Background(), p))
	p, _ = m.run()
	assert.Nil(t, p.Status.Remediation)
	assert.Nil(t, remediating(p))
}

// While a run of the spec is pending nothing is read or decided.
func TestRemediationWaitsForRuns(t *testing.T) {
	m := newRemediationRig(t)
	p := m.get()
	p.Generation = 2
	require.NoError(t, m.c.Update(context.Background(), p))
	m.down("w2", corev1.ConditionUnknown, time.Hour)
	p, wfs := m.run()
	assert.Empty(t, wfs)
	assert.Nil(t, remediating(p))
}

// A controller that crashed after creating a rung's Workflow but before writing its record
// decides the same rung again once the Workflow finished: the Workflow's name is the
// episode's, so it finds that one, records it, and makes no second; the node is then
// exhausted, not restarted twice.
func TestRemediationCrashBeforeRecordTakesNoRungTwice(t *testing.T) {
	m := newRemediationRig(t)
	m.down("w2", corev1.ConditionUnknown, 10*time.Minute)
	_, wfs := m.run()
	require.Len(t, wfs, 1)
	m.events()
	p := m.get()
	p.Status.Remediation, p.Status.Conditions = nil, nil // the status write that was lost
	require.NoError(t, m.c.Status().Update(context.Background(), p))
	wf := wfs[0]
	wf.Status.Phase = wfv1.WorkflowFailed
	require.NoError(t, m.c.Update(context.Background(), &wf))

	m.now = m.now.Add(time.Minute)
	p, wfs = m.run()
	assert.Len(t, wfs, 1, "the episode's Workflow is found, not made again")
	require.Len(t, p.Status.Remediation.Nodes, 1)
	assert.Equal(t, wf.Name, p.Status.Remediation.Nodes[0].Workflow)
	m.now = m.now.Add(time.Hour)
	p, wfs = m.run()
	assert.Len(t, wfs, 1)
	assert.Equal(t, bpav1.ReasonRemediationExhausted, remediating(p).Reason)
}

// A Node with no Ready condition (its kubelet never posted one) is unhealthy from when BPA
// first saw it so, as a missing Node is: its episode does not begin anew at every poll, so
// it is remediated after unhealthyFor, and its record is not rewritten every 15 s.
func TestRemediationNodeWithoutReady(t *testing.T) {
	m := newRemediationRig(t)
	m.nodes["w2"] = ""
	p, wfs := m.run()
	assert.Empty(t, wfs)
	first := p.Status.Remediation.Nodes[0].Since.Time
	m.now = m.now.Add(time.Minute)
	p, _ = m.run()
	assert.True(t, first.Equal(p.Status.Remediation.Nodes[0].Since.Time), "the episode began when first seen")
	m.now = m.now.Add(5 * time.Minute)
	_, wfs = m.run()
	assert.Len(t, wfs, 1, "remediated after unhealthyFor")
}

// Turned off while its Nodes were unread (no status.remediation yet, only the condition), a
// Provisioning still reaches the remediator, which clears the condition.
func TestRemediationOffClearsNodesUnread(t *testing.T) {
	m := newRemediationRig(t)
	m.err = errors.New("no Secret")
	p, _ := m.run()
	require.Equal(t, bpav1.ReasonNodesUnread, remediating(p).Reason)
	p.Spec.Remediation = nil
	require.NoError(t, m.c.Update(context.Background(), p))
	p = m.get()
	require.True(t, remediated(p), "the remediator is not called")
	p, _ = m.run()
	assert.Nil(t, remediating(p))
	assert.False(t, remediated(p))
}

// A worker Ready for a while after its Restart and then Unknown again (it flaps) goes on up
// its ladder instead of being restarted again: with only Restart listed, it is exhausted,
// and no second Workflow is made. Ready past remediation.SettleWindow after the rung, its
// record goes, and a later fault starts at the first rung.
func TestRemediationRelapseClimbsOn(t *testing.T) {
	m := newRemediationRig(t)
	m.down("w2", corev1.ConditionUnknown, 6*time.Minute)
	_, wfs := m.run()
	require.Len(t, wfs, 1)
	wf := wfs[0]
	wf.Status.Phase = wfv1.WorkflowSucceeded
	require.NoError(t, m.c.Update(context.Background(), &wf))
	m.events()

	m.now = m.now.Add(2 * time.Minute)
	m.down("w2", corev1.ConditionTrue, 0)
	p, _ := m.run()
	require.Len(t, p.Status.Remediation.Nodes, 1, "kept until the rung settles")

	m.now = m.now.Add(15 * time.Minute)
	m.down("w2", corev1.ConditionUnknown, 6*time.Minute) // a new episode, past the cooldown
	p, wfs = m.run()
	assert.Len(t, wfs, 1, "no second Restart for a node that relapsed")
	assert.Equal(t, bpav1.ReasonRemediationExhausted, remediating(p).Reason)
	rec := p.Status.Remediation.Nodes[0]
	assert.Equal(t, bpav1.RungRestart, rec.Rung)
	assert.True(t, rec.Since.Time.Equal(m.since["w2"]), "the record follows the new episode")

	m.now = m.now.Add(time.Minute)
	m.down("w2", corev1.ConditionTrue, 0)
	m.now = m.now.Add(remediation.SettleWindow)
	p, _ = m.run()
	assert.Empty(t, p.Status.Remediation.Nodes, "settled: the record goes")
	m.down("w2", corev1.ConditionUnknown, 6*time.Minute)
	_, wfs = m.run()
	assert.Len(t, wfs, 2, "a fault after the rung settled starts at the first rung")
}

// The Reboot rung is the admin's to allow: with a BPAPolicy granting the namespace
// allowReboot, a worker a Restart did not bring back gets a Reboot Workflow after the
// cooldown, with its event, and is exhausted only after it; a grant to another namespace
// (or none: TestRemediationRestartsOnce) skips Reboot as if the spec did not list it, and the
// node is exhausted after Restart.
func TestRemediationRebootNeedsTheGrant(t *testing.T) {
	for _, granted := range []string{"ns", "other"} {
		t.Run("granted to "+granted, func(t *testing.T) {
			m := newRemediationRig(t)
			pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}}
			pol.Spec.Namespaces = []bpav1.NamespaceGrant{{Names: []string{granted}, AllowReboot: true}}
			require.NoError(t, m.c.Create(context.Background(), pol))
			m.down("w2", corev1.ConditionUnknown, 6*time.Minute)
			_, wfs := m.run()
			require.Len(t, wfs, 1)
			assert.Equal(t, "Restart", wfs[0].Annotations[translator.RemediationRungAnnotation])
			wfs[0].Status.Phase = wfv1.WorkflowFailed // the unit would not start
			require.NoError(t, m.c.Update(context.Background(), &wfs[0]))
			m.events()

			m.now = m.now.Add(11 * time.Minute) // past the default 10m cooldown
			p, wfs := m.run()
			if granted != "ns" {
				assert.Len(t, wfs, 1, "no Reboot without the grant")
				assert.Equal(t, bpav1.ReasonRemediationExhausted, remediating(p).Reason)
				assert.Equal(t, bpav1.RungRestart, p.Status.Remediation.Nodes[0].Rung)
				return
			}
			require.Len(t, wfs, 2)
			i := slices.IndexFunc(wfs, func(wf wfv1.Workflow) bool { return wf.Annotations[translator.RemediationRungAnnotation] == "Reboot" })
			require.GreaterOrEqual(t, i, 0)
			reboot := wfs[i]
			assert.Equal(t, translator.RemediationWorkflowName("p", "w2", bpav1.RungReboot, m.since["w2"]), reboot.Name)
			assert.Equal(t, []string{"Normal RemediationReboot Reboot of node w2, unhealthy since 2026-11-28T11:54:00Z (attempt 2): Workflow " + reboot.Name}, m.events())
			rec := p.Status.Remediation.Nodes[0]
			assert.Equal(t, bpav1.RungReboot, rec.Rung)
			assert.Equal(t, reboot.Name, rec.Workflow)

			reboot.Status.Phase = wfv1.WorkflowSucceeded
			require.NoError(t, m.c.Update(context.Background(), &reboot))
			m.now = m.now.Add(11 * time.Minute)
			p, wfs = m.run()
			assert.Len(t, wfs, 2, "Replace is not taken here")
			assert.Equal(t, bpav1.ReasonRemediationExhausted, remediating(p).Reason)
			assert.Contains(t, strings.Join(m.events(), "\n"), "no rung left after Reboot")
		})
	}
}

// A reconcile whose status write is refused says nothing: its Workflow is found while it runs
// (RemediationInProgress), and once it ended the same rung is decided again, the Workflow
// adopted, not made twice, and its event goes out once, with the status that records it.
func TestRemediationEventOnceAfterAConflict(t *testing.T) {
	m := newRemediationRig(t)
	m.down("w2", corev1.ConditionUnknown, 6*time.Minute)
	refused := 0
	c := interceptor.NewClient(m.c.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if refused == 0 {
				refused++
				return apierrors.NewConflict(bpav1.GroupVersion.WithResource("provisionings").GroupResource(), obj.GetName(), nil)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}})
	r := &remediator{Client: c, Reader: c, Recorder: m.rec, Nodes: m.list, now: func() time.Time { return m.now }}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.Error(t, err, "the write refused")
	assert.Empty(t, m.events(), "nothing said while the status does not say it")
	p, wfs := m.run()
	require.Len(t, wfs, 1)
	assert.Equal(t, bpav1.ReasonRemediationInProgress, remediating(p).Reason)
	wfs[0].Status.Phase = wfv1.WorkflowFailed
	require.NoError(t, m.c.Update(context.Background(), &wfs[0]))
	p, wfs = m.run()
	require.Len(t, wfs, 1, "adopted, not made again")
	require.Equal(t, bpav1.RungRestart, p.Status.Remediation.Nodes[0].Rung)
	events := m.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Normal RemediationRestart Restart of node w2")
}
