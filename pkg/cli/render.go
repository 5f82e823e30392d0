package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

func init() {
	register(func() *cobra.Command {
		var file string
		var out *outputFormat
		cmd := &cobra.Command{
			Use:   "render -f FILE [-o yaml|json]",
			Short: "Print the Argo Workflow(s) BPA would run for the CRs in FILE",
			Long: "render translates every Provisioning and Software in a (multi-document) YAML file into\n" +
				"the Workflow the controller would create, after the same validation as `bpa lint`, and\n" +
				"prints them as YAML documents or, with -o json, JSON documents: what `kubectl create -f`\n" +
				"and `argo submit` read. A Workflow has no shorter text form, so there is no -o text.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				data, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				docs, problems := validation.ValidateFile(cmd.Context(), file, data)
				if len(problems) > 0 {
					for _, p := range problems {
						fmt.Fprintln(cmd.ErrOrStderr(), p)
					}
					return refused(fmt.Errorf("%d problem(s) in %s", len(problems), file))
				}
				var wfs []any
				for _, d := range docs {
					wf, err := translator.Translate(d.Object, translator.Options{})
					if err != nil {
						return fmt.Errorf("%s: %s/%s: %w", file, d.Kind, d.Name, err)
					}
					if wf != nil {
						wfs = append(wfs, wf)
					}
				}
				return out.printDocuments(cmd.OutOrStdout(), wfs)
			},
		}
		cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file with BPA CRs")
		out = addOutputFlag(cmd, formatYAML, formatJSON)
		_ = cmd.MarkFlagRequired("file")
		return cmd
	})
}
