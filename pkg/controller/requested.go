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

// requestKind is an operation a person asks for with an annotation (an etcd restore, a
// certificate renewal): what names it, where its status goes, how its Workflow is made.
type requestKind struct {
	name       string // the controller's name
	annotation string
	label      string // on its Workflows
	condition  string
	// The condition's reasons while it runs, once it succeeded, once it failed; the event
	// when it starts.
	running, succeeded, failed, started string
	// status is the CR's record of it, made when new is true.
	status func(p *bpav1.Provisioning, new bool) *bpav1.RequestStatus
	// begin describes a new request (and completes its record), or refuses it.
	begin    func(p *bpav1.Provisioning, value string, st *bpav1.RequestStatus) string
	workflow func(p *bpav1.Provisioning, opts translator.Options, value string) (*wfv1.Workflow, error)
	// done records what a Workflow that succeeded did, once, and says it.
	done  func(p *bpav1.Provisioning, o observe.Observation) string
	steps []string
}

// requestReconciler runs the operations one requestKind's annotation asks for: one Workflow
// per value of the annotation (named after it, so a reconcile after a crash makes no second
// one), mirrored into the kind's status and condition. Like the backup scheduler it never
// touches a run of the spec: its Workflows carry the kind's label, and queue on the cluster's
// mutex behind any run or backup.
type requestReconciler struct {
	client.Client
	Recorder record.EventRecorder
	Options  translator.Options
	kind     requestKind
}

func (r *requestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileStatus(ctx, r.Client, req, func(ctx context.Context, p *bpav1.Provisioning) (ctrl.Result, error) {
		return ctrl.Result{}, r.reconcile(ctx, p)
	}, r.reportFinished)
}

// reportFinished observes the duration of a request whose end has just been written.
func (r *requestReconciler) reportFinished(before, after *bpav1.Provisioning) {
	st := r.kind.status(after, false)
	if st == nil || st.Phase == bpav1.RequestRunning || st.FinishedAt == nil {
		return
	}
	if old := r.kind.status(before, false); old != nil && old.Phase == st.Phase && old.FinishedAt.Equal(st.FinishedAt) {
		return
	}
	observeOperation("Provisioning", r.kind.name, string(st.Phase), st.StartedAt, st.FinishedAt)
}

func (r *requestReconciler) reconcile(ctx context.Context, p *bpav1.Provisioning) error {
	if err := r.observe(ctx, p); err != nil {
		return err
	}
	value := p.Annotations[r.kind.annotation]
	st := r.kind.status(p, false)
	if value == "" || (st != nil && st.Request == value) {
		return nil // nothing asked, or asked and answered
	}
	if st != nil && st.Phase == bpav1.RequestRunning {
		return nil // one at a time: the next starts when this one ends
	}
	o, err := siteOptions(ctx, r.Client, p, r.Options)
	var wf *wfv1.Workflow
	if err == nil {
		wf, err = r.kind.workflow(p, o, value)
	}
	var refused *translator.Refusal
	if err != nil && !errors.As(err, &refused) {
		return err // the policy could not be read: retried
	}
	st = r.kind.status(p, true)
	*st = bpav1.RequestStatus{Request: value}
	what := r.kind.begin(p, value, st)
	if refused != nil {
		st.Phase, st.Message = bpav1.RequestFailed, "refused, nothing was changed: "+refused.Error()
		setCondition(&p.Status.Conditions, p.Generation, r.kind.condition, metav1.ConditionFalse, refused.Reason, st.Message)
		r.Recorder.Event(p, corev1.EventTypeWarning, r.kind.failed, st.Message)
		return nil
	}
	if err := createOwned(ctx, r.Client, p, wf); err != nil {
		return err
	}
	now := metav1.Now()
	st.Workflow, st.Phase, st.StartedAt = wf.Name, bpav1.RequestRunning, &now
	st.Message = fmt.Sprintf("%s: Workflow %s", what, wf.Name)
	setCondition(&p.Status.Conditions, p.Generation, r.kind.condition, metav1.ConditionFalse, r.kind.running, st.Message)
	r.Recorder.Event(p, corev1.EventTypeNormal, r.kind.started, st.Message)
	return nil
}

