package kubespray

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CheckPlaybook runs what kubespray checks of an operation before it changes a host: the
// playbook's own confirmations and variables, then, for the playbooks that import
// boilerplate.yml's inventory checks, CheckInventory and the facts-cache rule of --limit.
// cached says whether a host's facts are in the facts cache (kubespray's ansible.cfg:
// fact_caching = jsonfile under /tmp, so only a facts.yml run in the same container fills it).
func (p *Profile) CheckPlaybook(op Operation, inv Inventory, vars map[string]any, patch int, cached func(host string) bool) []error {
	all := func(k string) any {
		if v, ok := op.Vars[k]; ok {
			return v
		}
		return vars[k]
	}
	switch op.Playbook {
	case Remove:
		node, _ := all("node").(string)
		if node == "" {
			// v2.28's first play asserts it; v2.27 asserts nothing and, its plays targeting
			// node | default('etcd:k8s_cluster:calico_rr'), would reset every host.
			if p.ValidateRole == "" {
				return []error{Violation{Role: PolicyRole, Msg: "remove-node.yml needs -e node: without it kubespray " + p.Minor + " resets every host of the cluster"}}
			}
			return []error{Violation{"remove_node.yml", "Assert that nodes are specified for removal", "No nodes specified for removal. The `node` variable must be set explicitly."}}
		}
		if p.ValidateRole != "" {
			// v2.28's remove_node.yml imports boilerplate.yml, whose "Check inventory settings"
			// play runs roles/validate_inventory on every host before the confirmation.
			if errs := p.CheckInventory(inv, mergeVars(vars, op.Vars), patch); len(errs) > 0 {
				return errs
			}
		}
		if !truthy(all("skip_confirmation")) {
			// The pause prompt has no terminal in a pod: no answer is not "yes".
			return []error{Violation{"remove_node.yml", "Fail if user does not confirm deletion", "Delete nodes confirmation failed"}}
		}
		nodes := strings.Split(node, ",")
		for _, g := range []string{p.Groups.ControlPlane, p.Groups.Etcd} {
			if len(inv[g]) > 0 && slices.Contains(nodes, inv[g][0]) {
				// Not an assertion: a comment above remove_node.yml's "Post node removal" play
				// ("Currently cannot remove first control plane node or first etcd node").
				return []error{Violation{Role: PolicyRole, Msg: fmt.Sprintf("%s is the first host of %s, and kubespray's remove_node.yml says (in a comment) that it cannot remove the first control plane node or first etcd node", inv[g][0], g)}}
			}
		}
		return nil
	case Reset:
		if !truthy(all("reset_confirmation")) {
			return []error{Violation{"reset.yml", "Check confirmation", "Reset confirmation failed"}}
		}
		return nil
	case Facts:
		return nil
	}
	merged := mergeVars(vars, op.Vars)
	if errs := p.CheckInventory(inv, merged, patch); len(errs) > 0 {
		return errs
	}
	if len(op.Limit) > 0 && !jinjaTrue(merged["ignore_assert_errors"]) {
		var uncached []string
		for _, h := range inv[p.Groups.Cluster] {
			if !inv.matches(op.Limit, h) && !cached(h) {
				uncached = append(uncached, h)
			}
		}
		if len(uncached) > 0 {
			return []error{Violation{"kubernetes/preinstall", "Stop if any host not in '--limit' does not have a fact cache",
				"Kubespray does not support '--limit' without a populated facts cache for the excluded hosts. " +
					"Please run the facts.yml playbook first without '--limit'. " +
					"The following excluded hosts are not cached: " + strings.Join(uncached, ", ")}}
		}
	}
	return nil
}

// matches says whether a --limit of host and group names selects host.
func (inv Inventory) matches(limit []string, host string) bool {
	for _, l := range limit {
		if l == host || slices.Contains(inv[l], host) {
			return true
		}
	}
	return false
}

// Hosts lists the hosts an operation runs on: its limit, or every host of the cluster.
func (inv Inventory) Hosts(limit []string) []string {
	var out []string
	for _, h := range inv["all"] {
		if len(limit) == 0 || inv.matches(limit, h) {
			out = append(out, h)
		}
	}
	return out
}

// OperationDir names operation i (from 0) of a plan: `bpa plan --output-dir` writes it, and the
// SIMULATED kubespray records the runs it was given under the same names.
func OperationDir(i int, op Operation) string { return fmt.Sprintf("%02d-%s", i+1, op.Playbook) }

// mergeVars is vars with the operation's -e variables over them.
func mergeVars(vars, opVars map[string]any) map[string]any {
	if len(opVars) == 0 {
		return vars
	}
	merged := maps.Clone(vars)
	if merged == nil {
		merged = map[string]any{}
	}
	maps.Copy(merged, opVars)
	return merged
}
