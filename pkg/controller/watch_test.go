package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The Cluster and Software watches of Provisionings pass exactly the updates that change
// what those reconcilers read of a Provisioning.
func TestProvisioningUpdatesOtherKindsSee(t *testing.T) {
	base := func() *bpav1.Provisioning {
		p := newProvisioning()
		p.Status.Phase = bpav1.PhaseRunning
		return p
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name              string
		change            func(p *bpav1.Provisioning)
		cluster, software bool
	}{
		{"a step's progress", func(p *bpav1.Provisioning) { p.Status.Progress = "3/6"; p.Status.Message = "run-kubespray" }, false, false},
		{"the finalizer", func(p *bpav1.Provisioning) { p.Finalizers = []string{Finalizer} }, false, false},
		{"Running to Failed", func(p *bpav1.Provisioning) { p.Status.Phase = bpav1.PhaseFailed }, true, false},
		{"Running to Succeeded", func(p *bpav1.Provisioning) { p.Status.Phase = bpav1.PhaseSucceeded }, true, true},
		{"the kubeconfig Secret published", func(p *bpav1.Provisioning) { p.Status.KubeconfigSecretName = "c1-kubeconfig" }, true, false},
		{"a new generation", func(p *bpav1.Provisioning) { p.Generation++ }, false, true},
		{"another cluster", func(p *bpav1.Provisioning) { p.Labels[bpav1.ClusterLabel] = "c2" }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, updated := base(), base()
			tc.change(updated)
			e := event.UpdateEvent{ObjectOld: old, ObjectNew: updated}
			assert.Equal(t, tc.cluster, summaryChanged.Update(e), "Cluster")
			assert.Equal(t, tc.software, gateChanged.Update(e), "Software")
		})
	}

	// No phase yet reads as Pending to a Cluster: the first status write changes nothing
	// it shows.
	old, pending := newProvisioning(), newProvisioning()
	pending.Status.Phase = bpav1.PhasePending
	assert.False(t, summaryChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: pending}))

	// A succeeded Provisioning being deleted no longer lets its cluster's Software run.
	done, deleting := base(), base()
	done.Status.Phase, deleting.Status.Phase = bpav1.PhaseSucceeded, bpav1.PhaseSucceeded
	deleting.DeletionTimestamp = &now
	assert.True(t, gateChanged.Update(event.UpdateEvent{ObjectOld: done, ObjectNew: deleting}))
}
