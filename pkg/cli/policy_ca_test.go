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

// Issue 26 item 7: `bpa lint` refuses a BPAPolicy whose caBundle could vouch for more than
// its artifact server, naming the field, both as the policy CRs are judged by (--policy,
// which refuses to run) and as a file to lint (-f); a CA constrained to the server passes.
// Before, both took any CA, which every program on the nodes then trusted for every name.
func TestLintRefusesAPolicyCAWiderThanItsServer(t *testing.T) {
	dir := t.TempDir()
	policyFile := func(name string, ca []byte) string {
		f := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(f, []byte(`apiVersion: bpa.akraino.org/v1alpha1
kind: BPAPolicy
metadata: {name: default}
spec:
  artifactServers:
    - url: https://artifacts.site.example:8443
      caBundle: |
        `+strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n        ")+`
`), 0o644))
		return f
	}
	cr := filepath.Join(dir, "cr.yaml")
	require.NoError(t, os.WriteFile(cr, []byte(`apiVersion: bpa.akraino.org/v1alpha1
kind: Provisioning
metadata: {name: offline, labels: {cluster: c1}}
spec:
  masters:
    - master-1:
  offline: {url: "https://artifacts.site.example:8443"}
`), 0o644))

	good := policyFile("good", nodetrusttest.NewCA(t, []string{"artifacts.site.example"}).PEM)
	out, _, err := bpa(t, "lint", "--policy", good, "-f", cr)
	require.NoError(t, err, out)
	out, _, err = bpa(t, "lint", "-f", good)
	require.NoError(t, err, out)

	for name, tc := range map[string]struct {
		ca          []byte
		admission   string // what the CRD's own rule says, as the apiserver does
		constraints string // what the full check says
	}{
		"unconstrained": {nodetrusttest.Unconstrained(t).PEM, "every certificate must carry X.509 name constraints",
			"certificate 1 (CN=BPA test unconstrained CA): no X.509 name constraints: it may vouch for any name"},
		"another server's": {nodetrusttest.NewCA(t, []string{"other.site.example"}).PEM, "",
			"certificate 1 (CN=BPA test artifact server CA): its name constraints do not permit the artifact server's host artifacts.site.example"},
	} {
		t.Run(name, func(t *testing.T) {
			f := policyFile(name, tc.ca)
			_, _, err := bpa(t, "lint", "--policy", f, "-f", cr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "BPAPolicy default: spec.artifactServers[0].caBundle: Invalid value: "+tc.constraints)

			_, out, err := bpa(t, "lint", "-f", f) // problems go to stderr
			var exit *ExitError
			require.ErrorAs(t, err, &exit, "lint exits 1")
			want := "BPAPolicy/default: spec.artifactServers[0].caBundle: Invalid value: "
			if tc.admission != "" {
				assert.Contains(t, out, want+`"string": `+tc.admission)
			} else {
				assert.Contains(t, out, want+tc.constraints)
			}
			assert.NotContains(t, out, "metadata.labels.cluster", "a BPAPolicy has no cluster")
		})
	}
}

// A policy file is judged by the BPAPolicy CRD's schema too, as the apiserver judges the
// object: an enum value such as hostRelease exists only there.
func TestLintPolicyFileSchema(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("apiVersion: bpa.akraino.org/v1alpha1\nkind: BPAPolicy\nmetadata: {name: default}\nspec: {hostRelease: Wipe}\n"), 0o644))
	_, _, err := bpa(t, "lint", "--policy", pol, "-f", examples+"provisioning-by-mac.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.hostRelease: Unsupported value: "Wipe": supported values: "Deprovision", "Retain"`)

	require.NoError(t, os.WriteFile(pol, []byte("apiVersion: bpa.akraino.org/v1alpha1\nkind: BPAPolicy\nmetadata: {name: default}\nspec: {hostRelease: Retain}\n"), 0o644))
	out, _, err := bpa(t, "lint", "--policy", pol, "-f", examples+"provisioning-by-mac.yaml")
	require.NoError(t, err, out)
}
