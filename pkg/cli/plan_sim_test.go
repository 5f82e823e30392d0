package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/reference"
)

// CheckPlanDir runs the stand-in kubespray's checks (the real ansible-playbook on the tree,
// check-only) on each operation `bpa plan --output-dir` wrote to dir, in order, with the argv's in-pod
// paths pointed at the files beside it. Each fills the facts cache as its run would; the
// operations of one step (plan.json) share it, as they run in one container, and each step
// starts with an empty one. image picks the release.
func CheckPlanDir(t *testing.T, dir, image string) []string {
	t.Helper()
	ops, err := filepath.Glob(filepath.Join(dir, "[0-9][0-9]-*"))
	require.NoError(t, err)
	require.NotEmpty(t, ops, "bpa plan wrote no operation")
	var change translator.ChangePlan
	data, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &change))
	require.Len(t, ops, len(change.Operations()), "one directory per operation of plan.json")
	var names []string
	for _, step := range change.Steps {
		tmp := t.TempDir()
		for range step.Operations {
			op := ops[len(names)]
			// A hop of a chained upgrade runs in its own release's image: the stand-in acts as it.
			require.NoError(t, kubespraysim.Check(planArgv(t, op), translator.StepImage(image, step), tmp), "%s", op)
			names = append(names, filepath.Base(op))
		}
	}
	return names
}

// planArgv reads the argv `bpa plan --output-dir` wrote for an operation, its in-pod paths pointed at
// the files beside it, without the program.
func planArgv(t *testing.T, op string) []string {
	data, err := os.ReadFile(filepath.Join(op, "argv.json"))
	require.NoError(t, err)
	var argv []string
	require.NoError(t, json.Unmarshal(data, &argv))
	require.Equal(t, "ansible-playbook", argv[0])
	for i, a := range argv {
		switch {
		case i > 0 && argv[i-1] == "-i": // hosts.ini, or the inventory without the removed nodes
			argv[i] = filepath.Join(op, "hosts.ini")
		case a == "@/bpa/in/extra-vars.yaml":
			argv[i] = "@" + filepath.Join(op, "vars.yaml")
		}
	}
	return argv[1:]
}

func plan(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := cli.NewRootCommand()
	var out, errOut strings.Builder
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"plan"}, args...))
	err := root.Execute()
	return out.String(), err
}

func readCR(t *testing.T, file string) *bpav1.Provisioning {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	docs, problems := validation.ValidateFile(context.Background(), file, data)
	require.Empty(t, problems)
	for _, d := range docs {
		if p, ok := d.Object.(*bpav1.Provisioning); ok {
			return p
		}
	}
	return nil
}

// TestExamplesPlanPassKubesprayRules: every example's `bpa plan --output-dir` output (the real
// ansible-inventory reading its hosts.ini) passes what kubespray checks before it runs;
// the demo's two-master example included, with its odd etcd.
func TestExamplesPlanPassKubesprayRules(t *testing.T) {
	examples, err := filepath.Glob("../../examples/provisioning-*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(examples), 4)
	for _, ex := range examples {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			dir := t.TempDir()
			_, err := plan(t, "-f", ex, "--bmh", "../../examples/bmh/"+filepath.Base(ex), "--output-dir", dir)
			require.NoError(t, err)
			params, err := translator.ProvisioningParameters(readCR(t, ex))
			require.NoError(t, err)
			assert.Equal(t, []string{"01-cluster"}, CheckPlanDir(t, dir, params["kubespray-image"]))
			ini, err := os.ReadFile(filepath.Join(dir, "01-cluster", "hosts.ini"))
			require.NoError(t, err)
			if strings.Contains(ex, "mac-and-resources") {
				assert.Contains(t, string(ini), "[etcd]\nmaster-1\n\n", "two masters: etcd on the first")
			}
		})
	}
}

// TestPrintedPlan: without -o, the playbook, reason, argv, inventory and vars, in order.
func TestPrintedPlan(t *testing.T) {
	out, err := plan(t, "-f", "../../examples/provisioning-kud-plugins.yaml", "--bmh", "../../examples/bmh/provisioning-kud-plugins.yaml")
	require.NoError(t, err)
	i, j, k := strings.Index(out, "# 1. cluster: build the cluster on every host\n'ansible-playbook' '-i' '/bpa/in/hosts.ini'"),
		strings.Index(out, "# hosts.ini (-i /bpa/in/hosts.ini)\n"), strings.Index(out, "# vars.yaml (-e @/bpa/in/extra-vars.yaml)\n")
	assert.True(t, i >= 0 && j > i && k > j, out)
	assert.Contains(t, out, "\"kud_plugins\":\n  - !unsafe")
}

