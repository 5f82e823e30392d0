package controller

import (
	"context"
	"encoding/json"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

var appliedHosts = []bpav1.HostStatus{
	{Name: "m1", Roles: []string{"master", "worker"}, Etcd: true, MAC: "00:00:00:00:00:01", IP: "10.0.0.1", BareMetalHost: "mine"},
}

// provisioned is a Provisioning whose cluster was built on the host "mine" (claimed by it).
func provisioned(policy bpav1.DeletionPolicy) []client.Object {
	p := newProvisioning()
	p.Spec.DeletionPolicy = policy
	p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts, Generation: 1}
	p.Finalizers = []string{Finalizer}
	return []client.Object{p, host("mine", provisioningRef("p", "uid-p"), "c1")}
}

func newResetReconciler(funcs interceptor.Funcs, objs ...client.Object) (*runReconciler, client.Client) {
	r, c, _ := newTestReconcilerWith(funcs, objs...)
	r.kind.reset = r.resetBeforeRelease
	return r, c
}

// deleting deletes p (its finalizer keeps it) and reconciles; it returns p as left, or nil
// once it is gone.
func deleting(t *testing.T, r *runReconciler, c client.Client) (*bpav1.Provisioning, ctrl.Result) {
	t.Helper()
	ctx := context.Background()
	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	if p.DeletionTimestamp.IsZero() {
		require.NoError(t, c.Delete(ctx, p))
	}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.NoError(t, err)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "p"}, p); err != nil {
		require.NoError(t, client.IgnoreNotFound(err))
		return nil, res
	}
	return p, res
}

func resetWorkflows(t *testing.T, c client.Client) []wfv1.Workflow {
	var out []wfv1.Workflow
	for _, wf := range workflows(t, c) {
		if wf.Labels[translator.ResetLabel] == "true" {
			out = append(out, wf)
		}
	}
	return out
}

func setPhase(t *testing.T, c client.Client, wf *wfv1.Workflow, phase wfv1.WorkflowPhase, msg string) {
	wf.Status.Phase, wf.Status.Message = phase, msg
	require.NoError(t, c.Update(context.Background(), wf))
}

func TestRetainReleasesWithoutAWorkflow(t *testing.T) {
	r, c := newResetReconciler(interceptor.Funcs{}, provisioned(bpav1.DeletionRetain)...)
	p, _ := deleting(t, r, c)
	assert.Nil(t, p, "the CR is gone")
	assert.Empty(t, workflows(t, c))
	assert.False(t, claimed(t, c, "mine"))
}

// Reset: the provision runs stop, exactly one reset Workflow runs reset.yml on the applied
// hosts, the claims stay until it succeeds; a failure waits for `argo retry` or the skip.
func TestResetRunsOnceThenReleases(t *testing.T) {
	objs := provisioned(bpav1.DeletionReset)
	r, c := newResetReconciler(interceptor.Funcs{}, objs...)
	ctx := context.Background()
	// A provision run still going: it must not race the reset.
	run, err := translator.Provisioning(objs[0].(*bpav1.Provisioning), translator.Options{BackupServer: "https://backups.example"})
	require.NoError(t, err)
	require.NoError(t, c.Create(ctx, run))

	p, _ := deleting(t, r, c)
	require.NotNil(t, p, "the deletion waits for the reset")
	wfs := workflows(t, c)
	require.Len(t, wfs, 1, "the provision run is deleted, the reset created")
	reset := &wfs[0]
	assert.Equal(t, "true", reset.Labels[translator.ResetLabel])
	assert.Equal(t, "p", reset.Labels[bpav1.ProvisioningNameLabel])
	assert.True(t, ownedBy(reset, p))
	assert.Equal(t, "bpa-cluster-c1", reset.Spec.Synchronization.Mutexes[0].Name, "under the cluster's mutex")
	tasks := reset.Spec.Templates[0].DAG.Tasks
	require.Len(t, tasks, 2)
	var hosts []bpav1.HostStatus
	require.NoError(t, json.Unmarshal([]byte(tasks[0].Arguments.GetParameterByName("hosts").Value.String()), &hosts))
	assert.Equal(t, appliedHosts, hosts, "render-inventory gets the applied hosts")
	var ops []kubespray.Operation
	require.NoError(t, json.Unmarshal([]byte(tasks[1].Arguments.GetArtifactByName("operations").Raw.Data), &ops))
	require.Len(t, ops, 1)
	assert.Equal(t, kubespray.Reset, ops[0].Playbook)
	assert.Equal(t, "yes", ops[0].Vars["reset_confirmation"])

	d := condition(p, bpav1.ConditionDeleting)
	assert.Equal(t, bpav1.ReasonResetRunning, d.Reason)
	assert.Contains(t, d.Message, reset.Name)
	assert.Equal(t, bpav1.ReasonResetRunning, condition(p, bpav1.ConditionReconciling).Reason)
	assert.True(t, claimed(t, c, "mine"), "claims stay while the reset runs")

	// Reconciled again (or after a crash): still the one reset.
	deleting(t, r, c)
	require.Len(t, workflows(t, c), 1)

	setPhase(t, c, reset, wfv1.WorkflowFailed, "child 'reset' failed")
	p, _ = deleting(t, r, c)
	d = condition(p, bpav1.ConditionDeleting)
	assert.Equal(t, bpav1.ReasonResetFailed, d.Reason)
	assert.Contains(t, d.Message, "argo retry "+reset.Name)
	assert.Contains(t, d.Message, "child 'reset' failed")
	assert.Contains(t, d.Message, bpav1.SkipResetAnnotation+"=true")
	assert.Equal(t, bpav1.ReasonResetFailed, condition(p, bpav1.ConditionStalled).Reason)
	require.Len(t, workflows(t, c), 1, "a failed reset is kept for argo retry, not replaced")
	assert.True(t, claimed(t, c, "mine"))

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(reset), reset))
	setPhase(t, c, reset, wfv1.WorkflowSucceeded, "")
	p, _ = deleting(t, r, c)
	assert.Nil(t, p, "the finalizer is removed once the reset succeeded")
	assert.False(t, claimed(t, c, "mine"))
	assert.Empty(t, workflows(t, c))
}

