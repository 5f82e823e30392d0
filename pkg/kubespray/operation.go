package kubespray

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Operation is one ansible-playbook run: a playbook, the hosts it is limited to, the -e
// variables the playbook itself needs (beyond the vars file), and why it runs. A plan is an
// ordered list of them; the day-2 planner emits several (facts then scale, remove-node, ...).
type Operation struct {
	Playbook Playbook `json:"playbook"`
	// Limit is --limit: host or group names, empty for every host.
	Limit []string `json:"limit,omitempty"`
	// Vars are passed as one JSON -e object, after the vars file, so the playbook's own
	// switches (node, skip_confirmation, reset_confirmation) cannot be overridden by it.
	Vars map[string]any `json:"vars,omitempty"`
	// Reason says in words why the operation runs.
	Reason string `json:"reason,omitempty"`
	// Without are hosts left out of the inventory for this run: nodes an earlier operation
	// removed (docs/operations/nodes.md: remove the node from the inventory afterwards).
	Without []string `json:"without,omitempty"`
}

// The operations of kubespray's documented procedures (docs/operations/nodes.md).

// CreateCluster runs cluster.yml on every host.
func CreateCluster(reason string) Operation { return Operation{Playbook: Cluster, Reason: reason} }

// GatherFacts runs playbooks/facts.yml on every host: --limit needs every excluded host's
// facts in the cache ("Stop if any host not in '--limit' does not have a fact cache").
func GatherFacts(reason string) Operation { return Operation{Playbook: Facts, Reason: reason} }

// ScaleNodes runs scale.yml on the new workers; GatherFacts must run first, in the same
// container, since kubespray's ansible.cfg caches facts under /tmp.
func ScaleNodes(nodes []string, reason string) Operation {
	return Operation{Playbook: Scale, Limit: nodes, Reason: reason}
}

// RemoveNodes runs remove-node.yml for nodes. A dead host cannot be drained or reset:
// ungraceful sets reset_nodes=false and allow_ungraceful_removal=true.
func RemoveNodes(nodes []string, ungraceful bool, reason string) Operation {
	vars := map[string]any{"node": strings.Join(nodes, ","), "skip_confirmation": true}
	if ungraceful {
		vars["reset_nodes"], vars["allow_ungraceful_removal"] = false, true
	}
	return Operation{Playbook: Remove, Vars: vars, Reason: reason}
}

// UpgradeCluster runs upgrade-cluster.yml (kube_version comes from the vars file); the
// planner adds the drain settings roles/upgrade/pre-upgrade reads.
func UpgradeCluster(reason string) Operation { return Operation{Playbook: Upgrade, Reason: reason} }

// RejoinEtcd runs cluster.yml on the control plane after its first etcd member was restored
// from a snapshot as a cluster of one: the step of kubespray's recover-control-plane.yml
// after its etcd role ("Apply whole cluster install"), run as
// docs/operations/recover-control-plane.md says (--limit etcd,kube_control_plane, more etcd
// retries), which adds the other members back, their data set aside, as new ones. As when
// etcd members join (nodes.md, "Adding an etcd node"), ignore_assert_errors: the limited
// run's facts of the other hosts come from no cache.
func (p *Profile) RejoinEtcd(reason string) Operation {
	return Operation{Playbook: Cluster, Limit: []string{p.Groups.Etcd, p.Groups.ControlPlane},
		Vars: map[string]any{"ignore_assert_errors": "yes", "etcd_retries": ManyEtcdRetries}, Reason: reason}
}

// ResetCluster runs reset.yml, confirmed.
func ResetCluster(reason string) Operation {
	return Operation{Playbook: Reset, Vars: map[string]any{"reset_confirmation": "yes"}, Reason: reason}
}

// playbookVars are the -e variables each playbook may be given, with a check of each value;
// required ones must be present. Anything else belongs in the vars file.
var playbookVars = map[Playbook]struct{ allowed, required map[string]func(any) bool }{
	Remove: {
		// The drain settings of roles/remove-node/pre-remove (spec.nodeRemoval).
		// ignore_assert_errors: v2.28's boilerplate.yml checks the inventory here too, and the
		// inventory between two etcd removals holds an even number of members.
		allowed: map[string]func(any) bool{"reset_nodes": isBool, "allow_ungraceful_removal": isBool,
			"drain_grace_period": isCount, "drain_timeout": isSeconds, "drain_retries": isCount,
			"ignore_assert_errors": func(v any) bool { return v == "yes" }},
		required: map[string]func(any) bool{
			// v2.27 removes every host when node is missing (hosts: node | default('etcd:k8s_cluster:calico_rr')).
			"node":              isNodeList,
			"skip_confirmation": func(v any) bool { return v == true },
		},
	},
	Reset: {required: map[string]func(any) bool{"reset_confirmation": func(v any) bool { return v == "yes" }}},
	// kubespray's procedure to add a control-plane or etcd node runs cluster.yml, then
	// upgrade-cluster.yml, with ignore_assert_errors, and etcd_retries when several etcd
	// members join in one run (docs/operations/nodes.md, "Adding an etcd node").
	Cluster: {allowed: map[string]func(any) bool{"ignore_assert_errors": func(v any) bool { return v == "yes" }, "etcd_retries": isCount}},
	// upgrade-cluster.yml drains each node with roles/upgrade/pre-upgrade, which reads the
	// same drain_* variables as remove-node.yml's pre-remove (its defaults: 300, 360s, 3).
	// kube_version: a hop of a chained upgrade before the last goes to its own version, which
	// upgrades.md passes as -e kube_version ("or specify the new version you're upgrading to").
	Upgrade: {allowed: map[string]func(any) bool{"ignore_assert_errors": func(v any) bool { return v == "yes" }, "etcd_retries": isCount,
		"drain_grace_period": isCount, "drain_timeout": isSeconds, "drain_retries": isCount, "kube_version": isKubeVersion}},
}

