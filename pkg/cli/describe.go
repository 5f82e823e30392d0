package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/pkg/describe"
)

func init() {
	register(func() *cobra.Command {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		overrides := &clientcmd.ConfigOverrides{}
		var history int
		cmd := &cobra.Command{
			Use:   "describe provisioning|software|cluster NAME",
			Short: "Show one CR as a tree: conditions, Workflows and their steps, hosts, published objects",
			Long: "describe reads one Provisioning, Software or Cluster through the current kubeconfig and\n" +
				"prints its conditions, its current Workflow step by step (with the per-host nodes of a\n" +
				"Software run), its earlier Workflows, its hosts, and whether the cluster's kubeconfig\n" +
				"Secret and address ConfigMap exist (never their contents). A Cluster shows its\n" +
				"Provisioning and Software beneath it. Output is coloured on a terminal unless NO_COLOR\n" +
				"is set.",
			Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				kind, err := describe.ParseKind(args[0])
				if err != nil {
					return err
				}
				cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
				cfg, err := cc.ClientConfig()
				if err != nil {
					return err
				}
				ns, _, err := cc.Namespace()
				if err != nil {
					return err
				}
				c, err := client.New(cfg, client.Options{Scheme: controller.Scheme()})
				if err != nil {
					return err
				}
				t, err := describe.Fetch(cmd.Context(), c, kind, ns, args[1])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				return describe.Render(out, t, describe.Options{Now: time.Now(), Color: colorOK(out), History: history})
			},
		}
		f := cmd.Flags()
		f.StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
		f.StringVar(&overrides.CurrentContext, "context", "", "kubeconfig context to use")
		f.StringVarP(&overrides.Context.Namespace, "namespace", "n", "", "namespace of the CR (default: the context's)")
		f.IntVar(&history, "history", 3, "earlier Workflows to list besides the current one")
		return cmd
	})
}

// colorOK is true when out is a terminal and NO_COLOR (https://no-color.org) is unset.
func colorOK(out any) bool {
	f, ok := out.(*os.File)
	return ok && os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}
