package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/policy"

	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

func init() {
	register(func() *cobra.Command {
		var files []string
		var policyFile, appliedFile string
		cmd := &cobra.Command{
			Use:   "lint [-f FILE]...",
			Short: "Check CRs (or, without -f, BPA's WorkflowTemplates) before anything runs",
			Long: "lint applies the rules the apiserver applies at admission (the CRD schemas and CEL\n" +
				"rules, run by the apiserver's own validators, and the cluster-label policy), then\n" +
				"translates each CR and runs Argo's validator on the Workflow against BPA's\n" +
				"WorkflowTemplates. Each problem is one line: file: Kind/name: field: reason.\n" +
				"CRs are also judged by the site policy (--policy FILE, a BPAPolicy; default: the\n" +
				"built-in one, which grants nothing), as the admission policy would judge them.\n" +
				"With --applied (the cluster as it is, as `bpa plan --applied` takes it) a Provisioning's\n" +
				"change is planned too, and a change BPA refuses on a live cluster (a setting it cannot\n" +
				"change, a skipped minor, ...) is a problem naming the field, as the controller's Stalled.\n" +
				"Without -f it validates the WorkflowTemplates themselves.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if policyFile != "" {
					pol, err := readPolicy(policyFile)
					if err != nil {
						return err
					}
					cmd.SetContext(validation.WithPolicy(cmd.Context(), pol))
				}
				var l linter
				if appliedFile != "" {
					if len(files) == 0 {
						return fmt.Errorf("--applied needs the Provisioning to lint with it (-f)")
					}
					st, err := readApplied(appliedFile)
					if err != nil {
						return err
					}
					l.applied = st
				}
				var problems []string
				if len(files) == 0 {
					for _, err := range validation.ValidateWorkflowTemplates() {
						problems = append(problems, "workflowtemplates: "+err.Error())
					}
				}
				for _, f := range files {
					problems = append(problems, l.lintFile(cmd, f)...)
				}
				if l.applied != nil && l.provisionings != 1 {
					problems = append(problems, fmt.Sprintf("--applied %s: describes one cluster, but %d Provisionings were linted", appliedFile, l.provisionings))
				}
				for _, p := range problems {
					fmt.Fprintln(cmd.ErrOrStderr(), p)
				}
				if len(problems) > 0 {
					return &ExitError{Code: 1}
				}
				return nil
			},
		}
		cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "YAML file with BPA CRs (repeatable)")
		cmd.Flags().StringVar(&appliedFile, "applied", "", "YAML or JSON file with the cluster as it is (a Provisioning, its status, or its status.applied): the change to the linted Provisioning is checked as the controller would plan it")
		cmd.Flags().StringVar(&policyFile, "policy", "", "YAML file with the site's BPAPolicy (default: the built-in default policy, which grants nothing)")
		return cmd
	})
}

// linter lints files, with the cluster as it is when --applied gives it.
type linter struct {
	applied       *bpav1.ProvisioningStatus
	provisionings int
}

func (l *linter) lintFile(cmd *cobra.Command, file string) []string {
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
		var site translator.Options
		if p, ok := d.Object.(*bpav1.Provisioning); ok {
			l.provisionings++
			if l.applied != nil {
				p.Status.Applied, p.Status.LastHandledRerun = l.applied.Applied, l.applied.LastHandledRerun
			}
			// The site's etcd backup server, as the controller gives the run (a day-2 run
			// without one is refused): the --policy file's, or none.
			site.BackupServer, site.BackupServerCA, _ = validation.PolicyFrom(cmd.Context()).BackupServer(p)
		}
		wf, err := translator.Translate(d.Object, site)
		if err == nil && wf != nil {
			err = validation.ValidateWorkflow(wf)
		}
		var refusal *translator.Refusal
		switch {
		case errors.As(err, &refusal):
			// A change the controller would refuse (Stalled with this reason): the field it names.
			out = append(out, validation.Problem{File: file, Kind: d.Kind, Name: d.Name, Field: refusal.Field,
				Reason: refusal.Message + " (" + refusal.Reason + ")"}.String())
		case err != nil:
			out = append(out, validation.Problem{File: file, Kind: d.Kind, Name: d.Name, Field: "workflow", Reason: err.Error()}.String())
		}
	}
	return out
}

// readPolicy reads a BPAPolicy from a file, strictly (a misspelt field grants nothing
// silently).
func readPolicy(file string) (policy.Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return policy.Policy{}, err
	}
	p := &bpav1.BPAPolicy{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		return policy.Policy{}, fmt.Errorf("%s: not a BPAPolicy: %w", file, err)
	}
	if p.Kind != "BPAPolicy" {
		return policy.Policy{}, fmt.Errorf("%s: kind %q, want BPAPolicy", file, p.Kind)
	}
	if errs := policy.CheckPolicy(&p.Spec); len(errs) > 0 {
		return policy.Policy{}, fmt.Errorf("%s: BPAPolicy %s: %w", file, p.Name, errs.ToAggregate())
	}
	// Then the CRD's schema and CEL rules, as the apiserver would apply them (an enum
	// value such as hostRelease is only there).
	if _, problems := validation.ValidateFile(context.Background(), file, data); len(problems) > 0 {
		lines := make([]string, len(problems))
		for i, pr := range problems {
			lines[i] = pr.String()
		}
		return policy.Policy{}, errors.New(strings.Join(lines, "\n"))
	}
	return policy.Policy{Spec: p.Spec, Source: "BPAPolicy " + p.Name + " (" + file + ")"}, nil
}
