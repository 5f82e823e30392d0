package kubespray

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
)

// Violation is one of kubespray's assertions failing, in kubespray's words: the role and
// task that asserts it and the message Ansible prints.
type Violation struct {
	Role, Task, Msg string
}

func (v Violation) Error() string {
	return fmt.Sprintf("TASK [%s : %s] fatal: FAILED! => %s", v.Role, v.Task, v.Msg)
}

// Kubespray's defaults (roles/kubespray_defaults/defaults/main) of the variables the rules read.
var defaults = map[string]any{
	"kube_service_addresses": "10.233.0.0/18", "kube_pods_subnet": "10.233.64.0/18", "kube_network_node_prefix": json.Number("24"),
	"kube_network_plugin": "calico", "etcd_deployment_type": "host", "ignore_assert_errors": false, "ipv4_stack": true,
}

// Inventory is what the rules see of an inventory: each group's hosts, after kubespray's
// boilerplate.yml mapped the legacy names (kube-master, kube-node, k8s-cluster).
type Inventory map[string][]string

// LegacyGroups are boilerplate.yml's group_mappings (and the KUD layout's k8s-cluster).
var LegacyGroups = map[string]string{"kube-master": "kube_control_plane", "kube-node": "kube_node", "k8s-cluster": "k8s_cluster", "calico-rr": "calico_rr"}

// CheckInventory runs the assertions kubespray makes on the inventory and variables before
// it touches a host (ValidateRole, or kubernetes/preinstall where there is none), in
// kubespray's order, and returns those that fail. vars are the play's extra variables in
// decoded-JSON form (numbers as json.Number); patch picks the release within p.
func (p *Profile) CheckInventory(inv Inventory, vars map[string]any, patch int) []error {
	role := strings.TrimPrefix(p.ValidateRole, "roles/")
	if role == "" {
		role = "kubernetes/preinstall"
	}
	get := func(k string) any {
		if v, ok := vars[k]; ok {
			return v
		}
		return defaults[k]
	}
	str := func(k string) string { s, _ := get(k).(string); return s }
	var out []error
	fail := func(task, msg string) { out = append(out, Violation{role, task, msg}) }
	ignore := truthy(get("ignore_assert_errors"))

	if !p.VPrefix {
		var bad []string
		for _, k := range VersionVars {
			if s, ok := vars[k].(string); ok && strings.HasPrefix(s, "v") {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			fail("Stop if some versions have a 'v' left at the start",
				"All version string used in kubespray have been normalized to not use a leading 'v'. This check will be dropped in the next minor release. ("+strings.Join(bad, ", ")+")")
		}
	}
	if !ignore && len(inv[p.Groups.ControlPlane]) == 0 {
		fail("Stop if kube_control_plane group is empty", "Assertion failed")
	}
	if !ignore && len(inv[p.Groups.Etcd]) == 0 && str("etcd_deployment_type") != "kubeadm" {
		fail("Stop if etcd group is empty in external etcd mode", "Group 'etcd' cannot be empty in external etcd mode")
	}
	if kv, ok := vars["kube_version"]; ok && !ignore {
		p.checkKubeVersion(kv, patch, fail)
	}
	if !ignore {
		for _, k := range KnownBooleans {
			if v, ok := vars[k]; ok {
				if _, isBool := v.(bool); !isBool {
					// v2.27 loops with msg "{{ item.value }} isn't a bool"; v2.28 asserts each without a msg.
					msg := fmt.Sprintf("%v isn't a bool (%s)", v, k)
					if p.ValidateRole != "" {
						msg = fmt.Sprintf("Assertion failed (%s | type_debug == 'bool')", k)
					}
					fail("Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")", msg)
				}
			}
		}
	}
	etcd, ok := inv[p.Groups.Etcd]
	if !ok {
		etcd = inv[p.Groups.ControlPlane]
	}
	if !ignore && len(etcd)%2 == 0 {
		fail("Stop if even number of etcd hosts", fmt.Sprintf("Assertion failed (%d etcd hosts)", len(etcd)))
	}
	if truthy(get("ipv4_stack")) {
		services, pods := str("kube_service_addresses"), str("kube_pods_subnet")
		_, sn, serr := parseNet(services)
		if serr != nil {
			fail("Check that kube_service_addresses is a network range", fmt.Sprintf("kube_service_addresses = '%s' is not a valid network range", services))
		}
		plen, pn, perr := parseNet(pods)
		if perr != nil {
			fail("Check that kube_pods_subnet is a network range", fmt.Sprintf("kube_pods_subnet = '%s' is not a valid network range", pods))
		}
		if serr == nil && perr == nil && sn.Contains(pn.IP) && plen >= ones(sn) {
			fail("Check that kube_pods_subnet does not collide with kube_service_addresses", "kube_pods_subnet cannot be the same network segment as kube_service_addresses")
		}
		prefix, _ := strconv.Atoi(fmt.Sprint(get("kube_network_node_prefix")))
		if perr == nil && str("kube_network_plugin") != "calico" && prefix >= plen {
			need := big.NewInt(int64(len(inv[p.Groups.Cluster])))
			have := new(big.Int).Lsh(big.NewInt(1), uint(prefix-plen))
			if have.Cmp(need) < 0 {
				task, msg := "Check that ipv4 IP range is enough for the nodes", "Not enough ipv4 IPs are available for the desired node count."
				if p.VPrefix {
					task, msg = "Check that IP range is enough for the nodes", "Not enough IPs are available for the desired node count."
				}
				fail(task, msg)
			}
		}
	}
	return out
}

// checkKubeVersion: kube_version_min_required ("Stop if unsupported version of Kubernetes"),
// and a version the release has checksums for (kubelet_checksums keys, 'v'-prefixed up to
// v2.27): anything newer, or in the other format, fails when kubespray looks its checksum up.
func (p *Profile) checkKubeVersion(kv any, patch int, fail func(task, msg string)) {
	s := fmt.Sprint(kv)
	v, err := ParseKubeVersion(s)
	lo, hi := p.KubeRange(patch)
	if err == nil && v.less(lo) {
		fail("Stop if unsupported version of Kubernetes", fmt.Sprintf("The current release of Kubespray only support newer version of Kubernetes than %s - You are trying to apply %s", p.FormatVersion(lo), s))
		return
	}
	if err != nil || hi.less(v) || strings.HasPrefix(s, "v") != p.VPrefix {
		fail("Download | kubelet checksum (kubelet_checksums[image_arch][kube_version])", fmt.Sprintf("'dict object' has no attribute '%s': kubespray %s.%d has checksums for %s to %s only", s, p.Minor, patch, p.FormatVersion(lo), p.FormatVersion(hi)))
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
