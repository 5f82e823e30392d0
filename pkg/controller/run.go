package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Finalizer lets the controller clean up what a CR's runs left outside the reach of owner
// references (host claims) and what a cluster without a garbage collector would keep.
const Finalizer = "bpa.akraino.org/finalizer"

// runObject is a CR that is carried out by Workflows: Provisioning or Software.
type runObject interface {
	client.Object
	GetRunStatus() *bpav1.RunStatus
}

// runKind is what differs between the kinds; runReconciler holds what they share.
type runKind struct {
	kind      string
	nameLabel string
	steps     []string
	newObject func() runObject
	translate func(ctx context.Context, obj runObject, opts translator.Options) (*wfv1.Workflow, error)
	// revision names the state outside the spec a run depends on (Software: the cluster's
	// nodes, and the newest versions of the packages it tracks). A new revision starts a new
	// run. Empty means none.
	revision func(ctx context.Context, obj runObject) (string, error)
	// handledRevision reads the revision the last run (or no-op) was for from the status;
	// setRevision records one there.
	handledRevision func(obj runObject) string
	setRevision     func(obj runObject, revision string)
	// triggerReason is the Reconciling reason of a run whose Workflow says why it started
	// (bpav1.TriggerAnnotation): no CR was edited.
	triggerReason string
	// gate says whether a new run may start now; when not, why.
	gate func(ctx context.Context, obj runObject, cluster string) (ok bool, msg string, err error)
	// admit refuses a run the site policy, the SSH Secret's consent or another CR's hold
	// on the cluster forbids. It is asked right before every run starts, because the policy
	// may have been tightened after the CR was admitted.
	admit func(ctx context.Context, obj runObject, cluster string) (*policy.Refusal, error)
	// stepsOf lists the steps of one of the kind's Workflows, when they vary by run (a
	// Provisioning's plan); nil means steps.
	stepsOf func(wf *wfv1.Workflow) []string
	// observe copies kind-specific parts of an observation into the status.
	observe func(obj runObject, cluster string, wf *wfv1.Workflow, o observe.Observation)
	// settle acts on what a mirrored run achieved (a Provisioning releases the hosts its
	// removals freed).
	settle func(ctx context.Context, obj runObject, cluster string) error
	// operation names a run of the kind in bpa_operation_duration_seconds, when the run is
	// one operation (Software); a Provisioning's plan steps are its operations (reportOperations).
	operation string
	// report emits the kind's own events for what changed since before.
	report func(obj, before runObject)
	// timed updates what the status says that changes with time alone (a Provisioning's
	// CertificatesExpiring), and says when to look again; 0: no need.
	timed func(obj runObject) time.Duration
	// finalize removes what the CR's runs created, before the finalizer goes.
	finalize func(ctx context.Context, obj runObject) error
	// reset runs before the CR's Workflows are deleted and finalize releases its hosts;
	// until it says done, the deletion waits (Provisioning: spec.deletionPolicy Reset).
	reset func(ctx context.Context, obj runObject, res *ctrl.Result) (done bool, err error)
}

type runReconciler struct {
	client.Client
	// Reader reads around the cache, where a stale answer would do harm: before saying a
	// Workflow is gone, and in finalizers (which may look outside the watched namespaces).
	Reader   client.Reader
	Recorder record.EventRecorder
	Options  translator.Options
	kind     runKind
}

