package workflowtemplates_test

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	"github.com/stretchr/testify/assert"
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

// Every step runs as its own account with only its own rights (config/rbac/steps.yaml), or
// with no API token at all; and a Secret a step mounts shows it only the SSH key and
// known_hosts, whatever else a CR's named Secret holds.
func TestStepsRunAsTheirOwnAccountsAndMountOnlyTheSSHKeys(t *testing.T) {
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	for name, wft := range g {
		for _, tmpl := range wft.Spec.Templates {
			if tmpl.Container == nil {
				continue
			}
			where := name + "/" + tmpl.Name
			if tmpl.AutomountServiceAccountToken != nil && !*tmpl.AutomountServiceAccountToken {
				require.NotNil(t, tmpl.Executor, where)
				assert.True(t, strings.HasPrefix(tmpl.Executor.ServiceAccountName, "bpa-step-"), where)
			} else {
				assert.True(t, strings.HasPrefix(tmpl.ServiceAccountName, "bpa-step-"), "%s runs as %q", where, tmpl.ServiceAccountName)
			}
			for _, v := range tmpl.Volumes {
				if v.Secret == nil {
					continue
				}
				var keys []string
				for _, it := range v.Secret.Items {
					keys = append(keys, it.Key+"="+it.Path)
				}
				assert.Equal(t, []string{"ssh-privatekey=ssh-privatekey", "known_hosts=known_hosts"}, keys, where)
			}
		}
	}
}
