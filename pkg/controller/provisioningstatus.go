package controller

import (
	"context"
	"fmt"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// reconcileStatus is the shape of the reconcilers that add Workflows of their own beside a
// Provisioning's runs (scheduled backups, requested operations, drift checks): it reads the
// Provisioning, lets f act on it unless it is being deleted, and writes its status when f
// changed it; each of written is then told what the status was and is.
func reconcileStatus(ctx context.Context, c client.Client, req ctrl.Request, f func(context.Context, *bpav1.Provisioning) (ctrl.Result, error),
	written ...func(before, after *bpav1.Provisioning)) (ctrl.Result, error) {
	p := &bpav1.Provisioning{}
	if err := c.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := p.DeepCopy()
	res, err := f(ctx, p)
	if !equality.Semantic.DeepEqual(before.Status, p.Status) {
		if uerr := c.Status().Update(ctx, p); uerr != nil {
			return ctrl.Result{}, client.IgnoreNotFound(uerr) // a conflict: the retry sees the truth
		}
		for _, w := range written {
			w(before, p)
		}
	}
	return res, err
}

// createOwned creates p's Workflow wf, named so that it exists once: one already there is
// the one a reconcile made before a crash lost its status write, unless another CR of the
// same name (deleted and made again) made it.
func createOwned(ctx context.Context, c client.Client, p *bpav1.Provisioning, wf *wfv1.Workflow) error {
	err := c.Create(ctx, wf)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := &wfv1.Workflow{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(wf), existing); err != nil {
		return err
	}
	if !metav1.IsControlledBy(existing, p) {
		return fmt.Errorf("Workflow %s exists and is not this Provisioning's", wf.Name)
	}
	return nil
}

// clock is a reconciler's time: time.Now, unless a test sets it.
type clock func() time.Time

func (c clock) time() time.Time {
	if c != nil {
		return c()
	}
	return time.Now()
}

// heldEvents holds a reconcile's events until the status that says the same was written
// (flush, reconcileStatus's written): a reconcile whose write is refused (a conflict) decides
// again from the old status, and must not say it twice.
type heldEvents struct {
	record.EventRecorder
	held []func()
}

func (h *heldEvents) Event(o runtime.Object, typ, reason, msg string) {
	h.held = append(h.held, func() { h.EventRecorder.Event(o, typ, reason, msg) })
}

func (h *heldEvents) Eventf(o runtime.Object, typ, reason, format string, args ...any) {
	h.Event(o, typ, reason, fmt.Sprintf(format, args...))
}

func (h *heldEvents) AnnotatedEventf(o runtime.Object, annotations map[string]string, typ, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.held = append(h.held, func() { h.EventRecorder.AnnotatedEventf(o, annotations, typ, reason, "%s", msg) })
}

func (h *heldEvents) flush(_, _ *bpav1.Provisioning) {
	for _, e := range h.held {
		e()
	}
	h.held = nil
}
