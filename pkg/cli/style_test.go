package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// Issue 27, item 4: the kubeconfig flags are the root's, on every verb; a verb that would
// not use one refuses it (exit status 2) rather than ignore it.
func TestKubeconfigFlagsAreTheRoots(t *testing.T) {
	root := NewRootCommand()
	for _, path := range [][]string{{"controller"}, {"serve"}, {"describe"}, {"plan"}, {"artifacts", "ls"}, {"lint"}, {"hosts"}} {
		cmd, _, err := root.Find(path)
		require.NoError(t, err)
		for _, name := range []string{"kubeconfig", "context", "namespace"} {
			// The nearest declaration wins: a verb's (or its parent's) own would shadow the root's.
			assert.Same(t, root.PersistentFlags().Lookup(name), cmd.InheritedFlags().Lookup(name), "bpa %s --%s is the root's", strings.Join(path, " "), name)
			assert.Nil(t, cmd.LocalFlags().Lookup(name), "bpa %s declares --%s again", strings.Join(path, " "), name)
		}
	}

	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, c := range []struct {
		args []string
		want string
	}{
		// Before: `unknown flag: --kubeconfig` (controller-runtime's flag sat on Go's flag set).
		{[]string{"controller", "--kubeconfig", missing}, "loading the kubeconfig: stat " + missing + ": no such file or directory"},
		{[]string{"serve", "--plain-http", "--kubeconfig", missing}, "loading the kubeconfig: stat " + missing + ": no such file or directory"},
		{[]string{"controller", "-n", "a", "--namespaces", "b,c"}, "-n a and --namespaces b,c both name the namespaces to watch: give one"},
		{[]string{"serve", "-n", "a"}, "--namespace does not apply to bpa serve: it works across namespaces"},
		{[]string{"artifacts", "ls", "--namespace", "a"}, "--namespace does not apply to bpa artifacts ls: it works across namespaces"},
		{[]string{"lint", "--kubeconfig", missing}, "--kubeconfig does not apply to bpa lint: it reads no cluster"},
		{[]string{"hosts", "--context", "x", "-f", "cr.yaml", "--bmh", "hosts.yaml"}, "--context does not apply to bpa hosts: it reads no cluster"},
		{[]string{"plan", "-f", examples + "provisioning-by-mac.yaml", "--bmh", examples + "bmh/provisioning-by-mac.yaml", "-n", "a"},
			"--kubeconfig, --context and -n apply to --live NAME"},
	} {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			_, _, err := bpa(t, c.args...)
			requireExit2(t, err, c.want)
		})
	}
}

// Issue 27, item 4: hosts prints a table, or with -o yaml|json the list discover-hosts
// hands on, the same document in either format.
func TestHostsOutputFormats(t *testing.T) {
	args := []string{"hosts", "-f", examples + "provisioning-by-resources.yaml", "--bmh", examples + "bmh/provisioning-by-resources.yaml"}
	text, _, err := bpa(t, args...)
	require.NoError(t, err)
	assert.Equal(t, `NAME      ROLES   ETCD  IP           MAC                BAREMETALHOST
master-1  master  yes   10.213.1.18  52:54:00:00:00:08  node-08
worker-1  worker  -     10.213.1.17  52:54:00:00:00:07  node-07
worker-2  worker  -     10.213.1.16  52:54:00:00:00:06  node-06
`, text)

	asYAML, _, err := bpa(t, append(args, "-o", "yaml")...)
	require.NoError(t, err)
	asJSON, _, err := bpa(t, append(args, "-o", "json")...)
	require.NoError(t, err)
	var hosts []bpav1.HostStatus
	require.NoError(t, yaml.UnmarshalStrict([]byte(asYAML), &hosts), asYAML)
	assert.Equal(t, []bpav1.HostStatus{
		{Name: "master-1", Roles: []string{"master"}, MAC: "52:54:00:00:00:08", IP: "10.213.1.18", BareMetalHost: "node-08", Etcd: true},
		{Name: "worker-1", Roles: []string{"worker"}, MAC: "52:54:00:00:00:07", IP: "10.213.1.17", BareMetalHost: "node-07"},
		{Name: "worker-2", Roles: []string{"worker"}, MAC: "52:54:00:00:00:06", IP: "10.213.1.16", BareMetalHost: "node-06"},
	}, hosts)
	fromYAML, err := yaml.YAMLToJSON([]byte(asYAML))
	require.NoError(t, err)
	assert.JSONEq(t, asJSON, string(fromYAML))
}

