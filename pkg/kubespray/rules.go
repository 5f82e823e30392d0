package kubespray

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Violation is one of kubespray's assertions failing, in kubespray's words: the role (or
// playbook) and task that asserts it and the message Ansible prints. A rule that is BPA's own,
// with no kubespray task behind it, has Role PolicyRole and no Task.
type Violation struct {
	Role, Task, Msg string
}

// PolicyRole marks a Violation of BPA's own rule.
const PolicyRole = "BPA policy"

func (v Violation) Error() string {
	if v.Role == PolicyRole {
		return PolicyRole + ": " + v.Msg
	}
	return fmt.Sprintf("TASK [%s : %s] fatal: FAILED! => %s", v.Role, v.Task, v.Msg)
}

// Kubespray's defaults (roles/kubespray[-_]defaults, and the kubernetes/* roles' defaults) of
// the variables the rules read, the same at every supported tag.
var defaults = map[string]any{
	"kube_service_addresses": "10.233.0.0/18", "kube_pods_subnet": "10.233.64.0/18", "kube_network_node_prefix": json.Number("24"),
	"kube_service_addresses_ipv6": "fd85:ee78:d8a6:8607::1000/116", "kube_pods_subnet_ipv6": "fd85:ee78:d8a6:8607::1:0000/112",
	"kube_network_node_prefix_ipv6": json.Number("120"), "kubelet_max_pods": json.Number("110"),
	"kube_network_plugin": "calico", "etcd_deployment_type": "host", "ignore_assert_errors": false, "ipv4_stack": true,
	"kube_proxy_mode": "ipvs", "dns_mode": "coredns", "cert_management": "script", "resolvconf_mode": "host_resolvconf",
	"container_manager": "containerd", "download_localhost": false, "download_run_once": false,
	"kata_containers_enabled": false, "gvisor_enabled": false, "dashboard_enabled": false, "cloud_provider": "",
	"external_cloud_provider": "", "kube_external_ca_mode": false, "auto_renew_certificates": false,
	"authorization_modes": []any{"Node", "RBAC"},
}

// containerdMinVersion is containerd_min_version_required (roles/kubespray[-_]defaults/vars),
// 1.3.7 at every supported tag.
const containerdMinVersion = "1.3.7"

// Inventory is what the rules see of an inventory: each group's hosts, after kubespray's
// boilerplate.yml mapped the legacy names (kube-master, kube-node, k8s-cluster).
type Inventory map[string][]string

// LegacyGroups are boilerplate.yml's group_mappings (and the KUD layout's k8s-cluster).
var LegacyGroups = map[string]string{"kube-master": "kube_control_plane", "kube-node": "kube_node", "k8s-cluster": "k8s_cluster", "calico-rr": "calico_rr"}

// CheckVars runs the assertions of CheckInventory that read only variables, for `bpa lint`,
// which has a CR but no inventory yet.
func (p *Profile) CheckVars(vars map[string]any, patch int) []error {
	return p.CheckInventory(nil, vars, patch)
}

// CheckInventory runs the assertions kubespray makes on the inventory and variables before
// it touches a host (ValidateRole, or kubernetes/preinstall's 0040-verify-settings.yml where
// there is none), in kubespray's order, and returns those that fail. vars are the play's
// extra variables in decoded-JSON form (numbers as json.Number); patch picks the release
// within p. A nil inv skips the assertions on groups and hosts. Each task of those files is
// either modelled here or listed, with the reason, in testdata/tasks/not-modelled.txt
// (TestEveryTaskAccountedFor).
func (p *Profile) CheckInventory(inv Inventory, vars map[string]any, patch int) []error {
	v227 := p.ValidateRole == ""
	role := strings.TrimPrefix(p.ValidateRole, "roles/")
	if v227 {
		role = "kubernetes/preinstall"
	}
	get := func(k string) any {
		if v, ok := vars[k]; ok {
			return v
		}
		return defaults[k]
	}
	defined := func(k string) bool { _, ok := vars[k]; return ok }
	str := func(k string) string { return fmt.Sprint(get(k)) }
	var out []error
	fail := func(task, msg string) { out = append(out, Violation{role, task, msg}) }
	policy := func(msg string) { out = append(out, Violation{Role: PolicyRole, Msg: msg}) }
	ignore := jinjaTrue(get("ignore_assert_errors"))
	oneOf := func(k string, allowed ...string) bool { return slices.Contains(allowed, str(k)) }
	hasInv := inv != nil

	if !v227 {
		p.checkVPrefix(vars, fail)
	}
	if v227 && hasInv && !ignore {
		for _, h := range hosts(inv) {
			if !hostname.MatchString(h) {
				fail("Stop if bad hostname", "Hostname must consist of lower case alphanumeric characters, '.' or '-', and must start and end with an alphanumeric character ("+h+")")
			}
		}
	}
	if hasInv && !ignore && len(inv[p.Groups.ControlPlane]) == 0 {
		fail("Stop if kube_control_plane group is empty", "Assertion failed")
	}
	if hasInv && !ignore && len(inv[p.Groups.Etcd]) == 0 && str("etcd_deployment_type") != "kubeadm" {
		fail("Stop if etcd group is empty in external etcd mode", "Group 'etcd' cannot be empty in external etcd mode")
	}
	if v227 && !ignore && !oneOf("kube_network_plugin", networkPlugins...) {
		fail("Stop if unknown network plugin", str("kube_network_plugin")+" is not supported")
	}
	if kv, ok := vars["kube_version"]; ok && !ignore {
		p.checkKubeVersion(kv, patch, fail, policy)
	}
	if !ignore {
		for _, k := range KnownBooleans {
			if v, ok := vars[k]; ok {
				if _, isBool := v.(bool); !isBool {
					// v2.27 loops with msg "{{ item.value }} isn't a bool"; v2.28 asserts each without a msg.
					msg := fmt.Sprintf("%v isn't a bool (%s)", v, k)
					if !v227 {
						msg = fmt.Sprintf("Assertion failed (%s | type_debug == 'bool')", k)
					}
					fail("Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")", msg)
				}
			}
		}
	}
	if hasInv && !ignore {
		// v2.28: groups.get('etcd', groups.kube_control_plane); v2.27 asserts on the etcd hosts only.
		etcd, ok := inv[p.Groups.Etcd]
		if !ok && !v227 {
			etcd = inv[p.Groups.ControlPlane]
		}
		if (ok || !v227) && len(etcd)%2 == 0 {
			fail("Stop if even number of etcd hosts", fmt.Sprintf("Assertion failed (%d etcd hosts)", len(etcd)))
		}
	}
	// On k8s_cluster's hosts; v2.27 skips calico (and runs only when kube_network_node_prefix
	// is defined, which kubespray's defaults make it), v2.28 skips calico and none, and IPv6-only.
	skip := []string{"calico", "none"}
	if v227 {
		skip = skip[:1]
	}
	if !ignore && (!hasInv || len(inv[p.Groups.Cluster]) > 0) && !oneOf("kube_network_plugin", skip...) && (v227 || truthy(get("ipv4_stack"))) {
		prefix, perr := toInt(get("kube_network_node_prefix"))
		maxPods, merr := toInt(get("kubelet_max_pods"))
		if perr == nil && merr == nil && prefix >= 0 && prefix <= 32 && maxPods > (1<<(32-prefix))-2 {
			fail("Guarantee that enough network address space is available for all pods", "Do not schedule more pods on a node than inet addresses are available.")
		}
	}
	if !ignore && jinjaTrue(get("dashboard_enabled")) && !p.rbacEnabled(vars) {
		fail("Stop if RBAC is not enabled when dashboard is enabled", "Assertion failed (rbac_enabled)")
	}
	if !ignore && jinjaTrue(get("cloud_provider")) && str("cloud_provider") != "external" {
		fail("Check cloud_provider value", "Assertion failed (cloud_provider == 'external')")
	}
	if !ignore && str("cloud_provider") == "external" {
		providers := []string{"hcloud", "huaweicloud", "oci", "openstack", "vsphere"}
		if !v227 {
			providers = append(providers, "manual")
		}
		if !oneOf("external_cloud_provider", providers...) {
			fail("Check external_cloud_provider value", fmt.Sprintf("Assertion failed (external_cloud_provider in %s)", pyList(providers)))
		}
	}
	p.checkNetworks(inv, vars, get, v227, fail)
	if v227 {
		if defined("dns_mode") && !oneOf("dns_mode", dnsModes...) {
			fail("Stop if unknown dns mode", "dns_mode can only be 'coredns', 'coredns_dual', 'manual' or 'none'")
		}
		if defined("kube_proxy_mode") && !oneOf("kube_proxy_mode", "iptables", "ipvs") {
			fail("Stop if unknown kube proxy mode", "kube_proxy_mode can only be 'iptables' or 'ipvs'")
		}
		if !oneOf("cert_management", "script", "none") {
			fail("Stop if unknown cert_management", "cert_management can only be 'script' or 'none'")
		}
		if defined("resolvconf_mode") && !oneOf("resolvconf_mode", resolvconfModes...) {
			fail("Stop if unknown resolvconf_mode", "resolvconf_mode can only be 'docker_dns', 'host_resolvconf' or 'none'")
		}
		etcdHosts := !hasInv || len(inv[p.Groups.Etcd]) > 0 // the etcd tasks run on etcd's hosts
		if etcdHosts && !oneOf("etcd_deployment_type", "host", "docker", "kubeadm") {
			fail("Stop if etcd deployment type is not host, docker or kubeadm", "The etcd deployment type, 'etcd_deployment_type', must be host, docker or kubeadm")
		}
		if !oneOf("container_manager", "docker", "crio", "containerd") {
			fail("Stop if container manager is not docker, crio or containerd", "The container manager, 'container_manager', must be docker, crio or containerd")
		}
		if etcdHosts && str("container_manager") != "docker" && !oneOf("etcd_deployment_type", "host", "kubeadm") {
			fail("Stop if etcd deployment type is not host or kubeadm when container_manager != docker", "The etcd deployment type, 'etcd_deployment_type', must be host or kubeadm when container_manager is not docker")
		}
		if defined("etcd_kubeadm_enabled") && jinjaTrue(vars["etcd_kubeadm_enabled"]) && str("etcd_deployment_type") != "kubeadm" {
			fail("Stop if `etcd_kubeadm_enabled` is defined and `etcd_deployment_type` is not `kubeadm` or `host`",
				"It is not possible to use `etcd_kubeadm_enabled` when `etcd_deployment_type` is set to "+str("etcd_deployment_type")+". Unset the `etcd_kubeadm_enabled` variable and set `etcd_deployment_type` to desired deployment type (`host`, `kubeadm`, `docker`) instead.")
		}
	} else {
		var bad []string
		for _, c := range []struct {
			k  string
			ok bool
		}{
			{"kube_network_plugin", oneOf("kube_network_plugin", networkPlugins...)},
			{"dns_mode", oneOf("dns_mode", dnsModes...)},
			{"kube_proxy_mode", oneOf("kube_proxy_mode", "iptables", "ipvs", "nftables")},
			{"cert_management", oneOf("cert_management", "script", "none")},
			{"resolvconf_mode", oneOf("resolvconf_mode", resolvconfModes...)},
			{"etcd_deployment_type", oneOf("etcd_deployment_type", "host", "docker", "kubeadm")},
			{"etcd_deployment_type", oneOf("etcd_deployment_type", "host", "kubeadm") || str("container_manager") == "docker"},
			{"container_manager", oneOf("container_manager", "docker", "crio", "containerd")},
		} {
			if !c.ok && !slices.Contains(bad, c.k) {
				bad = append(bad, c.k)
			}
		}
		if len(bad) > 0 {
			fail("Stop if unsupported options selected", "The selected choice is not supported ("+strings.Join(bad, ", ")+")")
		}
		if defined("etcd_kubeadm_enabled") {
			fail("Stop if etcd_kubeadm_enabled is defined", "`etcd_kubeadm_enabled` is removed. You can set `etcd_deployment_type` to `kubeadm` instead of setting `etcd_kubeadm_enabled` to `true`.")
		}
	}
	if jinjaTrue(get("download_localhost")) && !jinjaTrue(get("download_run_once")) {
		fail("Stop if download_localhost is enabled but download_run_once is not", "download_localhost requires enable download_run_once")
	}
	if jinjaTrue(get("kata_containers_enabled")) && str("container_manager") == "docker" {
		fail("Stop if kata_containers_enabled is enabled when container_manager is docker", "kata_containers_enabled support only for containerd and crio-o.")
	}
	if jinjaTrue(get("gvisor_enabled")) && str("container_manager") != "containerd" {
		fail("Stop if gvisor_enabled is enabled when container_manager is not containerd", "gvisor_enabled support only compatible with containerd.")
	}
	if cv, ok := vars["containerd_version"]; ok && str("container_manager") == "containerd" && !slices.Contains([]string{"latest", "edge", "stable"}, fmt.Sprint(cv)) {
		if older(fmt.Sprint(cv), containerdMinVersion) {
			fail("Ensure minimum containerd version", "containerd_version is too low. Minimum version "+containerdMinVersion)
		}
	}
	if v227 && defined("containerd_config") && !ignore {
		fail("Stop if using deprecated containerd_config variable", "Variable containerd_config is now deprecated.")
	}
	if !ignore && jinjaTrue(get("kube_external_ca_mode")) && jinjaTrue(get("auto_renew_certificates")) {
		fail("Stop if auto_renew_certificates is enabled when certificates are managed externally (kube_external_ca_mode is true)",
			"Variable auto_renew_certificates must be disabled when CA are managed externally:  kube_external_ca_mode = true")
	}
	if l, ok := vars["kube_apiserver_enable_admission_plugins"].([]any); v227 && ok && len(l) > 0 && strings.Contains(fmt.Sprint(l[0]), ",") {
		fail("Stop if using deprecated comma separated list for admission plugins", "Comma-separated list for kube_apiserver_enable_admission_plugins is now deprecated, use separate list items for each plugin.")
	}
	return out
}

// The choices kubespray accepts, the same at every supported tag.
var (
	networkPlugins  = []string{"calico", "flannel", "weave", "cloud", "cilium", "cni", "kube-ovn", "kube-router", "macvlan", "custom_cni", "none"}
	dnsModes        = []string{"coredns", "coredns_dual", "manual", "none"}
	resolvconfModes = []string{"docker_dns", "host_resolvconf", "none"}
	// v2.27's "Stop if bad hostname".
	hostname = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// checkVPrefix: v2.28's two "'v' left at the start" tasks, for the variables a CR sets
// (kubespray's own defaults carry none).
func (p *Profile) checkVPrefix(vars map[string]any, fail func(task, msg string)) {
	const msg = "All version string used in kubespray have been normalized to not use a leading 'v'. This check will be dropped in the next minor release. ("
	var bad, derived []string
	for _, k := range append(slices.Clone(VersionVars), DerivedVersionVars...) {
		if s, ok := vars[k].(string); ok && strings.HasPrefix(s, "v") {
			if slices.Contains(DerivedVersionVars, k) {
				derived = append(derived, k)
			} else {
				bad = append(bad, k)
			}
		}
	}
	if len(bad) > 0 {
		fail("Stop if some versions have a 'v' left at the start", msg+strings.Join(bad, ", ")+")")
	}
	if len(derived) > 0 {
		fail("Stop if some derived versions have a 'v' left at the start", msg+strings.Join(derived, ", ")+")")
	}
}

// checkNetworks: the network-range tasks, IPv4 and (v2.28, with ipv6_stack) IPv6.
func (p *Profile) checkNetworks(inv Inventory, vars map[string]any, get func(string) any, v227 bool, fail func(task, msg string)) {
	str := func(k string) string { return fmt.Sprint(get(k)) }
	ipv6 := vars["ipv6_stack"]
	if _, ok := vars["ipv6_stack"]; !ok {
		ipv6 = vars["enable_dual_stack_networks"] // v2.28's default: enable_dual_stack_networks | default(false)
	}
	for _, fam := range []struct {
		on                bool
		suffix, ipv, what string
	}{
		{v227 || truthy(get("ipv4_stack")), "", "ipv4", "IP range"},
		{!v227 && truthy(ipv6), "_ipv6", "ipv6", "IP range"},
	} {
		if !fam.on {
			continue
		}
		services, pods := "kube_service_addresses"+fam.suffix, "kube_pods_subnet"+fam.suffix
		_, sn, serr := parseNet(str(services))
		if serr != nil {
			fail("Check that "+services+" is a network range", fmt.Sprintf("%s = '%s' is not a valid network range", services, str(services)))
		}
		plen, pn, perr := parseNet(str(pods))
		if perr != nil {
			fail("Check that "+pods+" is a network range", fmt.Sprintf("%s = '%s' is not a valid network range", pods, str(pods)))
		}
		if serr == nil && perr == nil && sn.Contains(pn.IP) && plen >= ones(sn) {
			fail("Check that "+pods+" does not collide with "+services, pods+" cannot be the same network segment as "+services)
		}
		prefix, err := toInt(get("kube_network_node_prefix" + fam.suffix))
		if inv != nil && err == nil && perr == nil && str("kube_network_plugin") != "calico" && prefix >= plen {
			need := big.NewInt(int64(len(inv[p.Groups.Cluster])))
			have := new(big.Int).Lsh(big.NewInt(1), uint(prefix-plen))
			if have.Cmp(need) < 0 {
				task, msg := "Check that "+fam.ipv+" IP range is enough for the nodes", "Not enough "+fam.ipv+" IPs are available for the desired node count."
				if v227 {
					task, msg = "Check that IP range is enough for the nodes", "Not enough IPs are available for the desired node count."
				}
				fail(task, msg)
			}
		}
	}
}

// rbacEnabled is kubespray's rbac_enabled: set, or 'RBAC' in authorization_modes. v2.28 also
// reads the authorizers of an authorization config file when one is used; BPA then takes
// kubespray's word (true) rather than model that file.
func (p *Profile) rbacEnabled(vars map[string]any) bool {
	if v, ok := vars["rbac_enabled"]; ok {
		return jinjaTrue(v)
	}
	if p.ValidateRole != "" && jinjaTrue(vars["kube_apiserver_use_authorization_config_file"]) {
		return true
	}
	modes, ok := vars["authorization_modes"].([]any)
	if !ok {
		return true
	}
	return slices.Contains(modes, any("RBAC"))
}

// hosts lists every host of an inventory, once.
func hosts(inv Inventory) []string {
	var out []string
	for _, g := range slices.Sorted(maps.Keys(inv)) {
		for _, h := range inv[g] {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// checkKubeVersion: kube_version_min_required ("Stop if unsupported version of Kubernetes"),
// then BPA's rule that the version is one the release has kubelet checksums for, in the
// release's format: kubespray asserts nothing of the kind, it fails later, in whichever task
// first templates kubelet_checksums[image_arch][kube_version], with "'dict object' has no
// attribute".
func (p *Profile) checkKubeVersion(kv any, patch int, fail func(task, msg string), policy func(msg string)) {
	s := fmt.Sprint(kv)
	v, err := ParseKubeVersion(s)
	if min := p.MinRequired(patch); err == nil && v.less(min) {
		fail("Stop if unsupported version of Kubernetes", fmt.Sprintf("The current release of Kubespray only support newer version of Kubernetes than %s - You are trying to apply %s", p.FormatVersion(min), s))
		return
	}
	if err != nil || !p.Supports(patch, v) || strings.HasPrefix(s, "v") != p.VPrefix {
		policy(fmt.Sprintf("kube_version %s is not a key of kubespray %s's kubelet_checksums, which has %s (written %s), so kubespray would fail with \"'dict object' has no attribute '%s'\" when it looks the kubelet checksum up",
			s, p.Tag(patch), p.DescribeKube(patch), p.FormatVersion(p.DefaultKube(patch)), s))
	}
}

func parseNet(s string) (int, *net.IPNet, error) {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		return 0, nil, err
	}
	if !ip.Equal(n.IP) {
		return 0, nil, fmt.Errorf("%s has host bits set", s)
	}
	return ones(n), n, nil
}

func ones(n *net.IPNet) int { o, _ := n.Mask.Size(); return o }

// jinjaTrue is a bare variable's truth in a `when:` (Jinja's): a non-empty string is true,
// whatever it says.
func jinjaTrue(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, _ := v.Float64()
		return f != 0
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

func toInt(v any) (int, error) { return strconv.Atoi(fmt.Sprint(v)) }

// older compares dotted versions as Ansible's version test does for plain numbers; a
// version it cannot read is not called older.
func older(v, than string) bool {
	a, b := strings.Split(v, "."), strings.Split(than, ".")
	for i := 0; i < len(a) && i < len(b); i++ {
		x, errx := strconv.Atoi(a[i])
		y, erry := strconv.Atoi(b[i])
		if errx != nil || erry != nil {
			return false
		}
		if x != y {
			return x < y
		}
	}
	return len(a) < len(b)
}

// pyList writes a list as Ansible prints one.
func pyList(l []string) string { return "['" + strings.Join(l, "', '") + "']" }

// truthy is Ansible's `| bool` for the forms a vars file carries.
func truthy(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		switch strings.ToLower(v) {
		case "yes", "on", "1", "true", "y", "t":
			return true
		}
	}
	return false
}