// ManyEtcdRetries is the etcd_retries kubespray's docs/operations/nodes.md advises when
// several etcd members join in one run ("`etcd_retries=10` might work to join 3 new nodes");
// roles/etcd's default is 4, read by join_etcd_member.yml and configure.yml.
const ManyEtcdRetries = 10

// isCount accepts a non-negative whole number, as Go or JSON decoding gives it.
func isCount(v any) bool {
	switch n := v.(type) {
	case int:
		return n >= 0
	case float64:
		return n >= 0 && n == float64(int64(n))
	case json.Number:
		i, err := n.Int64()
		return err == nil && i >= 0
	}
	return false
}

// isSeconds accepts a duration such as 360s, drain_timeout's form.
func isSeconds(v any) bool {
	s, ok := v.(string)
	n, found := strings.CutSuffix(s, "s")
	return ok && found && n != "" && strings.Trim(n, "0123456789") == ""
}

func isKubeVersion(v any) bool { s, ok := v.(string); return ok && kubeVersion.MatchString(s) }

func isBool(v any) bool { _, ok := v.(bool); return ok }

func isNodeList(v any) bool {
	s, ok := v.(string)
	return ok && s != "" && !slices.ContainsFunc(strings.Split(s, ","), func(n string) bool { return len(validation.IsDNS1123Label(n)) > 0 })
}

// Validate checks an operation against p: a known playbook, a limit of host or group names,
// and exactly the -e variables that playbook takes.
func (p *Profile) Validate(op Operation) error {
	if _, ok := p.Playbooks[op.Playbook]; !ok {
		return fmt.Errorf("operation: unknown playbook %q", op.Playbook)
	}
	for _, h := range op.Without {
		if len(validation.IsDNS1123Label(h)) > 0 {
			return fmt.Errorf("operation %s: without %q: want host names", op.Playbook, h)
		}
	}
	for _, l := range op.Limit {
		if len(validation.IsDNS1123Label(l)) > 0 && l != p.Groups.ControlPlane && l != p.Groups.Etcd && l != p.Groups.Node {
			return fmt.Errorf("operation %s: limit %q: want host names or kubespray groups", op.Playbook, l)
		}
	}
	rules := playbookVars[op.Playbook]
	for _, k := range slices.Sorted(maps.Keys(op.Vars)) {
		check := rules.required[k]
		if check == nil {
			check = rules.allowed[k]
		}
		if check == nil {
			return fmt.Errorf("operation %s: -e %s: not a variable of this playbook (set kubespray variables in the CR's extraVars)", op.Playbook, k)
		}
		if !check(op.Vars[k]) {
			return fmt.Errorf("operation %s: -e %s: invalid value %v", op.Playbook, k, op.Vars[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rules.required)) {
		if _, ok := op.Vars[k]; !ok {
			return fmt.Errorf("operation %s: -e %s is required", op.Playbook, k)
		}
	}
	return nil
}

// Files are what an invocation reads, as paths where it runs.
type Files struct {
	Program, Inventory, PrivateKey, User, VarsFile string
	// Overrides are JSON -e objects placed last, where they win over everything (run-kubespray's
	// SSH and host-key settings).
	Overrides []string
}

// Argv is the ansible-playbook command line of op:
//
//	PROGRAM -i INVENTORY --private-key KEY -u USER -b [--limit L] -e @VARS [-e OP_VARS] [-e OVERRIDES...] PLAYBOOK
func (p *Profile) Argv(op Operation, f Files) ([]string, error) {
	if err := p.Validate(op); err != nil {
		return nil, err
	}
	args := []string{f.Program, "-i", f.Inventory, "--private-key", f.PrivateKey, "-u", f.User, "-b"}
	if len(op.Limit) > 0 {
		args = append(args, "--limit", strings.Join(op.Limit, ","))
	}
	args = append(args, "-e", "@"+f.VarsFile)
	if len(op.Vars) > 0 {
		b, err := json.Marshal(op.Vars) // keys sorted: the same argv every time
		if err != nil {
			return nil, err
		}
		args = append(args, "-e", string(b))
	}
	for _, o := range f.Overrides {
		args = append(args, "-e", o)
	}
	return append(args, p.Playbooks[op.Playbook]), nil
}

// PlaybookOf maps a playbook path back to its operation's playbook.
func (p *Profile) PlaybookOf(path string) (Playbook, bool) {
	for k, v := range p.Playbooks {
		if v == path {
			return k, true
		}
	}
	return "", false
}
