package kubespray

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func groups(cp, etcd, node []string) Inventory {
	all := append(append([]string{}, cp...), node...)
	return Inventory{"kube_control_plane": cp, "etcd": etcd, "kube_node": node, "k8s_cluster": all}
}

// TestRules: every rule cites the kubespray task it comes from, by name, in the file named
// (v2.28: roles/validate_inventory/tasks/main.yml; v2.27:
// roles/kubernetes/preinstall/tasks/0040-verify-settings.yml), and fails with that task's
// message.
func TestRules(t *testing.T) {
	ok := groups([]string{"m1"}, []string{"m1"}, []string{"w1"})
	for _, tc := range []struct {
		release string
		inv     Inventory
		vars    map[string]any
		task    string // kubespray's task name
		msg     string
	}{
		{"v2.28.0", groups([]string{"m1", "m2"}, []string{"m1", "m2"}, []string{"w1"}), nil,
			"Stop if even number of etcd hosts", "Assertion failed"},
		{"v2.27.0", groups([]string{"m1", "m2", "m3", "m4"}, []string{"m1", "m2", "m3", "m4"}, nil), nil,
			"Stop if even number of etcd hosts", "Assertion failed"},
		// groups.get('etcd', groups.kube_control_plane): no [etcd] at all counts the control plane
		{"v2.28.0", Inventory{"kube_control_plane": {"m1", "m2"}, "k8s_cluster": {"m1", "m2"}}, map[string]any{"etcd_deployment_type": "kubeadm"},
			"Stop if even number of etcd hosts", "Assertion failed"},
		{"v2.28.0", groups(nil, []string{"m1"}, []string{"w1"}), nil,
			"Stop if kube_control_plane group is empty", "Assertion failed"},
		{"v2.28.0", groups([]string{"m1"}, []string{}, []string{"w1"}), nil,
			"Stop if etcd group is empty in external etcd mode", "Group 'etcd' cannot be empty in external etcd mode"},
		{"v2.28.0", ok, map[string]any{"helm_enabled": "true"},
			"Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")", "Assertion failed (helm_enabled | type_debug == 'bool')"},
		{"v2.27.0", ok, map[string]any{"download_run_once": "false"},
			"Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")", "false isn't a bool (download_run_once)"},
		{"v2.28.0", ok, map[string]any{"kube_version": "v1.32.5"},
			"Stop if some versions have a 'v' left at the start", "All version string used in kubespray have been normalized to not use a leading 'v'."},
		{"v2.28.0", ok, map[string]any{"calico_version": "v3.29.1"},
			"Stop if some versions have a 'v' left at the start", "(calico_version)"},
		{"v2.28.0", ok, map[string]any{"kube_version": "1.29.9"},
			"Stop if unsupported version of Kubernetes", "The current release of Kubespray only support newer version of Kubernetes than 1.30.0 - You are trying to apply 1.29.9"},
		{"v2.27.0", ok, map[string]any{"kube_version": "v1.28.0"},
			"Stop if unsupported version of Kubernetes", "than v1.29.0 - You are trying to apply v1.28.0"},
		{"v2.28.0", ok, map[string]any{"kube_version": "1.32.6"},
			"Download | kubelet checksum (kubelet_checksums[image_arch][kube_version])", "'dict object' has no attribute '1.32.6'"},
		{"v2.27.0", ok, map[string]any{"kube_version": "1.31.4"}, // v2.27's checksum keys carry the v
			"Download | kubelet checksum (kubelet_checksums[image_arch][kube_version])", "'dict object' has no attribute '1.31.4'"},
		{"v2.28.0", ok, map[string]any{"kube_pods_subnet": "10.244.64.1/18"},
			"Check that kube_pods_subnet is a network range", "kube_pods_subnet = '10.244.64.1/18' is not a valid network range"},
		{"v2.28.0", ok, map[string]any{"kube_service_addresses": "10.96.0.0"},
			"Check that kube_service_addresses is a network range", "kube_service_addresses = '10.96.0.0' is not a valid network range"},
		{"v2.28.0", ok, map[string]any{"kube_pods_subnet": "10.233.16.0/20"},
			"Check that kube_pods_subnet does not collide with kube_service_addresses", "kube_pods_subnet cannot be the same network segment as kube_service_addresses"},
		{"v2.28.0", groups([]string{"m1"}, []string{"m1"}, []string{"w1", "w2"}), map[string]any{"kube_network_plugin": "flannel", "kube_pods_subnet": "10.244.0.0/23"},
			"Check that ipv4 IP range is enough for the nodes", "Not enough ipv4 IPs are available for the desired node count."},
		{"v2.27.0", groups([]string{"m1"}, []string{"m1"}, []string{"w1", "w2"}), map[string]any{"kube_network_plugin": "flannel", "kube_pods_subnet": "10.244.0.0/23"},
			"Check that IP range is enough for the nodes", "Not enough IPs are available for the desired node count."},
	} {
		t.Run(tc.release+"/"+tc.task, func(t *testing.T) {
			p, patch, err := ProfileFor(tc.release)
			require.NoError(t, err)
			got := p.CheckInventory(tc.inv, tc.vars, patch)
			require.NotEmpty(t, got)
			v := got[0].(Violation)
			assert.Equal(t, tc.task, v.Task)
			assert.Contains(t, v.Msg, tc.msg)
			assert.Contains(t, v.Error(), "TASK [")
		})
	}
}

