package controller

import (
	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// An ad-hoc run (`argo submit --from workflowtemplate/bpa-provision`) carries no plan
// annotation: its plan task (lookup, under the cluster's mutex) planned it and says so in its
// outputs (translator.AdHocParameters). The controller lists its steps from there, and folds
// what it did into status.applied once the plan checks out against the CR
// (translator.CheckAdHocPlan).

// trustedAdHocPlan is an ad-hoc run's plan and generation when it may be folded into p's
// status.applied: made for p's current generation, and one p could have.
func trustedAdHocPlan(p *bpav1.Provisioning, wf *wfv1.Workflow) (*translator.ChangePlan, int64) {
	c, gen := observe.AdHocPlan(wf)
	if c == nil || gen != p.Generation || translator.CheckAdHocPlan(p, c) != nil {
		return nil, 0
	}
	return c, gen
}
