package hostmatch

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/leases"
)

// Roles, in the order HostStatus lists them.
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// Node is one node of the cluster: a name from masters and/or workers with the union of
// the requirements of its entries.
type Node struct {
	Name   string
	Master bool
	Worker bool
	// MAC is normalised (lower case, `:`); empty when the node is chosen by resources.
	MAC string
	// CPU is the minimum CPU count, 0 for any.
	CPU int
	// MemoryMiB is the minimum RAM in MiB (rounded up), 0 for any; Memory is the quantity
	// as written, for messages.
	MemoryMiB int64
	Memory    string
	SRIOV     bool
	QAT       bool
	// Etcd: the node is a master that runs an etcd member (kubespray.EtcdMembers).
	Etcd bool
	// Pool indexes spec.workerPools for a pool member, -1 for a named node.
	Pool int
	// Pinned: the cluster already has the node (status.applied), so MAC is its host's and
	// the host is kept even if it no longer meets the requirements.
	Pinned bool
}

// Roles lists the node's roles, master first.
func (n Node) Roles() []string {
	var r []string
	if n.Master {
		r = append(r, RoleMaster)
	}
	if n.Worker {
		r = append(r, RoleWorker)
	}
	return r
}

// requirements renders what the node asks for, for error messages.
func (n Node) requirements() string {
	var parts []string
	if n.MAC != "" {
		parts = append(parts, "mac-address "+n.MAC)
	}
	if n.CPU > 0 {
		parts = append(parts, fmt.Sprintf("cpu ≥ %d", n.CPU))
	}
	if n.MemoryMiB > 0 {
		parts = append(parts, "memory ≥ "+n.Memory)
	}
	if n.SRIOV {
		parts = append(parts, "sriov")
	}
	if n.QAT {
		parts = append(parts, "qat")
	}
	if len(parts) == 0 {
		return "no requirements"
	}
	return strings.Join(parts, ", ")
}

// Nodes flattens masters and workers into the cluster's nodes, masters first, each list in
// CR order (the order matching considers them in).
//
// A name in both lists is one node with both roles; its entries must agree on the MAC, and
// the host must meet both entries' resources. A null worker entry (`- master-1:`) is how
// ICN says "the master is also a worker". With no workers at all, every master is also a
// worker, as in ICN.
func Nodes(spec *bpav1.ProvisioningSpec) ([]Node, error) {
	var nodes []Node
	index := map[string]int{}
	add := func(list string, entries []bpav1.NodeEntry, master bool) error {
		seen := map[string]bool{}
		for i, e := range entries {
			if len(e) != 1 {
				return fmt.Errorf("%s[%d]: an entry names exactly one node, this one has %d", list, i, len(e))
			}
			for name, req := range e {
				if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
					return fmt.Errorf("%s[%d]: node name %q: %s", list, i, name, errs[0])
				}
				if seen[name] {
					return fmt.Errorf("%s: node %s is listed twice", list, name)
				}
				seen[name] = true
				if !master && req != nil && req.Etcd != nil {
					return fmt.Errorf("%s[%d]: node %s: etcd applies to masters only", list, i, name)
				}
				n, err := nodeOf(name, req)
				if err != nil {
					return err
				}
				j, ok := index[name]
				if !ok {
					n.Master, n.Worker = master, !master
					index[name] = len(nodes)
					nodes = append(nodes, n)
					continue
				}
				if err := merge(&nodes[j], n); err != nil {
					return err
				}
				nodes[j].Worker = true
			}
		}
		return nil
	}
	if err := add("masters", spec.Masters, true); err != nil {
		return nil, err
	}
	if err := etcdMembers(spec.Masters, nodes); err != nil {
		return nil, err
	}
	if err := add("workers", spec.Workers, false); err != nil {
		return nil, err
	}
	if len(spec.Workers) == 0 && len(spec.WorkerPools) == 0 {
		for i := range nodes {
			nodes[i].Worker = true
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("masters: at least one master is required")
	}
	byMAC := map[string]string{}
	for _, n := range nodes {
		if n.MAC == "" {
			continue
		}
		if other, dup := byMAC[n.MAC]; dup {
			return nil, fmt.Errorf("nodes %s and %s both name mac-address %s: a MAC is one host", other, n.Name, n.MAC)
		}
		byMAC[n.MAC] = n.Name
	}
	return nodes, nil
}

// etcdMembers marks the masters (nodes, in CR order) that run etcd.
func etcdMembers(masters []bpav1.NodeEntry, nodes []Node) error {
	if len(nodes) == 0 {
		return nil // refused below, in the words of a missing master
	}
	names, choice := make([]string, len(nodes)), map[string]bool{}
	for i, n := range nodes {
		names[i] = n.Name
	}
	for _, e := range masters {
		for name, req := range e {
			if req != nil && req.Etcd != nil {
				choice[name] = *req.Etcd
			}
		}
	}
	members, err := kubespray.EtcdMembers(names, choice)
	if err != nil {
		return fmt.Errorf("masters: %w", err)
	}
	for i := range nodes {
		nodes[i].Etcd = slices.Contains(members, nodes[i].Name)
	}
	return nil
}

func nodeOf(name string, req *bpav1.NodeRequirements) (Node, error) {
	n := Node{Name: name, Pool: -1}
	if req == nil {
		return n, nil
	}
	if req.MACAddress != "" {
		mac, ok := leases.NormalizeMAC(strings.TrimSpace(req.MACAddress))
		if !ok {
			return n, fmt.Errorf("node %s: mac-address %q is not a MAC address", name, req.MACAddress)
		}
		n.MAC = mac
	}
	if req.CPU != nil {
		if *req.CPU < 1 {
			return n, fmt.Errorf("node %s: cpu must be at least 1, got %d", name, *req.CPU)
		}
		n.CPU = int(*req.CPU)
	}
	if req.Memory != nil {
		mib, err := mebibytes(*req.Memory)
		if err != nil {
			return n, fmt.Errorf("node %s: memory %s: %w", name, req.Memory.String(), err)
		}
		n.MemoryMiB, n.Memory = mib, req.Memory.String()
	}
	n.SRIOV, n.QAT = req.SRIOV, req.QAT
	return n, nil
}

// mebibytes rounds a memory quantity up to whole MiB, the unit of status.hardware.ramMebibytes.
func mebibytes(q resource.Quantity) (int64, error) {
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("must be positive")
	}
	b, ok := q.AsInt64()
	if !ok {
		b = q.Value() // fractional bytes round up; absurdly large values saturate
	}
	const mib = 1 << 20
	n := b / mib
	if b%mib != 0 {
		n++
	}
	return n, nil
}

// merge folds the worker entry of a combined node into its master entry: both must hold.
func merge(dst *Node, src Node) error {
	switch {
	case dst.MAC == "":
		dst.MAC = src.MAC
	case src.MAC != "" && src.MAC != dst.MAC:
		return fmt.Errorf("node %s: masters and workers give it different mac-addresses (%s, %s); a node listed in both is one host",
			dst.Name, dst.MAC, src.MAC)
	}
	dst.CPU = max(dst.CPU, src.CPU)
	if src.MemoryMiB > dst.MemoryMiB {
		dst.MemoryMiB, dst.Memory = src.MemoryMiB, src.Memory
	}
	dst.SRIOV = dst.SRIOV || src.SRIOV
	dst.QAT = dst.QAT || src.QAT
	return nil
}
