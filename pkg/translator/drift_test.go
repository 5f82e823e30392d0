package translator_test

import (
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// A drift check is the hosts' steps then check-drift, which reads the hosts and the vars
// file; it is labelled as a check (never as a run of the spec), under the cluster's mutex,
// named after its slot, valid for Argo, and refused for a cluster never built.
func TestDriftCheckWorkflow(t *testing.T) {
	p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}\ndriftCheck: {interval: 5m}", appliedAs(t, base, host("m1", true, true), host("w1", false, false)))
	now := time.Date(2026, 11, 28, 7, 13, 20, 0, time.UTC)
	slot := translator.DriftSlot(now, p.Spec.DriftCheck.Interval.Duration)
	assert.Equal(t, time.Date(2026, 11, 28, 7, 10, 0, 0, time.UTC), slot)
	assert.Equal(t, slot, translator.DriftSlot(now.Add(time.Minute), 5*time.Minute), "one slot, one name")

	wf, err := translator.DriftCheckWorkflow(p, translator.Options{}, slot)
	require.NoError(t, err)
	require.NoError(t, validation.ValidateWorkflow(wf))
	assert.Equal(t, translator.DriftCheckWorkflowName("p", slot), wf.Name)
	assert.NotEqual(t, translator.DriftCheckWorkflowName("p", slot.Add(5*time.Minute)), wf.Name)
	assert.Equal(t, "p", wf.Labels[bpav1.DriftCheckOfLabel])
	assert.NotContains(t, wf.Labels, bpav1.ProvisioningNameLabel, "no run of the spec")
	require.NotNil(t, wf.Spec.Synchronization)
	assert.Equal(t, "bpa-cluster-"+wf.Labels[bpav1.ClusterNameLabel], wf.Spec.Synchronization.Mutexes[0].Name)
	assert.EqualValues(t, 600, *wf.Spec.TTLStrategy.SecondsAfterSuccess, "a check that succeeded is kept an interval, at least ten minutes")
	assert.EqualValues(t, 3600, *wf.Spec.TTLStrategy.SecondsAfterFailure, "one that failed an interval, at least an hour")
	assert.EqualValues(t, 3600, *wf.Spec.TTLStrategy.SecondsAfterCompletion, "one in Error as one that failed (Argo's Failed TTL is not applied to Error)")
	order, args := tasksAndArgs(wf, translator.StepCheckDrift)
	assert.Equal(t, translator.DriftSteps, order)
	assert.Equal(t, "{{tasks.render-inventory.outputs.parameters.extra-vars}}", args["extra-vars"])
	assert.Equal(t, "{{tasks.resolve-leases.outputs.parameters.hosts}}", args["hosts"])

	p.Spec.DriftCheck.Interval = metav1.Duration{Duration: time.Hour}
	wf, err = translator.DriftCheckWorkflow(p, translator.Options{}, slot)
	require.NoError(t, err)
	assert.EqualValues(t, 3600, *wf.Spec.TTLStrategy.SecondsAfterSuccess)
	p.Spec.DriftCheck = &bpav1.DriftCheck{Interval: metav1.Duration{Duration: 2 * time.Hour}}
	wf, err = translator.DriftCheckWorkflow(p, translator.Options{}, slot)
	require.NoError(t, err)
	assert.EqualValues(t, 7200, *wf.Spec.TTLStrategy.SecondsAfterFailure)

	p.Status.Applied = nil
	_, err = translator.DriftCheckWorkflow(p, translator.Options{}, slot)
	var refused *translator.Refusal
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Error(), "never built")
}

// tasksAndArgs are the names of wf's DAG tasks in order, and the arguments of the task step.
func tasksAndArgs(wf *wfv1.Workflow, step string) (order []string, args map[string]string) {
	args = map[string]string{}
	for _, task := range wf.Spec.Templates[0].DAG.Tasks {
		order = append(order, task.Name)
		if task.Name == step {
			for _, a := range task.Arguments.Parameters {
				args[a.Name] = a.Value.String()
			}
		}
	}
	return order, args
}
