package hostmatch

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Desired returns the nodes a Provisioning asks for now: its masters and named workers
// (Nodes), then each worker pool's members. It reads the spec, status.applied and the
// delete-nodes annotation, and nothing else, so the planner, discover-hosts and `bpa plan`
// agree on it. Nodes the cluster already has (status.applied) are pinned to their hosts.
// A worker graded remediation replaces (status.applied.replacements) is not asked for while
// it is still applied on its dead host: the run removes it from there, and the next one,
// finding it no longer applied, chooses it a spare host as for any node that joins.
func Desired(p *bpav1.Provisioning) ([]Node, error) {
	nodes, err := Nodes(&p.Spec)
	if err != nil {
		return nil, err
	}
	var applied []bpav1.HostStatus
	if p.Status.Applied != nil {
		applied = p.Status.Applied.Hosts
	}
	named := map[string]bool{}
	for _, n := range nodes {
		named[n.Name] = true
	}
	for i, pool := range p.Spec.WorkerPools {
		base, err := nodeOf(pool.Name+"-1", &bpav1.NodeRequirements{CPU: pool.CPU, Memory: pool.Memory, SRIOV: pool.SRIOV, QAT: pool.QAT})
		if err != nil {
			return nil, fmt.Errorf("workerPools[%d]: %w", i, err)
		}
		for _, name := range PoolMembers(pool, applied, DeleteFirst(p)) {
			if named[name] {
				return nil, fmt.Errorf("workerPools[%d]: member %s is also a named master or worker: rename the node, or the pool", i, name)
			}
			n := base
			n.Name, n.Worker, n.Pool = name, true, i
			nodes = append(nodes, n)
		}
	}
	nodes = withoutReplaced(nodes, p.Status.Applied)
	byName := map[string]bpav1.HostStatus{}
	for _, h := range applied {
		byName[h.Name] = h
	}
	for i := range nodes {
		if h, ok := byName[nodes[i].Name]; ok && !h.Removing && h.MAC != "" && (nodes[i].MAC == "" || nodes[i].MAC == h.MAC) {
			nodes[i].MAC, nodes[i].Pinned = h.MAC, true
		}
	}
	return nodes, nil
}

// DeleteFirst reads the delete-nodes annotation: the pool members a scale-down removes
// first.
func DeleteFirst(p *bpav1.Provisioning) map[string]bool {
	out := map[string]bool{}
	for _, n := range strings.Split(p.Annotations[bpav1.DeleteNodesAnnotation], ",") {
		if n = strings.TrimSpace(n); n != "" {
			out[n] = true
		}
	}
	return out
}

// PoolMembers names a pool's members, like a MachineDeployment's machines but with stable
// names: the members the cluster has keep their names; a scale-up adds the lowest free
// indices; a scale-down removes the members named in deleteFirst, then the newest (highest
// index), as Cluster API prefers the delete-machine annotation, then the newest machines.
func PoolMembers(pool bpav1.WorkerPool, applied []bpav1.HostStatus, deleteFirst map[string]bool) []string {
	prefix := pool.Name + "-"
	var have []int
	for _, h := range applied {
		if rest, ok := strings.CutPrefix(h.Name, prefix); ok && !h.Removing {
			if i, err := strconv.Atoi(rest); err == nil && i > 0 && strconv.Itoa(i) == rest {
				have = append(have, i)
			}
		}
	}
	sort.Ints(have)
	want := int(pool.Replicas)
	// One pass each way, so planning stays linear in members however far a pool scales.
	if excess := len(have) - want; excess > 0 {
		// The annotated members leave first, lowest index first; then the highest indexes.
		kept := have[:0]
		for _, n := range have {
			if excess > 0 && deleteFirst[prefix+strconv.Itoa(n)] {
				excess--
				continue
			}
			kept = append(kept, n)
		}
		have = kept[:len(kept)-excess]
	}
	taken := make(map[int]bool, len(have))
	for _, n := range have {
		taken[n] = true
	}
	for next := 1; len(have) < want; next++ {
		if !taken[next] {
			have = append(have, next)
		}
	}
	sort.Ints(have)
	out := make([]string, len(have))
	for i, n := range have {
		out[i] = prefix + strconv.Itoa(n)
	}
	return out
}

// Leaving lists the applied nodes that are not in desired, as they were applied, marked
// Removing.
func Leaving(p *bpav1.Provisioning, desired []Node) []bpav1.HostStatus {
	if p.Status.Applied == nil {
		return nil
	}
	want := map[string]bool{}
	for _, n := range desired {
		want[n.Name] = true
	}
	var out []bpav1.HostStatus
	for _, h := range p.Status.Applied.Hosts {
		if !want[h.Name] {
			h.Removing = true
			out = append(out, h)
		}
	}
	return out
}

// withoutReplaced drops the nodes whose replacement still has to remove them from their
// dead host.
func withoutReplaced(nodes []Node, applied *bpav1.AppliedState) []Node {
	if applied == nil || len(applied.Replacements) == 0 {
		return nodes
	}
	leaving := map[string]bool{}
	for _, r := range applied.Replacements {
		if r.Leaving(applied) {
			leaving[r.Node] = true
		}
	}
	return slices.DeleteFunc(nodes, func(n Node) bool { return leaving[n.Name] })
}