// The text of `bpa leases`: a lease that never ends says so, and a hostname from the file
// (tabs, quotes) stays in its column.
func TestLeasesText(t *testing.T) {
	out, _, err := bpa(t, "leases", "-f", trickyLeases, "--now", "2019-08-08T22:30:00Z")
	require.NoError(t, err)
	assert.Equal(t, `MAC                IP          HOSTNAME    EXPIRES
52:54:00:00:00:01  10.0.0.11   superseded  never
52:54:00:00:00:06  10.0.0.60   forever     never
52:54:00:00:00:09  10.0.0.80   -           never
52:54:00:00:00:0a  10.0.0.100  -           2030-01-01T00:00:00Z
52:54:00:00:00:0c  10.0.0.120  -           never
52:54:00:ab:cd:07  10.0.0.70   tab"bed     2019-08-09T22:00:00Z
`, out)
}

// render prints YAML documents by default and JSON documents with -o json, the streams
// `kubectl create -f` and `argo submit` read; a Workflow has no text form.
func TestRenderOutputFormats(t *testing.T) {
	file := examples + "provisioning-by-mac.yaml"
	asYAML, _, err := bpa(t, "render", "-f", file)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(asYAML, "---\n"), asYAML)
	asJSON, _, err := bpa(t, "render", "-f", file, "-o", "json")
	require.NoError(t, err)
	var wf map[string]any
	require.NoError(t, json.Unmarshal([]byte(asJSON), &wf))
	assert.Equal(t, "Workflow", wf["kind"])
	fromYAML, err := yaml.YAMLToJSON([]byte(strings.TrimPrefix(asYAML, "---\n")))
	require.NoError(t, err)
	assert.JSONEq(t, asJSON, string(fromYAML))

	_, _, err = bpa(t, "render", "-f", file, "-o", "text")
	requireExit2(t, err, `invalid argument "text" for "-o, --output" flag: want yaml, json`)
}

// Issue 27, item 4: plan's output directory is --output-dir; -o DIR still writes it, with a
// deprecation message, and -o yaml|json prints the plan as one document.
func TestPlanOutputDirAndFormats(t *testing.T) {
	args := []string{"plan", "-f", examples + "provisioning-by-mac.yaml", "--bmh", examples + "bmh/provisioning-by-mac.yaml"}
	dir := filepath.Join(t.TempDir(), "plan")
	out, stderr, err := bpa(t, append(args, "--output-dir", dir)...)
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Empty(t, stderr)
	want, err := os.ReadFile(filepath.Join(dir, "01-cluster", "hosts.ini"))
	require.NoError(t, err)

	old := filepath.Join(t.TempDir(), "old")
	_, stderr, err = bpa(t, append(args, "-o", old)...)
	require.NoError(t, err)
	assert.Equal(t, "bpa plan: -o DIR is deprecated, use --output-dir "+old+" (-o takes text, yaml or json)\n", stderr)
	got, err := os.ReadFile(filepath.Join(old, "01-cluster", "hosts.ini"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))

	asJSON, _, err := bpa(t, append(args, "-o", "json")...)
	require.NoError(t, err)
	var doc planDocument
	require.NoError(t, json.Unmarshal([]byte(asJSON), &doc), asJSON)
	require.Len(t, doc.Steps, 1)
	require.Len(t, doc.Steps[0].Operations, 1)
	op := doc.Steps[0].Operations[0]
	assert.Equal(t, kubespray.Cluster, op.Playbook)
	assert.Equal(t, string(want), op.Inventory)
	assert.Contains(t, op.Argv, "cluster.yml")
	asYAML, _, err := bpa(t, append(args, "-o", "yaml")...)
	require.NoError(t, err)
	fromYAML, err := yaml.YAMLToJSON([]byte(asYAML))
	require.NoError(t, err)
	assert.JSONEq(t, asJSON, string(fromYAML))

	text, _, err := bpa(t, args...)
	require.NoError(t, err)
	assert.Contains(t, text, "# Plan: 1 step(s)")

	_, _, err = bpa(t, append(args, "-o", "json", "--output-dir", dir)...)
	requireExit2(t, err, "-o json prints the plan and --output-dir writes it to files: give one")
	_, _, err = bpa(t, append(args, "-o", old, "--output-dir", dir)...)
	requireExit2(t, err, "-o "+old+" and --output-dir "+dir+": give --output-dir alone")
}

// artifacts ls's --json is a deprecated spelling of -o json.
func TestArtifactsListJSONIsDeprecated(t *testing.T) {
	ls, _, err := NewRootCommand().Find([]string{"artifacts", "ls"})
	require.NoError(t, err)
	f := ls.Flags().Lookup("json")
	require.NotNil(t, f)
	assert.Equal(t, "use -o json", f.Deprecated)
	_, _, err = bpa(t, "artifacts", "--server", "https://127.0.0.1:1", "--token-file", "/nonexistent", "ls", "--json", "-o", "yaml")
	requireExit2(t, err, "--json and -o yaml disagree: give -o alone")
}
