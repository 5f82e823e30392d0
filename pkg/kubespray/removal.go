package kubespray

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Unreachable reports which of nodes cannot be reached over SSH, and why for each. It
// returns an error for a node that answers but cannot be logged in to: such a node is not
// dead, and removing it without a drain or reset would leave its kubelet running.
type Unreachable func(nodes []string) (dead, why []string, err error)

// WithoutDeadHosts is kubespray's procedure for a dead host, applied at run time to the
// remove-node operations of a step: a node that cannot be reached cannot be drained or
// reset. With allowUngraceful (spec.nodeRemoval.allowUngraceful) it is removed first, in an
// operation of its own with reset_nodes=false and allow_ungraceful_removal=true, and the
// reachable nodes after it with it left out of the inventory: remove-node.yml gathers every
// host's facts when it resets nodes, which a dead host in the inventory would fail. Without
// it, the step fails with NodeUnreachable before anything runs. Other operations, and
// removals already ungraceful, are kept as they are.
func WithoutDeadHosts(ops []Operation, allowUngraceful bool, unreachable Unreachable) ([]Operation, error) {
	var out []Operation
	for _, op := range ops {
		if op.Playbook != Remove || op.Vars["allow_ungraceful_removal"] == true {
			out = append(out, op)
			continue
		}
		node, _ := op.Vars["node"].(string) // Validate made it a list of names
		nodes := strings.Split(node, ",")
		dead, why, err := unreachable(nodes)
		if err != nil {
			return nil, err
		}
		if len(dead) == 0 {
			out = append(out, op)
			continue
		}
		if !allowUngraceful {
			return nil, fmt.Errorf(bpav1.ReasonNodeUnreachable+": cannot reach node %s over SSH to drain and reset it before removal (%s); nothing was run. "+
				"Bring the host back, or set spec.nodeRemoval.allowUngraceful: true to remove it without draining or resetting it",
				strings.Join(dead, ", "), strings.Join(why, "; "))
		}
		out = append(out, ungracefulRemoval(op, dead))
		if alive := slices.DeleteFunc(nodes, func(n string) bool { return slices.Contains(dead, n) }); len(alive) > 0 {
			graceful := op
			graceful.Vars = maps.Clone(op.Vars)
			graceful.Vars["node"] = strings.Join(alive, ",")
			graceful.Without = append(slices.Clone(op.Without), dead...)
			out = append(out, graceful)
		}
	}
	return out, nil
}

// ungracefulRemoval removes the dead nodes of op without draining or resetting them, with
// op's drain settings and inventory.
func ungracefulRemoval(op Operation, dead []string) Operation {
	ungraceful := RemoveNodes(dead, true, fmt.Sprintf("%s cannot be reached: remove without draining or resetting (spec.nodeRemoval.allowUngraceful)", strings.Join(dead, ", ")))
	for k, v := range op.Vars {
		if strings.HasPrefix(k, "drain_") {
			ungraceful.Vars[k] = v
		}
	}
	ungraceful.Without = op.Without
	return ungraceful
}
