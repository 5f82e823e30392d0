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

// ruleCase is an input one rule of CheckInventory refuses.
type ruleCase struct {
	release string // the case runs at every recorded patch of this release's minor
	inv     Inventory
	vars    map[string]any
	task    string // kubespray's task name
	msg     string
}

func ruleCases() []ruleCase {
	ok := groups([]string{"m1"}, []string{"m1"}, []string{"w1"})
	three := groups([]string{"m1"}, []string{"m1"}, []string{"w1", "w2"})
	both := func(vars map[string]any, task, msg string) []ruleCase {
		return []ruleCase{{"v2.27.0", ok, vars, task, msg}, {"v2.28.0", ok, vars, task, msg}}
	}
	cases := []ruleCase{
		{"v2.28.0", groups([]string{"m1", "m2"}, []string{"m1", "m2"}, []string{"w1"}), nil,
			"Stop if even number of etcd hosts", "Assertion failed"},
		{"v2.27.0", groups([]string{"m1", "m2", "m3", "m4"}, []string{"m1", "m2", "m3", "m4"}, nil), nil,
			"Stop if even number of etcd hosts", "Assertion failed"},
		// groups.get('etcd', groups.kube_control_plane): no [etcd] at all counts the control plane
		{"v2.28.0", Inventory{"kube_control_plane": {"m1", "m2"}, "k8s_cluster": {"m1", "m2"}}, map[string]any{"etcd_deployment_type": "kubeadm"},
			"Stop if even number of etcd hosts", "Assertion failed"},
		{"v2.28.0", groups(nil, []string{"m1"}, []string{"w1"}), nil,
			"Stop if kube_control_plane group is empty", "Assertion failed"},
		{"v2.27.0", groups(nil, []string{"m1"}, []string{"w1"}), nil,
			"Stop if kube_control_plane group is empty", "Assertion failed"},
		{"v2.28.0", groups([]string{"m1"}, []string{}, []string{"w1"}), nil,
			"Stop if etcd group is empty in external etcd mode", "Group 'etcd' cannot be empty in external etcd mode"},
		{"v2.27.0", groups([]string{"m1"}, []string{}, []string{"w1"}), nil,
			"Stop if etcd group is empty in external etcd mode", "Group 'etcd' cannot be empty in external etcd mode"},
		{"v2.28.0", ok, map[string]any{"helm_enabled": "true"},
			"Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")", "Assertion failed (helm_enabled | type_debug == 'bool')"},
		{"v2.27.0", ok, map[string]any{"download_run_once": "false"},
			"Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")", "false isn't a bool (download_run_once)"},
		{"v2.28.0", ok, map[string]any{"kube_version": "v1.32.5"},
			"Stop if some versions have a 'v' left at the start", "All version string used in kubespray have been normalized to not use a leading 'v'."},
		{"v2.28.0", ok, map[string]any{"calico_version": "v3.29.1"},
			"Stop if some versions have a 'v' left at the start", "(calico_version)"},
		{"v2.28.0", ok, map[string]any{"etcd_version": "v3.5.16"},
			"Stop if some derived versions have a 'v' left at the start", "(etcd_version)"},
		{"v2.28.0", ok, map[string]any{"kube_version": "1.29.9"},
			"Stop if unsupported version of Kubernetes", "The current release of Kubespray only support newer version of Kubernetes than 1.30.0 - You are trying to apply 1.29.9"},
		{"v2.27.0", ok, map[string]any{"kube_version": "v1.28.0"},
			"Stop if unsupported version of Kubernetes", "than v1.29.0 - You are trying to apply v1.28.0"},
		{"v2.28.0", ok, map[string]any{"kube_pods_subnet": "10.244.64.1/18"},
			"Check that kube_pods_subnet is a network range", "kube_pods_subnet = '10.244.64.1/18' is not a valid network range"},
		{"v2.27.0", ok, map[string]any{"kube_pods_subnet": "10.244.64.1/18"},
			"Check that kube_pods_subnet is a network range", "kube_pods_subnet = '10.244.64.1/18' is not a valid network range"},
		{"v2.28.0", ok, map[string]any{"kube_service_addresses": "10.96.0.0"},
			"Check that kube_service_addresses is a network range", "kube_service_addresses = '10.96.0.0' is not a valid network range"},
		{"v2.27.0", ok, map[string]any{"kube_service_addresses": "10.96.0.0"},
			"Check that kube_service_addresses is a network range", "kube_service_addresses = '10.96.0.0' is not a valid network range"},
		{"v2.28.0", ok, map[string]any{"kube_pods_subnet": "10.233.16.0/20"},
			"Check that kube_pods_subnet does not collide with kube_service_addresses", "kube_pods_subnet cannot be the same network segment as kube_service_addresses"},
		{"v2.27.0", ok, map[string]any{"kube_pods_subnet": "10.233.16.0/20"},
			"Check that kube_pods_subnet does not collide with kube_service_addresses", "kube_pods_subnet cannot be the same network segment as kube_service_addresses"},
		{"v2.28.0", three, map[string]any{"kube_network_plugin": "flannel", "kube_pods_subnet": "10.244.0.0/23"},
			"Check that ipv4 IP range is enough for the nodes", "Not enough ipv4 IPs are available for the desired node count."},
		{"v2.27.0", three, map[string]any{"kube_network_plugin": "flannel", "kube_pods_subnet": "10.244.0.0/23"},
			"Check that IP range is enough for the nodes", "Not enough IPs are available for the desired node count."},
		{"v2.28.0", ok, map[string]any{"ipv6_stack": true, "kube_service_addresses_ipv6": "fd00::1/64"},
			"Check that kube_service_addresses_ipv6 is a network range", "kube_service_addresses_ipv6 = 'fd00::1/64' is not a valid network range"},
		{"v2.28.0", ok, map[string]any{"enable_dual_stack_networks": true, "kube_pods_subnet_ipv6": "fd00::"},
			"Check that kube_pods_subnet_ipv6 is a network range", "kube_pods_subnet_ipv6 = 'fd00::' is not a valid network range"},
		{"v2.28.0", ok, map[string]any{"ipv6_stack": true, "kube_pods_subnet_ipv6": "fd85:ee78:d8a6:8607::1000/120"},
			"Check that kube_pods_subnet_ipv6 does not collide with kube_service_addresses_ipv6", "kube_pods_subnet_ipv6 cannot be the same network segment as kube_service_addresses_ipv6"},
		{"v2.28.0", three, map[string]any{"ipv6_stack": true, "kube_network_plugin": "flannel", "kube_pods_subnet_ipv6": "fd00:1::/119"},
			"Check that ipv6 IP range is enough for the nodes", "Not enough ipv6 IPs are available for the desired node count."},
		{"v2.28.0", ok, map[string]any{"kube_proxy_mode": "userspace"},
			"Stop if unsupported options selected", "The selected choice is not supported (kube_proxy_mode)"},
		{"v2.28.0", ok, map[string]any{"container_manager": "crio", "etcd_deployment_type": "docker"},
			"Stop if unsupported options selected", "(etcd_deployment_type)"},
		{"v2.28.0", ok, map[string]any{"etcd_kubeadm_enabled": true},
			"Stop if etcd_kubeadm_enabled is defined", "`etcd_kubeadm_enabled` is removed."},
		{"v2.28.0", ok, map[string]any{"etcd_kubeadm_enabled": false}, // "is defined", whatever its value
			"Stop if etcd_kubeadm_enabled is defined", "`etcd_kubeadm_enabled` is removed."},
		{"v2.27.0", groups([]string{"m1"}, []string{"m1"}, []string{"Worker-1"}), nil,
			"Stop if bad hostname", "Hostname must consist of lower case alphanumeric characters"},
		{"v2.27.0", ok, map[string]any{"kube_network_plugin": "flannel2"},
			"Stop if unknown network plugin", "flannel2 is not supported"},
		{"v2.27.0", ok, map[string]any{"dns_mode": "kubedns"},
			"Stop if unknown dns mode", "dns_mode can only be 'coredns', 'coredns_dual', 'manual' or 'none'"},
		{"v2.27.0", ok, map[string]any{"kube_proxy_mode": "nftables"},
			"Stop if unknown kube proxy mode", "kube_proxy_mode can only be 'iptables' or 'ipvs'"},
		{"v2.27.0", ok, map[string]any{"cert_management": "cert-manager"},
			"Stop if unknown cert_management", "cert_management can only be 'script' or 'none'"},
		{"v2.27.0", ok, map[string]any{"resolvconf_mode": "systemd"},
			"Stop if unknown resolvconf_mode", "resolvconf_mode can only be 'docker_dns', 'host_resolvconf' or 'none'"},
		{"v2.27.0", ok, map[string]any{"etcd_deployment_type": "podman"},
			"Stop if etcd deployment type is not host, docker or kubeadm", "must be host, docker or kubeadm"},
		{"v2.27.0", ok, map[string]any{"container_manager": "podman"},
			"Stop if container manager is not docker, crio or containerd", "must be docker, crio or containerd"},
		{"v2.27.0", ok, map[string]any{"etcd_deployment_type": "docker"},
			"Stop if etcd deployment type is not host or kubeadm when container_manager != docker", "must be host or kubeadm when container_manager is not docker"},
		{"v2.27.0", ok, map[string]any{"etcd_kubeadm_enabled": true},
			"Stop if `etcd_kubeadm_enabled` is defined and `etcd_deployment_type` is not `kubeadm` or `host`", "when `etcd_deployment_type` is set to host"},
		{"v2.27.0", ok, map[string]any{"containerd_config": map[string]any{"grpc": map[string]any{}}},
			"Stop if using deprecated containerd_config variable", "Variable containerd_config is now deprecated."},
		{"v2.27.0", ok, map[string]any{"kube_apiserver_enable_admission_plugins": []any{"NodeRestriction,PodSecurity"}},
			"Stop if using deprecated comma separated list for admission plugins", "Comma-separated list"},
		{"v2.27.0", ok, map[string]any{"cloud_provider": "external", "external_cloud_provider": "manual"}, // v2.28 added manual
			"Check external_cloud_provider value", "Assertion failed (external_cloud_provider in ['hcloud', 'huaweicloud', 'oci', 'openstack', 'vsphere'])"},
	}
	cases = append(cases, both(map[string]any{"kube_network_plugin": "flannel", "kube_network_node_prefix": json.Number("26")},
		"Guarantee that enough network address space is available for all pods", "Do not schedule more pods on a node than inet addresses are available.")...)
	cases = append(cases, both(map[string]any{"dashboard_enabled": true, "authorization_modes": []any{"Node"}},
		"Stop if RBAC is not enabled when dashboard is enabled", "rbac_enabled")...)
	cases = append(cases, both(map[string]any{"cloud_provider": "aws"},
		"Check cloud_provider value", "cloud_provider == 'external'")...)
	cases = append(cases, both(map[string]any{"cloud_provider": "external", "external_cloud_provider": "aws"},
		"Check external_cloud_provider value", "Assertion failed")...)
	cases = append(cases, both(map[string]any{"download_localhost": true},
		"Stop if download_localhost is enabled but download_run_once is not", "download_localhost requires enable download_run_once")...)
	cases = append(cases, both(map[string]any{"kata_containers_enabled": true, "container_manager": "docker", "etcd_deployment_type": "docker"},
		"Stop if kata_containers_enabled is enabled when container_manager is docker", "kata_containers_enabled support only for containerd and crio-o.")...)
	cases = append(cases, both(map[string]any{"gvisor_enabled": true, "container_manager": "crio"},
		"Stop if gvisor_enabled is enabled when container_manager is not containerd", "gvisor_enabled support only compatible with containerd.")...)
	cases = append(cases, both(map[string]any{"containerd_version": "1.2.13"},
		"Ensure minimum containerd version", "containerd_version is too low. Minimum version 1.3.7")...)
	cases = append(cases, both(map[string]any{"kube_external_ca_mode": true, "auto_renew_certificates": true},
		"Stop if auto_renew_certificates is enabled when certificates are managed externally (kube_external_ca_mode is true)", "must be disabled when CA are managed externally")...)
	return cases
}

