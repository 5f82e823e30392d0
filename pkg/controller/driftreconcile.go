package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// Putting drift back (spec.driftCheck.reconcile: Apply, docs/drift.md). A check that found
// drift a run puts back (stepio.DriftRerun) asks for those runs through the normal plan: the
// bpa.akraino.org/rerun annotation, set to drift-<the check's slot> on the Provisioning (its
// rerun is cluster.yml on every host) and on each Software whose packages drifted. The
// request is recorded in status.drift.reconcile with the fields it is to put back; no check
// runs until its runs have finished, and a check that then finds the same fields marks it
// NotPutBack and asks for nothing more: one drift is applied once, never in a loop.

// decideReconcile sets status.drift.reconcile from what check wf found (d), given the
// record before it (prev). It returns the record when runs are to be asked for now.
func (r *driftChecker) decideReconcile(p *bpav1.Provisioning, wf string, d *stepio.Drift, prev *bpav1.DriftReconcileStatus) *bpav1.DriftReconcileStatus {
	st := p.Status.Drift
	fields, softwares := rerunFields(d.Rerun)
	if len(fields) == 0 || p.Spec.DriftCheck == nil || p.Spec.DriftCheck.Reconcile != bpav1.DriftApply {
		return nil // nothing a run puts back (the last request worked), or not asked to
	}
	if prev != nil && slices.Equal(prev.Fields, fields) {
		st.Reconcile = prev
		prev.NotPutBack = true // said once, by reconcileWritten
		return nil
	}
	rec := &bpav1.DriftReconcileStatus{
		Request:      bpav1.DriftRerunPrefix + wf[strings.LastIndexByte(wf, '-')+1:],
		RequestedAt:  metav1.NewTime(r.now.time()),
		Provisioning: d.Rerun.Provisioning != nil,
		Softwares:    softwares,
		Fields:       fields,
	}
	st.Reconcile = rec
	return rec
}

// reconcileWritten records the events of a request and of its failure once the status that
// says so was written: a reconcile whose write is refused (a conflict) decides again, and
// must not say it twice.
func (r *driftChecker) reconcileWritten(before, after *bpav1.Provisioning) {
	was, rec := driftReconcileOf(before), driftReconcileOf(after)
	switch {
	case rec == nil:
	case was == nil || was.Request != rec.Request:
		var runs []string
		if rec.Provisioning {
			runs = append(runs, "Provisioning "+after.Name)
		}
		for _, s := range rec.Softwares {
			runs = append(runs, "Software "+s)
		}
		r.Recorder.Eventf(after, corev1.EventTypeNormal, bpav1.EventDriftReconcile, "rerun %s (%s) to put back: %s",
			strings.Join(runs, ", "), rec.Request, strings.Join(clusterdrift.Cap(rec.Fields, 5), "; "))
	case rec.NotPutBack && !was.NotPutBack:
		r.Recorder.Eventf(after, corev1.EventTypeWarning, bpav1.EventDriftNotPutBack,
			"the runs of %s did not put back: %s; BPA does not ask again, look at the nodes", rec.Request, strings.Join(clusterdrift.Cap(rec.Fields, 5), "; "))
	}
}

func driftReconcileOf(p *bpav1.Provisioning) *bpav1.DriftReconcileStatus {
	if p.Status.Drift == nil {
		return nil
	}
	return p.Status.Drift.Reconcile
}

// rerunFields are the lines runs put back, sorted and capped as status.drift.fields, and the
// Softwares to run again, sorted.
func rerunFields(rr *stepio.DriftRerun) (fields, softwares []string) {
	if rr == nil {
		return nil, nil
	}
	fields = slices.Clone(rr.Provisioning)
	for _, name := range slices.Sorted(maps.Keys(rr.Softwares)) {
		softwares = append(softwares, name)
		fields = append(fields, rr.Softwares[name]...)
	}
	slices.Sort(fields)
	return clusterdrift.Cap(fields, bpav1.MaxDriftFields), softwares
}

// requestRuns sets the rerun annotation of rec on the Provisioning and the Softwares it names,
// with merge patches of that one annotation (a Software gone meanwhile is skipped). p keeps
// its status and takes the new resourceVersion, so the status write that follows holds.
func (r *driftChecker) requestRuns(ctx context.Context, p *bpav1.Provisioning, rec *bpav1.DriftReconcileStatus) error {
	if rec.Provisioning {
		patched := p.DeepCopy()
		if err := setRerun(ctx, r.Client, patched, rec.Request); err != nil {
			return fmt.Errorf("asking Provisioning %s to run again: %w", p.Name, err)
		}
		p.ResourceVersion, p.Annotations = patched.ResourceVersion, patched.Annotations
	}
	for _, name := range rec.Softwares {
		sw := &bpav1.Software{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, sw); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return err
		}
		if err := setRerun(ctx, r.Client, sw, rec.Request); err != nil {
			return fmt.Errorf("asking Software %s to run again: %w", name, err)
		}
	}
	return nil
}

// setRerun sets obj's rerun annotation to value, unless it has it already.
func setRerun(ctx context.Context, c client.Client, obj client.Object, value string) error {
	if obj.GetAnnotations()[bpav1.RerunAnnotation] == value {
		return nil
	}
	patch := client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, bpav1.RerunAnnotation, value))
	return c.Patch(ctx, obj, patch)
}

// reconcilePending says whether a Software run BPA asked for to put drift back has not yet
// finished: the next check waits for it, or it would find the same drift and call the
// request a failure. (The Provisioning's own run holds checks back already: checkable.)
func (r *driftChecker) reconcilePending(ctx context.Context, p *bpav1.Provisioning) (bool, error) {
	if p.Status.Drift == nil || p.Status.Drift.Reconcile == nil || p.Status.Drift.Reconcile.NotPutBack {
		return false, nil
	}
	rec := p.Status.Drift.Reconcile
	for _, name := range rec.Softwares {
		sw := &bpav1.Software{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, sw); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return false, err
		}
		st := sw.Status.RunStatus
		if sw.Annotations[bpav1.RerunAnnotation] == rec.Request && (st.LastHandledRerun != rec.Request || !isTerminal(st.Phase)) {
			return true, nil
		}
	}
	return false, nil
}