func (r *runReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return r.reconcileDelete(ctx, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		// An update, not a patch: the apiserver need not render the stored object and
		// apply a patch to it; a stale copy fails with a conflict and is retried.
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := r.Update(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := obj.DeepCopyObject().(runObject)
	var res ctrl.Result
	err := r.reconcileRun(ctx, obj, &res)
	if r.kind.timed != nil {
		if d := r.kind.timed(obj); d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d
		}
	}
	if perr := r.writeStatus(ctx, before, obj); perr != nil {
		// A conflict means our view was stale: nothing is reported, the retry sees the truth.
		return ctrl.Result{}, perr
	}
	r.reportTransition(obj, before.GetRunStatus(), obj.GetRunStatus())
	if r.kind.report != nil {
		r.kind.report(obj, before)
	}
	// Errors requeue with controller-runtime's exponential backoff; success waits for the
	// next Workflow or CR event. The timers: a refusal that lifts without any object BPA
	// watches changing (a Secret created or labelled later), looked at again now and then;
	// and what changes with time alone (timed).
	return res, err
}

// workflowKind is the kind part of a kind's Workflow names (translator.WorkflowName).
var workflowKind = map[string]string{"Provisioning": "provision", "Software": "software"}

// refusalRetry is how often a run refused for a reason BPA cannot watch is tried again.
const refusalRetry = time.Minute

// writeStatus writes the status subresource, and only when it changed.
func (r *runReconciler) writeStatus(ctx context.Context, before, after runObject) error {
	if equality.Semantic.DeepEqual(before.GetRunStatus(), after.GetRunStatus()) && equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	// A whole-status update, carrying the resourceVersion the reconcile started from: a
	// reconcile that started from a stale cached copy fails with a conflict instead of
	// overwriting newer status, and its transitions are not reported. It is also the
	// cheapest status write: a merge patch costs this process a diff of two encodings and
	// the apiserver an encoding of the stored object to apply it to (profiled with
	// test/bench's -phase-cpuprofile), and the controller owns every field of the status
	// it sends.
	return client.IgnoreNotFound(r.Status().Update(ctx, after))
}

// reportTransition emits events and metrics for a phase change that has been written.
func (r *runReconciler) reportTransition(obj runObject, before, after *bpav1.RunStatus) {
	if after.Workflow == nil || before.Phase == after.Phase {
		return
	}
	sameRun := before.Workflow != nil && before.Workflow.UID == after.Workflow.UID
	switch {
	case isTerminal(after.Phase):
		runsTotal.WithLabelValues(r.kind.kind, string(after.Phase)).Inc()
		if after.StartedAt != nil && after.FinishedAt != nil {
			runDuration.WithLabelValues(r.kind.kind, string(after.Phase)).Observe(after.FinishedAt.Sub(after.StartedAt.Time).Seconds())
		}
		if r.kind.operation != "" {
			observeOperation(r.kind.kind, r.kind.operation, string(after.Phase), after.StartedAt, after.FinishedAt)
		}
		eventType := corev1.EventTypeNormal
		if after.Phase != bpav1.PhaseSucceeded {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(obj, eventType, bpav1.EventRunPrefix+string(after.Phase), "%s", runMessage(after))
	case sameRun && isTerminal(before.Phase):
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, bpav1.EventRunResumed, "Workflow %s is %s again (retried)", after.Workflow.Name, after.Phase)
	}
}

func (r *runReconciler) reconcileRun(ctx context.Context, obj runObject, res *ctrl.Result) error {
	st := obj.GetRunStatus()
	gen := obj.GetGeneration()
	cluster, err := translator.ClusterOf(obj)
	if err != nil {
		setStalled(st, gen, bpav1.ReasonInvalidSpec, err.Error())
		return nil
	}

	revision := ""
	if r.kind.revision != nil {
		if revision, err = r.kind.revision(ctx, obj); err != nil {
			return err
		}
	}
	rerun := obj.GetAnnotations()[bpav1.RerunAnnotation]
	if r.sizeRefused(obj, rerun, revision) {
		return nil // its Workflow was too large to create: the same inputs would plan it again
	}
	needRun := st.ObservedGeneration != gen || st.LastHandledRerun != rerun ||
		(r.kind.handledRevision != nil && r.kind.handledRevision(obj) != revision)

	wfs, err := r.workflows(ctx, obj)
	if argoGone(err) {
		// Argo is not installed (argo.go). A CR with nothing to run keeps its status: the
		// cluster is as the last run left it. A run it shows in flight (not finished: a
		// Software waiting for its cluster is Pending with its last, finished run) was
		// deleted with Argo's CRD, and a run already reported deleted cannot be run again
		// until Argo is back: both say so. One that needs a run says why it waits.
		inFlight := !isTerminal(st.Phase) && st.FinishedAt == nil
		if ready := meta.FindStatusCondition(st.Conditions, bpav1.ConditionReady); st.Workflow != nil &&
			(inFlight || (ready != nil && ready.Reason == bpav1.ReasonWorkflowDeleted)) {
			r.workflowGone(obj, bpav1.ReasonArgoUnavailable, fmt.Sprintf("Workflow %s is gone and Argo Workflows is not installed (the Workflow kind %s is not served); install Argo Workflows, then set the %s annotation to a new value to run again",
				st.Workflow.Name, wfv1.SchemeGroupVersion, bpav1.RerunAnnotation))
		}
		if needRun {
			argoUnavailable(st, gen, res)
		}
		return nil
	}
	if err != nil {
		return err
	}
	current := currentWorkflow(wfs, st.Workflow)

	if needRun && current != nil && st.Workflow != nil {
		// Fold in what the last run did before planning the next: a run that ended while
		// the controller was down, or while a newer generation waited, must count, or the
		// next plan would redo its work. And settle it (release the hosts it freed) before
		// the next starts: a replacement's next run must not find its dead host still
		// claimed, unmarked.
		r.mirror(obj, cluster, current)
		if r.kind.settle != nil {
			if err := r.kind.settle(ctx, obj, cluster); err != nil {
				return err
			}
		}
	}
	if needRun {
		started, err := r.startRun(ctx, obj, cluster, wfs, revision, rerun, res)
		if err != nil || started == nil {
			return err
		}
		current = started
	}

	if current == nil {
		if st.Workflow != nil {
			gone, err := r.confirmGone(ctx, obj.GetNamespace(), st.Workflow.Name)
			if err != nil || !gone {
				return err // the cache lags: the Workflow's own event brings us back
			}
			r.workflowGone(obj, bpav1.ReasonWorkflowDeleted, fmt.Sprintf("Workflow %s was deleted; set the %s annotation to a new value to run again", st.Workflow.Name, bpav1.RerunAnnotation))
		}
		return nil
	}
	r.mirror(obj, cluster, current)
	if r.kind.settle != nil {
		return r.kind.settle(ctx, obj, cluster)
	}
	return nil
}

// currentWorkflow is the run to mirror: the one the status names, or a newer one (an ad-hoc
// `argo submit --from` run). Older Workflows, such as a failed run kept for `argo retry`,
// never replace it, so a newer run expiring does not bring an old failure back.
func currentWorkflow(wfs []wfv1.Workflow, ref *bpav1.WorkflowReference) *wfv1.Workflow {
	if len(wfs) == 0 {
		return nil
	}
	if ref == nil {
		return &wfs[len(wfs)-1]
	}
	for i := range wfs {
		if (ref.UID != "" && wfs[i].UID == ref.UID) || (ref.UID == "" && wfs[i].Name == ref.Name) {
			return &wfs[len(wfs)-1] // wfs is oldest first: this one or a newer one
		}
	}
	return nil
}

// confirmGone asks the apiserver, not the cache, whether a Workflow is really gone.
func (r *runReconciler) confirmGone(ctx context.Context, ns, name string) (bool, error) {
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &wfv1.Workflow{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return true, nil
	}
	return false, err
}

// startRun creates the Workflow for the current generation, or says why it must wait. It
// returns the Workflow to mirror, or nil while waiting.
func (r *runReconciler) startRun(ctx context.Context, obj runObject, cluster string, wfs []wfv1.Workflow, revision, rerun string, res *ctrl.Result) (*wfv1.Workflow, error) {
	st := obj.GetRunStatus()
	gen := obj.GetGeneration()
	// A run in progress finishes first, and only then is the next one planned: a plan made
	// against a cluster that is still changing would be wrong (a spec edit reverted mid-run
	// would otherwise read as "nothing to do" and the run would undo it).
	if running := unfinished(wfs, translator.WorkflowName(obj.GetName(), workflowKind[r.kind.kind], gen, rerun, revision)); running != nil {
		r.mirror(obj, cluster, running)
		setRunConditions(st, gen, bpav1.ReasonWaitingForRun, fmt.Sprintf("generation %d starts when Workflow %s finishes", gen, running.Name))
		return nil, nil
	}
	opts := r.Options
	opts.Revision = revision
	wf, err := r.kind.translate(ctx, obj, opts)
	var upToDate *translator.UpToDate
	if errors.As(err, &upToDate) {
		wf, err = nil, nil
	}
	if err != nil {
		reason := bpav1.ReasonInvalidSpec
		var refused *translator.Refusal
		if errors.As(err, &refused) {
			// The plan refuses the change: nothing runs, the cluster stays as it is.
			reason = refused.Reason
		}
		setStalled(st, gen, reason, err.Error())
		return nil, nil
	}
	if wf == nil {
		// Nothing to do for this generation (a Provisioning whose cluster already is what
		// the spec asks, a Software none of whose hosts needs an uploaded version): record
		// it as handled, and say so.
		st.ObservedGeneration, st.LastHandledRerun = gen, rerun
		if r.kind.setRevision != nil {
			r.kind.setRevision(obj, revision)
		}
		msg := fmt.Sprintf("generation %d needs no operation: the cluster already is what the spec asks", gen)
		if upToDate != nil {
			msg = upToDate.Message
			r.Recorder.Event(obj, corev1.EventTypeNormal, bpav1.ReasonUpToDate, msg)
		}
		setCondition(&st.Conditions, gen, bpav1.ConditionReady, metav1.ConditionTrue, bpav1.ReasonUpToDate, msg)
		meta.RemoveStatusCondition(&st.Conditions, bpav1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, bpav1.ConditionStalled)
		return nil, nil
	}

	if r.kind.admit != nil {
		refusal, err := r.kind.admit(ctx, obj, cluster)
		if err != nil {
			return nil, err
		}
		if refusal != nil {
			setStalled(st, gen, refusal.Reason, refusal.Message)
			if refusal.Retry {
				res.RequeueAfter = refusalRetry
			}
			return nil, nil
		}
	}
	if r.kind.gate != nil {
		ok, msg, err := r.kind.gate(ctx, obj, cluster)
		if err != nil {
			return nil, err
		}
		if !ok {
			st.Phase = bpav1.PhasePending
			st.Message = msg
			setRunConditions(st, gen, bpav1.ReasonWaitingForProvisioning, msg)
			return nil, nil
		}
	}

	planned := wf
	wf, created, err := r.createOrAdopt(ctx, obj, wf, wfs)
	if limit := sizeLimit(err); limit != "" {
		r.refuseTooLarge(obj, planned, limit, rerun, revision)
		return nil, nil
	}
	if argoGone(err) {
		// Argo's CRD was deleted while the controller runs: the cached list still answers
		// (with what it last saw), the create does not.
		argoUnavailable(st, gen, res)
		return nil, nil
	}
	if err != nil || wf == nil {
		return nil, err
	}
	if created {
		runsStarted.WithLabelValues(r.kind.kind).Inc()
		why := ""
		if t := wf.Annotations[bpav1.TriggerAnnotation]; t != "" {
			why = ": " + t
		}
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, bpav1.EventRunStarted, "Started Workflow %s for generation %d%s", wf.Name, gen, why)
		log.FromContext(ctx).Info("started run", "workflow", wf.Name, "generation", gen)
	}

	st.ObservedGeneration = gen
	st.LastHandledRerun = rerun
	if r.kind.setRevision != nil {
		r.kind.setRevision(obj, revision)
	}
	// A new run starts with a clean slate: nothing from the last run may pass for this one.
	st.Phase, st.Message, st.Progress = bpav1.PhasePending, "", ""
	st.Steps, st.StartedAt, st.FinishedAt = nil, nil, nil
	st.Workflow = &bpav1.WorkflowReference{Name: wf.Name, UID: wf.UID}
	return wf, nil
}