// TestSamplesRenderKubesprayAcceptedInventories: the project's own CR samples (ICN-shaped
// testdata, examples) and, when BPA_REFERENCE_DIR is set, ICN's and the seed's, each with
// the hosts matched to its nodes, render an inventory and vars kubespray accepts.
func TestSamplesRenderKubesprayAcceptedInventories(t *testing.T) {
	paths, err := filepath.Glob("../../pkg/validation/testdata/good/*.yaml")
	require.NoError(t, err)
	ex, _ := filepath.Glob("../../examples/provisioning-*.yaml")
	paths = append(paths, ex...)
	if os.Getenv(reference.Env) != "" {
		paths = append(paths, reference.Samples(t)...)
	}
	checked := 0
	for _, path := range paths {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		docs, _ := validation.ValidateFile(context.Background(), path, data)
		for _, d := range docs {
			p, ok := d.Object.(*bpav1.Provisioning)
			if !ok {
				continue
			}
			t.Run(filepath.Base(path)+"/"+p.Name, func(t *testing.T) {
				nodes, err := hostmatch.Nodes(&p.Spec)
				require.NoError(t, err)
				var hosts []bpav1.HostStatus
				for i, n := range nodes {
					hosts = append(hosts, bpav1.HostStatus{Name: n.Name, Roles: n.Roles(), Etcd: n.Etcd, IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
				}
				flavor := bpav1.InventoryFlavor("")
				if p.Spec.Inventory != nil {
					flavor = p.Spec.Inventory.Flavor
				}
				ini, _, err := bpainventory.Render(hosts, bpainventory.Options{Flavor: flavor})
				require.NoError(t, err)
				vars, err := bpainventory.ExtraVars(&p.Spec)
				require.NoError(t, err)
				dir := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(dir, "hosts.ini"), ini, 0o644))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "vars.yaml"), vars, 0o644))
				params, err := translator.ProvisioningParameters(p)
				require.NoError(t, err)
				require.NoError(t, kubespraysim.Check([]string{"-i", filepath.Join(dir, "hosts.ini"), "--private-key", "/k", "-e", "@" + filepath.Join(dir, "vars.yaml"), "cluster.yml"},
					params["kubespray-image"], t.TempDir()))
			})
			checked++
		}
	}
	require.GreaterOrEqual(t, checked, 8)
}

// TestPrintedPlanShowsTheAdminsCA: with the site's BPAPolicy (--policy) naming the CR's
// artifact server with a CA, the plan's vars point containerd's mirrors at the CA BPA
// installs, and the plan says it installs it. Without the policy, or with one that lists
// another server, the CR is refused naming spec.offline.url: no plan of it would run.
func TestPrintedPlanShowsTheAdminsCA(t *testing.T) {
	dir := t.TempDir()
	p := readCR(t, "../../examples/provisioning-kud-plugins.yaml")
	p.Spec.Offline = &bpav1.OfflineConfig{URL: "https://artifacts.example:8443"}
	data, err := yaml.Marshal(p)
	require.NoError(t, err)
	cr := filepath.Join(dir, "cr.yaml")
	require.NoError(t, os.WriteFile(cr, data, 0o644))
	policyFor := func(url string) string {
		host, _, _ := strings.Cut(strings.TrimPrefix(url, "https://"), ":")
		ca := nodetrusttest.NewCA(t, []string{host}).PEM
		pol := bpav1.BPAPolicy{TypeMeta: metav1.TypeMeta{APIVersion: bpav1.GroupVersion.String(), Kind: "BPAPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName},
			Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{{URL: url, CABundle: string(ca)}}}}
		data, err := yaml.Marshal(pol)
		require.NoError(t, err)
		f := filepath.Join(dir, "policy-"+strings.NewReplacer(":", "_", "/", "_").Replace(url)+".yaml")
		require.NoError(t, os.WriteFile(f, data, 0o644))
		return f
	}
	args := []string{"-f", cr, "--bmh", "../../examples/bmh/provisioning-kud-plugins.yaml"}

	out, err := plan(t, append(args, "--policy", policyFor("https://artifacts.example:8443"))...)
	require.NoError(t, err)
	assert.Contains(t, out, "installs\n# the artifact server's CA (BPAPolicy spec.artifactServers) at "+bpav1.ArtifactsCAPath)
	assert.Contains(t, out, `"ca": !unsafe "`+bpav1.ArtifactsCAPath+`"`)

	for _, extra := range [][]string{nil, {"--policy", policyFor("https://elsewhere.example:8443")}} {
		root := cli.NewRootCommand()
		var out, errOut strings.Builder
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"plan"}, append(slices.Clone(args), extra...)...))
		require.Error(t, root.Execute(), "%v", extra)
		assert.Contains(t, errOut.String(), "spec.offline.url: Forbidden: https://artifacts.example:8443 is not allowed by", "%v", extra)
		assert.NotContains(t, out.String(), bpav1.ArtifactsCAPath, "%v", extra)
	}
}
