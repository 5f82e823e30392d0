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
		var files []string
		cmd := &cobra.Command{
			Use:   "lint [-f FILE]...",
			Short: "Check CRs (or, without -f, BPA's WorkflowTemplates) before anything runs",
			Long: "lint applies the rules the apiserver applies at admission (the CRD schemas and CEL\n" +
				"rules, run by the apiserver's own validators, and the cluster-label policy), then\n" +
				"translates each CR and runs Argo's validator on the Workflow against BPA's\n" +
				"WorkflowTemplates. Each problem is one line: file: Kind/name: field: reason.\n" +
				"Without -f it validates the WorkflowTemplates themselves.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				var problems []string
				if len(files) == 0 {
					for _, err := range validation.ValidateWorkflowTemplates() {
						problems = append(problems, "workflowtemplates: "+err.Error())
					}
				}
				for _, f := range files {
					problems = append(problems, lintFile(cmd, f)...)
				}
				for _, p := range problems {
					fmt.Fprintln(cmd.OutOrStdout(), p)
				}
				if len(problems) > 0 {
					return &ExitError{Code: 1}
				}
				return nil
			},
		}
		cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "YAML file with BPA CRs (repeatable)")
		return cmd
	})
}

func lintFile(cmd *cobra.Command, file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	docs, problems := validation.ValidateFile(cmd.Context(), file, data)
	var out []string
	for _, p := range problems {
		out = append(out, p.String())
	}
	for _, d := range docs {
		if d.Object == nil {
			continue
		}
		wf, err := translator.Translate(d.Object, translator.Options{})
		if err == nil && wf != nil {
			err = validation.ValidateWorkflow(wf)
		}
		if err != nil {
			out = append(out, validation.Problem{File: file, Kind: d.Kind, Name: d.Name, Field: "workflow", Reason: err.Error()}.String())
		}
	}
	return out
}
