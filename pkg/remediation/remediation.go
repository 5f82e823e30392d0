// Package remediation decides graded remediation of a cluster's workers: given each node's
// health, spec.remediation, what was done so far (status.remediation) and the time, it
// returns at most one rung to take now, or why none is taken. It is pure (no I/O, no
// clock): the controller reads the inputs, writes status, and runs the rung as a Workflow,
// so a controller restart decides again from the same record and never repeats a rung.
package remediation

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ReplaceWindow is how long after a node's replacement another Replace of it is refused
// (RemediationExhausted): a spare that dies as its predecessor did points at something
// replacing hosts will not fix, and trying again would burn through the spares.
const ReplaceWindow = 24 * time.Hour

// SettleWindow is how long a node must stay Ready after a rung for the rung to count as
// having worked. A node unhealthy again sooner goes on up its ladder from the rung it
// reached, rather than starting again at the first: a node that flaps (Ready for a moment
// after each restart) would otherwise be restarted once per cooldown forever.
const SettleWindow = time.Hour

// Ladder is the order rungs are climbed in.
var Ladder = []bpav1.RemediationRung{bpav1.RungRestart, bpav1.RungReboot, bpav1.RungReplace}

// Node is one node's health as the application cluster reports it.
type Node struct {
	Name         string
	ControlPlane bool
	// Ready is the Node's Ready condition: True, False, Unknown; "" for an applied worker
	// with no Node at all.
	Ready corev1.ConditionStatus
	// Since is the condition's lastTransitionTime (for a worker with no Node: when it was
	// first seen missing).
	Since time.Time
}

// Policy is spec.remediation with its defaults applied (PolicyOf).
type Policy struct {
	UnhealthyFor, Cooldown time.Duration
	MaxUnhealthy           intstr.IntOrString
	Rungs                  []bpav1.RemediationRung
}

// PolicyOf is spec.remediation with the defaults of unset fields; rungs in Ladder's order.
func PolicyOf(r *bpav1.Remediation) Policy {
	p := Policy{
		UnhealthyFor: bpav1.DefaultRemediationUnhealthyFor, Cooldown: bpav1.DefaultRemediationCooldown,
		MaxUnhealthy: intstr.FromString(bpav1.DefaultRemediationMaxUnhealthy), Rungs: slices.Clone(Ladder),
	}
	if r == nil {
		return p
	}
	if r.UnhealthyFor != nil {
		p.UnhealthyFor = r.UnhealthyFor.Duration
	}
	if r.Cooldown != nil {
		p.Cooldown = r.Cooldown.Duration
	}
	if r.MaxUnhealthy != nil {
		p.MaxUnhealthy = *r.MaxUnhealthy
	}
	if len(r.Rungs) > 0 {
		p.Rungs = nil
		for _, rung := range Ladder {
			if slices.Contains(r.Rungs, rung) {
				p.Rungs = append(p.Rungs, rung)
			}
		}
	}
	return p
}

// Input is everything one decision reads.
type Input struct {
	Nodes  []Node
	Policy Policy
	// Records are status.remediation.nodes; LastActionAt status.remediation.lastActionAt.
	Records      []bpav1.NodeRemediation
	LastActionAt time.Time
	// InFlight: a remediation Workflow of the cluster has not finished.
	InFlight bool
	Now      time.Time
}

// Action is one rung to take on one node, in the episode that began at Since.
type Action struct {
	Node    string
	Rung    bpav1.RemediationRung
	Since   time.Time
	Attempt int32
}

// Decision is at most one Action; Reason and Message say why (bpav1.ReasonRemediating with an
// Action, else the hold). Unhealthy names the workers past unhealthyFor, Exhausted those
// with no rung left.
type Decision struct {
	Action    *Action
	Reason    string
	Message   string
	Unhealthy []string
	Exhausted []string
}

// Decide returns the decision for in. Control-plane nodes are never acted on, nor counted.
func Decide(in Input) Decision {
	workers, unhealthy, due := dueWorkers(in)
	d := Decision{Reason: bpav1.ReasonWorkersHealthy, Message: "no worker has been unhealthy for " + in.Policy.UnhealthyFor.String()}
	for _, n := range due {
		d.Unhealthy = append(d.Unhealthy, n.Name)
	}
	if len(due) == 0 {
		return d
	}
	// Every worker not Ready counts, due or not yet: workers failing seconds apart are one
	// fault, and the first one due must not be acted on alone.
	if limit := MaxUnhealthy(in.Policy.MaxUnhealthy, workers); unhealthy > limit {
		d.Reason = bpav1.ReasonRemediationHeld
		d.Message = fmt.Sprintf("%d of %d workers unhealthy, more than maxUnhealthy %s allows (%d): no action", unhealthy, workers, in.Policy.MaxUnhealthy.String(), limit)
		return d
	}
	if in.InFlight {
		// Before anything else: the rung that runs may still bring its node back.
		d.Reason, d.Message = bpav1.ReasonRemediationInProgress, "a remediation Workflow of the cluster still runs"
		return d
	}
	var next *Action
	waiting := false
	for _, n := range due {
		r := record(in.Records, n.Name)
		a, ok := nextRung(n, r, in)
		switch {
		case !ok && r != nil && r.LastActionAt != nil && in.Now.Sub(r.LastActionAt.Time) < in.Policy.Cooldown:
			waiting = true // its last rung still has the cooldown to work
		case !ok:
			d.Exhausted = append(d.Exhausted, n.Name)
		case next == nil:
			next = a
		}
	}
	return withAction(d, next, waiting, in)
}