// A crash after the reset succeeded and its Workflow was deleted, but before the finalizer
// went: the status says so, and no second reset starts.
func TestResetDoneIsNotRepeated(t *testing.T) {
	objs := provisioned(bpav1.DeletionReset)
	fail := true
	r, c := newResetReconciler(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*bpav1.Provisioning); ok && fail {
			return assert.AnError // the finalizer's removal fails once
		}
		return cl.Patch(ctx, obj, patch, opts...)
	}}, objs...)
	deleting(t, r, c)
	reset := &resetWorkflows(t, c)[0]
	setPhase(t, c, reset, wfv1.WorkflowSucceeded, "")
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.ErrorIs(t, err, assert.AnError)
	assert.Empty(t, workflows(t, c), "the reset Workflow went with the others")
	fail = false
	p, _ := deleting(t, r, c)
	assert.Nil(t, p)
	assert.Empty(t, workflows(t, c), "no second reset")
}

// Without Argo the reset cannot run: the deletion waits, says why and how to go on, looks
// again now and then, and the skip annotation (only "true") lets it finish.
func TestArgoUnavailableWaitsUntilSkipped(t *testing.T) {
	r, c := newResetReconciler(interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := argoNotServed(list); err != nil {
				return err
			}
			return cl.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := argoNotServed(obj); err != nil {
				return err
			}
			return cl.Create(ctx, obj, opts...)
		},
	}, provisioned(bpav1.DeletionReset)...)
	p, res := deleting(t, r, c)
	require.NotNil(t, p)
	d := condition(p, bpav1.ConditionDeleting)
	assert.Equal(t, bpav1.ReasonArgoUnavailable, d.Reason)
	assert.Contains(t, d.Message, "bpa.akraino.org/skip-reset=true")
	assert.Contains(t, d.Message, "m1")
	assert.Equal(t, bpav1.ReasonArgoUnavailable, condition(p, bpav1.ConditionStalled).Reason)
	assert.Equal(t, refusalRetry, res.RequeueAfter)
	assert.True(t, claimed(t, c, "mine"))

	skip := func(v string) {
		p.Annotations = map[string]string{bpav1.SkipResetAnnotation: v}
		require.NoError(t, c.Update(context.Background(), p))
	}
	skip("yes")
	p, _ = deleting(t, r, c)
	require.NotNil(t, p, `only "true" skips`)
	assert.Contains(t, condition(p, bpav1.ConditionDeleting).Message, `bpa.akraino.org/skip-reset is "yes": only "true" skips the reset`)

	skip("true")
	p, _ = deleting(t, r, c)
	assert.Nil(t, p)
	assert.False(t, claimed(t, c, "mine"))
}

// The reset passes the checks every run passes: a withdrawn SSH Secret consent stops it.
func TestResetIsAdmittedLikeARun(t *testing.T) {
	objs := append(provisioned(bpav1.DeletionReset), sshSecret("c1-ssh", "someone-else"))
	r, c := newResetReconciler(interceptor.Funcs{}, objs...)
	p, res := deleting(t, r, c)
	require.NotNil(t, p)
	assert.Empty(t, workflows(t, c))
	d := condition(p, bpav1.ConditionDeleting)
	assert.Equal(t, "SSHSecretNotUsable", d.Reason)
	assert.Contains(t, d.Message, "spec.ssh.secretName")
	assert.Contains(t, d.Message, bpav1.SkipResetAnnotation)
	assert.Equal(t, refusalRetry, res.RequeueAfter)
}

func TestResetWithNothingAppliedIsRetain(t *testing.T) {
	objs := provisioned(bpav1.DeletionReset)
	objs[0].(*bpav1.Provisioning).Status.Applied = nil
	r, c := newResetReconciler(interceptor.Funcs{}, objs...)
	p, _ := deleting(t, r, c)
	assert.Nil(t, p)
	assert.Empty(t, workflows(t, c))
}
