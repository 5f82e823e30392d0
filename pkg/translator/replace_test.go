package translator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// TestPlanReplacement: a worker graded remediation replaces (status.applied.replacements)
// is, with the spec unchanged, first removed from its dead host without drain even though
// spec.nodeRemoval does not allow it (the first run), then, once it left status.applied,
// added back under its name (the second); a replacement that is done plans nothing. The
// plans are golden files (`go test ./pkg/translator -run TestPlanReplacement -update`).
func TestPlanReplacement(t *testing.T) {
	m1, w1, w2 := host("m1", true, true), host("w1", false, false), host("w2", false, false)
	spec := "masters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}]\nkubernetes: {version: 1.31.4}\n"
	a := appliedAs(t, spec, m1, w1, w2)
	a.Replacements = []bpav1.Replacement{{Node: "w1", BareMetalHost: w1.BareMetalHost, DecidedAt: metav1.NewTime(time.Unix(1795860341, 0))}}
	p := day2(t, spec, a)

	c := operations(t, p)
	assert.Equal(t, []wantStep{{translator.StepRemoveWorkers, []string{"w1"}, []kubespray.Playbook{kubespray.Remove}}}, steps(c))
	assert.True(t, c.Steps[0].AllowUngraceful, "the remediator decided the host is dead: no drain, whatever spec.nodeRemoval says")
	assert.True(t, c.Steps[0].Removes)
	assert.Contains(t, c.Steps[0].Reason, "graded remediation replaces w1")
	checkGolden(t, "testdata/golden/replacement-remove.plan.yaml", c)

	// The removal succeeded (verify saw the Node gone): w1 left status.applied.
	a.Hosts = []bpav1.HostStatus{m1, w2}
	c = operations(t, p)
	assert.Equal(t, []wantStep{{translator.StepScaleWorkers, []string{"w1"}, []kubespray.Playbook{kubespray.Facts, kubespray.Scale}}}, steps(c))
	assert.True(t, c.Steps[0].Adds)
	assert.Contains(t, c.Steps[0].Reason, "graded remediation's replacement")
	checkGolden(t, "testdata/golden/replacement-add.plan.yaml", c)

	// w1 joined on the spare; the controller drops the entry once it sees that.
	a.Hosts = []bpav1.HostStatus{m1, w2, {Name: "w1", Roles: []string{"worker"}, MAC: "00:00:00:00:00:99", BareMetalHost: "spare", IP: "10.0.0.9"}}
	c, err := translator.PlanChange(p)
	require.NoError(t, err)
	assert.Empty(t, c.Steps)
}

// TestPlanRefusesReplacingTheControlPlane: the planner does not trust status alone to
// remove a control-plane or etcd node kubespray cannot put back.
func TestPlanRefusesReplacingTheControlPlane(t *testing.T) {
	m1, m2, w1 := host("m1", true, true), host("m2", true, false), host("w1", false, false)
	spec := "masters: [{m1: null}, {m2: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}\n"
	a := appliedAs(t, spec, m1, m2, w1)
	a.Replacements = []bpav1.Replacement{{Node: "m2", BareMetalHost: m2.BareMetalHost, DecidedAt: metav1.Now()}}
	_, err := translator.PlanChange(day2(t, spec, a))
	var refused *translator.Refusal
	require.True(t, errors.As(err, &refused), "%v", err)
	assert.Equal(t, bpav1.ReasonReplaceRefused, refused.Reason)
	assert.Contains(t, refused.Message, "node m2 is a control-plane node without etcd")
}
