package kubespray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every immutable setting cites a task of the file its role names at every supported tag,
// or is BPA policy with no task.
func TestImmutableSettingsCiteRealTasks(t *testing.T) {
	files := map[string]string{"network_plugin/calico": "roles/network_plugin/calico/tasks/check.yml"}
	for _, tag := range Versions() {
		_, tasks := taskLists(t, tag)
		for _, s := range ImmutableSettings {
			if s.Role == PolicyRole {
				assert.Empty(t, s.Task, s.Var)
				continue
			}
			require.Contains(t, files, s.Role, s.Var)
			assert.Contains(t, tasks[files[s.Role]], s.Task, "%s: kubespray %s", s.Var, tag)
		}
	}
}

func TestImmutableValues(t *testing.T) {
	v := ImmutableValues(nil)
	assert.Equal(t, map[string]string{"kube_network_plugin": "calico", "kube_pods_subnet": "10.233.64.0/18", "calico_pool_cidr": "10.233.64.0/18",
		"calico_pool_blocksize": "26", "calico_ipip_mode": "Never", "calico_vxlan_mode": "Always", "kube_service_addresses": "10.233.0.0/18",
		"etcd_deployment_type": "host", "cluster_name": "cluster.local", "dns_domain": "cluster.local"}, v, "kubespray's defaults")
	w := ImmutableValues(map[string]any{"kube_pods_subnet": "10.244.0.0/16", "cluster_name": "edge.local"})
	assert.Equal(t, "10.244.0.0/16", w["calico_pool_cidr"], "calico_pool_cidr | default(kube_pods_subnet)")
	assert.Equal(t, "edge.local", w["dns_domain"], `dns_domain: "{{ cluster_name }}"`)

	assert.Nil(t, ImmutableChange(v, v))
	assert.Equal(t, "kube_pods_subnet", ImmutableChange(v, w).Var)
	assert.Nil(t, ImmutableChange(map[string]string{"kube_network_plugin": "calico"}, w), "settings the cluster's record lacks are not compared")
	flannel := ImmutableValues(map[string]any{"kube_network_plugin": "flannel", "calico_pool_blocksize": "26"})
	assert.Equal(t, "kube_network_plugin", ImmutableChange(v, flannel).Var)
	f2 := ImmutableValues(map[string]any{"kube_network_plugin": "flannel", "calico_ipip_mode": "Always"})
	assert.Nil(t, ImmutableChange(flannel, f2), "calico's pool settings mean nothing without calico")
	c2 := ImmutableValues(map[string]any{"calico_ipip_mode": "Always"})
	assert.Equal(t, "calico_ipip_mode", ImmutableChange(v, c2).Var)
}

// TestPodSubnetCitesCalicoOnlyWithCalico: calico's pool check is kubespray's reason only
// while calico runs; with another plugin the same refusal is BPA's own, and says so.
func TestPodSubnetCitesCalicoOnlyWithCalico(t *testing.T) {
	for plugin, want := range map[string]string{"calico": "kubespray's TASK [network_plugin/calico : " + calicoPoolCheck + "]", "flannel": PolicyRole} {
		applied := map[string]string{"kube_network_plugin": plugin, "kube_pods_subnet": "10.244.0.0/16"}
		desired := map[string]string{"kube_network_plugin": plugin, "kube_pods_subnet": "10.245.0.0/16"}
		s := ImmutableChange(applied, desired)
		if s == nil || s.Var != "kube_pods_subnet" || s.Source() != want {
			t.Errorf("%s: got %+v, want kube_pods_subnet from %s", plugin, s, want)
		}
	}
}
