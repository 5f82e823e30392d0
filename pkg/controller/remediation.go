package controller

import (
	"context"
	"errors"
	"slices"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/remediation"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// NodeSource lists the application cluster's Nodes of p: graded remediation's detection
// (docs/remediation.md). An error is reported as NodesUnread, and nothing is decided.
type NodeSource func(ctx context.Context, p *bpav1.Provisioning) ([]corev1.Node, error)

// remediationPoll is how often the remediator reads a cluster's Nodes while
// spec.remediation is set.
const remediationPoll = 15 * time.Second

// remediationWorkers is the least number of clusters read at once: each read may wait out
// nodeReaderTimeout, and a few clusters that do not answer (or a tenant's that will not) must
// not hold the remediation of the others behind them.
const remediationWorkers = 8

// rungAction is how the remediator takes one rung: the builder of its Workflow for the
// node's episode (none for Replace, which runs the spec again: replace.go), the reason of the
// Normal event that says it was taken, and, for a rung the admin must allow, whether the site
// policy allows it in the Provisioning's namespace.
type rungAction struct {
	workflow func(p *bpav1.Provisioning, o translator.Options, a remediation.Action) (*wfv1.Workflow, error)
	event    string
	allowed  func(pol policy.Policy, namespace string) bool
}

// rungActions are the rungs the remediator can take, one entry each; the spec's others, and
// those the policy does not allow, are left out of the decision (takeable), so a node past
// them goes on to the next rung or is RemediationExhausted, never acted on by nothing.
var rungActions = map[bpav1.RemediationRung]rungAction{
	bpav1.RungRestart: {workflow: func(p *bpav1.Provisioning, o translator.Options, a remediation.Action) (*wfv1.Workflow, error) {
		return translator.RestartWorkflow(p, o, a.Node, a.Since)
	}, event: bpav1.EventRemediationRestart},
	// Reboot touches power: only where the BPAPolicy grants the namespace allowReboot.
	bpav1.RungReboot: {workflow: func(p *bpav1.Provisioning, o translator.Options, a remediation.Action) (*wfv1.Workflow, error) {
		return translator.RebootWorkflow(p, o, a.Node, a.Since)
	}, event: bpav1.EventRemediationReboot, allowed: policy.Policy.RebootAllowed},
	bpav1.RungReplace: {event: bpav1.EventRemediationReplace},
}

// takeable reports whether the remediator can take rung g for a Provisioning of namespace:
// it is built, and allowed by pol where it must be.
func takeable(g bpav1.RemediationRung, pol policy.Policy, namespace string) bool {
	a, ok := rungActions[g]
	return ok && (a.allowed == nil || a.allowed(pol, namespace))
}

// remediator runs graded remediation (spec.remediation): it reads the Nodes (Nodes),
// decides with pkg/remediation from status.remediation, and creates the rung's Workflow,
// named after the node's episode so a reconcile after a crash creates none twice. Like
// the drift checker it never touches a run of the spec, and it does nothing while one is
// pending (checkable).
type remediator struct {
	client.Client
	// Reader lists BareMetalHosts around the cache (the Replace rung's spare), as host
	// releases do: they may live in a namespace the cache does not watch.
	Reader   client.Reader
	Recorder record.EventRecorder
	Options  translator.Options
	Nodes    NodeSource
	now      clock
}

func (r *remediator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Its events go out once the status recording the rung is written: a refused write
	// decides the same rung again (the Workflow, named after the episode, is found, not made).
	this := *r
	events := &heldEvents{EventRecorder: r.Recorder}
	this.Recorder = events
	return reconcileStatus(ctx, r.Client, req, this.reconcile, events.flush)
}

func (r *remediator) reconcile(ctx context.Context, p *bpav1.Provisioning) (ctrl.Result, error) {
	if p.Spec.Remediation == nil {
		// Turned off: a record would go stale unseen.
		p.Status.Remediation = nil
		meta.RemoveStatusCondition(&p.Status.Conditions, bpav1.ConditionRemediating)
		return ctrl.Result{}, nil
	}
	next := ctrl.Result{RequeueAfter: remediationPoll}
	wfs := &wfv1.WorkflowList{}
	if err := r.List(ctx, wfs, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.RemediationOfLabel: p.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if !checkable(p) {
		return next, nil // a run of the spec is pending: the cluster is in its hands
	}
	nodes, err := r.Nodes(ctx, p)
	if err != nil {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionRemediating, metav1.ConditionFalse, bpav1.ReasonNodesUnread, err.Error())
		return next, nil
	}
	now := r.now.time()
	st := remediationStatus(p)
	health := nodeHealth(p.Status.Applied.Hosts, nodes, st, now)
	pol, err := policy.Get(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	rp := remediation.PolicyOf(p.Spec.Remediation)
	rp.Rungs = slices.DeleteFunc(slices.Clone(rp.Rungs), func(g bpav1.RemediationRung) bool { return !takeable(g, pol, p.Namespace) })
	d := remediation.Decide(remediation.Input{Nodes: health, Policy: rp, Records: st.Nodes,
		LastActionAt: timeOf(st.LastActionAt), InFlight: inFlight(p, wfs.Items) || replacing(p), Now: now})
	keepRecords(st, health, now)
	r.exhausted(p, st, d)
	if d.Action == nil {
		r.hold(p, d)
		return next, nil
	}
	return next, r.act(ctx, p, st, d)
}

// act creates the rung's Workflow (rungActions) and records it.
func (r *remediator) act(ctx context.Context, p *bpav1.Provisioning, st *bpav1.RemediationStatus, d remediation.Decision) error {
	a := d.Action
	if a.Rung == bpav1.RungReplace {
		return r.replace(ctx, p, st, d)
	}
	rung := rungActions[a.Rung]
	o, err := siteOptions(ctx, r.Client, p, r.Options)
	var wf *wfv1.Workflow
	if err == nil {
		wf, err = rung.workflow(p, o, *a)
	}
	var refused *translator.Refusal
	if errors.As(err, &refused) {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionRemediating, metav1.ConditionFalse, bpav1.ReasonInvalidSpec, "not remediated: "+refused.Error())
		return nil
	} else if err != nil {
		return err
	}
	if err := createOwned(ctx, r.Client, p, wf); err != nil {
		return err
	}
	now := metav1.NewTime(r.now.time())
	rec := recordOf(st, a.Node)
	rec.Since, rec.Rung, rec.Attempts, rec.LastActionAt, rec.Workflow = &metav1.Time{Time: a.Since}, a.Rung, a.Attempt, &now, wf.Name
	st.LastActionAt = &now
	r.Recorder.Event(p, corev1.EventTypeNormal, rung.event, d.Message+": Workflow "+wf.Name)
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionRemediating, metav1.ConditionTrue, bpav1.ReasonRemediating, d.Message)
	return nil
}

