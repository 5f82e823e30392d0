package observe

import (
	"encoding/json"
	"strconv"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"

	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// A Provisioning's Workflow carries its day-2 plan: a controller run in an annotation, an
// ad-hoc run (`argo submit --from workflowtemplate/bpa-provision`) in its plan task's
// outputs (translator.AdHocParameters). Its steps are that plan's.

// PlanOf reads the plan a Workflow carries, or nil (a run started with `argo submit --from`,
// whose plan AdHocPlan reads).
func PlanOf(wf *wfv1.Workflow) *translator.ChangePlan {
	raw := wf.Annotations[translator.PlanAnnotation]
	if raw == "" {
		return nil
	}
	c := &translator.ChangePlan{}
	if json.Unmarshal([]byte(raw), c) != nil {
		return nil
	}
	return c
}

// ProvisioningSteps are the steps a Provisioning's Workflow runs: its plan's (an ad-hoc
// run's once it is planned), or the create shape for a run without one.
func ProvisioningSteps(wf *wfv1.Workflow) []string {
	if c := PlanOf(wf); c != nil {
		return translator.StepsOf(c)
	}
	if c, _ := AdHocPlan(wf); c != nil {
		return translator.StepsOf(c)
	}
	return translator.ProvisioningSteps
}

// AdHocPlan is the plan of an ad-hoc run and the generation it was made for, once its plan
// task succeeded; nil for any other Workflow.
func AdHocPlan(wf *wfv1.Workflow) (*translator.ChangePlan, int64) {
	if ref := wf.Spec.WorkflowTemplateRef; ref == nil || ref.ClusterScope || ref.Name != workflowtemplates.Provision {
		return nil, 0
	}
	nodes := wf.Status.Nodes
	if wf.Status.CompressedNodes != "" {
		c := wf.DeepCopy()
		if packer.DecompressWorkflow(c) != nil {
			return nil, 0
		}
		nodes = c.Status.Nodes
	}
	n, ok := taskNodes(nodes)[translator.AdHocPlanTask]
	if !ok || n.Phase != wfv1.NodeSucceeded || n.Outputs == nil {
		return nil, 0
	}
	var c *translator.ChangePlan
	var gen int64
	for _, p := range n.Outputs.Parameters {
		switch {
		case p.Value == nil:
		case p.Name == translator.AdHocPlanOutput:
			if json.Unmarshal([]byte(p.Value.String()), &c) != nil {
				return nil, 0
			}
		case p.Name == "generation":
			gen, _ = strconv.ParseInt(p.Value.String(), 10, 64)
		}
	}
	return c, gen
}