// observe mirrors the Workflow of the kind's status: its phase, and once it ended, the
// outcome. `argo retry` of a failed one makes it Running again.
func (r *requestReconciler) observe(ctx context.Context, p *bpav1.Provisioning) error {
	st := r.kind.status(p, false)
	if st == nil || st.Workflow == "" {
		return nil
	}
	wf := &wfv1.Workflow{}
	err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: st.Workflow}, wf)
	if apierrors.IsNotFound(err) {
		if st.Phase == bpav1.RequestRunning {
			r.finish(p, st, bpav1.RequestFailed, fmt.Sprintf("Workflow %s was deleted before it finished; set the %s annotation to a new value to ask again", st.Workflow, r.kind.annotation))
		}
		return nil
	}
	if err != nil || !metav1.IsControlledBy(wf, p) {
		return err
	}
	o := observe.Workflow(wf, r.kind.steps)
	switch {
	case !wf.Status.Phase.Completed():
		if st.Phase != bpav1.RequestRunning {
			st.Phase, st.FinishedAt = bpav1.RequestRunning, nil
			st.Message = fmt.Sprintf("Workflow %s was retried and runs again", wf.Name)
			setCondition(&p.Status.Conditions, p.Generation, r.kind.condition, metav1.ConditionFalse, r.kind.running, st.Message)
		}
	case wf.Status.Phase == wfv1.WorkflowSucceeded:
		if st.Phase != bpav1.RequestSucceeded { // once: what it read may be older than a later run's
			r.finish(p, st, bpav1.RequestSucceeded, r.kind.done(p, o))
		}
	default:
		msg := o.Message
		if msg == "" {
			msg = fmt.Sprintf("Workflow %s is %s", wf.Name, wf.Status.Phase)
		}
		r.finish(p, st, bpav1.RequestFailed, msg+fmt.Sprintf("; read the step's log (argo logs %s), then `argo retry %s` or set the %s annotation to a new value", wf.Name, wf.Name, r.kind.annotation))
	}
	return nil
}

// finish records an outcome, with one event when it changes.
func (r *requestReconciler) finish(p *bpav1.Provisioning, st *bpav1.RequestStatus, phase bpav1.RequestPhase, msg string) {
	if st.Phase == phase && st.Message == msg {
		return
	}
	st.Phase, st.Message = phase, msg
	now := metav1.Now()
	st.FinishedAt = &now
	if phase == bpav1.RequestSucceeded {
		setCondition(&p.Status.Conditions, p.Generation, r.kind.condition, metav1.ConditionTrue, r.kind.succeeded, msg)
		r.Recorder.Event(p, corev1.EventTypeNormal, r.kind.succeeded, msg)
		return
	}
	setCondition(&p.Status.Conditions, p.Generation, r.kind.condition, metav1.ConditionFalse, r.kind.failed, msg)
	r.Recorder.Event(p, corev1.EventTypeWarning, r.kind.failed, msg)
}

