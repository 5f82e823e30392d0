package workflowtemplates_test

import (
	"testing"

	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

func TestTemplatesPassArgoValidation(t *testing.T) {
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	require.Contains(t, g, workflowtemplates.Provision)
	require.Contains(t, g, workflowtemplates.Software)
	for name, wft := range g {
		err := validate.ValidateWorkflowTemplate(g, &templateresolution.NullClusterWorkflowTemplateGetter{}, wft, nil, validate.ValidateOpts{})
		require.NoError(t, err, name)
	}
}
