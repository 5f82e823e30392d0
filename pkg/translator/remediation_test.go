package translator_test

import (
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// TestRemediationWorkflowName: one name per provisioning, node, rung and episode, so a
// controller restarted mid-remediation finds its Workflow; any of them differing gives
// another name; a long CR name stays within Kubernetes' label length.
func TestRemediationWorkflowName(t *testing.T) {
	since := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	name := translator.RemediationWorkflowName("p", "worker-1", bpav1.RungRestart, since)
	assert.Equal(t, name, translator.RemediationWorkflowName("p", "worker-1", bpav1.RungRestart, since.Add(0)), "deterministic")
	assert.Regexp(t, `^p-remediate-restart-1795860000-[0-9a-f]{6}$`, name)
	for _, other := range []string{
		translator.RemediationWorkflowName("q", "worker-1", bpav1.RungRestart, since),
		translator.RemediationWorkflowName("p", "worker-2", bpav1.RungRestart, since),
		translator.RemediationWorkflowName("p", "worker-1", bpav1.RungReboot, since),
		translator.RemediationWorkflowName("p", "worker-1", bpav1.RungRestart, since.Add(time.Second)),
	} {
		assert.NotEqual(t, name, other)
	}
	long := translator.RemediationWorkflowName("a-very-long-provisioning-name-that-goes-on-and-on-and-on", "worker-1", bpav1.RungReplace, since)
	assert.LessOrEqual(t, len(long), 63)
}

// A Restart or Reboot rung is the hosts' steps then the rung's step (restart-node,
// reboot-node) on the one node, labelled as a remediation (never as a run of the spec) with
// its node, rung and episode, under the cluster's mutex, named after its episode and rung,
// valid for Argo, and refused for a cluster never built.
func TestRungWorkflows(t *testing.T) {
	for _, x := range []struct {
		rung  bpav1.RemediationRung
		build func(*bpav1.Provisioning, translator.Options, string, time.Time) (*wfv1.Workflow, error)
		step  string
		steps []string
	}{
		{bpav1.RungRestart, translator.RestartWorkflow, translator.StepRestartNode, translator.RestartSteps},
		{bpav1.RungReboot, translator.RebootWorkflow, translator.StepRebootNode, translator.RebootSteps},
	} {
		t.Run(string(x.rung), func(t *testing.T) {
			p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}", appliedAs(t, base, host("m1", true, true), host("w1", false, false)))
			since := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
			wf, err := x.build(p, translator.Options{}, "w1", since)
			require.NoError(t, err)
			require.NoError(t, validation.ValidateWorkflow(wf))
			assert.Equal(t, translator.RemediationWorkflowName("p", "w1", x.rung, since), wf.Name)
			assert.Equal(t, "p", wf.Labels[bpav1.RemediationOfLabel])
			assert.Equal(t, "w1", wf.Labels[bpav1.RemediationNodeLabel])
			assert.NotContains(t, wf.Labels, bpav1.ProvisioningNameLabel, "no run of the spec")
			assert.Equal(t, string(x.rung), wf.Annotations[translator.RemediationRungAnnotation])
			assert.Equal(t, "2026-11-28T10:00:00Z", wf.Annotations[translator.RemediationEpisodeAnnotation])
			require.NotNil(t, wf.Spec.Synchronization)
			assert.Equal(t, "bpa-cluster-"+wf.Labels[bpav1.ClusterNameLabel], wf.Spec.Synchronization.Mutexes[0].Name)
			order, args := tasksAndArgs(wf, x.step)
			assert.Equal(t, x.steps, order)
			assert.Equal(t, "w1", args["node"])
			assert.Equal(t, "{{tasks.resolve-leases.outputs.parameters.hosts}}", args["hosts"])
			task := wf.Spec.Templates[0].DAG.Tasks[len(order)-1]
			require.NotNil(t, task.TemplateRef)
			assert.Equal(t, x.step, task.TemplateRef.Template, "the rung's template of provision.yaml")

			p.Status.Applied = nil
			_, err = x.build(p, translator.Options{}, "w1", since)
			var refused *translator.Refusal
			assert.ErrorAs(t, err, &refused)
		})
	}
}
