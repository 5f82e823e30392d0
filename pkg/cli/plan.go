package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/runkubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func init() {
	register(func() *cobra.Command {
		var hf hostsFlags
		var outDir string
		cmd := &cobra.Command{
			Use:   "plan -f CR.yaml --bmh HOSTS.yaml [--leases FILE [--format isc|dnsmasq]] [--now RFC3339] [-o DIR]",
			Short: "Print what run-kubespray would execute for a Provisioning: each playbook, its argv, inventory and vars",
			Long: "plan chooses and resolves the hosts as `bpa hosts` does, renders the inventory and vars file as\n" +
				"render-inventory does, and prints each kubespray operation of the run in order: the playbook\n" +
				"and why, the exact ansible-playbook argv run-kubespray executes in the kubespray image, and\n" +
				"the hosts.ini and vars.yaml it reads. It checks each operation with the rules of the chosen\n" +
				"kubespray release (pkg/kubespray, the same the SIMULATED kubespray applies) and exits 1 on\n" +
				"the first kubespray would refuse. -o DIR writes DIR/01-cluster/{argv.json,hosts.ini,vars.yaml}\n" +
				"and so on, numbered in order, to run real kubespray with (the argv's paths are the step's:\n" +
				"-i /tmp/bpa/in/hosts.ini -e @/tmp/bpa/in/extra-vars.yaml).",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				p, hosts, err := hf.resolve(cmd)
				if err != nil {
					return err
				}
				plan, err := planOf(cmd, p, hosts)
				if err != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("%s: Provisioning %s: %w", hf.crFile, p.Name, err)}
				}
				if outDir != "" {
					return writePlan(outDir, plan)
				}
				return printPlan(cmd.OutOrStdout(), plan)
			},
		}
		hf.register(cmd)
		cmd.Flags().StringVarP(&outDir, "output-dir", "o", "", "write each operation into DIR/NN-<playbook>/ (argv.json, hosts.ini, vars.yaml)")
		return cmd
	})
}

// plannedOperation is one operation as run-kubespray executes it.
type plannedOperation struct {
	kubespray.Operation
	Argv      []string
	Inventory []byte
	Vars      []byte
}

// planOf builds the operations with the functions the steps use: render-inventory's
// inventory.Render and ExtraVars, run-kubespray's Build, and the release's rules.
func planOf(cmd *cobra.Command, p *bpav1.Provisioning, hosts []bpav1.HostStatus) ([]plannedOperation, error) {
	opts, err := inventoryOptions(cmd, p, "", "")
	if err != nil {
		return nil, err
	}
	ini, _, err := inventory.Render(hosts, opts)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	vars, err := inventory.ExtraVars(&p.Spec)
	if err != nil {
		return nil, err
	}
	ops, err := translator.Plan(p)
	if err != nil {
		return nil, err
	}
	params, err := translator.ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	profile, patch, err := kubespray.ProfileForImage(params["kubespray-image"])
	if err != nil {
		return nil, err
	}
	data, err := inventory.NewData(hosts, opts.Flavor)
	if err != nil {
		return nil, err
	}
	groups := kubesprayGroups(data)
	decoded, err := inventory.ReadVars(vars)
	if err != nil {
		return nil, err
	}
	cached := map[string]bool{} // the facts each earlier operation of the same container gathered
	var out []plannedOperation
	for i, op := range ops {
		o, err := runkubespray.ForOperation(params, op, i)
		if err != nil {
			return nil, err
		}
		inv, err := runkubespray.Build(o, o.AnsiblePlaybook, nil)
		if err != nil {
			return nil, fmt.Errorf("operation %d (%s): %w", i+1, op.Playbook, err)
		}
		if errs := profile.CheckPlaybook(op, groups, decoded, patch, func(h string) bool { return cached[h] }); len(errs) > 0 {
			return nil, fmt.Errorf("operation %d (%s): kubespray %s.%d would refuse it: %w", i+1, op.Playbook, profile.Minor, patch, errs[0])
		}
		if op.Playbook != kubespray.Reset {
			for _, h := range groups.Hosts(op.Limit) {
				cached[h] = true
			}
		}
		out = append(out, plannedOperation{Operation: op, Argv: inv.Args, Inventory: ini, Vars: vars})
	}
	return out, nil
}

// kubesprayGroups is the inventory as kubespray's rules see it, whichever the flavour.
func kubesprayGroups(d inventory.Data) kubespray.Inventory {
	names := func(hs []inventory.Host) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	return kubespray.Inventory{"all": names(d.Hosts), "kube_control_plane": names(d.Masters), "etcd": names(d.Etcd),
		"kube_node": names(d.Workers), "k8s_cluster": names(d.Hosts)}
}

func printPlan(w io.Writer, plan []plannedOperation) error {
	for i, op := range plan {
		quoted := make([]string, len(op.Argv))
		for j, a := range op.Argv {
			quoted[j] = sshexec.Quote(a)
		}
		fmt.Fprintf(w, "# %d. %s: %s\n%s\n\n# hosts.ini (-i %s)\n%s\n# vars.yaml (-e @%s)\n%s\n", i+1, op.Playbook, op.Reason,
			strings.Join(quoted, " "), runkubespray.DefaultOptions().Inventory, op.Inventory, runkubespray.DefaultOptions().ExtraVars, op.Vars)
	}
	return nil
}

func writePlan(dir string, plan []plannedOperation) error {
	for i, op := range plan {
		d := filepath.Join(dir, kubespray.OperationDir(i, op.Operation))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		argv, _ := json.MarshalIndent(op.Argv, "", "  ")
		operation, _ := json.MarshalIndent(op.Operation, "", "  ")
		for name, data := range map[string][]byte{"argv.json": append(argv, '\n'), "hosts.ini": op.Inventory, "vars.yaml": op.Vars, "operation.json": append(operation, '\n')} {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
		}
	}
	return nil
}
