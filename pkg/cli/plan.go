package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

func init() {
	registerKube(kubeNamespace, func(k *kubeFlags) *cobra.Command {
		var hf hostsFlags
		var outDir, appliedFile, live, policyFile string
		out := &planOutput{outputFormat: outputFormat{value: formatText, allowed: []string{formatText, formatYAML, formatJSON}}}
		cmd := &cobra.Command{
			Use: "plan (-f CR.yaml --bmh HOSTS.yaml [--applied STATUS.yaml] | --live NAME [-n NS] [--bmh HOSTS.yaml]) " +
				"[--leases FILE [--format isc|dnsmasq]] [--now RFC3339] [-o text|yaml|json | --output-dir DIR]",
			Short: "Print what a Provisioning's next run would do: each step, and each playbook with its argv, inventory and vars",
			Long: "plan computes the change from the cluster as it is (status.applied) to the spec, as the controller\n" +
				"does (a first creation when nothing is applied yet), and prints it step by step, each step a task\n" +
				"of the Workflow: its name, why, and the nodes it adds or removes; then each kubespray operation\n" +
				"of the step in order: the playbook and why, the exact ansible-playbook argv run-kubespray executes\n" +
				"in the kubespray image, and the hosts.ini (without the nodes an earlier operation removed) and\n" +
				"vars.yaml it reads. It chooses and resolves the hosts as `bpa hosts` does, renders the inventory\n" +
				"and vars file as render-inventory does, and checks each operation with the rules of the chosen\n" +
				"kubespray release (pkg/kubespray, the same the SIMULATED kubespray applies), the facts cache\n" +
				"shared by the operations of one step. It exits 1 on a change BPA refuses (naming the field and\n" +
				"the rule) and on the first operation kubespray would refuse.\n\n" +
				"--applied names the cluster as it is: a whole Provisioning (`kubectl get provisioning NAME -o\n" +
				"yaml`), a document with its `status:`, a status with `applied:`, or just the applied object\n" +
				"(hosts, kubesprayVersion, kubernetesVersion, settings). Without it, the status of CR.yaml is used.\n\n" +
				"--live NAME reads the Provisioning (spec, annotations and status) through the kubeconfig\n" +
				"(--kubeconfig, --context, -n)\n" +
				"instead, and its BareMetalHosts (spec.bareMetalHostNamespace, else its namespace) unless --bmh\n" +
				"names a file. IPs come from the hosts' NICs or --leases, not from the lease file on a node.\n\n" +
				"-o yaml or json prints the plan as one document: plan.json's fields, each operation with its\n" +
				"argv, hosts.ini and vars.yaml.\n\n" +
				"--output-dir DIR writes DIR/01-<playbook>/{argv.json,hosts.ini,vars.yaml,operation.json} and so on,\n" +
				"numbered across the whole plan in operation order, and DIR/plan.json, to run real kubespray\n" +
				"with (the argv's paths are the step's: -i /bpa/in/hosts.ini, or the inventory without the\n" +
				"removed nodes under /tmp/bpa/run/, and -e @/bpa/in/extra-vars.yaml).",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := out.resolveDir(cmd, &outDir); err != nil {
					return err
				}
				if live == "" && (k.given("kubeconfig") || k.given("context") || k.given("namespace")) {
					return fmt.Errorf("--kubeconfig, --context and -n apply to --live NAME: without it plan reads files only")
				}
				var p *bpav1.Provisioning
				var bmhs []metal3v1.BareMetalHost
				var err error
				source := hf.bmhFile
				pol, known := policy.Default(), policyFile != ""
				if known {
					if pol, err = readPolicy(policyFile); err != nil {
						return judged(err)
					}
				}
				switch {
				case live != "" && (hf.crFile != "" || appliedFile != ""):
					return fmt.Errorf("--live reads the CR and its status from the cluster: give neither -f nor --applied")
				case live != "":
					var livePol *policy.Policy
					p, bmhs, source, livePol, err = readLive(cmd.Context(), k, live, hf.bmhFile)
					if livePol != nil && policyFile == "" {
						pol, known = *livePol, true
					} else if err == nil && policyFile == "" {
						fmt.Fprintf(cmd.ErrOrStderr(), "bpa plan: BPAPolicy %s is not readable with your credentials: the plan shows no artifact-server CA (give --policy FILE)\n", bpav1.PolicyName)
					}
				case hf.crFile == "" || hf.bmhFile == "":
					return fmt.Errorf("give -f CR.yaml and --bmh HOSTS.yaml, or --live NAME")
				default:
					// Judged by the site's policy when given, as lint --policy judges it: the
					// plan of a CR the site refuses (an artifact server it does not list,
					// say) would never run.
					ctx := cmd.Context()
					if ctx == nil {
						ctx = context.Background()
					}
					if policyFile != "" {
						ctx = validation.WithPolicy(ctx, pol)
					}
					if p, err = readProvisioning(ctx, cmd, hf.crFile); err == nil {
						bmhs, err = hostmatch.ReadBareMetalHostsFile(hf.bmhFile)
						err = judged(err)
					}
				}
				if err != nil {
					return err
				}
				if live != "" && known {
					// The apiserver admitted the CR under the policy of that day; the
					// controller judges its next run by today's, and so does the plan.
					if errs := pol.CheckProvisioning(p); len(errs) > 0 {
						return refused(fmt.Errorf("Provisioning %s is refused by %s and nothing would run: %w", p.Name, pol.Source, errs.ToAggregate()))
					}
				}
				if appliedFile != "" {
					st, err := readApplied(appliedFile)
					if err != nil {
						return judged(err)
					}
					p.Status.Applied, p.Status.LastHandledRerun = st.Applied, st.LastHandledRerun
				}
				ca, err := pol.ArtifactsCA(p)
				if err != nil {
					return refused(err)
				}
				return runPlan(cmd, &hf, p, bmhs, source, outDir, ca != "", out)
			},
		}
		hf.register(cmd)
		f := cmd.Flags()
		for _, name := range []string{"file", "bmh"} { // --live needs neither
			delete(f.Lookup(name).Annotations, cobra.BashCompOneRequiredFlag)
		}
		f.StringVar(&appliedFile, "applied", "", "YAML or JSON file with the cluster as it is: a Provisioning, its status, or its status.applied")
		f.StringVar(&outDir, "output-dir", "", "write each operation into DIR/NN-<playbook>/ (argv.json, hosts.ini, vars.yaml, operation.json), and DIR/plan.json")
		f.VarP(out, "output", "o", "output format: text, yaml, json (-o DIR is the deprecated spelling of --output-dir DIR)")
		f.StringVar(&live, "live", "", "plan the Provisioning NAME as it is in the cluster (through --kubeconfig, --context, -n)")
		f.StringVar(&policyFile, "policy", "", "YAML file with the site's BPAPolicy: the CR is judged by it (as bpa lint --policy does) and it gives the artifact server's CA (default: with --live the cluster's, else the built-in default policy)")
		return cmd
	})
}

