package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/remediation"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// The Replace rung (docs/remediation.md): the remediator records the worker in
// status.applied.replacements, and the Provisioning's runs do the rest with the unchanged
// spec. The first removes the node from its dead host without drain (the planner), after
// which its claim is released with the unhealthy mark (releaseRemoved); the second adds it
// back under its name on a spare (discover-hosts no longer pins it, and the marked host is
// unfit). The record is in the Provisioning's status because only the controller writes
// that: a CR author cannot start a replacement, and the host mark is written by the
// controller in the release itself, where a step cannot wash it.

// replace takes the Replace rung on d's node: when a spare host matches its entry, it
// records the replacement (the runs follow); else it holds with RemediationNoSpare and
// touches nothing.
func (r *remediator) replace(ctx context.Context, p *bpav1.Provisioning, st *bpav1.RemediationStatus, d remediation.Decision) error {
	a := d.Action
	spare, err := r.spare(ctx, p, a.Node)
	if err != nil {
		return err
	}
	if spare.why != "" {
		msg := fmt.Sprintf("Replace of node %s is due, but nothing was done: %s", a.Node, spare.why)
		if was := remediating(p); was == nil || was.Reason != bpav1.ReasonRemediationNoSpare || was.Message != msg {
			r.Recorder.Event(p, corev1.EventTypeWarning, bpav1.ReasonRemediationNoSpare, msg)
		}
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionRemediating, metav1.ConditionFalse, bpav1.ReasonRemediationNoSpare, msg)
		return nil
	}
	now := metav1.NewTime(r.now.time())
	applied := p.Status.Applied
	if !slices.ContainsFunc(applied.Replacements, func(x bpav1.Replacement) bool { return x.Node == a.Node }) {
		applied.Replacements = append(applied.Replacements, bpav1.Replacement{Node: a.Node, BareMetalHost: spare.dead, DecidedAt: now})
	}
	run := translator.WorkflowName(p.Name, workflowKind["Provisioning"], p.Generation, p.Annotations[bpav1.RerunAnnotation], bpav1.ReplacementRevision(applied))
	rec := recordOf(st, a.Node)
	rec.Since, rec.Rung, rec.Attempts, rec.LastActionAt, rec.Workflow = &metav1.Time{Time: a.Since}, a.Rung, a.Attempt, &now, run
	rec.ReplacedAt = &now
	st.LastActionAt = &now
	msg := fmt.Sprintf("%s: Workflow %s removes it from BareMetalHost %s without drain, then a run adds it back on a spare host (%s now)", d.Message, run, spare.dead, spare.host)
	r.Recorder.Event(p, corev1.EventTypeNormal, bpav1.EventRemediationReplace, msg)
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionRemediating, metav1.ConditionTrue, bpav1.ReasonRemediating, msg)
	return nil
}

// spareHost is the host a replaced node would take (host), its dead one, or why there is
// none.
type spareHost struct{ host, dead, why string }

// spare finds the host the run that adds node back would choose, as discover-hosts will:
// every BareMetalHost of the Provisioning's host namespace, node's entry, its dead host
// released and marked.
func (r *remediator) spare(ctx context.Context, p *bpav1.Provisioning, node string) (spareHost, error) {
	var out spareHost
	i := slices.IndexFunc(p.Status.Applied.Hosts, func(h bpav1.HostStatus) bool { return h.Name == node && !h.Removing })
	if i < 0 {
		return spareHost{why: "it is not in status.applied"}, nil
	}
	if h := p.Status.Applied.Hosts[i]; slices.Contains(h.Roles, "master") || h.Etcd || h.BareMetalHost == "" {
		return spareHost{why: "only a worker with a BareMetalHost is replaced"}, nil
	}
	out.dead = p.Status.Applied.Hosts[i].BareMetalHost
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return spareHost{why: err.Error()}, nil
	}
	hosts := &metal3v1.BareMetalHostList{}
	if err := r.Reader.List(ctx, hosts, client.InNamespace(p.HostNamespace())); err != nil && !meta.IsNoMatchError(err) {
		return out, err
	}
	out.host, err = hostmatch.Spare(p, hostmatch.ClaimantOf(p, cluster), hosts.Items, node)
	if err != nil {
		out.why = err.Error()
	}
	return out, nil
}

// withReplacements has k (the Provisioning's) start the runs a replacement needs: the
// spec is unchanged, and the replacement's state names the runs (bpav1.ReplacementRevision).
func withReplacements(k *runKind) {
	k.revision = func(_ context.Context, obj runObject) (string, error) {
		return bpav1.ReplacementRevision(obj.(*bpav1.Provisioning).Status.Applied), nil
	}
	k.handledRevision = func(obj runObject) string { return obj.(*bpav1.Provisioning).Status.LastHandledReplacement }
	k.setRevision = func(obj runObject, rev string) { obj.(*bpav1.Provisioning).Status.LastHandledReplacement = rev }
}

// replacing says whether a replacement of p's has runs to come: the rung is still in flight.
func replacing(p *bpav1.Provisioning) bool {
	return p.Status.Applied != nil && len(p.Status.Applied.Replacements) > 0
}

// dropReplaced forgets the replacements that are done: their node is applied again, on
// another host, or, removed from its dead host, is no longer in the spec (an edit took it
// out meanwhile), so no run will add it back.
func dropReplaced(p *bpav1.Provisioning) {
	a := p.Status.Applied
	if a == nil || len(a.Replacements) == 0 {
		return
	}
	desired, err := hostmatch.Desired(p)
	a.Replacements = slices.DeleteFunc(a.Replacements, func(r bpav1.Replacement) bool {
		if r.Leaving(a) {
			return false
		}
		applied := slices.ContainsFunc(a.Hosts, func(h bpav1.HostStatus) bool { return h.Name == r.Node })
		wanted := err != nil || slices.ContainsFunc(desired, func(n hostmatch.Node) bool { return n.Name == r.Node })
		return applied || !wanted
	})
	if len(a.Replacements) == 0 {
		a.Replacements = nil
	}
}

// unhealthyMark is the bpav1.HostUnhealthyAnnotation a release of host gives it: set when a
// replacement of p's names it as dead, "" otherwise.
func unhealthyMark(p *bpav1.Provisioning, host string) string {
	if p.Status.Applied == nil {
		return ""
	}
	for _, r := range p.Status.Applied.Replacements {
		if r.BareMetalHost == host {
			return fmt.Sprintf("node %s of Provisioning %s/%s stayed unhealthy and was replaced at %s", r.Node, p.Namespace, p.Name, r.DecidedAt.UTC().Format(time.RFC3339))
		}
	}
	return ""
}

// replacementChanged lets a Provisioning whose replacements need another run reach the
// run reconciler: the remediator's status write, or the fold of the removal, changes no
// generation or annotation.
var replacementChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*bpav1.Provisioning)
		cur, okNew := e.ObjectNew.(*bpav1.Provisioning)
		return okOld && okNew && bpav1.ReplacementRevision(old.Status.Applied) != bpav1.ReplacementRevision(cur.Status.Applied)
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// remediating is p's Remediating condition, nil without one.
func remediating(p *bpav1.Provisioning) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionRemediating)
}