// patchesOf lists the recorded releases of a release's minor (v2.28.0 -> v2.28.0, v2.28.1):
// the task lists of patches of a minor are the same, and so are the rules.
func patchesOf(t testing.TB, release string) []string {
	p, _, err := ProfileFor(release)
	require.NoError(t, err)
	var out []string
	for patch := range p.patches() {
		out = append(out, p.Tag(patch))
	}
	return out
}

// TestRules: every rule cites the kubespray task it comes from, by name (TestCitations checks
// the names against kubespray's files), and fails with that task's message.
func TestRules(t *testing.T) {
	for _, tc := range ruleCases() {
		for _, release := range patchesOf(t, tc.release) {
			t.Run(release+"/"+tc.task, func(t *testing.T) {
				p, patch, err := ProfileFor(release)
				require.NoError(t, err)
				got := p.CheckInventory(tc.inv, tc.vars, patch)
				v, found := violation(got, tc.task)
				require.True(t, found, "no violation of %q in %v", tc.task, got)
				assert.Contains(t, v.Msg, tc.msg)
				assert.Contains(t, v.Error(), "TASK [")
			})
		}
	}
}

func violation(errs []error, task string) (Violation, bool) {
	for _, e := range errs {
		if v, ok := e.(Violation); ok && v.Task == task {
			return v, true
		}
	}
	return Violation{}, false
}