// readLive reads the Provisioning name and its BareMetalHosts (or bmhFile's) with the
// caller's own credentials, and the site policy when they may read it (nil when not).
func readLive(ctx context.Context, k *kubeFlags, name, bmhFile string) (*bpav1.Provisioning, []metal3v1.BareMetalHost, string, *policy.Policy, error) {
	c, ns, err := k.client()
	if err != nil {
		return nil, nil, "", nil, err
	}
	p := &bpav1.Provisioning{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return nil, nil, "", nil, fmt.Errorf("Provisioning %s/%s: %w", ns, name, err)
	}
	var pol *policy.Policy
	if got, err := policy.Get(ctx, c); err == nil {
		pol = &got
	}
	if bmhFile != "" {
		bmhs, err := hostmatch.ReadBareMetalHostsFile(bmhFile)
		return p, bmhs, bmhFile, pol, judged(err)
	}
	ns = p.HostNamespace()
	var list metal3v1.BareMetalHostList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, nil, "", nil, fmt.Errorf("listing the BareMetalHosts of namespace %s: %w", ns, err)
	}
	return p, list.Items, "the BareMetalHosts of namespace " + ns, pol, nil
}

// runPlan plans p, resolves its hosts among bmhs and prints or writes the plan.
func runPlan(cmd *cobra.Command, hf *hostsFlags, p *bpav1.Provisioning, bmhs []metal3v1.BareMetalHost, bmhSource, outDir string, ca bool, out *planOutput) error {
	change, err := translator.PlanChange(p)
	var refusal *translator.Refusal
	if errors.As(err, &refusal) {
		return refused(fmt.Errorf("Provisioning %s: the change is refused and nothing would run: %s: %s (rule %s)",
			p.Name, refusal.Field, refusal.Message, refusal.Reason))
	}
	if err != nil {
		return refused(fmt.Errorf("Provisioning %s: %w", p.Name, err))
	}
	hosts, err := hf.match(cmd, p, bmhs, bmhSource)
	if err != nil {
		return err
	}
	plan, err := planOf(cmd, p, hosts, change, ca)
	if err != nil {
		return refused(fmt.Errorf("Provisioning %s: %w", p.Name, err))
	}
	if outDir != "" {
		return writePlan(outDir, change, plan)
	}
	doc := planDocument{KubesprayVersion: change.KubesprayVersion, KubernetesVersion: change.KubernetesVersion, Steps: plan}
	if ca {
		doc.ArtifactsCA = bpav1.ArtifactsCAPath
	}
	return out.print(cmd.OutOrStdout(), doc, func(w io.Writer) error {
		if ca {
			fmt.Fprintf(w, "# Before each playbook that downloads (cluster.yml, scale.yml, upgrade-cluster.yml), run-kubespray installs\n"+
				"# the artifact server's CA (BPAPolicy spec.artifactServers) at %s and in the OS trust store\n# of the hosts it covers.\n", bpav1.ArtifactsCAPath)
		}
		return printPlan(w, change, plan)
	})
}

