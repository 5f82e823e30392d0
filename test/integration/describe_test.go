package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

// secretValue is the data of the published kubeconfig Secret in the fixture.
const secretValue = "SECRET-KUBECONFIG-DATA"

// TestDescribeOnRig creates a Provisioning with two runs, its published Secret and
// ConfigMap, and a Cluster, on a real kube-apiserver with BPA's and Argo's CRDs, then runs
// `bpa describe` (the command's own code, through a kubeconfig) and `kubectl bpa describe`
// (the built binary as a kubectl plugin, through the real kubectl).
func TestDescribeOnRig(t *testing.T) {
	// Argo's own install manifests apply the schema-less CRDs, as here.
	r := rig.ForTest(t, rig.Options{MinimalArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	require.NoError(t, bpatest.CreateFixture(ctx, c, r.Namespace, filepath.Join(root, "pkg/describe/testdata/provisioning.yaml")))
	require.NoError(t, bpatest.CreateFixture(ctx, c, r.Namespace, filepath.Join(root, "pkg/describe/testdata/cluster.yaml")))
	s := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: "cluster-xyz-kubeconfig"}, s))
	require.Equal(t, secretValue, string(s.Data["value"]), "the Secret holds the data describe must not show")

	describe := func(args ...string) string {
		t.Helper()
		cmd := cli.NewRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"describe", "--kubeconfig", r.Kubeconfig, "-n", r.Namespace}, args...))
		require.NoError(t, cmd.ExecuteContext(ctx))
		t.Logf("bpa describe %s:\n%s", strings.Join(args, " "), out.String())
		return out.String()
	}
	got := describe("provisioning", "provisioning-sample-xyz")
	checkDescribedProvisioning(t, got)

	cl := describe("cluster", "cluster-sample")
	assert.True(t, strings.HasPrefix(cl, "Cluster "+r.Namespace+"/cluster-sample  Pending"), cl)
	assert.Contains(t, cl, "├─Provisioning "+r.Namespace+"/provisioning-sample-xyz  Succeeded  6/6")
	assert.Contains(t, cl, "│ │ └─publish-kubeconfig  Succeeded", "the Provisioning's steps, nested")
	assert.Contains(t, cl, "└─Software "+r.Namespace+"/example-software  not found")
	assert.NotContains(t, cl, secretValue)

	// A deleted object reads as missing.
	require.NoError(t, c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: "cluster-xyz-configmap"}}))
	assert.Contains(t, describe("prov", "provisioning-sample-xyz"), "└─ConfigMap  cluster-xyz-configmap   missing")

	// A CR that does not exist is an error that names it.
	cmd := cli.NewRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"describe", "--kubeconfig", r.Kubeconfig, "-n", r.Namespace, "software", "nope"})
	assert.EqualError(t, cmd.ExecuteContext(ctx), "Software "+r.Namespace+"/nope not found")

	// The same binary as a kubectl plugin, found by the real kubectl on PATH, reading
	// the kubeconfig from $KUBECONFIG as kubectl does.
	kubectl := findKubectl(t, root)
	plugins := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(plugins, "bpa"), "./cmd/bpa")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/bpa: %s", out)
	// `make build` links bin/kubectl-bpa to bin/bpa the same way.
	require.NoError(t, os.Link(filepath.Join(plugins, "bpa"), filepath.Join(plugins, "kubectl-bpa")))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+r.Kubeconfig)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "kubectl %s: %s", strings.Join(args, " "), stderr.String())
		return stdout.String()
	}
	plugin := run("bpa", "describe", "provisioning", "provisioning-sample-xyz", "-n", r.Namespace)
	t.Logf("kubectl bpa describe:\n%s", plugin)
	checkDescribedProvisioning(t, plugin)
	assert.Contains(t, run("bpa", "describe", "--help"), "kubectl bpa describe provisioning|software|cluster NAME")
}

// checkDescribedProvisioning checks the tree of the provisioning.yaml fixture as the
// apiserver serves it.
func checkDescribedProvisioning(t *testing.T, got string) {
	t.Helper()
	assert.True(t, strings.HasPrefix(got, "Provisioning bpa-system/provisioning-sample-xyz  Succeeded  6/6  cluster cluster-xyz\n"), got)
	assert.Regexp(t, `│ ├─EtcdQuorum +True  OddEtcdCount`, got)
	assert.Regexp(t, `│ └─CertificatesExpiring +True  CertificateExpiring`, got)
	assert.Contains(t, got, "├─Workflow provisioning-sample-xyz-provision-2  Succeeded  6/6")
	for _, step := range []string{"discover-hosts", "resolve-leases", "render-inventory", "run-kubespray", "verify", "publish-kubeconfig"} {
		assert.Regexp(t, "(?m)^│ [├└]─"+step+" +Succeeded +[0-9]", got, step)
	}
	assert.Contains(t, got, "│ └─provisioning-sample-xyz-provision-1  Failed  3/6")
	assert.Contains(t, got, "step run-kubespray failed: ansible-playbook exited 2: UNREACHABLE worker-1")
	assert.NotContains(t, got, "other-provision-1", "another CR's run")
	assert.Contains(t, got, "│ ├─master-1  master,worker  10.10.0.11  00:c5:16:05:61:b2  BareMetalHost host-a")
	assert.Contains(t, got, "│ └─worker-1  worker         10.10.0.12")
	assert.Regexp(t, "├─Secret +cluster-xyz-kubeconfig +exists +by Workflow provisioning-sample-xyz-provision-2\n", got)
	assert.NotContains(t, got, secretValue)
	assert.NotContains(t, got, base64.StdEncoding.EncodeToString([]byte(secretValue)))
	assert.NotContains(t, got, "\x1b", "no colour when stdout is not a terminal")
}

// findKubectl prefers bin/kubectl (from hack/build-tools.sh, when it builds one), then
// kubectl on PATH; without either the test fails, as the plugin path is what it proves.
func findKubectl(t *testing.T, root string) string {
	t.Helper()
	if p := filepath.Join(root, "bin", "kubectl"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("kubectl")
	require.NoError(t, err, "kubectl is needed to run bpa as a kubectl plugin")
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
