package remediation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func mt(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

func healthy(name string) Node {
	return Node{Name: name, Ready: corev1.ConditionTrue, Since: ago(time.Hour)}
}

func down(name string, for_ time.Duration) Node {
	return Node{Name: name, Ready: corev1.ConditionUnknown, Since: ago(for_)}
}

func master(n Node) Node { n.ControlPlane = true; return n }

// cluster is a master and three workers, w2 in the given state.
func cluster(w2 Node) []Node {
	return []Node{master(healthy("m1")), healthy("w1"), w2, healthy("w3")}
}

// TestDecide is the decision table: each guard, each rung, the episode's record, and a
// node that would loop.
func TestDecide(t *testing.T) {
	policy := PolicyOf(nil)
	for _, x := range []struct {
		name      string
		in        Input
		reason    string
		action    *Action
		exhausted []string
	}{
		{name: "all healthy", in: Input{Nodes: cluster(healthy("w2"))}, reason: bpav1.ReasonWorkersHealthy},
		{name: "unhealthy, not yet for unhealthyFor", in: Input{Nodes: cluster(down("w2", 4*time.Minute))}, reason: bpav1.ReasonWorkersHealthy},
		{name: "NotReady (False) counts as Unknown does", in: Input{Nodes: cluster(Node{Name: "w2", Ready: corev1.ConditionFalse, Since: ago(5 * time.Minute)})},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungRestart, Since: ago(5 * time.Minute), Attempt: 1}},
		{name: "a worker with no Node, missing long enough", in: Input{Nodes: cluster(Node{Name: "w2", Since: ago(6 * time.Minute)})},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungRestart, Since: ago(6 * time.Minute), Attempt: 1}},
		{name: "control-plane nodes never", in: Input{Nodes: []Node{master(down("m1", time.Hour)), healthy("w1")}}, reason: bpav1.ReasonWorkersHealthy},
		{name: "second rung of the same episode after the cooldown",
			in: Input{Nodes: cluster(down("w2", 20*time.Minute)), LastActionAt: ago(11 * time.Minute),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(20 * time.Minute)), Rung: bpav1.RungRestart, Attempts: 1}}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungReboot, Since: ago(20 * time.Minute), Attempt: 2}},
		{name: "within the cooldown: nothing",
			in: Input{Nodes: cluster(down("w2", 20*time.Minute)), LastActionAt: ago(9 * time.Minute),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(20 * time.Minute)), Rung: bpav1.RungRestart, Attempts: 1}}},
			reason: bpav1.ReasonRemediationCoolingDown},
		{name: "a new episode starts at the first rung again",
			in: Input{Nodes: cluster(down("w2", 6*time.Minute)), LastActionAt: ago(time.Hour),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(2 * time.Hour)), Rung: bpav1.RungReboot, Attempts: 2}}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungRestart, Since: ago(6 * time.Minute), Attempt: 1}},
		{name: "unhealthy again before the last rung settled: the ladder goes on, never a loop",
			in: Input{Nodes: cluster(down("w2", 6*time.Minute)), LastActionAt: ago(20 * time.Minute),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(time.Hour)), Rung: bpav1.RungRestart, Attempts: 1, LastActionAt: mt(ago(20 * time.Minute))}}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungReboot, Since: ago(6 * time.Minute), Attempt: 2}},
		{name: "unhealthy again after the last rung settled: the first rung",
			in: Input{Nodes: cluster(down("w2", 6*time.Minute)), LastActionAt: ago(2 * time.Hour),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(3 * time.Hour)), Rung: bpav1.RungRestart, Attempts: 1, LastActionAt: mt(ago(2 * time.Hour))}}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungRestart, Since: ago(6 * time.Minute), Attempt: 1}},
		{name: "a Workflow in flight: nothing", in: Input{Nodes: cluster(down("w2", time.Hour)), InFlight: true}, reason: bpav1.ReasonRemediationInProgress},
		{name: "in flight before exhausted: the last rung may still work",
			in: Input{Nodes: cluster(down("w2", 2*time.Hour)), InFlight: true, LastActionAt: ago(time.Minute),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(2 * time.Hour)), Rung: bpav1.RungReplace, Attempts: 3, LastActionAt: mt(ago(time.Minute))}}},
			reason: bpav1.ReasonRemediationInProgress},
		{name: "the last rung within the cooldown: not yet exhausted",
			in: Input{Nodes: cluster(down("w2", 2*time.Hour)), LastActionAt: ago(5 * time.Minute),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(2 * time.Hour)), Rung: bpav1.RungReplace, Attempts: 3, LastActionAt: mt(ago(5 * time.Minute))}}},
			reason: bpav1.ReasonRemediationCoolingDown},
		{name: "every rung taken: exhausted",
			in: Input{Nodes: cluster(down("w2", 2*time.Hour)), LastActionAt: ago(time.Hour),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(2 * time.Hour)), Rung: bpav1.RungReplace, Attempts: 3}}},
			reason: bpav1.ReasonRemediationExhausted, exhausted: []string{"w2"}},
		{name: "a second Replace within the window: exhausted, never a loop",
			in: Input{Nodes: cluster(down("w2", 2*time.Hour)), LastActionAt: ago(time.Hour),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(2 * time.Hour)), Rung: bpav1.RungReboot, Attempts: 2, ReplacedAt: mt(ago(5 * time.Hour))}}},
			reason: bpav1.ReasonRemediationExhausted, exhausted: []string{"w2"}},
		{name: "a Replace after the window is allowed",
			in: Input{Nodes: cluster(down("w2", 2*time.Hour)), LastActionAt: ago(time.Hour),
				Records: []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(2 * time.Hour)), Rung: bpav1.RungReboot, Attempts: 2, ReplacedAt: mt(ago(25 * time.Hour))}}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungReplace, Since: ago(2 * time.Hour), Attempt: 3}},
		{name: "an exhausted node does not block another",
			in: Input{Nodes: []Node{master(healthy("m1")), down("w1", 3*time.Hour), down("w2", 10*time.Minute), healthy("w3"), healthy("w4"), healthy("w5")},
				Records: []bpav1.NodeRemediation{{Node: "w1", Since: mt(ago(3 * time.Hour)), Rung: bpav1.RungReplace, Attempts: 3}}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungRestart, Since: ago(10 * time.Minute), Attempt: 1}, exhausted: []string{"w1"}},
		{name: "two of three workers beyond 40%: held",
			in:     Input{Nodes: []Node{master(healthy("m1")), down("w1", time.Hour), down("w2", time.Hour), healthy("w3")}},
			reason: bpav1.ReasonRemediationHeld},
		{name: "one due, another just gone NotReady: held (one fault, seconds apart)",
			in:     Input{Nodes: []Node{master(healthy("m1")), down("w1", time.Hour), down("w2", 10*time.Second), healthy("w3")}},
			reason: bpav1.ReasonRemediationHeld},
		{name: "the longest unhealthy first",
			in:     Input{Nodes: []Node{master(healthy("m1")), down("w1", 10*time.Minute), down("w2", time.Hour), healthy("w3"), healthy("w4"), healthy("w5")}},
			reason: bpav1.ReasonRemediating, action: &Action{Node: "w2", Rung: bpav1.RungRestart, Since: ago(time.Hour), Attempt: 1}},
	} {
		t.Run(x.name, func(t *testing.T) {
			in := x.in
			in.Policy, in.Now = policy, now
			d := Decide(in)
			assert.Equal(t, x.reason, d.Reason, d.Message)
			assert.Equal(t, x.action, d.Action, d.Message)
			assert.Equal(t, x.exhausted, d.Exhausted)
			assert.NotEmpty(t, d.Message)
		})
	}
}

