package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// restorer runs the etcd restores the bpa.akraino.org/restore annotation asks for: one
// Workflow per value of the annotation (named after it, so a reconcile after a crash makes no
// second one), mirrored into status.restore and the EtcdRestored condition. Like the backup
// scheduler it never touches a run of the spec: its Workflows carry RestoreOfLabel, and queue
// on the cluster's mutex behind any run or backup.
type restorer struct {
	client.Client
	Recorder record.EventRecorder
	Options  translator.Options
}

func (r *restorer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &bpav1.Provisioning{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := p.DeepCopy()
	err := r.reconcile(ctx, p)
	if !equality.Semantic.DeepEqual(before.Status, p.Status) {
		if uerr := r.Status().Update(ctx, p); uerr != nil {
			return ctrl.Result{}, client.IgnoreNotFound(uerr) // a conflict: the retry sees the truth
		}
	}
	return ctrl.Result{}, err
}

func (r *restorer) reconcile(ctx context.Context, p *bpav1.Provisioning) error {
	if err := r.observe(ctx, p); err != nil {
		return err
	}
	request := p.Annotations[bpav1.RestoreAnnotation]
	st := p.Status.Restore
	if request == "" || (st != nil && st.Request == request) {
		return nil // nothing asked, or asked and answered
	}
	if st != nil && st.Phase == bpav1.RestoreRunning {
		return nil // one restore at a time: the next starts when this one ends
	}
	snapshot, _ := translator.ParseRestoreRequest(request)
	next := &bpav1.RestoreStatus{Request: request, Snapshot: snapshot}
	o, err := siteOptions(ctx, r.Client, p, r.Options)
	var wf *wfv1.Workflow
	if err == nil {
		wf, err = translator.RestoreWorkflow(p, o, request)
	}
	if err != nil {
		var refused *translator.Refusal
		if !errors.As(err, &refused) {
			return err // the policy could not be read: retried
		}
		reason := refused.Reason
		next.Phase, next.Message = bpav1.RestoreFailed, "refused, nothing was changed: "+err.Error()
		p.Status.Restore = next
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdRestored, metav1.ConditionFalse, reason, next.Message)
		r.Recorder.Event(p, corev1.EventTypeWarning, bpav1.ReasonEtcdRestoreFailed, next.Message)
		return nil
	}
	if err := r.Create(ctx, wf); apierrors.IsAlreadyExists(err) {
		// This request's, made before a crash lost the status write; unless another CR of
		// the same name (deleted and made again) made it.
		existing := &wfv1.Workflow{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(wf), existing); err != nil {
			return err
		}
		if !metav1.IsControlledBy(existing, p) {
			return fmt.Errorf("Workflow %s exists and is not this Provisioning's", wf.Name)
		}
	} else if err != nil {
		return err
	}
	now := metav1.Now()
	next.Workflow, next.Phase, next.StartedAt = wf.Name, bpav1.RestoreRunning, &now
	next.Message = fmt.Sprintf("restoring etcd from snapshot %s: Workflow %s", snapshot, wf.Name)
	p.Status.Restore = next
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdRestored, metav1.ConditionFalse, bpav1.ReasonRestoring, next.Message)
	r.Recorder.Event(p, corev1.EventTypeNormal, bpav1.EventRestoreStarted, next.Message)
	return nil
}