// restoreKind: the bpa.akraino.org/restore annotation (docs/protecting.md#restore).
var restoreKind = requestKind{
	name: "etcd-restore", annotation: bpav1.RestoreAnnotation, label: bpav1.RestoreOfLabel, condition: bpav1.ConditionEtcdRestored,
	running: bpav1.ReasonRestoring, succeeded: bpav1.ReasonEtcdRestored, failed: bpav1.ReasonEtcdRestoreFailed, started: bpav1.EventRestoreStarted,
	status: func(p *bpav1.Provisioning, new bool) *bpav1.RequestStatus {
		if p.Status.Restore == nil {
			if !new {
				return nil
			}
			p.Status.Restore = &bpav1.RestoreStatus{}
		}
		return &p.Status.Restore.RequestStatus
	},
	begin: func(p *bpav1.Provisioning, value string, _ *bpav1.RequestStatus) string {
		p.Status.Restore.Snapshot, _ = translator.ParseRestoreRequest(value)
		return "restoring etcd from snapshot " + p.Status.Restore.Snapshot
	},
	workflow: translator.RestoreWorkflow,
	done: func(p *bpav1.Provisioning, o observe.Observation) string {
		return restoredMessage(p.Status.Restore.Snapshot, o.Restore)
	},
	steps: []string{"discover-hosts", "resolve-leases", "render-inventory", translator.StepRestoreEtcd, translator.StepRejoinEtcd, translator.StepVerify, "publish-kubeconfig"},
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

// renewalKind: the bpa.akraino.org/renew-certificates annotation
// (docs/protecting.md#renewing-certificates).
var renewalKind = requestKind{
	name: "certificate-renewal", annotation: bpav1.RenewCertificatesAnnotation, label: bpav1.RenewalOfLabel, condition: bpav1.ConditionCertificatesRenewed,
	running: bpav1.ReasonRenewing, succeeded: bpav1.ReasonCertificatesRenewed, failed: bpav1.ReasonCertificateRenewalFailed, started: bpav1.EventRenewalStarted,
	status: func(p *bpav1.Provisioning, new bool) *bpav1.RequestStatus {
		if p.Status.CertificateRenewal == nil && new {
			p.Status.CertificateRenewal = &bpav1.RequestStatus{}
		}
		return p.Status.CertificateRenewal
	},
	begin: func(*bpav1.Provisioning, string, *bpav1.RequestStatus) string {
		return "renewing the control plane's certificates, one node at a time"
	},
	workflow: translator.RenewalWorkflow,
	done: func(p *bpav1.Provisioning, o observe.Observation) string {
		// verify read the renewed certificates: status.certificates and CertificatesExpiring
		// follow at once, not at the next run.
		observeCertificates(p, o)
		certificatesExpiring(p, time.Now())
		msg := "every control-plane node's certificates renewed, one at a time, and verify passed"
		if o.Renewal != nil {
			var each []string
			for _, m := range o.Renewal.Masters {
				each = append(each, fmt.Sprintf("%s (its API server away %.0fs)", m.Name, m.AwaySeconds))
			}
			msg = "renewed, one at a time: " + strings.Join(each, ", ") + "; verify passed"
		}
		if o.Certificates != nil && len(o.Certificates.Certificates) > 0 {
			c := o.Certificates.Certificates[0]
			msg += fmt.Sprintf("; the earliest now expires %s (%s on %s)", c.NotAfter.UTC().Format("2006-01-02"), c.Component, c.Node)
		}
		return msg
	},
	steps: []string{"discover-hosts", "resolve-leases", "render-inventory", translator.StepRenewCertificates, translator.StepVerify, "publish-kubeconfig"},
}

// SetupRequests registers the reconcilers of the requested operations.
func SetupRequests(mgr ctrl.Manager, opts translator.Options) error {
	for _, kind := range []requestKind{restoreKind, renewalKind} {
		r := &requestReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("bpa-controller"), Options: opts, kind: kind}
		// Only the Provisionings asked, or with one on record.
		asked := predicate.NewPredicateFuncs(func(o client.Object) bool {
			p, ok := o.(*bpav1.Provisioning)
			return ok && (p.Annotations[kind.annotation] != "" || kind.status(p, false) != nil)
		})
		err := ctrl.NewControllerManagedBy(mgr).
			For(&bpav1.Provisioning{}, builder.WithPredicates(asked)).
			Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(kind.label))).
			Named(kind.name).
			Complete(r)
		if err != nil {
			return err
		}
	}
	return nil
}