// planOutput is plan's -o: a format, or the directory --output-dir names now, which -o
// meant before every verb's -o took formats (kept, with a deprecation message).
type planOutput struct {
	outputFormat
	dir string
}

func (o *planOutput) Set(s string) error {
	if o.outputFormat.Set(s) != nil {
		o.dir = s
	}
	return nil
}

// resolveDir moves a deprecated -o DIR into outDir, saying so on stderr, and refuses -o
// and --output-dir together: the one prints the plan, the other writes it to files.
func (o *planOutput) resolveDir(cmd *cobra.Command, outDir *string) error {
	dirGiven := cmd.Flags().Changed("output-dir")
	if o.dir != "" {
		if dirGiven {
			return fmt.Errorf("-o %s and --output-dir %s: give --output-dir alone", o.dir, *outDir)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "bpa plan: -o DIR is deprecated, use --output-dir %s (-o takes text, yaml or json)\n", o.dir)
		*outDir = o.dir
		return nil
	}
	if dirGiven && cmd.Flags().Changed("output") {
		return fmt.Errorf("-o %s prints the plan and --output-dir writes it to files: give one", o.value)
	}
	return nil
}

// planDocument is the plan as -o yaml|json print it: plan.json's versions and steps, each
// operation with the argv, inventory and vars file run-kubespray gives it.
type planDocument struct {
	KubesprayVersion  string `json:"kubesprayVersion"`
	KubernetesVersion string `json:"kubernetesVersion"`
	// ArtifactsCA is where run-kubespray installs the artifact server's CA before each
	// playbook that downloads, when the site policy gives one.
	ArtifactsCA string                   `json:"artifactsCA,omitempty"`
	Steps       []translator.PlannedStep `json:"steps"`
}