// argoUnavailable marks a CR whose run cannot start because the Workflow kind is not served,
// and looks again later: no event says when Argo is back.
func argoUnavailable(st *bpav1.RunStatus, gen int64, res *ctrl.Result) {
	setStalled(st, gen, bpav1.ReasonArgoUnavailable, fmt.Sprintf("Argo Workflows is not installed (the Workflow kind %s is not served), so the run for generation %d cannot start; install Argo Workflows and it starts within a minute (a BPA controller that started without Argo restarts first, to watch Workflows)",
		wfv1.SchemeGroupVersion, gen))
	res.RequeueAfter = refusalRetry
}

// createOrAdopt creates wf, or adopts the Workflow of that name if this CR already made it
// (before a crash, or in a reconcile whose status write was lost). The cached list answers
// first: creating a Workflow that exists costs the apiserver a full validation before it
// says AlreadyExists. It returns nil, with the CR marked Stalled, when the name is taken by
// a Workflow this CR does not own.
func (r *runReconciler) createOrAdopt(ctx context.Context, obj runObject, wf *wfv1.Workflow, cached []wfv1.Workflow) (_ *wfv1.Workflow, created bool, _ error) {
	var existing *wfv1.Workflow
	for i := range cached {
		if cached[i].Name == wf.Name {
			existing = &cached[i]
			break
		}
	}
	if existing == nil {
		err := r.Create(ctx, wf)
		if err == nil {
			return wf, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, fmt.Errorf("creating Workflow %s: %w", wf.Name, err)
		}
		// The cache had not seen it yet.
		existing = &wfv1.Workflow{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(wf), existing); err != nil {
			return nil, false, err
		}
	}
	if !metav1.IsControlledBy(existing, obj) {
		setStalled(obj.GetRunStatus(), obj.GetGeneration(), bpav1.ReasonInvalidSpec, fmt.Sprintf("Workflow %s exists and is not owned by this %s", wf.Name, r.kind.kind))
		return nil, false, nil
	}
	return existing, false, nil
}

