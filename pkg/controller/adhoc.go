package controller

import (
	"encoding/json"
	"strconv"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// An ad-hoc run (`argo submit --from workflowtemplate/bpa-provision`) carries no plan
// annotation: its plan task (lookup, under the cluster's mutex) planned it and says so in its
// outputs (translator.AdHocParameters). The controller lists its steps from there, and folds
// what it did into status.applied once the plan checks out against the CR
// (translator.CheckAdHocPlan).

// adHocPlan is the plan of an ad-hoc run and the generation it was made for, once its plan
// task succeeded; nil for any other Workflow.
func adHocPlan(wf *wfv1.Workflow) (*translator.ChangePlan, int64) {
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

// trustedAdHocPlan is an ad-hoc run's plan and generation when it may be folded into p's
// status.applied: made for p's current generation, and one p could have.
func trustedAdHocPlan(p *bpav1.Provisioning, wf *wfv1.Workflow) (*translator.ChangePlan, int64) {
	c, gen := adHocPlan(wf)
	if c == nil || gen != p.Generation || translator.CheckAdHocPlan(p, c) != nil {
		return nil, 0
	}
	return c, gen
}
