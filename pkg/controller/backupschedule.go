package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// backupScheduler takes each Provisioning's scheduled etcd snapshots
// (spec.etcdBackup.schedule): when a time of the schedule has come, it creates that time's
// backup Workflow (named after it, so a reconcile after a crash makes no second one), and
// it folds the snapshots those Workflows stored into status.backups and the EtcdBackedUp
// condition. It never touches a run of the spec: its Workflows carry EtcdBackupOfLabel,
// not ProvisioningNameLabel, and queue on the cluster's mutex behind any run.
type backupScheduler struct {
	client.Client
	Recorder record.EventRecorder
	Options  translator.Options
	now      clock
}

// maxMissedSlots bounds a walk to the newest time a schedule missed (see lastSlot).
const maxMissedSlots = 100000

func (r *backupScheduler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileStatus(ctx, r.Client, req, r.reconcile)
}

func (r *backupScheduler) reconcile(ctx context.Context, p *bpav1.Provisioning) (ctrl.Result, error) {
	wfs := &wfv1.WorkflowList{}
	if err := r.List(ctx, wfs, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.EtcdBackupOfLabel: p.Name}); err != nil {
		return ctrl.Result{}, err
	}
	running := r.observe(p, wfs.Items)
	b := p.Spec.EtcdBackup
	if b == nil || b.Schedule == "" || p.Status.Applied == nil || len(p.Status.Applied.Hosts) == 0 {
		return ctrl.Result{}, nil
	}
	if errs := validation.ValidateEtcdBackup(p); len(errs) > 0 {
		// The CRD's pattern admits the shape, not the values; bpa lint refuses it.
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdBackedUp, metav1.ConditionFalse, bpav1.ReasonInvalidSpec, errs.ToAggregate().Error())
		return ctrl.Result{}, nil // nothing to retry until the spec changes
	}
	sched, _ := cron.ParseStandard(b.Schedule)
	now := r.now.time()
	slot, due := lastSlot(sched, p, now)
	next := ctrl.Result{RequeueAfter: sched.Next(now).Sub(now) + time.Second}
	if !due || running {
		return next, nil // one backup at a time: a slot that comes meanwhile is taken later
	}
	o, err := siteOptions(ctx, r.Client, p, r.Options)
	var wf *wfv1.Workflow
	if err == nil {
		wf, err = translator.EtcdBackupWorkflow(p, o, slot)
	}
	var refused *translator.Refusal
	if errors.As(err, &refused) {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdBackedUp, metav1.ConditionFalse, refused.Reason, refused.Error())
		p.Status.LastScheduledBackup = &metav1.Time{Time: slot}
		return next, nil
	} else if err != nil {
		return next, err
	}
	if err := createOwned(ctx, r.Client, p, wf); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(p, corev1.EventTypeNormal, bpav1.EventBackupStarted, "etcd snapshot for %s (spec.etcdBackup.schedule %q): Workflow %s", slot.UTC().Format(time.RFC3339), b.Schedule, wf.Name)
	p.Status.LastScheduledBackup = &metav1.Time{Time: slot}
	return next, nil
}

// observe folds p's scheduled backup Workflows into its status: the snapshots they stored,
// and EtcdBackedUp from the newest that ended. It reports whether one is still running.
func (r *backupScheduler) observe(p *bpav1.Provisioning, wfs []wfv1.Workflow) (running bool) {
	var newest *wfv1.Workflow
	var newestMessage string
	for i := range wfs {
		wf := &wfs[i]
		o := observe.Workflow(wf, []string{translator.StepBackupEtcd})
		mergeBackups(p, wf, o.Backups)
		if !wf.Status.Phase.Completed() {
			running = true
			continue
		}
		if newest == nil || newest.Status.FinishedAt.Before(&wf.Status.FinishedAt) {
			newest, newestMessage = wf, o.Message
		}
	}
	if newest == nil {
		return running
	}
	if newest.Status.Phase == wfv1.WorkflowSucceeded {
		return running // mergeBackups said so
	}
	if n := len(p.Status.Backups); n > 0 && !p.Status.Backups[n-1].TakenAt.Before(&newest.Status.StartedAt) {
		return running // a newer snapshot (a day-2 run's) stands
	}
	msg := newestMessage
	if msg == "" {
		msg = fmt.Sprintf("Workflow %s is %s", newest.Name, newest.Status.Phase)
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdBackedUp, metav1.ConditionFalse, bpav1.ReasonEtcdBackupFailed, msg)
	return running
}

// lastSlot is the newest time of sched after the last one taken (or, before any, the CR's
// creation) that is not after now, and whether there is one. Times missed before it are not
// made up: one snapshot stands for them.
func lastSlot(sched cron.Schedule, p *bpav1.Provisioning, now time.Time) (time.Time, bool) {
	from := p.CreationTimestamp.Time
	if t := p.Status.LastScheduledBackup; t != nil && t.Before(&metav1.Time{Time: now}) {
		from = t.Time
	}
	// The last two days first: a frequent schedule has its newest time there, in a walk of
	// at most a few thousand; only a rare one (weekly, monthly) walks from the last taken.
	if recent := now.Add(-recentWindow); from.Before(recent) {
		if slot, ok := walkSlots(sched, recent, now); ok {
			return slot, true
		}
	}
	return walkSlots(sched, from, now)
}

// recentWindow is how far back lastSlot looks first for the newest time of a schedule.
const recentWindow = 48 * time.Hour

// walkSlots is the newest time of sched after from that is not after now.
func walkSlots(sched cron.Schedule, from, now time.Time) (time.Time, bool) {
	var slot time.Time
	for i, t := 0, sched.Next(from); !t.IsZero() && !t.After(now) && i < maxMissedSlots; i, t = i+1, sched.Next(t) {
		slot = t
	}
	return slot, !slot.IsZero()
}

// SetupBackupSchedule registers the scheduler of etcd snapshots.
func SetupBackupSchedule(mgr ctrl.Manager, opts translator.Options) error {
	r := &backupScheduler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("bpa-controller"), Options: opts}
	// Only the Provisionings with a schedule: the others' many status writes cost nothing.
	scheduled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*bpav1.Provisioning)
		return ok && p.Spec.EtcdBackup != nil && p.Spec.EtcdBackup.Schedule != ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Provisioning{}, builder.WithPredicates(scheduled)).
		Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.EtcdBackupOfLabel))).
		Named("etcd-backup-schedule").
		Complete(r)
}
