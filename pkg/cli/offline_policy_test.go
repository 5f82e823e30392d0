package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
)

// `bpa lint --policy` and `bpa plan --policy` refuse a spec.offline.url the site's BPAPolicy
// does not list for the CR's namespace, naming the field: the run-kubespray step and every
// node would fetch from it, so any other URL is a probe of the CR author's choosing.
func TestLintAndPlanRefuseAnUnlistedArtifactServer(t *testing.T) {
	ca := nodetrusttest.NewCA(t, []string{"tenant-a"}).PEM
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(pol, []byte(`apiVersion: bpa.akraino.org/v1alpha1
kind: BPAPolicy
metadata: {name: default}
spec:
  artifactServers:
    - url: https://tenant-a:8443
      namespaces: [a]
      caBundle: |
        `+strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n        ")+`
`), 0o644))
	cr := func(ns, url string) string {
		f := filepath.Join(dir, ns+".yaml")
		require.NoError(t, os.WriteFile(f, []byte(`apiVersion: bpa.akraino.org/v1alpha1
kind: Provisioning
metadata: {name: offline, namespace: `+ns+`, labels: {cluster: c1}}
spec:
  masters:
    - master-1:
  offline: {url: "`+url+`"}
`), 0o644))
		return f
	}
	out, _, err := bpa(t, "lint", "--policy", pol, "-f", cr("a", "https://tenant-a:8443"))
	require.NoError(t, err, out)

	for _, c := range []struct{ ns, url string }{{"b", "https://tenant-a:8443"}, {"a", "https://169.254.169.254"}} {
		f := cr(c.ns, c.url)
		want := "spec.offline.url: Forbidden: " + c.url + " is not allowed by BPAPolicy default (" + pol + ") (spec.artifactServers[].url for namespace " + c.ns + ": "
		out, stderr, err := bpa(t, "lint", "--policy", pol, "-f", f)
		requireExit1(t, err, "")
		assert.Empty(t, out, "problems go to stderr")
		assert.Contains(t, stderr, want)
		_, stderr, err = bpa(t, "plan", "--policy", pol, "-f", f, "--bmh", examples+"bmh/provisioning-by-mac.yaml")
		requireExit1(t, err, "problem(s) in "+f)
		assert.Contains(t, stderr, want)
	}
}