// hold records why nothing is done, with a Warning event when a hold for too many unhealthy
// workers begins.
func (r *remediator) hold(p *bpav1.Provisioning, d remediation.Decision) {
	was := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionRemediating)
	if d.Reason == bpav1.ReasonRemediationHeld && (was == nil || was.Reason != d.Reason) {
		r.Recorder.Event(p, corev1.EventTypeWarning, bpav1.ReasonRemediationHeld, d.Message)
	}
	status := metav1.ConditionFalse
	if d.Reason == bpav1.ReasonRemediationInProgress {
		status = metav1.ConditionTrue // a rung runs
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionRemediating, status, d.Reason, d.Message)
}

// exhausted marks the nodes with no rung left, with a Warning event for each when it begins.
func (r *remediator) exhausted(p *bpav1.Provisioning, st *bpav1.RemediationStatus, d remediation.Decision) {
	for _, n := range d.Exhausted {
		rec := recordOf(st, n)
		if !rec.Exhausted {
			rec.Exhausted = true
			r.Recorder.Eventf(p, corev1.EventTypeWarning, bpav1.ReasonRemediationExhausted,
				"node %s: no rung left after %s (attempt %d); look at the host", n, rec.Rung, rec.Attempts)
		}
	}
}

// nodeHealth is each applied host's Node as the decision reads it: control-plane (and etcd)
// nodes marked so; a host with no Node, or a Node with no Ready condition, unhealthy since
// its record's episode, or now (else its episode would begin anew at every poll).
func nodeHealth(hosts []bpav1.HostStatus, nodes []corev1.Node, st *bpav1.RemediationStatus, now time.Time) []remediation.Node {
	var out []remediation.Node
	for _, h := range bpav1.KeptHosts(hosts) {
		n := remediation.Node{Name: h.Name, ControlPlane: slices.Contains(h.Roles, "master") || h.Etcd, Since: now}
		if c := readyOf(nodes, h.Name); c != nil {
			n.Ready, n.Since = c.Status, c.LastTransitionTime.Time
		} else if rec := findRecord(st, h.Name); rec != nil && rec.Since != nil {
			n.Since = rec.Since.Time
		}
		out = append(out, n)
	}
	return out
}