// kube_version must be a key of the release's kubelet_checksums, in its format: BPA's rule,
// since kubespray asserts nothing and fails when it looks the checksum up.
func TestKubeVersionHasChecksums(t *testing.T) {
	ok := groups([]string{"m1"}, []string{"m1"}, []string{"w1"})
	for release, kube := range map[string]string{"v2.28.0": "1.32.6", "v2.27.0": "1.31.4" /* v2.27's keys carry the v */, "v2.27.1": "v1.31.10"} {
		p, patch, _ := ProfileFor(release)
		got := p.CheckInventory(ok, map[string]any{"kube_version": kube}, patch)
		require.Len(t, got, 1, release)
		v := got[0].(Violation)
		assert.Equal(t, PolicyRole, v.Role)
		assert.Empty(t, v.Task, "no kubespray task asserts it")
		assert.Contains(t, v.Error(), "BPA policy: kube_version "+kube+" is not a key of kubespray "+release+"'s kubelet_checksums")
	}
	// Inside v2.28.0's old range, but v2.28.0 has no checksums for it.
	p, patch, _ := ProfileFor("v2.28.0")
	assert.NotEmpty(t, p.CheckVars(map[string]any{"kube_version": "1.31.12"}, patch))
	p, patch, _ = ProfileFor("v2.28.1")
	assert.Empty(t, p.CheckVars(map[string]any{"kube_version": "1.31.12"}, patch))
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

// What kubespray accepts, next to what TestRules refuses.
func TestRulesAcceptChoices(t *testing.T) {
	for release, vars := range map[string]map[string]any{
		"v2.28.0": {"kube_proxy_mode": "nftables", "download_localhost": true, "download_run_once": true, "kube_network_plugin": "none"},
		"v2.28.1": {"cloud_provider": "external", "external_cloud_provider": "manual", "containerd_version": "2.0.5", "ipv6_stack": true},
		"v2.27.0": {"kube_proxy_mode": "iptables", "etcd_kubeadm_enabled": true, "etcd_deployment_type": "kubeadm", "dashboard_enabled": true},
		"v2.27.1": {"etcd_kubeadm_enabled": false, "containerd_version": "latest", "kube_apiserver_enable_admission_plugins": []any{"NodeRestriction"}},
	} {
		p, patch, _ := ProfileFor(release)
		assert.Empty(t, p.CheckInventory(groups([]string{"m1"}, []string{"m1"}, []string{"w1"}), vars, patch), release)
	}
}

func TestIgnoreAssertErrors(t *testing.T) {
	p, patch, _ := ProfileFor("v2.28.0")
	even := groups([]string{"m1", "m2"}, []string{"m1", "m2"}, nil)
	assert.NotEmpty(t, p.CheckInventory(even, map[string]any{"ignore_assert_errors": false}, patch))
	assert.Empty(t, p.CheckInventory(even, map[string]any{"ignore_assert_errors": "yes"}, patch), "kubespray's add-a-control-plane-node procedure runs with -e ignore_assert_errors=yes")
}

var playbookInv = Inventory{"all": {"m1", "m2", "m3", "w1", "w2"}, "kube_control_plane": {"m1", "m2", "m3"}, "etcd": {"m1", "m2", "m3"},
	"kube_node": {"w1", "w2"}, "k8s_cluster": {"m1", "m2", "m3", "w1", "w2"}}

type playbookCase struct {
	release string // the case runs at every recorded patch of this release's minor
	name    string
	op      Operation
	cached  func(string) bool
	task    string // "" for BPA's own rule
	msg     string
}

func playbookCases() []playbookCase {
	none := func(string) bool { return false }
	var cases []playbookCase
	for _, release := range []string{"v2.27.0", "v2.28.0"} {
		cases = append(cases,
			playbookCase{release, "remove unconfirmed", Operation{Playbook: Remove, Vars: map[string]any{"node": "w1"}}, none,
				"Fail if user does not confirm deletion", "Delete nodes confirmation failed"},
			playbookCase{release, "reset unconfirmed", Operation{Playbook: Reset}, none,
				"Check confirmation", "Reset confirmation failed"},
			playbookCase{release, "scale --limit without facts", ScaleNodes([]string{"w2"}, ""), func(h string) bool { return h != "m2" },
				"Stop if any host not in '--limit' does not have a fact cache", "The following excluded hosts are not cached: m2"},
			playbookCase{release, "cluster --limit group without facts", Operation{Playbook: Cluster, Limit: []string{"kube_control_plane"}}, none,
				"Stop if any host not in '--limit' does not have a fact cache", "Please run the facts.yml playbook first without '--limit'."},
			playbookCase{release, "remove first control plane", RemoveNodes([]string{"w1", "m1"}, false, ""), none,
				"", "BPA policy: m1 is the first host of kube_control_plane, and kubespray's remove_node.yml says (in a comment) that it cannot remove the first control plane node or first etcd node"},
		)
	}
	return append(cases,
		playbookCase{"v2.28.0", "remove without node", Operation{Playbook: Remove, Vars: map[string]any{"skip_confirmation": true}}, none,
			"Assert that nodes are specified for removal", "No nodes specified for removal. The `node` variable must be set explicitly."},
		playbookCase{"v2.27.0", "remove without node", Operation{Playbook: Remove, Vars: map[string]any{"skip_confirmation": true}}, none,
			"", "BPA policy: remove-node.yml needs -e node: without it kubespray v2.27 resets every host of the cluster"},
	)
}

// TestPlaybookRules: what each playbook checks before it changes a host, citing the task
// (playbooks/remove_node.yml, playbooks/reset.yml, roles/kubernetes/preinstall/tasks/
// 0040-verify-settings.yml for --limit), or saying it is BPA's own rule.
func TestPlaybookRules(t *testing.T) {
	for _, tc := range playbookCases() {
		for _, release := range patchesOf(t, tc.release) {
			t.Run(release+"/"+tc.name, func(t *testing.T) {
				p, patch, _ := ProfileFor(release)
				errs := p.CheckPlaybook(tc.op, playbookInv, nil, patch, tc.cached)
				require.NotEmpty(t, errs)
				v := errs[0].(Violation)
				assert.Equal(t, tc.task, v.Task)
				if tc.task == "" {
					assert.Equal(t, PolicyRole, v.Role)
					assert.Equal(t, tc.msg, v.Error())
				} else {
					assert.Contains(t, v.Msg, tc.msg)
				}
			})
		}
	}
	none := func(string) bool { return false }
	p, patch, _ := ProfileFor("v2.28.0")
	all := func(string) bool { return true }
	for _, op := range []Operation{CreateCluster(""), GatherFacts(""), ScaleNodes([]string{"w2"}, ""), RemoveNodes([]string{"w2", "m2"}, true, ""), UpgradeCluster(""), ResetCluster("")} {
		assert.Empty(t, p.CheckPlaybook(op, playbookInv, nil, patch, all), "%s with every fact cached", op.Playbook)
	}
	assert.Empty(t, p.CheckPlaybook(ScaleNodes([]string{"w2"}, ""), playbookInv, map[string]any{"ignore_assert_errors": true}, patch, none))
}

// v2.28's remove_node.yml imports boilerplate.yml, which checks the inventory: an inventory
// between two etcd removals (an even number of members) passes only with
// ignore_assert_errors. v2.27's checks the inventory nowhere in remove_node.yml.
func TestRemoveNodeChecksInventoryAtV228(t *testing.T) {
	even := Inventory{"all": {"m1", "m3", "w1"}, "kube_control_plane": {"m1", "m3"}, "etcd": {"m1", "m3"}, "kube_node": {"w1"}, "k8s_cluster": {"m1", "m3", "w1"}}
	all := func(string) bool { return true }
	op := RemoveNodes([]string{"m3"}, false, "")
	p, patch, err := ProfileFor("v2.28.0")
	require.NoError(t, err)
	errs := p.CheckPlaybook(op, even, nil, patch, all)
	require.Len(t, errs, 1)
	assert.Equal(t, "Stop if even number of etcd hosts", errs[0].(Violation).Task)
	op.Vars["ignore_assert_errors"] = "yes"
	assert.NoError(t, p.Validate(op))
	assert.Empty(t, p.CheckPlaybook(op, even, nil, patch, all))
	p, patch, err = ProfileFor("v2.27.1")
	require.NoError(t, err)
	assert.Empty(t, p.CheckPlaybook(RemoveNodes([]string{"m3"}, false, ""), even, nil, patch, all))
}