// What BPA renders by default passes in both releases; typed booleans, a version in the
// release's format and a calico-sized cluster too.
func TestRulesAccept(t *testing.T) {
	for release, kube := range map[string]string{"v2.27.0": "v1.31.4", "v2.28.0": "1.32.5", "v2.28.1": "1.32.8"} {
		p, patch, err := ProfileFor(release)
		require.NoError(t, err)
		vars := map[string]any{"kube_version": kube, "helm_enabled": true, "download_run_once": false, "kube_pods_subnet": "10.244.64.0/18",
			"kube_network_node_prefix": json.Number("24")}
		assert.Empty(t, p.CheckInventory(groups([]string{"m1", "m2", "m3", "m4"}, []string{"m1", "m2", "m3"}, []string{"w1"}), vars, patch), release)
		assert.Empty(t, p.CheckInventory(groups([]string{"m1"}, []string{"m1"}, nil), nil, patch), release)
	}
}

func TestIgnoreAssertErrors(t *testing.T) {
	p, patch, _ := ProfileFor("v2.28.0")
	even := groups([]string{"m1", "m2"}, []string{"m1", "m2"}, nil)
	assert.NotEmpty(t, p.CheckInventory(even, map[string]any{"ignore_assert_errors": false}, patch))
	assert.Empty(t, p.CheckInventory(even, map[string]any{"ignore_assert_errors": "yes"}, patch), "kubespray's add-a-control-plane-node procedure runs with -e ignore_assert_errors=yes")
}

// TestPlaybookRules: what each playbook checks before it changes a host, citing the task
// (playbooks/remove_node.yml, playbooks/reset.yml, roles/kubernetes/preinstall/tasks/
// 0040-verify-settings.yml for --limit).
func TestPlaybookRules(t *testing.T) {
	inv := Inventory{"all": {"m1", "m2", "m3", "w1", "w2"}, "kube_control_plane": {"m1", "m2", "m3"}, "etcd": {"m1", "m2", "m3"},
		"kube_node": {"w1", "w2"}, "k8s_cluster": {"m1", "m2", "m3", "w1", "w2"}}
	none := func(string) bool { return false }
	for _, tc := range []struct {
		name   string
		op     Operation
		cached func(string) bool
		task   string
		msg    string
	}{
		{"remove without node", Operation{Playbook: Remove, Vars: map[string]any{"skip_confirmation": true}}, none,
			"Assert that nodes are specified for removal", "No nodes specified for removal. The `node` variable must be set explicitly."},
		{"remove unconfirmed", Operation{Playbook: Remove, Vars: map[string]any{"node": "w1"}}, none,
			"Fail if user does not confirm deletion", "Delete nodes confirmation failed"},
		{"remove first control plane", RemoveNodes([]string{"w1", "m1"}, false, ""), none,
			"Post node removal", "Currently cannot remove first control plane node or first etcd node"},
		{"reset unconfirmed", Operation{Playbook: Reset}, none,
			"Check confirmation", "Reset confirmation failed"},
		{"scale --limit without facts", ScaleNodes([]string{"w2"}, ""), func(h string) bool { return h != "m2" },
			"Stop if any host not in '--limit' does not have a fact cache", "The following excluded hosts are not cached: m2"},
		{"cluster --limit group without facts", Operation{Playbook: Cluster, Limit: []string{"kube_control_plane"}}, none,
			"Stop if any host not in '--limit' does not have a fact cache", "Please run the facts.yml playbook first without '--limit'."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, patch, _ := ProfileFor("v2.28.0")
			errs := p.CheckPlaybook(tc.op, inv, nil, patch, tc.cached)
			require.NotEmpty(t, errs)
			v := errs[0].(Violation)
			assert.Equal(t, tc.task, v.Task)
			assert.Contains(t, v.Msg, tc.msg)
		})
	}
	p, patch, _ := ProfileFor("v2.28.0")
	all := func(string) bool { return true }
	for _, op := range []Operation{CreateCluster(""), GatherFacts(""), ScaleNodes([]string{"w2"}, ""), RemoveNodes([]string{"w2", "m2"}, true, ""), UpgradeCluster(""), ResetCluster("")} {
		assert.Empty(t, p.CheckPlaybook(op, inv, nil, patch, all), "%s with every fact cached", op.Playbook)
	}
	assert.Empty(t, p.CheckPlaybook(ScaleNodes([]string{"w2"}, ""), inv, map[string]any{"ignore_assert_errors": true}, patch, none))
}