// withAction applies the cluster-wide guards to the first node's next rung.
func withAction(d Decision, next *Action, waiting bool, in Input) Decision {
	switch {
	case next == nil && waiting:
		d.Reason, d.Message = bpav1.ReasonRemediationCoolingDown, "the last rung taken is given the cooldown to work"
	case next == nil:
		d.Reason, d.Message = bpav1.ReasonRemediationExhausted, fmt.Sprintf("no rung left for %v: look at the hosts", d.Exhausted)
	case !in.LastActionAt.IsZero() && in.Now.Sub(in.LastActionAt) < in.Policy.Cooldown:
		d.Reason = bpav1.ReasonRemediationCoolingDown
		d.Message = fmt.Sprintf("the last rung was taken at %s; the next not before %s", in.LastActionAt.UTC().Format(time.RFC3339),
			in.LastActionAt.Add(in.Policy.Cooldown).UTC().Format(time.RFC3339))
	default:
		d.Action, d.Reason = next, bpav1.ReasonRemediating
		d.Message = fmt.Sprintf("%s of node %s, unhealthy since %s (attempt %d)", next.Rung, next.Node, next.Since.UTC().Format(time.RFC3339), next.Attempt)
	}
	return d
}

// dueWorkers counts the workers and those not Ready, and returns those not Ready for at
// least unhealthyFor, longest unhealthy first (then by name), so the oldest episode is
// served first.
func dueWorkers(in Input) (workers, unhealthy int, due []Node) {
	for _, n := range in.Nodes {
		if n.ControlPlane {
			continue
		}
		workers++
		if n.Ready == corev1.ConditionTrue {
			continue
		}
		unhealthy++
		if !n.Since.IsZero() && in.Now.Sub(n.Since) >= in.Policy.UnhealthyFor {
			due = append(due, n)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].Since.Equal(due[j].Since) {
			return due[i].Since.Before(due[j].Since)
		}
		return due[i].Name < due[j].Name
	})
	return workers, unhealthy, due
}

// MaxUnhealthy is maxUnhealthy as a count of workers: a percentage rounded down, as Cluster
// API's MachineHealthCheck scales it, but at least one (for any percentage above 0%), so
// that the one dead worker of a small edge cluster is remediated under the default.
func MaxUnhealthy(v intstr.IntOrString, workers int) int {
	if v.Type == intstr.Int {
		return v.IntValue()
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, workers, false)
	if err != nil {
		return 0 // the CRD refuses such a value; hold rather than guess
	}
	if pct, _ := intstr.GetScaledValueFromIntOrPercent(&v, 100, false); pct == 0 {
		return 0 // "0%" says never
	}
	return max(n, 1)
}

// nextRung is the node's next rung in its current episode, or false when none is left.
func nextRung(n Node, r *bpav1.NodeRemediation, in Input) (*Action, bool) {
	a := &Action{Node: n.Name, Since: n.Since, Attempt: 1}
	start := 0
	if r != nil && r.Rung != "" && (r.Since != nil && r.Since.Time.Equal(n.Since) || Unsettled(r, in.Now)) {
		// The same episode, or a new one before the last rung settled: the rung after the
		// last one taken.
		i := slices.Index(in.Policy.Rungs, r.Rung)
		start, a.Attempt = i+1, r.Attempts+1
		if i < 0 { // a rung since removed from the spec: carry on from the ladder's next one
			start = nextAllowed(in.Policy.Rungs, r.Rung)
		}
	}
	if start >= len(in.Policy.Rungs) {
		return nil, false
	}
	a.Rung = in.Policy.Rungs[start]
	if a.Rung == bpav1.RungReplace && r != nil && r.ReplacedAt != nil && in.Now.Sub(r.ReplacedAt.Time) < ReplaceWindow {
		return nil, false
	}
	return a, true
}

// Unsettled says whether r's last rung was taken within SettleWindow of now: its node has
// not yet shown that the rung worked, so a new episode goes on up the same ladder.
func Unsettled(r *bpav1.NodeRemediation, now time.Time) bool {
	return r.LastActionAt != nil && now.Sub(r.LastActionAt.Time) < SettleWindow
}

// nextAllowed is the index in rungs of the first rung climbed after last on the ladder.
func nextAllowed(rungs []bpav1.RemediationRung, last bpav1.RemediationRung) int {
	after := slices.Index(Ladder, last)
	for i, r := range rungs {
		if slices.Index(Ladder, r) > after {
			return i
		}
	}
	return len(rungs)
}

func record(records []bpav1.NodeRemediation, node string) *bpav1.NodeRemediation {
	for i := range records {
		if records[i].Node == node {
			return &records[i]
		}
	}
	return nil
}