// mirror copies the Workflow's state into the status, and reports phase changes.
func (r *runReconciler) mirror(obj runObject, cluster string, wf *wfv1.Workflow) {
	st := obj.GetRunStatus()
	steps := r.kind.steps
	if r.kind.stepsOf != nil {
		steps = r.kind.stepsOf(wf)
	}
	o := observe.Workflow(wf, steps)

	st.Workflow = &bpav1.WorkflowReference{Name: wf.Name, UID: wf.UID}
	st.Phase, st.Progress, st.Message = o.Phase, o.Progress, o.Message
	st.StartedAt, st.FinishedAt, st.Steps = o.StartedAt, o.FinishedAt, o.Steps
	if o.Hosts != nil {
		st.Hosts = o.Hosts
	}
	if r.kind.observe != nil {
		r.kind.observe(obj, cluster, wf, o)
	}

	reason, msg := "", st.Message
	if st.Phase == bpav1.PhasePending && wf.Status.Synchronization != nil && wf.Status.Synchronization.Mutex != nil && len(wf.Status.Synchronization.Mutex.Waiting) > 0 {
		reason = bpav1.ReasonWaitingForLock
	}
	if msg == "" {
		msg = fmt.Sprintf("Workflow %s is %s", wf.Name, st.Phase)
	}
	if r := stepReason(msg); r != "" {
		reason = r
	}
	if t := wf.Annotations[bpav1.TriggerAnnotation]; t != "" {
		// No CR was edited: the conditions say what started the run ("htop 3.2.2-3 uploaded").
		msg = t + ": " + msg
		if reason == "" && !isTerminal(st.Phase) {
			reason = r.kind.triggerReason
		}
	}
	setRunConditions(st, obj.GetGeneration(), reason, msg)

}

