package controller

import (
	"encoding/json"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// adHocCluster is a cluster of m1, w1 and w2 asked to lose w1 and gain w3.
func adHocCluster(t *testing.T) *bpav1.Provisioning {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p", Generation: 5, Labels: map[string]string{"cluster": "c"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, Workers: []bpav1.NodeEntry{{"w2": nil}, {"w3": nil}},
			Kubernetes: &bpav1.KubernetesConfig{Version: "1.31.4"}}}
	built, err := translator.PlanChange(p)
	require.NoError(t, err)
	p.Status.Applied = &bpav1.AppliedState{KubesprayVersion: built.KubesprayVersion, KubernetesVersion: built.KubernetesVersion, Settings: built.Settings,
		Immutable: built.Immutable, Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}, Etcd: true}, {Name: "w1", Roles: []string{"worker"}}, {Name: "w2", Roles: []string{"worker"}}}}
	return p
}

// plannedAdHocRun is `argo submit --from workflowtemplate/bpa-provision` of p, its plan task done
// with outputs.
func plannedAdHocRun(t *testing.T, outputs map[string]string) *wfv1.Workflow {
	t.Helper()
	plan := observetest.Node("pl", translator.AdHocPlanTask, wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 1)
	plan.Outputs = &wfv1.Outputs{}
	for _, k := range []string{translator.AdHocPlanOutput, "generation"} {
		plan.Outputs.Parameters = append(plan.Outputs.Parameters, wfv1.Parameter{Name: k, Value: wfv1.AnyStringPtr(outputs[k])})
	}
	return &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "p-adhoc", Labels: map[string]string{bpav1.ProvisioningNameLabel: "p"}},
		Spec:   wfv1.WorkflowSpec{WorkflowTemplateRef: &wfv1.WorkflowTemplateRef{Name: workflowtemplates.Provision}},
		Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, Nodes: wfv1.Nodes{"pl": plan}}}
}

// succeeded is what the controller observes of a run whose steps all succeeded.
func succeeded(steps []string) observe.Observation {
	o := observe.Observation{Phase: bpav1.PhaseSucceeded, Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}, Etcd: true},
		{Name: "w1", Roles: []string{"worker"}, Removing: true}, {Name: "w2", Roles: []string{"worker"}}, {Name: "w3", Roles: []string{"worker"}, IP: "10.0.0.3"}}}
	for _, s := range steps {
		o.Steps = append(o.Steps, bpav1.StepStatus{Name: s, Phase: "Succeeded"})
	}
	return o
}

func appliedNames(p *bpav1.Provisioning) []string {
	var out []string
	for _, h := range p.Status.Applied.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// An ad-hoc run's steps are its plan's, once its plan task has planned it, and what they
// did is folded into status.applied as a controller run's would be.
func TestAdHocRunIsMirroredAndFolded(t *testing.T) {
	p := adHocCluster(t)
	outputs, err := translator.AdHocParameters(p, translator.Options{BackupServer: "https://backups.example"})
	require.NoError(t, err)
	wf := plannedAdHocRun(t, outputs)
	steps := observe.ProvisioningSteps(wf)
	assert.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", "backup-etcd", "remove-workers", "scale-workers", "verify", "publish-kubeconfig"}, steps)
	assert.Equal(t, translator.ProvisioningSteps, observe.ProvisioningSteps(plannedAdHocRun(t, map[string]string{})), "not planned yet: the create shape")

	// The controller's cache trims Workflows: the plan task is kept, and packed nodes too.
	trimmed, err := trimWorkflow(wf.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, steps, observe.ProvisioningSteps(trimmed.(*wfv1.Workflow)))
	packed := wf.DeepCopy()
	restore := packer.SetMaxWorkflowSize(1500)
	require.NoError(t, packer.CompressWorkflowIfNeeded(packed))
	restore()
	require.NotEmpty(t, packed.Status.CompressedNodes)
	assert.Equal(t, steps, observe.ProvisioningSteps(packed))

	observePlan(p, wf, succeeded(steps))
	assert.Equal(t, []string{"m1", "w2", "w3"}, appliedNames(p))
	assert.Equal(t, "10.0.0.3", p.Status.Applied.Hosts[2].IP)
	assert.Equal(t, int64(5), p.Status.Applied.Generation)
	require.Len(t, p.Status.Plan, 3)
	assert.Equal(t, "scale-workers", p.Status.Plan[2].Name)
	next, err := translator.PlanChange(p)
	require.NoError(t, err)
	assert.Empty(t, next.Steps, "the controller's next plan finds the cluster as the spec asks")
}

// The attack: whoever may write Workflows writes their status too (Argo's Workflow has no
// status subresource), so an ad-hoc run's plan output may be forged. Only a plan p could
// have is folded: for its generation, to the releases and settings of its spec, adding
// nodes it asks for and removing nodes it does not.
func TestForgedAdHocPlanIsNotFolded(t *testing.T) {
	for name, forge := range map[string]func(c *translator.ChangePlan, outputs map[string]string, wf *wfv1.Workflow){
		"removes a node the spec keeps": func(c *translator.ChangePlan, _ map[string]string, _ *wfv1.Workflow) {
			c.Steps[1].Nodes = []string{"w1", "w2"}
		},
		"adds a node the spec does not ask for": func(c *translator.ChangePlan, _ map[string]string, _ *wfv1.Workflow) {
			c.Steps[2].Nodes = []string{"w3", "w9"}
		},
		"another release": func(c *translator.ChangePlan, _ map[string]string, _ *wfv1.Workflow) { c.KubernetesVersion = "1.29.1" },
		"other settings":  func(c *translator.ChangePlan, _ map[string]string, _ *wfv1.Workflow) { c.Settings = "forged" },
		"an older generation": func(_ *translator.ChangePlan, outputs map[string]string, _ *wfv1.Workflow) {
			outputs["generation"] = "4"
		},
		"not a run of bpa-provision": func(_ *translator.ChangePlan, _ map[string]string, wf *wfv1.Workflow) {
			wf.Spec.WorkflowTemplateRef = nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := adHocCluster(t)
			outputs, err := translator.AdHocParameters(p, translator.Options{BackupServer: "https://backups.example"})
			require.NoError(t, err)
			var c translator.ChangePlan
			require.NoError(t, json.Unmarshal([]byte(outputs[translator.AdHocPlanOutput]), &c))
			wf := plannedAdHocRun(t, outputs)
			forge(&c, outputs, wf)
			raw, err := json.Marshal(c)
			require.NoError(t, err)
			outputs[translator.AdHocPlanOutput] = string(raw)
			wf.Status.Nodes = plannedAdHocRun(t, outputs).Status.Nodes
			observePlan(p, wf, succeeded([]string{"remove-workers", "scale-workers"}))
			assert.Equal(t, []string{"m1", "w1", "w2"}, appliedNames(p), "nothing is folded")
			assert.Equal(t, "1.31.4", p.Status.Applied.KubernetesVersion)
		})
	}
}