// readyOf is the Ready condition of the Node named name, nil if it has none or there is no
// such Node.
func readyOf(nodes []corev1.Node, name string) *corev1.NodeCondition {
	i := slices.IndexFunc(nodes, func(x corev1.Node) bool { return x.Name == name })
	if i < 0 {
		return nil
	}
	for j, c := range nodes[i].Status.Conditions {
		if c.Type == corev1.NodeReady {
			return &nodes[i].Status.Conditions[j]
		}
	}
	return nil
}

// keepRecords keeps a record for every unhealthy worker (its episode's start) and drops a
// healthy one's once its last rung settled (remediation.SettleWindow), but for its
// replacement within remediation.ReplaceWindow.
func keepRecords(st *bpav1.RemediationStatus, health []remediation.Node, now time.Time) {
	for _, n := range health {
		if n.ControlPlane {
			continue
		}
		rec := findRecord(st, n.Name)
		if n.Ready == corev1.ConditionTrue {
			// Ready again: the record goes once the last rung has settled (it worked), but
			// for a replacement; until then it is kept, so a relapse climbs on.
			if rec != nil && !remediation.Unsettled(rec, now) {
				*rec = bpav1.NodeRemediation{Node: n.Name, ReplacedAt: rec.ReplacedAt}
			}
			continue
		}
		if rec == nil {
			rec = recordOf(st, n.Name)
		}
		switch {
		case rec.Since != nil && rec.Since.Time.Equal(n.Since):
		case rec.Rung != "" && remediation.Unsettled(rec, now):
			// A relapse before the last rung settled: the same ladder, from the new episode.
			rec.Since = &metav1.Time{Time: n.Since}
		default:
			// A new episode: what the last one did no longer counts, but a replacement does.
			*rec = bpav1.NodeRemediation{Node: n.Name, Since: &metav1.Time{Time: n.Since}, ReplacedAt: rec.ReplacedAt}
		}
	}
	st.Nodes = slices.DeleteFunc(st.Nodes, func(r bpav1.NodeRemediation) bool {
		return r.Since == nil && (r.ReplacedAt == nil || now.Sub(r.ReplacedAt.Time) >= remediation.ReplaceWindow)
	})
}

// inFlight reports whether a remediation Workflow of p has not finished.
func inFlight(p *bpav1.Provisioning, wfs []wfv1.Workflow) bool {
	return slices.ContainsFunc(wfs, func(wf wfv1.Workflow) bool {
		return metav1.IsControlledBy(&wf, p) && !wf.Status.Phase.Completed()
	})
}

func remediationStatus(p *bpav1.Provisioning) *bpav1.RemediationStatus {
	if p.Status.Remediation == nil {
		p.Status.Remediation = &bpav1.RemediationStatus{}
	}
	return p.Status.Remediation
}

func findRecord(st *bpav1.RemediationStatus, node string) *bpav1.NodeRemediation {
	for i := range st.Nodes {
		if st.Nodes[i].Node == node {
			return &st.Nodes[i]
		}
	}
	return nil
}

// recordOf is node's record, added if it has none.
func recordOf(st *bpav1.RemediationStatus, node string) *bpav1.NodeRemediation {
	if rec := findRecord(st, node); rec != nil {
		return rec
	}
	st.Nodes = append(st.Nodes, bpav1.NodeRemediation{Node: node})
	return &st.Nodes[len(st.Nodes)-1]
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// SetupRemediation registers the remediator with its detection.
func SetupRemediation(mgr ctrl.Manager, opts translator.Options, nodes NodeSource) error {
	r := &remediator{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor("bpa-controller"), Options: opts, Nodes: nodes}
	return ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Provisioning{}, builder.WithPredicates(predicate.NewPredicateFuncs(remediated))).
		Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.RemediationOfLabel))).
		Named("remediation").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(remediationWorkers, mgr.GetControllerOptions().MaxConcurrentReconciles)}).
		Complete(r)
}

// remediated says whether the remediator has anything to do with o: spec.remediation is set,
// or what it wrote (status.remediation, or the Remediating condition alone, as NodesUnread
// leaves it) is still to clear.
func remediated(o client.Object) bool {
	p, ok := o.(*bpav1.Provisioning)
	return ok && (p.Spec.Remediation != nil || p.Status.Remediation != nil ||
		meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionRemediating) != nil)
}