// stepReasons are the reasons a step names at the start of its error ("PreflightFailed:
// ..."), so that the CR's conditions carry them instead of RunFailed: run-kubespray's
// refusal to remove a dead host gracefully, a failed preflight check, a node an upgrade
// left behind, an etcd snapshot that could not be taken, stored or verified.
var stepReasons = []string{bpav1.ReasonNodeUnreachable, bpav1.ReasonPreflightFailed, bpav1.ReasonNodeNotUpgraded, bpav1.ReasonEtcdBackupFailed}

// stepReason is the first of stepReasons that msg names, "" for none.
func stepReason(msg string) string {
	for _, r := range stepReasons {
		if strings.Contains(msg, r+":") {
			return r
		}
	}
	return ""
}

// workflowGone reports a Workflow that disappeared (deleted by hand, by its TTL, or with
// Argo's CRD) without starting another: a new run needs a new generation or a rerun
// request. msg says so; reason is the conditions' reason.
func (r *runReconciler) workflowGone(obj runObject, reason, msg string) {
	st := obj.GetRunStatus()
	if !isTerminal(st.Phase) {
		st.Phase = bpav1.PhaseError
	}
	if st.Phase == bpav1.PhaseSucceeded {
		// The run succeeded and its record expired: the cluster is still what it was.
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: bpav1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: bpav1.ReasonSucceeded, Message: fmt.Sprintf("Workflow %s succeeded and has since been deleted", st.Workflow.Name), ObservedGeneration: obj.GetGeneration()})
		return
	}
	st.Message = msg
	setRunConditions(st, obj.GetGeneration(), reason, msg)
}

