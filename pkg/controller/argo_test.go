package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The controller stops to restart when Argo comes or goes under it, in either direction,
// and only then: a look that fails, or that finds what the controller started with,
// changes nothing.
func TestArgoWatchStopsWhenArgoComesOrGoes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wasServed bool
		want      error
	}{
		{"installed under a controller started without it", false, ErrArgoInstalled},
		{"uninstalled under a controller started with it", true, ErrArgoRemoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var served atomic.Bool
			var failing atomic.Bool
			served.Store(tc.wasServed)
			looks := make(chan struct{}, 100)
			w := &argoWatch{wasServed: tc.wasServed, every: time.Millisecond, served: func() (bool, error) {
				looks <- struct{}{}
				if failing.Load() {
					return !tc.wasServed, errors.New("discovery failed")
				}
				return served.Load(), nil
			}}
			stopped := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { stopped <- w.Start(ctx) }()

			// Unchanged, then a failed look that would read as changed: it keeps running.
			for range 3 {
				<-looks
			}
			failing.Store(true)
			for range 3 {
				<-looks
			}
			select {
			case err := <-stopped:
				t.Fatalf("stopped with %v while nothing changed", err)
			default:
			}

			failing.Store(false)
			served.Store(!tc.wasServed)
			select {
			case err := <-stopped:
				assert.ErrorIs(t, err, tc.want)
				assert.True(t, ErrRestart(err))
			case <-time.After(10 * time.Second):
				t.Fatal("the change was not noticed")
			}
		})
	}
	assert.False(t, ErrRestart(errors.New("cache sync timed out")))
}

// Uninstalling Argo deletes its Workflows with their CRD. A run the status still shows in
// flight is then lost, and says so: Error, Stalled with ArgoUnavailable, an event, and what
// to do. A run that ended by itself keeps its status: the cluster is what it left.
func TestRunInFlightIsLostWithArgo(t *testing.T) {
	noArgo := func(list client.ObjectList) error {
		if _, ok := list.(*wfv1.WorkflowList); ok {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}}
		}
		return nil
	}
	funcs := interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := noArgo(list); err != nil {
			return err
		}
		return cl.List(ctx, list, opts...)
	}}
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inState := func(phase bpav1.RunPhase) *bpav1.Provisioning {
		p := newProvisioning()
		p.Finalizers = []string{Finalizer}
		p.Status.ObservedGeneration = 1
		p.Status.Workflow = &bpav1.WorkflowReference{Name: "p-provision-1", UID: "uid-wf"}
		p.Status.Phase, p.Status.StartedAt = phase, &started
		return p
	}

	for _, phase := range []bpav1.RunPhase{bpav1.PhasePending, bpav1.PhaseRunning} {
		t.Run(string(phase), func(t *testing.T) {
			r, _, rec := newTestReconcilerWith(funcs, inState(phase))
			p := reconcile(t, r)
			assert.Equal(t, bpav1.PhaseError, p.Status.Phase)
			stalled := condition(p, bpav1.ConditionStalled)
			assert.Equal(t, metav1.ConditionTrue, stalled.Status)
			assert.Equal(t, ReasonArgoUnavailable, stalled.Reason)
			assert.Equal(t, ReasonArgoUnavailable, condition(p, bpav1.ConditionReady).Reason)
			assert.Contains(t, p.Status.Message, "Workflow p-provision-1 is gone and Argo Workflows is not installed")
			assert.Contains(t, p.Status.Message, "install Argo Workflows, then set the "+bpav1.RerunAnnotation)
			require.Len(t, rec.Events, 1)
			assert.Contains(t, <-rec.Events, "Warning RunError")

			// Seen again, nothing changes and nothing is reported twice.
			again := reconcile(t, r)
			assert.Equal(t, p.Status, again.Status)
			assert.Empty(t, rec.Events)
		})
	}

	// A run a controller already reported deleted (it saw the Workflows go with their CRD)
	// now also says that Argo must come back first; that is no new event.
	t.Run("reported deleted", func(t *testing.T) {
		deleted := inState(bpav1.PhaseError)
		deleted.Status.Message = "Workflow p-provision-1 was deleted; set the bpa.akraino.org/rerun annotation to a new value to run again"
		setRunConditions(&deleted.Status.RunStatus, 1, ReasonWorkflowDeleted, deleted.Status.Message)
		r, _, rec := newTestReconcilerWith(funcs, deleted)
		p := reconcile(t, r)
		assert.Equal(t, bpav1.PhaseError, p.Status.Phase)
		assert.Equal(t, ReasonArgoUnavailable, condition(p, bpav1.ConditionStalled).Reason)
		assert.Contains(t, p.Status.Message, "install Argo Workflows, then set the "+bpav1.RerunAnnotation)
		assert.Empty(t, rec.Events)
	})

	for _, phase := range []bpav1.RunPhase{bpav1.PhaseSucceeded, bpav1.PhaseFailed} {
		t.Run(string(phase), func(t *testing.T) {
			before := inState(phase)
			r, _, rec := newTestReconcilerWith(funcs, before)
			p := reconcile(t, r)
			assert.Equal(t, phase, p.Status.Phase)
			assert.Empty(t, p.Status.Message)
			assert.Empty(t, p.Status.Conditions)
			assert.Empty(t, rec.Events)
		})
	}
}
