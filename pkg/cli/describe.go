package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/akraino-edge-stack/bpa/pkg/describe"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

func init() {
	registerKube(kubeNamespace, func(k *kubeFlags) *cobra.Command {
		var history int
		var out *outputFormat
		cmd := &cobra.Command{
			Use:   "describe provisioning|software|cluster NAME [-o text|yaml|json]",
			Short: "Show one CR as a tree: conditions, Workflows and their steps, hosts, published objects",
			Long: "describe reads one Provisioning, Software or Cluster through the current kubeconfig and\n" +
				"prints its conditions, its current Workflow step by step (with the per-host nodes of a\n" +
				"Software run), its earlier Workflows, its hosts, and whether the cluster's kubeconfig\n" +
				"Secret and address ConfigMap exist (never their contents). A Cluster shows its\n" +
				"Provisioning and Software beneath it. Output is coloured on a terminal unless NO_COLOR\n" +
				"is set. -o yaml or json prints the same objects as a v1 List instead: the CR, its\n" +
				"Workflows (the current one and --history earlier ones), the published objects'\n" +
				"metadata only, and a Cluster's Provisioning and Software with theirs.",
			Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				kind, err := describe.ParseKind(args[0])
				if err != nil {
					return err
				}
				c, ns, err := k.client()
				if err != nil {
					return err
				}
				t, err := describe.Fetch(cmd.Context(), c, kind, ns, args[1])
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if out.value == formatText {
					return describe.Render(w, t, describe.Options{Now: time.Now(), Color: colorOK(w), History: history})
				}
				list, err := t.List(scheme.New(), history, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				return out.printData(w, list)
			},
		}
		cmd.Flags().IntVar(&history, "history", 3, "earlier Workflows to list besides the current one")
		out = addOutputFlag(cmd, formatText, formatYAML, formatJSON)
		return cmd
	})
}

// colorOK is true when out is a terminal and NO_COLOR (https://no-color.org) is unset.
func colorOK(out any) bool {
	f, ok := out.(*os.File)
	return ok && os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}