// unfinished returns a Workflow other than name that is still running, if any. name is the
// Workflow the next run would create: one already there is adopted (or, if not this CR's,
// refused) rather than waited for.

func unfinished(wfs []wfv1.Workflow, name string) *wfv1.Workflow {
	for i := range wfs {
		if wfs[i].Name != name && !wfs[i].Status.Fulfilled() {
			return &wfs[i]
		}
	}
	return nil
}

func isTerminal(p bpav1.RunPhase) bool {
	return p == bpav1.PhaseSucceeded || p == bpav1.PhaseFailed || p == bpav1.PhaseError
}

// workflows lists the CR's Workflows, oldest first: those the controller made and those
// `argo submit --from` labelled with the CR's name.
func (r *runReconciler) workflows(ctx context.Context, obj runObject) ([]wfv1.Workflow, error) {
	list := &wfv1.WorkflowList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{runIndex[r.kind.nameLabel]: obj.GetName()}); err != nil {
		return nil, err
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

func (r *runReconciler) reconcileDelete(ctx context.Context, obj runObject) (ctrl.Result, error) {
	var res ctrl.Result
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return res, nil
	}
	if r.kind.reset != nil {
		if done, err := r.kind.reset(ctx, obj, &res); err != nil || !done {
			return res, err
		}
	}
	if err := r.deleteWorkflows(ctx, obj); err != nil {
		return res, err
	}
	if r.kind.finalize != nil {
		if err := r.kind.finalize(ctx, obj); err != nil {
			return res, err
		}
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(obj, Finalizer)
	return res, client.IgnoreNotFound(r.Patch(ctx, obj, patch))
}

// deleteWorkflows removes the CR's Workflows and their staged kubeconfigs. Owner references
// would do it too, but only where a garbage collector runs; and if Argo is gone (no
// Workflow kind any more, argoGone) there is nothing to delete, so deletion never hangs on it.
func (r *runReconciler) deleteWorkflows(ctx context.Context, obj runObject) error {
	list := &wfv1.WorkflowList{}
	err := r.Reader.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{r.kind.nameLabel: obj.GetName()})
	if argoGone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return r.deleteEach(ctx, list.Items)
}

// deleteEach deletes the Workflows wfs and their staged kubeconfigs.
func (r *runReconciler) deleteEach(ctx context.Context, wfs []wfv1.Workflow) error {
	for i := range wfs {
		if err := r.Delete(ctx, &wfs[i], client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil && !meta.IsNoMatchError(err) {
			return err
		}
		if err := r.deleteStagedKubeconfig(ctx, &wfs[i]); err != nil {
			return err
		}
	}
	return nil
}

// runMessage says how a run ended: the Workflow's own message when it has one, else what
// finished and how long it took. Never a dangling separator.
func runMessage(st *bpav1.RunStatus) string {
	msg := fmt.Sprintf("Workflow %s %s", st.Workflow.Name, st.Phase)
	if st.StartedAt != nil && st.FinishedAt != nil {
		msg += " in " + st.FinishedAt.Sub(st.StartedAt.Time).Round(time.Second).String()
	}
	if st.Message != "" {
		msg += ": " + st.Message
	}
	return msg
}

// deleteStagedKubeconfig deletes the Workflow's staging Secret (see pkg/steps/verify) only
// if that Workflow owns it: its name proves nothing, since anyone who may create Secrets in
// the namespace can create one by that name. The UID precondition spares a Secret that
// replaced it meanwhile.
func (r *runReconciler) deleteStagedKubeconfig(ctx context.Context, wf *wfv1.Workflow) error {
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: wf.Namespace, Name: kubeconfig.StagingSecretName(wf.Name)}, s); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, o := range s.OwnerReferences {
		if o.Kind == "Workflow" && o.UID == wf.UID {
			return client.IgnoreNotFound(r.Delete(ctx, s, client.Preconditions{UID: &s.UID}))
		}
	}
	return nil
}