// observe mirrors the Workflow of status.restore: its phase, and once it ended, the
// outcome. `argo retry` of a failed restore makes it Running again.
func (r *restorer) observe(ctx context.Context, p *bpav1.Provisioning) error {
	st := p.Status.Restore
	if st == nil || st.Workflow == "" {
		return nil
	}
	wf := &wfv1.Workflow{}
	err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: st.Workflow}, wf)
	if apierrors.IsNotFound(err) {
		if st.Phase == bpav1.RestoreRunning {
			r.finish(p, bpav1.RestoreFailed, fmt.Sprintf("Workflow %s was deleted before it finished; set the %s annotation to a new value to restore again", st.Workflow, bpav1.RestoreAnnotation))
		}
		return nil
	}
	if err != nil || !metav1.IsControlledBy(wf, p) {
		return err
	}
	o := observe.Workflow(wf, restoreSteps)
	switch {
	case !wf.Status.Phase.Completed():
		if st.Phase != bpav1.RestoreRunning {
			st.Phase, st.FinishedAt = bpav1.RestoreRunning, nil
			st.Message = fmt.Sprintf("restoring etcd from snapshot %s again: Workflow %s was retried", st.Snapshot, wf.Name)
			setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdRestored, metav1.ConditionFalse, bpav1.ReasonRestoring, st.Message)
		}
	case wf.Status.Phase == wfv1.WorkflowSucceeded:
		r.finish(p, bpav1.RestoreSucceeded, restoredMessage(st.Snapshot, o.Restore))
	default:
		msg := o.Message
		if msg == "" {
			msg = fmt.Sprintf("Workflow %s is %s", wf.Name, wf.Status.Phase)
		}
		r.finish(p, bpav1.RestoreFailed, msg+fmt.Sprintf("; read the step's log (argo logs %s), then `argo retry %s` or set the %s annotation to a new value", wf.Name, wf.Name, bpav1.RestoreAnnotation))
	}
	if st.FinishedAt != nil && !wf.Status.FinishedAt.IsZero() {
		st.FinishedAt = wf.Status.FinishedAt.DeepCopy()
	}
	return nil
}

// restoreSteps are the tasks of a restore Workflow, for its failure message.
var restoreSteps = []string{"discover-hosts", "resolve-leases", "render-inventory", translator.StepRestoreEtcd, translator.StepRejoinEtcd, translator.StepVerify, "publish-kubeconfig"}

// finish records a restore's outcome, with one event when it changes.
func (r *restorer) finish(p *bpav1.Provisioning, phase bpav1.RestorePhase, msg string) {
	st := p.Status.Restore
	if st.Phase == phase && st.Message == msg {
		return
	}
	st.Phase, st.Message = phase, msg
	now := metav1.Now()
	st.FinishedAt = &now
	if phase == bpav1.RestoreSucceeded {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdRestored, metav1.ConditionTrue, bpav1.ReasonEtcdRestored, msg)
		r.Recorder.Event(p, corev1.EventTypeNormal, bpav1.ReasonEtcdRestored, msg)
		return
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdRestored, metav1.ConditionFalse, bpav1.ReasonEtcdRestoreFailed, msg)
	r.Recorder.Event(p, corev1.EventTypeWarning, bpav1.ReasonEtcdRestoreFailed, msg)
}

// restoredMessage says what the restore did, from the step's record.
func restoredMessage(snapshot string, rec *stepio.Restore) string {
	if rec == nil {
		return fmt.Sprintf("etcd restored from snapshot %s and verify passed", snapshot)
	}
	var aside []string
	for m, dir := range rec.SetAside {
		aside = append(aside, m+":"+dir)
	}
	sort.Strings(aside)
	msg := fmt.Sprintf("etcd restored from snapshot %s (revision %d) on %s, and verify passed", rec.Snapshot, rec.Revision, rec.Member)
	if len(aside) > 0 {
		msg += "; the data from before is kept in " + strings.Join(aside, ", ") + " (delete it once the cluster is as it should be)"
	}
	return msg
}

// SetupRestore registers the restorer.
func SetupRestore(mgr ctrl.Manager, opts translator.Options) error {
	r := &restorer{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("bpa-controller"), Options: opts}
	// Only the Provisionings asked to restore, or with one on record.
	asked := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*bpav1.Provisioning)
		return ok && (p.Annotations[bpav1.RestoreAnnotation] != "" || p.Status.Restore != nil)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Provisioning{}, builder.WithPredicates(asked)).
		Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.RestoreOfLabel))).
		Named("etcd-restore").
		Complete(r)
}