// readApplied reads the cluster as it is from a whole Provisioning, a `status:` document, a
// status, or an applied object, strictly: a misspelt field is an error, not a first creation.
func readApplied(file string) (*bpav1.ProvisioningStatus, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("--applied %s: %w", file, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(j, &doc); err != nil {
		return nil, fmt.Errorf("--applied %s: want a YAML or JSON object: %w", file, err)
	}
	st := &bpav1.ProvisioningStatus{}
	into, what := any(st), "a Provisioning status"
	switch {
	case doc["status"] != nil:
		j = doc["status"]
	case doc["applied"] == nil:
		st.Applied = &bpav1.AppliedState{}
		into, what = st.Applied, "a Provisioning's status.applied"
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return nil, fmt.Errorf("--applied %s: read as %s: %w", file, what, err)
	}
	if st.Applied == nil || len(st.Applied.Hosts) == 0 {
		return nil, fmt.Errorf("--applied %s: no applied hosts (status.applied.hosts): the cluster would be created", file)
	}
	return st, nil
}

// planOf builds the operations as the steps run them (translator.PlanOperations), with the
// inventory options `bpa inventory` would use for p.
func planOf(cmd *cobra.Command, p *bpav1.Provisioning, hosts []bpav1.HostStatus, change *translator.ChangePlan, ca bool) ([]translator.PlannedStep, error) {
	opts, err := inventoryOptions(cmd, p, "", "")
	if err != nil {
		return nil, err
	}
	return translator.PlanOperations(p, hosts, change, opts, ca)
}

func printPlan(w io.Writer, change *translator.ChangePlan, plan []translator.PlannedStep) error {
	fmt.Fprintf(w, "# Plan: %d step(s), to kubespray %s and Kubernetes %s\n", len(plan), change.KubesprayVersion, change.KubernetesVersion)
	if len(plan) == 0 {
		fmt.Fprintln(w, "# Nothing to do: the cluster is what the spec asks for.")
	}
	n := 0
	for s, step := range plan {
		fmt.Fprintf(w, "\n## Step %d/%d %s: %s\n", s+1, len(plan), step.Name, step.Reason)
		if len(step.Nodes) > 0 {
			fmt.Fprintf(w, "## nodes: %s\n", strings.Join(step.Nodes, ", "))
		}
		if step.Release != "" {
			fmt.Fprintf(w, "## runs in %s: kubespray %s takes the cluster to Kubernetes %s; status.applied records it once it succeeded, and a retry resumes at the first step not done\n", step.Image, step.Release, step.Kubernetes)
		}
		if step.Removes {
			if step.AllowUngraceful {
				fmt.Fprintln(w, "## a node that cannot be reached over SSH at run time is removed first, without draining or resetting it (spec.nodeRemoval.allowUngraceful, or a replacement by graded remediation)")
			} else {
				fmt.Fprintln(w, "## a node that cannot be reached over SSH at run time stops the step (NodeUnreachable) before anything runs")
			}
		}
		for _, op := range step.Operations {
			n++
			quoted := make([]string, len(op.Argv))
			for j, a := range op.Argv {
				quoted[j] = sshexec.Quote(a)
			}
			without := ""
			if len(op.Without) > 0 {
				without = ", without " + strings.Join(op.Without, ", ")
			}
			fmt.Fprintf(w, "\n# %d. %s: %s\n", n, op.Playbook, op.Reason)
			if t, ok := op.Operation.Vars["drain_timeout"]; ok {
				fmt.Fprintf(w, "# drains each node: grace period %vs, timeout %v, %v retries (spec.nodeRemoval)\n", op.Operation.Vars["drain_grace_period"], t, op.Operation.Vars["drain_retries"])
			}
			fmt.Fprintf(w, "%s\n\n# hosts.ini (-i %s%s)\n%s\n# vars.yaml (-e @%s)\n%s\n",
				strings.Join(quoted, " "), op.Argv[2], without, op.Inventory, kubespray.DefaultRunOptions().ExtraVars, op.Vars)
		}
	}
	return nil
}

func writePlan(dir string, change *translator.ChangePlan, plan []translator.PlannedStep) error {
	files := map[string][]byte{}
	n := 0
	for _, step := range plan {
		for _, op := range step.Operations {
			d := kubespray.OperationDir(n, op.Operation)
			n++
			argv, _ := json.MarshalIndent(op.Argv, "", "  ")
			operation, _ := json.MarshalIndent(op.Operation, "", "  ")
			for name, data := range map[string][]byte{"argv.json": append(argv, '\n'), "hosts.ini": []byte(op.Inventory), "vars.yaml": []byte(op.Vars), "operation.json": append(operation, '\n')} {
				files[filepath.Join(d, name)] = data
			}
		}
	}
	whole, _ := json.MarshalIndent(change, "", "  ")
	files["plan.json"] = append(whole, '\n')
	for name, data := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
