package controller

import (
	"encoding/json"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func planned(t *testing.T, c *translator.ChangePlan) *wfv1.Workflow {
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	return &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Labels: map[string]string{translator.GenerationLabel: "3"},
		Annotations: map[string]string{translator.PlanAnnotation: string(raw)}}}
}

// TestAppliedFollowsSucceededSteps: a node is applied once the step that adds it succeeded,
// and leaves once the one that removes it did; folding the same observation twice changes
// nothing; the versions move only when the whole run succeeded.
func TestAppliedFollowsSucceededSteps(t *testing.T) {
	c := &translator.ChangePlan{KubesprayVersion: "v2.28.0", KubernetesVersion: "1.31.4", Settings: "new",
		Steps: []translator.Step{
			{Name: translator.StepRemoveWorkers, Nodes: []string{"w1"}, Operations: []kubespray.Operation{{Playbook: kubespray.Remove}}},
			{Name: translator.StepScaleWorkers, Nodes: []string{"w3"}, Operations: []kubespray.Operation{{Playbook: kubespray.Facts}, {Playbook: kubespray.Scale}}},
		}}
	p := &bpav1.Provisioning{}
	p.Status.Applied = &bpav1.AppliedState{KubesprayVersion: "v2.28.0", KubernetesVersion: "1.30.4", Settings: "old",
		Hosts: []bpav1.HostStatus{{Name: "m1"}, {Name: "w1"}, {Name: "w2"}}}
	hosts := []bpav1.HostStatus{{Name: "m1"}, {Name: "w1", Removing: true}, {Name: "w2"}, {Name: "w3", IP: "10.0.0.3"}}
	now := metav1.NewTime(time.Now())
	o := Observation{Phase: bpav1.PhaseRunning, Hosts: hosts, Steps: []bpav1.StepStatus{
		{Name: translator.StepRemoveWorkers, Phase: "Succeeded", StartedAt: &now, FinishedAt: &now},
		{Name: translator.StepScaleWorkers, Phase: "Failed", StartedAt: &now, FinishedAt: &now},
	}}
	wf := planned(t, c)
	observePlan(p, wf, o)
	names := func() []string {
		var out []string
		for _, h := range p.Status.Applied.Hosts {
			out = append(out, h.Name)
		}
		return out
	}
	assert.Equal(t, []string{"m1", "w2"}, names(), "w1 left; w3 is not applied while its step failed")
	assert.Equal(t, "1.30.4", p.Status.Applied.KubernetesVersion)
	require.Len(t, p.Status.Operations, 2)
	assert.Equal(t, "Failed", p.Status.Operations[1].Result)
	assert.Equal(t, []bpav1.OperationStatus{
		{Name: "remove-workers", Playbooks: []string{"remove-node"}, Nodes: []string{"w1"}, Phase: "Succeeded"},
		{Name: "scale-workers", Playbooks: []string{"facts", "scale"}, Nodes: []string{"w3"}, Phase: "Failed"},
	}, p.Status.Plan)

	rec := record.NewFakeRecorder(10)
	before := append([]bpav1.OperationRecord(nil), p.Status.Operations...)
	// argo retry: the failed step runs again and succeeds.
	o.Phase, o.Steps[1].Phase = bpav1.PhaseSucceeded, "Succeeded"
	observePlan(p, wf, o)
	observePlan(p, wf, o)
	assert.Equal(t, []string{"m1", "w2", "w3"}, names())
	assert.Equal(t, "10.0.0.3", p.Status.Applied.Hosts[2].IP)
	assert.Equal(t, "1.31.4", p.Status.Applied.KubernetesVersion, "the run succeeded: the plan's versions apply")
	assert.Equal(t, "new", p.Status.Applied.Settings)
	assert.Equal(t, int64(3), p.Status.Applied.Generation)
	require.Len(t, p.Status.Operations, 2, "a retried step updates its record")
	reportOperations(rec, p, before)
	require.Len(t, rec.Events, 1, "one event: the retried step now succeeded")
	assert.Contains(t, <-rec.Events, "OperationSucceeded scale-workers succeeded (w3)")
}

func TestOperationsKeepTheLastTen(t *testing.T) {
	p := &bpav1.Provisioning{}
	for i := range 12 {
		recordOperation(p, bpav1.OperationRecord{Name: "scale-workers", Workflow: "wf-" + string(rune('a'+i)), Result: "Succeeded"})
	}
	require.Len(t, p.Status.Operations, maxOperations)
	assert.Equal(t, "wf-c", p.Status.Operations[0].Workflow)
	assert.Equal(t, "wf-l", p.Status.Operations[9].Workflow)
}
