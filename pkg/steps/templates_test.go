package steps_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/steps"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// argoExpression is an Argo placeholder such as {{inputs.parameters.generation}}.
var argoExpression = regexp.MustCompile(`\{\{[^}]*\}\}`)

// Every bpa command line in the embedded WorkflowTemplates names a real subcommand and
// parses with its flags: a renamed or retyped flag would otherwise fail every run, in a pod.
func TestTemplateCommandLinesParse(t *testing.T) {
	wfts, err := workflowtemplates.All()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, wft := range wfts {
		for _, tmpl := range wft.Spec.Templates {
			if tmpl.Container == nil {
				continue
			}
			lines := [][]string{tmpl.Container.Args}
			for _, ic := range tmpl.InitContainers {
				if len(ic.Command) > 0 && ic.Command[0] == "bpa" {
					lines = append(lines, append(ic.Command[1:len(ic.Command):len(ic.Command)], ic.Args...))
				}
			}
			for _, line := range lines {
				if len(line) == 0 || (line[0] != "step" && line[0] != "install-binary") {
					continue
				}
				where := wft.Name + "/" + tmpl.Name + ": bpa " + strings.Join(line, " ")
				cmd, rest, err := newRoot().Find(line)
				require.NoError(t, err, where)
				require.NotEqual(t, "bpa", cmd.Name(), where)
				seen[cmd.CommandPath()] = true
				require.NoError(t, cmd.ParseFlags(withSampleValues(t, cmd.Flags().Lookup, rest)), where)
				assert.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), where)
			}
		}
	}
	for _, want := range []string{"discover-hosts", "resolve-leases", "render-inventory", "run-kubespray", "verify",
		"publish-kubeconfig", "lookup", "resolve-nodes", "install-software", "verify-software"} {
		assert.True(t, seen["bpa step "+want], "no template runs bpa step %s", want)
	}
	assert.True(t, seen["bpa install-binary"])
}

// newRoot is the command tree as cmd/bpa builds it.
func newRoot() *cobra.Command {
	root := cli.NewRootCommand()
	root.AddCommand(cli.InCluster(steps.Command()))
	return root
}

// withSampleValues replaces each Argo expression by a value of the flag's type.
func withSampleValues(t *testing.T, lookup func(string) *pflag.Flag, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !argoExpression.MatchString(value) {
			out[i] = a
			continue
		}
		f := lookup(name)
		require.NotNil(t, f, "unknown flag --%s", name)
		sample := "x"
		switch f.Value.Type() {
		case "bool":
			sample = "false"
		case "int", "int32", "int64", "uint16":
			sample = "1"
		}
		out[i] = "--" + name + "=" + argoExpression.ReplaceAllString(value, sample)
	}
	return out
}
