package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInventoryKubespray(t *testing.T) {
	out, stderr, err := bpa(t, "inventory", "-f", examples+"provisioning-by-mac.yaml", "--bmh", examples+"bmh/provisioning-by-mac.yaml",
		"--leases", examples+"leases/dhcpd.leases")
	require.NoError(t, err)
	assert.Equal(t, `# Kubespray inventory rendered by BPA from the cluster's Provisioning. BPA renders it again
# on every run, so change the CR (or its inventory template) rather than this file.
[all]
master ansible_host=10.213.1.11 ip=10.213.1.11
worker-1 ansible_host=10.213.1.12 ip=10.213.1.12
worker-2 ansible_host=10.213.1.13 ip=10.213.1.13

[kube_control_plane]
master

[etcd]
master

[kube_node]
worker-1
worker-2

[k8s_cluster:children]
kube_control_plane
kube_node
`, out)
	assert.Empty(t, stderr)
}

func TestInventoryKUDOddEtcd(t *testing.T) {
	out, stderr, err := bpa(t, "inventory", "--flavor", "kud", "-f", examples+"provisioning-mac-and-resources.yaml",
		"--bmh", examples+"bmh/provisioning-mac-and-resources.yaml")
	require.NoError(t, err)
	assert.Contains(t, out, "[kube-master]\nmaster-1\nmaster-2\n\n[kube-node]\nworker\n")
	assert.Contains(t, out, "[ovn-central]\nmaster-1\nmaster-2\n\n[ovn-controller]\nworker\n\n[virtlet]\nworker\n\n[k8s-cluster:children]\nkube-node\nkube-master\n")
	// The demo's two masters: etcd on the first only, as kubespray requires an odd etcd.
	assert.Contains(t, out, "[etcd]\nmaster-1\n\n")
	assert.Empty(t, stderr)
}

func TestInventoryTemplates(t *testing.T) {
	out, _, err := bpa(t, "inventory", "-f", examples+"provisioning-kud-plugins.yaml", "--bmh", examples+"bmh/provisioning-kud-plugins.yaml",
		"--template", hostsTestdata+"inventory.tmpl")
	require.NoError(t, err)
	assert.Equal(t, "# 1 hosts rendered with a user template\n[all]\nmaster-1 ansible_host=10.213.1.19 access_ip=10.213.1.19\n\n[kube_control_plane]\nmaster-1\n", out)

	// A CR naming a template ConfigMap and a flavour: offline, the flavour applies and the
	// user hears that the ConfigMap cannot be read.
	data, err := os.ReadFile(examples + "provisioning-kud-plugins.yaml")
	require.NoError(t, err)
	cr := filepath.Join(t.TempDir(), "cr.yaml")
	require.NoError(t, os.WriteFile(cr, append(data, "  inventory:\n    flavor: kud\n    templateConfigMapRef:\n      name: my-inventory\n"...), 0o644))
	out, stderr, err := bpa(t, "inventory", "-f", cr, "--bmh", examples+"bmh/provisioning-kud-plugins.yaml")
	require.NoError(t, err)
	assert.Contains(t, out, "[kube-master]\nmaster-1\n")
	assert.Contains(t, stderr, "warning: Provisioning sample-kud-plugins renders with the template in ConfigMap my-inventory; this uses the built-in one")

	_, _, err = bpa(t, "inventory", "-f", examples+"provisioning-kud-plugins.yaml", "--bmh", examples+"bmh/provisioning-kud-plugins.yaml", "--flavor", "ansible")
	requireExit2(t, err, `--flavor: unknown inventory flavor "ansible"`)
	_, _, err = bpa(t, "inventory", "-f", examples+"provisioning-kud-plugins.yaml", "--bmh", examples+"bmh/provisioning-kud-plugins.yaml", "--template", "nope.tmpl")
	requireExit2(t, err, "open nope.tmpl")
}

func TestInventoryFailsLikeHosts(t *testing.T) {
	_, _, err := bpa(t, "inventory", "-f", hostsTestdata+"tricky-freed-provisioning.yaml", "--bmh", hostsTestdata+"tricky-hosts.yaml",
		"--leases", trickyLeases, "--now", "2019-08-08T22:30:00Z")
	requireExit1(t, err, "no current lease for 4 MAC(s)")
}
