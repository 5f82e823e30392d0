package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// driftChecker runs each Provisioning's periodic drift check (spec.driftCheck): once per
// interval's slot, it creates that slot's check Workflow (named after it, so a reconcile
// after a crash makes no second one), only for a built cluster whose spec's last run
// succeeded and none is pending, and folds what the newest finished check found into
// status.drift and the Drifted condition. Like the backup scheduler it never touches a run
// of the spec: its Workflows carry DriftCheckOfLabel and queue on the cluster's mutex.
type driftChecker struct {
	client.Client
	Recorder record.EventRecorder
	Options  translator.Options
	now      clock
}

func (r *driftChecker) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileStatus(ctx, r.Client, req, r.reconcile, r.reconcileWritten)
}

func (r *driftChecker) reconcile(ctx context.Context, p *bpav1.Provisioning) (ctrl.Result, error) {
	wfs := &wfv1.WorkflowList{}
	if err := r.List(ctx, wfs, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.DriftCheckOfLabel: p.Name}); err != nil {
		return ctrl.Result{}, err
	}
	before := p.Status.Drift.DeepCopy()
	running, request := r.observe(p, wfs.Items)
	if request != nil {
		if err := r.requestRuns(ctx, p, request); err != nil {
			// Folded again at the next reconcile, which asks again.
			p.Status.Drift = before
			return ctrl.Result{}, err
		}
	}
	dc := p.Spec.DriftCheck
	if dc == nil {
		// Turned off: what the last check found would go stale unseen.
		p.Status.Drift = nil
		meta.RemoveStatusCondition(&p.Status.Conditions, bpav1.ConditionDrifted)
		return ctrl.Result{}, nil
	}
	if dc.Interval.Duration < bpav1.MinDriftCheckInterval || dc.Interval.Duration > bpav1.MaxDriftCheckInterval {
		return ctrl.Result{}, nil // the CRD admits no other interval
	}
	now := r.now.time()
	slot := translator.DriftSlot(now, dc.Interval.Duration)
	next := ctrl.Result{RequeueAfter: slot.Add(dc.Interval.Duration).Sub(now) + time.Second}
	if running || !checkable(p) {
		return next, nil // one check at a time; a status change of the run brings us back
	}
	if pending, err := r.reconcilePending(ctx, p); err != nil || pending {
		return next, err // the runs putting drift back finish first
	}
	name := translator.DriftCheckWorkflowName(p.Name, slot)
	if slices.ContainsFunc(wfs.Items, func(wf wfv1.Workflow) bool { return wf.Name == name }) {
		return next, nil // this slot's is done
	}
	o, err := siteOptions(ctx, r.Client, p, r.Options)
	var wf *wfv1.Workflow
	if err == nil {
		wf, err = translator.DriftCheckWorkflow(p, o, slot)
	}
	var refused *translator.Refusal
	if errors.As(err, &refused) {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionDrifted, metav1.ConditionUnknown, bpav1.ReasonDriftCheckFailed, "not checked: "+refused.Error())
		return next, nil
	} else if err != nil {
		return next, err
	}
	if err := createOwned(ctx, r.Client, p, wf); err != nil {
		return ctrl.Result{}, err
	}
	return next, nil
}

// checkable says whether p may be checked now: a built cluster (status.applied), and no run
// of the spec pending: the current generation's run succeeded, and no rerun is asked. Only
// then does the spec the hosts' steps render say what status.applied holds.
func checkable(p *bpav1.Provisioning) bool {
	st := p.Status
	return st.Applied != nil && len(st.Applied.Hosts) > 0 &&
		st.Phase == bpav1.PhaseSucceeded && st.ObservedGeneration == p.Generation &&
		p.Annotations[bpav1.RerunAnnotation] == st.LastHandledRerun &&
		bpav1.ReplacementRevision(st.Applied) == st.LastHandledReplacement
}

// observe folds the newest finished check into status.drift and Drifted, once each, and
// reports whether a check is still running, and the runs to ask for to put drift back.
func (r *driftChecker) observe(p *bpav1.Provisioning, wfs []wfv1.Workflow) (running bool, request *bpav1.DriftReconcileStatus) {
	var newest *wfv1.Workflow
	for i := range wfs {
		wf := &wfs[i]
		if !metav1.IsControlledBy(wf, p) {
			continue
		}
		if !wf.Status.Phase.Completed() {
			running = true
			continue
		}
		if newest == nil || newest.Status.FinishedAt.Before(&wf.Status.FinishedAt) {
			newest = wf
		}
	}
	if newest == nil || (p.Status.Drift != nil && !laterSlot(newest, p.Status.Drift.Workflow)) {
		return running, nil // folded already, or older than the one folded (the newer one collected)
	}
	o := observe.Workflow(newest, translator.DriftSteps)
	if newest.Status.Phase != wfv1.WorkflowSucceeded || o.Drift == nil {
		r.failed(p, newest, o.Message)
		return running, nil
	}
	var prev *bpav1.DriftReconcileStatus
	if p.Status.Drift != nil {
		prev = p.Status.Drift.Reconcile
	}
	r.found(p, newest.Name, o)
	return running, r.decideReconcile(p, newest.Name, o.Drift, prev)
}