// TestDecideRungsOfTheSpec: only the rungs the spec lists, in the ladder's order whatever
// the listed order; a rung removed from the spec mid-episode goes on from the next one.
func TestDecideRungsOfTheSpec(t *testing.T) {
	p := PolicyOf(&bpav1.Remediation{Rungs: []bpav1.RemediationRung{bpav1.RungReplace, bpav1.RungRestart}})
	assert.Equal(t, []bpav1.RemediationRung{bpav1.RungRestart, bpav1.RungReplace}, p.Rungs)
	rec := []bpav1.NodeRemediation{{Node: "w2", Since: mt(ago(time.Hour)), Rung: bpav1.RungRestart, Attempts: 1}}
	d := Decide(Input{Nodes: cluster(down("w2", time.Hour)), Policy: p, Records: rec, Now: now})
	assert.Equal(t, bpav1.RungReplace, d.Action.Rung, "Reboot is not in the spec: Restart, then Replace")

	p = PolicyOf(&bpav1.Remediation{Rungs: []bpav1.RemediationRung{bpav1.RungReplace}})
	rec[0].Rung = bpav1.RungReboot // taken before the spec dropped Reboot
	d = Decide(Input{Nodes: cluster(down("w2", time.Hour)), Policy: p, Records: rec, Now: now})
	assert.Equal(t, bpav1.RungReplace, d.Action.Rung)
	rec[0].Rung = bpav1.RungReplace
	p = PolicyOf(&bpav1.Remediation{Rungs: []bpav1.RemediationRung{bpav1.RungRestart}})
	d = Decide(Input{Nodes: cluster(down("w2", time.Hour)), Policy: p, Records: rec, Now: now})
	assert.Equal(t, bpav1.ReasonRemediationExhausted, d.Reason, "past the only rung left")
}

