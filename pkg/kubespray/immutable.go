package kubespray

import "fmt"

// ImmutableSetting is a kubespray variable whose value a live cluster keeps: cluster.yml or
// upgrade-cluster.yml with another value either fails against the running cluster or leaves
// it half changed. A day-2 change of one is refused (ImmutableSetting).
type ImmutableSetting struct {
	Var string
	// Role and Task cite the kubespray task that refuses the change at run time, the same at
	// every supported tag (v2.27.0 to v2.28.1); Role is PolicyRole, and Task empty, where
	// kubespray checks nothing and the rule is BPA's own.
	Role, Task string
	// Why says what goes wrong.
	Why string
	// CalicoOnly: compared only while kube_network_plugin stays calico (the task is calico's).
	CalicoOnly bool
}

// Source cites the rule: kubespray's task, or BPA policy.
func (s ImmutableSetting) Source() string {
	if s.Role == PolicyRole {
		return PolicyRole
	}
	return fmt.Sprintf("kubespray's TASK [%s : %s]", s.Role, s.Task)
}

// calicoPoolCheck is roles/network_plugin/calico/tasks/check.yml at v2.27.0..v2.28.1: it
// reads the live pool with calicoctl and asserts blockSize, cidr
// (calico_pool_cidr | default(kube_pods_subnet)), ipipMode and vxlanMode match the inventory.
const calicoPoolCheck = "Check if inventory match current cluster configuration"

// ImmutableSettings are the settings a live cluster cannot change, checked in this order.
//
// Not here, and why:
//   - container_manager: kubespray changes it (roles/container-engine/validate-container-engine
//     drains the node with remove-node/pre-remove and uninstalls the old engine, "Uninstall
//     containerd" / "Uninstall docker" / "Uninstall crio");
//   - calico's "Check if ipv6 inventory match current cluster configuration" (v2.28; the
//     ipv6 pool): BPA sets no IPv6 settings, and kube_pods_subnet_ipv6 is not modelled;
//   - the other network plugins: no task at the supported tags compares the inventory with
//     the live cluster (`git grep "current cluster"` finds calico's only); their subnets are
//     BPA policy through kube_pods_subnet below.
var ImmutableSettings = []ImmutableSetting{
	{Var: "kube_network_plugin", Role: PolicyRole, Why: "kubespray has no migration between network plugins: cluster.yml installs the new one beside the old, and pods keep the old one's addresses"},
	{Var: "kube_pods_subnet", Role: "network_plugin/calico", Task: calicoPoolCheck, Why: "calico's IP pool keeps the CIDR it was created with"},
	{Var: "calico_pool_cidr", Role: "network_plugin/calico", Task: calicoPoolCheck, Why: "calico's IP pool keeps the CIDR it was created with", CalicoOnly: true},
	{Var: "calico_pool_blocksize", Role: "network_plugin/calico", Task: calicoPoolCheck, Why: "calico's IP pool keeps its block size", CalicoOnly: true},
	{Var: "calico_ipip_mode", Role: "network_plugin/calico", Task: calicoPoolCheck, Why: "calico's IP pool keeps its IPIP mode", CalicoOnly: true},
	{Var: "calico_vxlan_mode", Role: "network_plugin/calico", Task: calicoPoolCheck, Why: "calico's IP pool keeps its VXLAN mode", CalicoOnly: true},
	{Var: "kube_service_addresses", Role: PolicyRole, Why: "kubespray checks nothing, but the apiserver certificate names the kubernetes Service's address and every Service keeps its ClusterIP from the old range"},
	{Var: "etcd_deployment_type", Role: PolicyRole, Why: "kubespray has no migration of etcd's data between host and kubeadm deployments"},
	{Var: "cluster_name", Role: PolicyRole, Why: "it is dns_domain's default, which the apiserver certificate (kubernetes.default.svc.<domain>) and running pods' search domains keep"},
	{Var: "dns_domain", Role: PolicyRole, Why: "kubespray checks nothing, but the apiserver certificate names kubernetes.default.svc.<domain> and running pods keep the old search domain"},
}

// immutableDefaults are kubespray's defaults of the settings not in defaults, the same at
// every supported tag (roles/network_plugin/calico_defaults/defaults/main.yml,
// roles/kubespray[-_]defaults/defaults/main/main.yml).
var immutableDefaults = map[string]string{
	"calico_pool_blocksize": "26", "calico_ipip_mode": "Never", "calico_vxlan_mode": "Always", "cluster_name": "cluster.local",
}

// ImmutableValues are the values the immutable settings take with vars (the vars file's
// variables, decoded): the variable, else kubespray's default.
func ImmutableValues(vars map[string]any) map[string]string {
	out := map[string]string{}
	get := func(k string) string {
		if v, ok := vars[k]; ok {
			return fmt.Sprint(v)
		}
		if v, ok := defaults[k]; ok {
			return fmt.Sprint(v)
		}
		return immutableDefaults[k]
	}
	for _, s := range ImmutableSettings {
		out[s.Var] = get(s.Var)
	}
	// Defaults that are other variables: calico_pool_cidr | default(kube_pods_subnet),
	// dns_domain: "{{ cluster_name }}".
	if _, ok := vars["calico_pool_cidr"]; !ok {
		out["calico_pool_cidr"] = out["kube_pods_subnet"]
	}
	if _, ok := vars["dns_domain"]; !ok {
		out["dns_domain"] = out["cluster_name"]
	}
	return out
}

// ImmutableChange is the first immutable setting whose value differs between the cluster as
// applied and the spec, or nil. A setting applied records lack (a cluster built before BPA
// recorded them) is not compared.
func ImmutableChange(applied, desired map[string]string) *ImmutableSetting {
	calico := applied["kube_network_plugin"] == "calico" && desired["kube_network_plugin"] == "calico"
	for _, s := range ImmutableSettings {
		was, ok := applied[s.Var]
		if !ok || s.CalicoOnly && !calico || was == desired[s.Var] {
			continue
		}
		if s.Task == calicoPoolCheck && !calico {
			// Only calico's task checks the pool: with another plugin the rule is BPA's.
			s.Role, s.Task, s.Why = PolicyRole, "", "each node keeps the podCIDR it was given"
		}
		return &s
	}
	return nil
}
