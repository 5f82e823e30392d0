package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestDeletionPolicyOnRig runs the controller against a real kube-apiserver with BPA's,
// metal3's and Argo's CRDs, but no workflow-controller: the test plays Argo by setting the
// reset Workflow's phase. Retain releases the hosts at once; Reset starts exactly one
// reset Workflow (reset.yml on the applied hosts), keeps the claims while it runs and
// releases them when it succeeds; and once the Workflow kind is no longer served (Argo's
// CRD deleted), a Reset deletion waits with ArgoUnavailable until skip-reset=true, a CR that
// needs a run is Stalled ArgoUnavailable, and its run starts once Argo is back. This covers
// the window before a controller notices Argo gone and restarts (TestControllerNoticesArgoUninstalled),
// so it looks for Argo only once an hour.
func TestDeletionPolicyOnRig(t *testing.T) {
	ctx, r, c, stop, stopped := controllerOnRig(t, rig.Options{MinimalArgoCRDs: true}, controller.Options{ArgoPollInterval: time.Hour})
	defer func() { stop(); require.NoError(t, <-stopped) }()
	ns := r.Namespace
	require.NoError(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ssh", Labels: map[string]string{bpav1.ClusterNameLabel: "c1"}},
		Data:       map[string][]byte{"ssh-privatekey": []byte("k"), "known_hosts": []byte("h")}}))

	get := func(name string) *bpav1.Provisioning { return getProvisioning(ctx, t, c, ns, name) }
	provisioned := func(name string, policy bpav1.DeletionPolicy) { provisionedOn(ctx, t, c, ns, name, "c1", policy) }
	claimed := func(name string) bool {
		h := &metal3v1.BareMetalHost{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-host"}, h))
		return h.Spec.ConsumerRef != nil
	}
	workflowsOf := func(name string) []wfv1.Workflow {
		l := &wfv1.WorkflowList{}
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{bpav1.ProvisioningNameLabel: name}))
		return l.Items
	}
	deleting := func(name string) condition {
		p := get(name)
		if p == nil {
			return condition{gone: true}
		}
		d := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionDeleting)
		if d == nil {
			return condition{}
		}
		return condition{reason: d.Reason, message: d.Message}
	}

	t.Run("Retain", func(t *testing.T) {
		provisioned("retain", bpav1.DeletionRetain)
		eventually(t, "the provision run", func() bool { return len(workflowsOf("retain")) == 1 })
		require.NoError(t, c.Delete(ctx, get("retain")))
		eventually(t, "the CR gone", func() bool { return deleting("retain").gone })
		assert.False(t, claimed("retain"))
		assert.Empty(t, workflowsOf("retain"), "no reset Workflow, and the run deleted")
	})

	t.Run("Reset", func(t *testing.T) {
		provisioned("reset", bpav1.DeletionReset)
		eventually(t, "the provision run", func() bool { return len(workflowsOf("reset")) == 1 })
		require.NoError(t, c.Delete(ctx, get("reset")))
		eventually(t, "ResetRunning", func() bool { return deleting("reset").reason == bpav1.ReasonResetRunning })
		wfs := workflowsOf("reset")
		require.Len(t, wfs, 1, "the provision run stopped, exactly one reset Workflow")
		wf := wfs[0]
		assert.Equal(t, "true", wf.Labels[translator.ResetLabel])
		assert.Contains(t, deleting("reset").message, wf.Name)
		tasks := wf.Spec.Templates[0].DAG.Tasks
		assert.Contains(t, tasks[0].Arguments.GetParameterByName("hosts").Value.String(), `"ip":"10.0.0.1"`, "the applied hosts")
		assert.Contains(t, tasks[1].Arguments.GetArtifactByName("operations").Raw.Data, `"playbook":"`+string(kubespray.Reset)+`"`)
		assert.Contains(t, tasks[1].Arguments.GetArtifactByName("operations").Raw.Data, `"reset_confirmation":"yes"`)
		p := get("reset")
		assert.True(t, meta.IsStatusConditionTrue(p.Status.Conditions, bpav1.ConditionReconciling))
		assert.True(t, claimed("reset"), "the claim stays while the reset runs")
		assertEvent(ctx, t, c, ns, "reset", bpav1.ReasonResetRunning)

		// Argo's part: the reset fails, then (after `argo retry`) succeeds.
		wf.Status.Phase, wf.Status.Message = wfv1.WorkflowFailed, "child 'reset' failed"
		require.NoError(t, c.Update(ctx, &wf))
		eventually(t, "ResetFailed", func() bool { return deleting("reset").reason == bpav1.ReasonResetFailed })
		assert.Contains(t, deleting("reset").message, "argo retry "+wf.Name)
		assert.True(t, meta.IsStatusConditionTrue(get("reset").Status.Conditions, bpav1.ConditionStalled))
		assert.Len(t, workflowsOf("reset"), 1, "no second reset")
		assert.True(t, claimed("reset"))
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&wf), &wf))
		wf.Status.Phase, wf.Status.Message = wfv1.WorkflowSucceeded, ""
		require.NoError(t, c.Update(ctx, &wf))
		eventually(t, "the CR gone", func() bool { return deleting("reset").gone })
		assert.False(t, claimed("reset"))
		assert.Empty(t, workflowsOf("reset"))
	})

	t.Run("ArgoUnavailable", func(t *testing.T) {
		provisioned("no-argo", bpav1.DeletionReset)
		provisioned("no-argo-retain", bpav1.DeletionRetain) // no run: no-argo holds the cluster
		eventually(t, "the provision run", func() bool { return len(workflowsOf("no-argo")) == 1 })
		crds, err := apiextensions.NewForConfig(r.RESTConfig)
		require.NoError(t, err)
		const crd = "workflows.argoproj.io"
		require.NoError(t, crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd, metav1.DeleteOptions{}))
		eventually(t, "Argo's Workflow CRD gone", func() bool {
			_, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		// Retain goes at once: with Argo gone there is no Workflow left to delete.
		require.NoError(t, c.Delete(ctx, get("no-argo-retain")))
		eventually(t, "the Retain CR gone", func() bool { return deleting("no-argo-retain").gone })
		assert.False(t, claimed("no-argo-retain"))

		require.NoError(t, c.Delete(ctx, get("no-argo")))
		eventually(t, "ArgoUnavailable", func() bool { return deleting("no-argo").reason == bpav1.ReasonArgoUnavailable })
		msg := deleting("no-argo").message
		assert.Contains(t, msg, "bpa.akraino.org/skip-reset=true")
		assert.Contains(t, msg, "m1")
		assert.True(t, claimed("no-argo"))
		assertEvent(ctx, t, c, ns, "no-argo", bpav1.ReasonArgoUnavailable)

		p := get("no-argo")
		p.Annotations = map[string]string{bpav1.SkipResetAnnotation: "true"}
		require.NoError(t, c.Update(ctx, p))
		eventually(t, "the CR gone", func() bool { return deleting("no-argo").gone })
		assert.False(t, claimed("no-argo"))

		// A CR that needs a run while Argo is gone says why it waits, as it does under a
		// controller started without Argo (TestControllerStartsWithoutArgo).
		require.NoError(t, c.Create(ctx, &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "needs-argo", Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
			Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}}}))
		eventually(t, "Stalled ArgoUnavailable", func() bool {
			cond := meta.FindStatusCondition(get("needs-argo").Status.Conditions, bpav1.ConditionStalled)
			return cond != nil && cond.Reason == bpav1.ReasonArgoUnavailable
		})
		// Argo back: the same controller's informer lists Workflows again, and the run starts.
		require.NoError(t, r.InstallArgoCRDs(ctx, true))
		deadline := time.Now().Add(2 * time.Minute)
		for len(workflowsOf("needs-argo")) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Second)
		}
		assert.Len(t, workflowsOf("needs-argo"), 1, "the run did not start once Argo was back")
	})
}

type condition struct {
	gone            bool
	reason, message string
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertEvent checks that an event with reason was recorded for the Provisioning name.
func assertEvent(ctx context.Context, t *testing.T, c client.Client, ns, name, reason string) {
	t.Helper()
	eventually(t, "event "+reason, func() bool {
		l := &corev1.EventList{}
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns)))
		for _, e := range l.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return true
			}
		}
		return false
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