// laterSlot reports whether check wf is of a later slot than the check named folded: a
// succeeded check is collected sooner than a failed one, which must not come back as news.
func laterSlot(wf *wfv1.Workflow, folded string) bool {
	if folded == "" {
		return true
	}
	slot, err := time.Parse(time.RFC3339, wf.Annotations[translator.DriftSlotAnnotation])
	if err != nil {
		return wf.Name != folded
	}
	i := strings.LastIndexByte(folded, '-')
	was, err := strconv.ParseInt(folded[i+1:], 10, 64)
	if i < 0 || err != nil {
		return wf.Name != folded
	}
	return slot.Unix() > was
}

// failed records a check that could not read the cluster. One whose run's generation is
// no longer the CR's (the spec changed while it ran; its hosts' steps refuse that) says
// nothing of the cluster: only its name is kept, so it is folded once.
func (r *driftChecker) failed(p *bpav1.Provisioning, wf *wfv1.Workflow, msg string) {
	if p.Status.Drift == nil {
		p.Status.Drift = &bpav1.DriftStatus{}
	}
	p.Status.Drift.Workflow = wf.Name
	if wf.Labels[translator.GenerationLabel] != strconv.FormatInt(p.Generation, 10) {
		return
	}
	if msg == "" {
		msg = fmt.Sprintf("Workflow %s is %s", wf.Name, wf.Status.Phase)
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionDrifted, metav1.ConditionUnknown, bpav1.ReasonDriftCheckFailed,
		fmt.Sprintf("the drift check could not read the cluster: %s; read the step's log (argo logs %s)", msg, wf.Name))
}

// found records what a check that succeeded found, with a Warning event when drift is
// new or differs from what the check before found.
func (r *driftChecker) found(p *bpav1.Provisioning, name string, o observe.Observation) {
	d := o.Drift
	prev := p.Status.Drift
	st := &bpav1.DriftStatus{Workflow: name, Fields: clusterdrift.Cap(d.Fields, bpav1.MaxDriftFields), ObservedGeneration: d.Generation}
	if !d.CheckedAt.IsZero() {
		st.CheckedAt = d.CheckedAt.DeepCopy()
	}
	p.Status.Drift = st
	if len(d.Fields) == 0 {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionDrifted, metav1.ConditionFalse, bpav1.ReasonNoDrift,
			fmt.Sprintf("the cluster is as BPA applied it (generation %d)", d.Generation))
		return
	}
	msg := DriftMessage(d.Fields)
	was := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionDrifted)
	if was == nil || was.Status != metav1.ConditionTrue || prev == nil || !slices.Equal(prev.Fields, st.Fields) {
		r.Recorder.Event(p, corev1.EventTypeWarning, bpav1.EventDriftFound, msg)
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionDrifted, metav1.ConditionTrue, bpav1.ReasonDriftFound, msg)
}

// maxDriftMessageFields bounds the fields the Drifted condition's message names.
const maxDriftMessageFields = 5

// DriftMessage is the Drifted condition's message: how many fields differ, and the first
// few of them.
func DriftMessage(fields []string) string {
	shown := fields[:min(len(fields), maxDriftMessageFields)]
	msg := fmt.Sprintf("%d %s from what BPA applied: %s", len(fields), pluralize(len(fields), "field differs", "fields differ"), strings.Join(shown, "; "))
	if more := len(fields) - len(shown); more > 0 {
		msg += fmt.Sprintf("; and %d more (status.drift.fields)", more)
	}
	return msg
}

func pluralize(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// SetupDriftCheck registers the drift checker.
func SetupDriftCheck(mgr ctrl.Manager, opts translator.Options) error {
	r := &driftChecker{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("bpa-controller"), Options: opts}
	// Only the Provisionings with a check, or a finding to clear: the others' many status
	// writes cost nothing.
	checked := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*bpav1.Provisioning)
		return ok && (p.Spec.DriftCheck != nil || p.Status.Drift != nil)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Provisioning{}, builder.WithPredicates(checked)).
		Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.DriftCheckOfLabel))).
		Named("drift-check").
		Complete(r)
}
