package integration

import (
	"errors"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestControllerStartsWithoutArgo starts the controller on a real kube-apiserver where Argo
// is not installed (an admin uninstalled it, then the controller restarted). It must still
// reconcile: a new Provisioning is Stalled with ArgoUnavailable (not silent), a deletion
// with deletionPolicy Reset waits with ArgoUnavailable and goes once skip-reset is set, and
// once Argo is installed the controller stops with ErrArgoInstalled so that its Deployment
// restarts it watching Workflows. Before, NewManager failed (the Workflow cache index).
func TestControllerStartsWithoutArgo(t *testing.T) {
	ctx, r, c, _, stopped := controllerOnRig(t, rig.Options{NoArgoCRDs: true}, controller.Options{ApplyTemplates: true, ArgoPollInterval: time.Second})
	ns := r.Namespace

	get := func(name string) *bpav1.Provisioning { return getProvisioning(ctx, t, c, ns, name) }
	reason := func(name, typ string) string {
		if p := get(name); p != nil {
			if cond := meta.FindStatusCondition(p.Status.Conditions, typ); cond != nil {
				return cond.Reason
			}
		}
		return ""
	}

	// A new CR needs a run that cannot start: it says so.
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new", Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}}}
	require.NoError(t, c.Create(ctx, p))
	eventually(t, "Stalled ArgoUnavailable", func() bool { return reason("new", bpav1.ConditionStalled) == bpav1.ReasonArgoUnavailable })
	msg := meta.FindStatusCondition(get("new").Status.Conditions, bpav1.ConditionStalled).Message
	assert.Contains(t, msg, "argoproj.io/v1alpha1")
	assert.Contains(t, msg, "install Argo Workflows")

	// A built cluster deleted with Reset waits, saying how to proceed, then goes when told.
	provisionedOn(ctx, t, c, ns, "built", "c2", bpav1.DeletionReset)
	require.NoError(t, c.Delete(ctx, get("built")))
	eventually(t, "Deleting ArgoUnavailable", func() bool { return reason("built", bpav1.ConditionDeleting) == bpav1.ReasonArgoUnavailable })
	p = get("built")
	p.Annotations = map[string]string{bpav1.SkipResetAnnotation: "true"}
	require.NoError(t, c.Update(ctx, p))
	eventually(t, "the CR gone", func() bool { return get("built") == nil })
	h := &metal3v1.BareMetalHost{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "built-host"}, h))
	assert.Nil(t, h.Spec.ConsumerRef, "the claim released")

	// Argo arrives: the controller stops to restart with Workflow watches.
	select {
	case err := <-stopped:
		t.Fatalf("the controller stopped before Argo was installed: %v", err)
	default:
	}
	require.NoError(t, r.InstallArgoCRDs(ctx, true))
	select {
	case err := <-stopped:
		assert.True(t, errors.Is(err, controller.ErrArgoInstalled), "stopped with %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the controller did not notice Argo")
	}
}

// TestControllerNoticesArgoUninstalled uninstalls Argo under a controller that started with
// it, while a run is in flight. Deleting Argo's CRDs deletes every Workflow. A controller
// that saw those deletions reported the run deleted, to be run again with the rerun
// annotation (which cannot work without Argo); one that missed them (down at the time, or
// its watch ended first) showed the run Pending or Running for ever; either kept running
// with a Workflow informer failing on every relist. Now the controller stops with
// ErrArgoRemoved; started again (as its Deployment does) it runs without Workflow watches,
// and the CR says that its run is gone with Argo, and how to run again.
func TestControllerNoticesArgoUninstalled(t *testing.T) {
	ctx, r, c, _, stopped := controllerOnRig(t, rig.Options{MinimalArgoCRDs: true}, controller.Options{ArgoPollInterval: time.Second})
	ns := r.Namespace
	get := func() *bpav1.Provisioning { return getProvisioning(ctx, t, c, ns, "inflight") }

	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ssh",
		Labels: map[string]string{bpav1.ClusterNameLabel: "c1"}}}))
	require.NoError(t, c.Create(ctx, &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inflight", Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}}}))
	eventually(t, "the run started", func() bool { p := get(); return p.Status.Workflow != nil && p.Status.Phase == bpav1.PhasePending })
	wf := get().Status.Workflow.Name

	require.NoError(t, r.UninstallArgoCRDs(ctx))
	select {
	case err := <-stopped:
		assert.True(t, errors.Is(err, controller.ErrArgoRemoved), "stopped with %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the controller did not notice that Argo was uninstalled")
	}

	stopAgain, restarted := startController(ctx, t, r, controller.Options{ArgoPollInterval: time.Second})
	defer func() { stopAgain(); require.NoError(t, <-restarted) }()
	eventually(t, "the run reported gone with Argo", func() bool {
		ready := meta.FindStatusCondition(get().Status.Conditions, bpav1.ConditionReady)
		return ready != nil && ready.Reason == bpav1.ReasonArgoUnavailable
	})
	p := get()
	assert.Equal(t, bpav1.PhaseError, p.Status.Phase)
	assert.Equal(t, wf, p.Status.Workflow.Name)
	assert.Contains(t, p.Status.Message, "Workflow "+wf+" is gone and Argo Workflows is not installed")
	stalled := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionStalled)
	require.NotNil(t, stalled)
	assert.Equal(t, bpav1.ReasonArgoUnavailable, stalled.Reason)
	// The controller started again stays up: it runs without Workflow watches, and nothing
	// it looks for has changed.
	select {
	case err := <-restarted:
		t.Fatalf("the restarted controller stopped: %v", err)
	case <-time.After(3 * time.Second):
	}
}
