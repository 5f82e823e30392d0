package workflowtemplates_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
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
		require.NoError(t, g.CheckArguments(wft.Spec.Templates), name)
	}
}

// CheckArguments refuses what Argo's validator lets through: an argument the called template
// has no input for, or has as the other kind (run-kubespray's operations as a parameter,
// which Argo would ignore for the default, cluster.yml).
func TestCheckArgumentsRefusesAnArgumentOfTheWrongKind(t *testing.T) {
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	call := func(args wfv1.Arguments) []wfv1.Template {
		return []wfv1.Template{{Name: "main", DAG: &wfv1.DAGTemplate{Tasks: []wfv1.DAGTask{{Name: "k", Arguments: args,
			TemplateRef: &wfv1.TemplateRef{Name: workflowtemplates.Provision, Template: "run-kubespray"}}}}}}
	}
	ops := wfv1.Arguments{Artifacts: wfv1.Artifacts{{Name: "operations", ArtifactLocation: wfv1.ArtifactLocation{Raw: &wfv1.RawArtifact{Data: "[]"}}}}}
	require.NoError(t, g.CheckArguments(call(ops)))
	err = g.CheckArguments(call(wfv1.Arguments{Parameters: []wfv1.Parameter{{Name: "operations", Value: wfv1.AnyStringPtr("[]")}}}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "templates.main.tasks.k.arguments.parameters.operations: bpa-provision/run-kubespray has no input parameter operations (it takes it as an artifact)")
	err = g.CheckArguments(call(wfv1.Arguments{Artifacts: wfv1.Artifacts{{Name: "ssh-user", ArtifactLocation: wfv1.ArtifactLocation{Raw: &wfv1.RawArtifact{Data: "root"}}}}}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no input artifact ssh-user (it takes it as a parameter)")
	assert.ErrorContains(t, g.CheckArguments(call(wfv1.Arguments{Parameters: []wfv1.Parameter{{Name: "nope", Value: wfv1.AnyStringPtr("")}}})), "no input parameter nope")
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

// Every step is retried when the node lost it (retryPolicy Always lets Error through, which
// Argo's default OnFailure does not): the idempotent ones on any failure, with limits of
// their own, the others (kubespray, the checks, restore and renewal) only on what
// InfraRetryExpression names, never on what the step said.
func TestEveryStepSurvivesTheNodeLosingIt(t *testing.T) {
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	infra := 0
	for name, wft := range g {
		for _, tmpl := range wft.Spec.Templates {
			if tmpl.Container == nil {
				continue
			}
			where := name + "/" + tmpl.Name
			rs := tmpl.RetryStrategy
			require.NotNil(t, rs, where)
			assert.Equal(t, "Always", string(rs.RetryPolicy), where)
			if slices.Contains([]string{"run-kubespray", "preflight", "restore-etcd", "renew-certificates"}, tmpl.Name) {
				assert.Equal(t, workflowtemplates.InfraRetryExpression, rs.Expression, "%s: what the step said is never retried", where)
			}
			if rs.Expression == workflowtemplates.InfraRetryExpression {
				infra++
			}
		}
	}
	assert.GreaterOrEqual(t, infra, 8)
}

// A step that checks its run's generation (--generation) and finds the CR changed can never
// succeed on a retry: its retry strategy skips that exit status (NotChangedExpression), or
// retries only what the node lost. Before, a drift check whose CR changed under it retried
// resolve-leases for 15 minutes, and no later check ran meanwhile.
func TestAChangedCRIsNeverRetried(t *testing.T) {
	assert.Equal(t, fmt.Sprintf(`lastRetry.exitCode != "%d"`, stepio.ExitChanged), workflowtemplates.NotChangedExpression)
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	checked := 0
	for name, wft := range g {
		for _, tmpl := range wft.Spec.Templates {
			if tmpl.Container == nil || !slices.ContainsFunc(tmpl.Container.Args, func(a string) bool { return strings.HasPrefix(a, "--generation=") }) ||
				!strings.Contains(strings.Join(tmpl.Container.Args, " "), "--provisioning=") {
				continue
			}
			checked++
			require.NotNil(t, tmpl.RetryStrategy, "%s/%s", name, tmpl.Name)
			assert.Contains(t, []string{workflowtemplates.NotChangedExpression, workflowtemplates.InfraRetryExpression}, tmpl.RetryStrategy.Expression,
				"%s/%s checks its generation: a changed CR is never retried", name, tmpl.Name)
		}
	}
	assert.GreaterOrEqual(t, checked, 4, "discover-hosts, resolve-leases (twice), render-inventory")
}
