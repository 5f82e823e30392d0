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

// argoNotServed is the error a client returns for Argo's kinds where Argo is not installed.
func argoNotServed(obj any) error {
	switch obj.(type) {
	case *wfv1.Workflow, *wfv1.WorkflowList:
		return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}}
	}
	return nil
}

// The controller stops to restart when Argo comes or goes under it, in either direction,
// and only once argoConfirmations looks in a row have seen it: a look that fails (whatever
// it would say), one that finds what the controller started with, or a single odd answer
// between two ordinary ones changes nothing.
func TestArgoWatchStopsWhenArgoComesOrGoes(t *testing.T) {
	type answer struct {
		changed bool
		err     error
	}
	failed := errors.New("discovery failed")
	script := []answer{{false, nil}, {false, nil}, {true, failed}, {true, failed}, {true, nil}, {false, nil}, {true, nil}, {false, nil}}
	for _, tc := range []struct {
		name      string
		wasServed bool
		want      error
	}{
		{"installed under a controller started without it", false, ErrArgoInstalled},
		{"uninstalled under a controller started with it", true, ErrArgoRemoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Look i answers script[i]; after the script, Argo has changed for good.
			var looks atomic.Int64
			w := &argoWatch{wasServed: tc.wasServed, every: time.Millisecond, served: func() (bool, error) {
				a := answer{changed: true}
				if i := looks.Add(1) - 1; i < int64(len(script)) {
					a = script[i]
				}
				return tc.wasServed != a.changed, a.err
			}}
			stopped := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { stopped <- w.Start(ctx) }()
			select {
			case err := <-stopped:
				assert.ErrorIs(t, err, tc.want)
				assert.True(t, IsRestart(err))
				// The script, then two looks in a row that saw the change.
				assert.Equal(t, int64(len(script)+argoConfirmations), looks.Load(), "looks before it stopped")
			case <-time.After(10 * time.Second):
				t.Fatalf("the change was not noticed (%d looks)", looks.Load())
			}
		})
	}
	assert.False(t, IsRestart(errors.New("cache sync timed out")))
}

// Uninstalling Argo deletes its Workflows with their CRD. A run the status still shows in
// flight is then lost, and says so: Error, Stalled with ArgoUnavailable, an event, and what
// to do. A run that ended by itself keeps its status: the cluster is what it left.
func TestRunInFlightIsLostWithArgo(t *testing.T) {
	funcs := interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := argoNotServed(list); err != nil {
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
			assert.Equal(t, bpav1.ReasonArgoUnavailable, stalled.Reason)
			assert.NotContains(t, stalled.Message, "argo retry", "nothing is left to retry")
			assert.Equal(t, bpav1.ReasonArgoUnavailable, condition(p, bpav1.ConditionReady).Reason)
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
		setRunConditions(&deleted.Status.RunStatus, 1, bpav1.ReasonWorkflowDeleted, deleted.Status.Message)
		r, _, rec := newTestReconcilerWith(funcs, deleted)
		p := reconcile(t, r)
		assert.Equal(t, bpav1.PhaseError, p.Status.Phase)
		assert.Equal(t, bpav1.ReasonArgoUnavailable, condition(p, bpav1.ConditionStalled).Reason)
		assert.Contains(t, p.Status.Message, "install Argo Workflows, then set the "+bpav1.RerunAnnotation)
		assert.Empty(t, rec.Events)
	})

	// A Software waiting for its cluster is Pending with its last run, which finished: that
	// run was not lost.
	t.Run("waiting with a finished run", func(t *testing.T) {
		waiting := inState(bpav1.PhasePending)
		finished := metav1.NewTime(started.Add(time.Minute))
		waiting.Status.FinishedAt = &finished
		r, _, rec := newTestReconcilerWith(funcs, waiting)
		p := reconcile(t, r)
		assert.Equal(t, bpav1.PhasePending, p.Status.Phase)
		assert.Empty(t, p.Status.Conditions)
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