// TestPolicyDefaults: spec.remediation: {} is 5m, 40%, 10m and every rung.
func TestPolicyDefaults(t *testing.T) {
	for _, r := range []*bpav1.Remediation{nil, {}} {
		p := PolicyOf(r)
		assert.Equal(t, 5*time.Minute, p.UnhealthyFor)
		assert.Equal(t, 10*time.Minute, p.Cooldown)
		assert.Equal(t, intstr.FromString("40%"), p.MaxUnhealthy)
		assert.Equal(t, Ladder, p.Rungs)
	}
	p := PolicyOf(nil)
	p.Rungs[0] = "changed"
	assert.Equal(t, bpav1.RungRestart, Ladder[0], "a policy's rungs are its own, never the Ladder")
	one := intstr.FromInt32(1)
	p = PolicyOf(&bpav1.Remediation{UnhealthyFor: &metav1.Duration{Duration: time.Minute}, Cooldown: &metav1.Duration{Duration: 2 * time.Minute}, MaxUnhealthy: &one})
	assert.Equal(t, Policy{UnhealthyFor: time.Minute, Cooldown: 2 * time.Minute, MaxUnhealthy: one, Rungs: Ladder}, p)
}

// TestMaxUnhealthy: a count as it is; a percentage of the workers rounded down (Cluster
// API's MachineHealthCheck) but at least one.
func TestMaxUnhealthy(t *testing.T) {
	for _, x := range []struct {
		v       intstr.IntOrString
		workers int
		want    int
	}{
		{intstr.FromString("40%"), 1, 1}, {intstr.FromString("40%"), 2, 1}, {intstr.FromString("40%"), 3, 1},
		{intstr.FromString("40%"), 5, 2}, {intstr.FromString("40%"), 10, 4}, {intstr.FromString("100%"), 7, 7},
		{intstr.FromString("0%"), 7, 0}, {intstr.FromString("1%"), 7, 1}, {intstr.FromInt32(0), 7, 0}, {intstr.FromInt32(3), 2, 3},
		{intstr.FromString("many"), 7, 0},
	} {
		assert.Equal(t, x.want, MaxUnhealthy(x.v, x.workers), "%s of %d", x.v.String(), x.workers)
	}
}
