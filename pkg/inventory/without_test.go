package inventory

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// TestWithout: the real ansible-inventory finds the left-out hosts in no group of either
// flavour, and every other host where it was, with its address.
func TestWithout(t *testing.T) {
	hosts := samples["multi"]
	for _, flavor := range []bpav1.InventoryFlavor{bpav1.InventoryFlavorKubespray, bpav1.InventoryFlavorKUD} {
		ini, _, err := Render(hosts, Options{Flavor: flavor})
		require.NoError(t, err)
		before := ansibleInventory(t, ini)
		out, err := Without(ini, []string{"worker-1", "master-3"})
		require.NoError(t, err)
		after := ansibleInventory(t, out)
		for g := range groups[flavor] {
			want := slices.DeleteFunc(before.members(g), func(h string) bool { return h == "worker-1" || h == "master-3" })
			assert.Equal(t, want, after.members(g), "%s: group %s", flavor, g)
		}
		assert.NotEmpty(t, append(after.members("kube_node"), after.members("kube-node")...), flavor)
		assert.Equal(t, "10.10.10.22", after.hostvar("worker-2", "ansible_host"))
		assert.Equal(t, map[string]string{"master-1": "10.10.10.11", "master-2": "10.10.10.12", "worker-2": "10.10.10.22"}, Addresses(out))
	}
}

// A host named like a group is dropped from the groups, never the group from a
// [group:children] section; what is left must still pass CheckInventory.
func TestWithoutKeepsChildren(t *testing.T) {
	ini := "[all]\nkube-node ansible_host=10.0.0.1\nw ansible_host=10.0.0.2\n[kube-node]\nkube-node\nw\n[k8s-cluster:children]\nkube-node\n"
	out, err := Without([]byte(ini), []string{"kube-node"})
	require.NoError(t, err)
	assert.Equal(t, "[all]\nw ansible_host=10.0.0.2\n[kube-node]\nw\n[k8s-cluster:children]\nkube-node\n", string(out))

	_, err = Without([]byte("[all]\nm ansible_host=10.0.0.1 ansible_connection=local\n"), []string{"w"})
	assert.ErrorContains(t, err, "the inventory without w: line 2: host m: only the variables")
}
