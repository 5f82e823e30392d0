package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

func init() {
	register(func() *cobra.Command {
		var file string
		cmd := &cobra.Command{
			Use:   "render -f FILE",
			Short: "Print the Argo Workflow(s) BPA would run for the CRs in FILE",
			Long: "render translates every Provisioning and Software in a (multi-document) YAML file into\n" +
				"the Workflow the controller would create, after the same validation as `bpa lint`.",
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
					return &ExitError{Code: 1, Err: fmt.Errorf("%d problem(s) in %s", len(problems), file)}
				}
				out := cmd.OutOrStdout()
				for _, d := range docs {
					wf, err := translator.Translate(d.Object, translator.Options{})
					if err != nil {
						return fmt.Errorf("%s: %s/%s: %w", file, d.Kind, d.Name, err)
					}
					if wf == nil {
						continue
					}
					y, err := yaml.Marshal(wf)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "---\n%s", y)
				}
				return nil
			},
		}
		cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file with BPA CRs")
		_ = cmd.MarkFlagRequired("file")
		return cmd
	})
}
