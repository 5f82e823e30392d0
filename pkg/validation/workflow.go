package validation

import (
	"fmt"
	"sync"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"

	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// ValidateWorkflow runs Argo's own validator on wf, resolving templateRefs against the
// embedded WorkflowTemplates (the ones the controller installs), and checks that each
// task's arguments are inputs of the template it calls (Getter.CheckArguments).
func ValidateWorkflow(wf *wfv1.Workflow) error {
	g, err := embeddedTemplates()
	if err != nil {
		return err
	}
	if err := validate.ValidateWorkflow(g, &templateresolution.NullClusterWorkflowTemplateGetter{}, wf.DeepCopy(), nil, validate.ValidateOpts{}); err != nil {
		return err
	}
	return g.CheckArguments(wf.Spec.Templates)
}

// embeddedTemplates parses the embedded templates once; they cannot change at run time.
var embeddedTemplates = sync.OnceValues(workflowtemplates.NewGetter)

// ValidateWorkflowTemplates runs Argo's validator on every embedded WorkflowTemplate.
func ValidateWorkflowTemplates() []error {
	g, err := workflowtemplates.NewGetter()
	if err != nil {
		return []error{err}
	}
	var errs []error
	all, _ := workflowtemplates.All()
	for _, wft := range all {
		if err := validate.ValidateWorkflowTemplate(g, &templateresolution.NullClusterWorkflowTemplateGetter{}, wft, nil, validate.ValidateOpts{}); err != nil {
			errs = append(errs, err)
		} else if err := g.CheckArguments(wft.Spec.Templates); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", wft.Name, err))
		}
	}
	return errs
}
