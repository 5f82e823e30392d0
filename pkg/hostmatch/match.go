// Package hostmatch chooses a BareMetalHost for every node of a Provisioning. It is pure:
// a spec and a list of hosts in, an assignment (or an error naming the node, host and
// requirement at fault) out, so `bpa hosts` and the discover-hosts step give the same
// answer for the same input.
//
// A node with a mac-address gets the one host with a NIC of that MAC (status.hardware.nics
// or spec.bootMACAddress), which must also meet any cpu, memory, sriov and qat the node
// asks for. The other nodes are matched by resources among the remaining hosts as a
// bipartite matching problem (augmenting paths, Hopcroft–Karp), so an assignment is found
// whenever one exists; greedy first-fit is not enough (a big host taken by a small node can
// leave a demanding node with nothing).
//
// Preference, which makes the result deterministic and independent of the order hosts are
// listed in: nodes are considered masters first, each list in CR order; each node prefers
// the hosts already claimed by this cluster (so a rerun keeps its hosts), then the smallest
// host that fits (fewest CPUs, then least RAM), then the host name. The first pass is that
// greedy smallest-fit; augmenting paths only move a node off its preferred host when
// another node would otherwise get none.
package hostmatch

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/leases"
)

// ErrNoAssignment is wrapped by the error Match returns when the hosts cannot give every
// resource-chosen node a host of its own.
var ErrNoAssignment = errors.New("no assignment of BareMetalHosts satisfies every node")

// Selectors are the per-role label selectors; nil selects every host.
type Selectors struct {
	Master, Worker labels.Selector
	// Pools are the worker pools' hostSelectors, in spec order (a pool member's Node.Pool
	// indexes it); a pool's selector replaces workerSelector for its members.
	Pools []labels.Selector
}

// SelectorsOf converts the spec's masterSelector and workerSelector.
func SelectorsOf(spec *bpav1.ProvisioningSpec) (Selectors, error) {
	conv := func(field string, s *metav1.LabelSelector) (labels.Selector, error) {
		if s == nil {
			return labels.Everything(), nil
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return sel, nil
	}
	m, err := conv("masterSelector", spec.MasterSelector)
	if err != nil {
		return Selectors{}, err
	}
	w, err := conv("workerSelector", spec.WorkerSelector)
	if err != nil {
		return Selectors{}, err
	}
	sel := Selectors{Master: m, Worker: w}
	for i, pool := range spec.WorkerPools {
		ps, err := conv(fmt.Sprintf("workerPools[%d].hostSelector", i), pool.HostSelector)
		if err != nil {
			return Selectors{}, err
		}
		sel.Pools = append(sel.Pools, ps)
	}
	return sel, nil
}

// Claimant is the Provisioning hosts are chosen for. A host is its own when the host's
// spec.consumerRef names it, or, for hosts an earlier BPA claimed with the cluster label
// only, when that label names its cluster and the host is in its own namespace (a claim
// in a namespace shared by several tenants cannot tell whose it was: an admin adopts it
// by setting spec.consumerRef).
type Claimant struct {
	Cluster, Namespace, Name string
	// UID, when known, must match the consumerRef's too: a Provisioning deleted and
	// created again under the same name does not inherit the old one's hosts silently.
	UID types.UID
}

// ClaimantOf is the claimant for a Provisioning of cluster.
func ClaimantOf(p *bpav1.Provisioning, cluster string) Claimant {
	return Claimant{Cluster: cluster, Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// ConsumerRef is the spec.consumerRef that claims a host for c.
func (c Claimant) ConsumerRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
}

// Owns says whether ref names c.
func (c Claimant) Owns(ref *corev1.ObjectReference) bool {
	if ref == nil || ref.Kind != "Provisioning" || ref.Namespace != c.Namespace || ref.Name != c.Name {
		return false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != bpav1.GroupVersion.Group {
		return false
	}
	return c.UID == "" || ref.UID == "" || ref.UID == c.UID
}

// LegacyClaim says whether b carries only an earlier BPA's label claim for c's cluster in
// c's namespace, which c adopts.
func (c Claimant) LegacyClaim(b *metal3v1.BareMetalHost) bool {
	return b.Spec.ConsumerRef == nil && b.Labels[bpav1.HostClaimLabel] == c.Cluster && b.Namespace == c.Namespace
}

// Describe names a consumerRef for messages.
func Describe(ref *corev1.ObjectReference) string {
	if ref.Namespace == "" {
		return ref.Kind + " " + ref.Name
	}
	return ref.Kind + " " + ref.Namespace + "/" + ref.Name
}

// Match chooses a host for every node p asks for now (Desired) from hosts, for claimant.
// Nodes the cluster already has keep their hosts; nodes leaving it (applied, no longer
// desired) are listed as they were applied, marked Removing, since kubespray removes a node
// that is still in its inventory. The result is sorted by node name; IPs of the others are
// left empty (resolve-leases fills them).
func Match(p *bpav1.Provisioning, cluster Claimant, hosts []metal3v1.BareMetalHost) ([]bpav1.HostStatus, error) {
	return MatchSpec(&p.Spec, p.Status.Applied, p.Annotations, cluster, hosts)
}

// MatchSpec is Match on a spec, the applied state (nil for a new cluster) and the CR's
// annotations.
func MatchSpec(spec *bpav1.ProvisioningSpec, applied *bpav1.AppliedState, annotations map[string]string, cluster Claimant, hosts []metal3v1.BareMetalHost) ([]bpav1.HostStatus, error) {
	p := &bpav1.Provisioning{Spec: *spec}
	p.Annotations, p.Status.Applied = annotations, applied
	nodes, err := Desired(p)
	if err != nil {
		return nil, err
	}
	sel, err := SelectorsOf(&p.Spec)
	if err != nil {
		return nil, err
	}
	out, err := matchNodes(nodes, sel, cluster, hosts, deadHosts(applied))
	if err != nil {
		return nil, err
	}
	out = append(out, Leaving(p, nodes)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// host is what matching needs to know about one BareMetalHost.
type host struct {
	bmh       *metal3v1.BareMetalHost
	name      string
	inspected bool // status.hardware is present
	cpu       int
	ramMiB    int64
	sriov     bool
	qat       bool
	master    bool   // in masterSelector
	worker    bool   // in workerSelector
	pools     uint32 // bit i: in worker pool i's hostSelector
	ours      bool   // already claimed by this claimant
	// excluded says why the host can never be chosen, empty if it can; excludedShort is
	// the same for counting hosts in an error.
	excluded, excludedShort string
	// mac is the address reported for a node chosen by resources: the boot MAC, else the
	// PXE NIC's, else the first NIC's.
	mac  string
	macs []string // every MAC of the host, normalised
}

func newHost(b *metal3v1.BareMetalHost, cluster Claimant, sel Selectors) host {
	h := host{bmh: b, name: b.Name}
	l := labels.Set(b.Labels)
	h.sriov = l[bpav1.SRIOVFeatureLabel] == "true"
	h.qat = l[bpav1.QATFeatureLabel] == "true"
	h.master = sel.Master == nil || sel.Master.Matches(l)
	h.worker = sel.Worker == nil || sel.Worker.Matches(l)
	for i, ps := range sel.Pools {
		if ps == nil || ps.Matches(l) {
			h.pools |= 1 << i
		}
	}
	h.ours = cluster.Owns(b.Spec.ConsumerRef) || cluster.LegacyClaim(b)
	h.excluded, h.excludedShort = Unfit(b, cluster)
	addMAC := func(s string) string {
		mac, ok := leases.NormalizeMAC(strings.TrimSpace(s))
		if !ok {
			return ""
		}
		for _, m := range h.macs {
			if m == mac {
				return mac
			}
		}
		h.macs = append(h.macs, mac)
		return mac
	}
	h.mac = addMAC(b.Spec.BootMACAddress)
	if hw := b.Status.HardwareDetails; hw != nil {
		h.inspected = true
		h.cpu, h.ramMiB = hw.CPU.Count, int64(hw.RAMMebibytes)
		for _, nic := range hw.NIC {
			if m := addMAC(nic.MAC); m != "" && h.mac == "" && nic.PXE {
				h.mac = m
			}
		}
	}
	if h.mac == "" && len(h.macs) > 0 {
		h.mac = h.macs[0]
	}
	return h
}

// shortfall is one requirement a host fails: a short form for counting hosts in an
// error, and a long one naming the figures.
type shortfall struct{ short, long string }

// unmet lists what host h lacks for node n, empty when it qualifies.
func unmet(n Node, h *host) []shortfall {
	var miss []shortfall
	if n.Master && !h.master {
		miss = append(miss, shortfall{"not in masterSelector", "its labels do not match masterSelector"})
	}
	switch {
	case n.Pool >= 0:
		if h.pools&(1<<n.Pool) == 0 {
			miss = append(miss, shortfall{"not in the pool's hostSelector", fmt.Sprintf("its labels do not match workerPools[%d].hostSelector", n.Pool)})
		}
	case n.Worker && !h.worker:
		miss = append(miss, shortfall{"not in workerSelector", "its labels do not match workerSelector"})
	}
	if (n.CPU > 0 || n.MemoryMiB > 0) && !h.inspected {
		miss = append(miss, shortfall{"not inspected", "it has no status.hardware (not inspected yet), so its cpu and memory are unknown"})
	} else {
		if n.CPU > h.cpu {
			miss = append(miss, shortfall{"too few CPUs", fmt.Sprintf("cpu: it has %d, the node needs %d", h.cpu, n.CPU)})
		}
		if n.MemoryMiB > h.ramMiB {
			miss = append(miss, shortfall{"too little memory", fmt.Sprintf("memory: it has %dMi, the node needs %s", h.ramMiB, n.Memory)})
		}
	}
	if n.SRIOV && !h.sriov {
		miss = append(miss, shortfall{"without the sriov label", fmt.Sprintf("sriov: it lacks the label %s=true", bpav1.SRIOVFeatureLabel)})
	}
	if n.QAT && !h.qat {
		miss = append(miss, shortfall{"without the qat label", fmt.Sprintf("qat: it lacks the label %s=true", bpav1.QATFeatureLabel)})
	}
	return miss
}

func longForms(miss []shortfall) string {
	parts := make([]string, len(miss))
	for i, m := range miss {
		parts[i] = m.long
	}
	return strings.Join(parts, "; ")
}

// MatchNodes is Match on nodes already flattened by Nodes.
func MatchNodes(nodes []Node, sel Selectors, cluster Claimant, bmhs []metal3v1.BareMetalHost) ([]bpav1.HostStatus, error) {
	return matchNodes(nodes, sel, cluster, bmhs, nil)
}

// deadHosts are the hosts graded remediation replaces nodes off (status.applied.replacements),
// with why: no node is matched to one, even while the cluster still holds its claim (the
// release that marks it comes after the removal).
func deadHosts(applied *bpav1.AppliedState) map[string]string {
	if applied == nil || len(applied.Replacements) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, r := range applied.Replacements {
		out[r.BareMetalHost] = fmt.Sprintf("is the dead host graded remediation replaces node %s off (status.applied.replacements)", r.Node)
	}
	return out
}

// matchNodes is MatchNodes with hosts no node may take (dead, by name, with why).
func matchNodes(nodes []Node, sel Selectors, cluster Claimant, bmhs []metal3v1.BareMetalHost, dead map[string]string) ([]bpav1.HostStatus, error) {
	hosts := make([]host, len(bmhs))
	for i := range bmhs {
		hosts[i] = newHost(&bmhs[i], cluster, sel)
		if why, ok := dead[hosts[i].name]; ok && hosts[i].excluded == "" {
			hosts[i].excluded, hosts[i].excludedShort = why, "replaced as dead"
		}
	}
	// Host order must not depend on how the hosts were listed.
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].name < hosts[j].name })
	for i := 1; i < len(hosts); i++ {
		if hosts[i].name == hosts[i-1].name {
			return nil, fmt.Errorf("BareMetalHost %s is listed twice", hosts[i].name)
		}
	}

	chosen := make([]int, len(nodes)) // node -> host index
	takenBy := make(map[int]string)   // host index -> node name, for nodes with a MAC
	if err := matchByMAC(nodes, hosts, chosen, takenBy); err != nil {
		return nil, err
	}
	if err := matchByResources(nodes, hosts, chosen, takenBy); err != nil {
		return nil, err
	}

	out := make([]bpav1.HostStatus, len(nodes))
	for i, n := range nodes {
		h := &hosts[chosen[i]]
		mac := n.MAC
		if mac == "" {
			mac = h.mac
		}
		out[i] = bpav1.HostStatus{Name: n.Name, Roles: n.Roles(), MAC: mac, BareMetalHost: h.name, Etcd: n.Etcd}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// matchByMAC pins every node with a mac-address to its host.
func matchByMAC(nodes []Node, hosts []host, chosen []int, takenBy map[int]string) error {
	byMAC := map[string][]int{}
	for i := range hosts {
		for _, m := range hosts[i].macs {
			byMAC[m] = append(byMAC[m], i)
		}
	}
	for ni, n := range nodes {
		if n.MAC == "" {
			continue
		}
		all := byMAC[n.MAC]
		if len(all) == 0 {
			return fmt.Errorf("node %s: no BareMetalHost has a NIC with MAC %s (status.hardware.nics[].mac or spec.bootMACAddress)", n.Name, n.MAC)
		}
		// A host being replaced can leave a stale object with the same MAC: only the
		// usable ones count, and they must be exactly one.
		var usable, why []string
		hi := -1
		for _, i := range all {
			if hosts[i].excluded == "" {
				usable = append(usable, hosts[i].name)
				hi = i
			} else {
				why = append(why, fmt.Sprintf("BareMetalHost %s %s", hosts[i].name, hosts[i].excluded))
			}
		}
		switch {
		case len(usable) == 0:
			return fmt.Errorf("node %s: the host with MAC %s cannot be used: %s", n.Name, n.MAC, strings.Join(why, "; "))
		case len(usable) > 1:
			return fmt.Errorf("node %s: MAC %s is on several BareMetalHosts (%s); delete the stale ones", n.Name, n.MAC, strings.Join(usable, ", "))
		}
		h := &hosts[hi]
		if other, dup := takenBy[hi]; dup {
			return fmt.Errorf("nodes %s and %s name MACs of the same BareMetalHost %s", other, n.Name, h.name)
		}
		// A node the cluster already has stays where it is even if its requirements changed
		// since: moving it would mean removing it and adding it back.
		if miss := unmet(n, h); len(miss) > 0 && !n.Pinned {
			return fmt.Errorf("node %s: BareMetalHost %s (MAC %s) does not meet the node's requirements: %s",
				n.Name, h.name, n.MAC, longForms(miss))
		}
		takenBy[hi] = n.Name
		chosen[ni] = hi
	}
	return nil
}

// matchByResources assigns the nodes without a MAC.
func matchByResources(nodes []Node, hosts []host, chosen []int, takenBy map[int]string) error {
	var free []int // indices of resource-chosen nodes
	for i, n := range nodes {
		if n.MAC == "" {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return nil
	}
	var avail []int // indices of hosts they may use
	for i := range hosts {
		if _, taken := takenBy[i]; !taken && hosts[i].excluded == "" && hosts[i].mac != "" {
			avail = append(avail, i)
		}
	}
	m := newMatcher(nodes, free, hosts, avail)
	m.solve()
	for k, ni := range free {
		if p := m.matchN[k]; p >= 0 {
			chosen[ni] = avail[m.order[p]]
			continue
		}
		return m.explain(k, nodes, free, hosts, avail, takenBy)
	}
	return nil
}

// Capability bits of hosts, and the bits a node requires.
const (
	bitSRIOV uint32 = 1 << iota
	bitQAT
	bitMaster
	bitWorker
	// bitPool0 << i is worker pool i (at most 28 pools; the CRD allows 20).
	bitPool0
)

// matcher is the bipartite graph of resource-chosen nodes and available hosts, kept
// implicit: an edge is a cheap test on flat arrays, so 10,000 hosts × 1,000 nodes never
// materialise ten million edges.
type matcher struct {
	// Hosts by position p, in preference order: hosts [0, ours) are claimed by this
	// cluster, the rest sorted by CPU count, so a node skips every host with too few CPUs
	// with one binary search (lb).
	order []int // position -> index into avail
	cpu   []int
	ram   []int64
	bits  []uint32
	ours  int
	// Nodes by k, in node order.
	ncpu  []int
	nram  []int64
	nbits []uint32
	lb    []int
	// The matching, and Hopcroft–Karp's scratch space.
	matchN []int // node -> host position, -1
	matchH []int // host position -> node, -1
	dist   []int
	iter   []int
}

func newMatcher(nodes []Node, free []int, hosts []host, avail []int) *matcher {
	m := &matcher{order: make([]int, len(avail))}
	for p := range m.order {
		m.order[p] = p
	}
	less := func(a, b *host) bool {
		if a.ours != b.ours {
			return a.ours
		}
		if a.cpu != b.cpu {
			return a.cpu < b.cpu
		}
		if a.ramMiB != b.ramMiB {
			return a.ramMiB < b.ramMiB
		}
		return a.name < b.name
	}
	sort.Slice(m.order, func(i, j int) bool { return less(&hosts[avail[m.order[i]]], &hosts[avail[m.order[j]]]) })
	n := len(avail)
	m.cpu, m.ram, m.bits, m.matchH = make([]int, n), make([]int64, n), make([]uint32, n), make([]int, n)
	for p, a := range m.order {
		h := &hosts[avail[a]]
		if h.ours {
			m.ours = p + 1
		}
		m.cpu[p], m.ram[p] = h.cpu, h.ramMiB
		if !h.inspected {
			m.cpu[p], m.ram[p] = 0, 0
		}
		m.bits[p] = bit(h.sriov, bitSRIOV) | bit(h.qat, bitQAT) | bit(h.master, bitMaster) | bit(h.worker, bitWorker) | h.pools*bitPool0
		m.matchH[p] = -1
	}
	k := len(free)
	m.ncpu, m.nram, m.nbits, m.lb = make([]int, k), make([]int64, k), make([]uint32, k), make([]int, k)
	m.matchN, m.dist, m.iter = make([]int, k), make([]int, k), make([]int, k)
	for j, ni := range free {
		nd := &nodes[ni]
		m.ncpu[j], m.nram[j] = nd.CPU, nd.MemoryMiB
		m.nbits[j] = bit(nd.SRIOV, bitSRIOV) | bit(nd.QAT, bitQAT) | bit(nd.Master, bitMaster)
		if nd.Pool >= 0 {
			m.nbits[j] |= bitPool0 << nd.Pool // the pool's selector, not workerSelector
		} else {
			m.nbits[j] |= bit(nd.Worker, bitWorker)
		}
		rest := m.cpu[m.ours:]
		m.lb[j] = m.ours + sort.Search(len(rest), func(i int) bool { return rest[i] >= nd.CPU })
		m.matchN[j] = -1
	}
	return m
}

func bit(b bool, v uint32) uint32 {
	if b {
		return v
	}
	return 0
}

// next returns the first host position ≥ p that node k fits, or -1.
func (m *matcher) next(k, p int) int {
	for p < len(m.cpu) {
		if p >= m.ours && p < m.lb[k] {
			p = m.lb[k]
			continue
		}
		if m.cpu[p] >= m.ncpu[k] && m.ram[p] >= m.nram[k] && m.bits[p]&m.nbits[k] == m.nbits[k] {
			return p
		}
		p++
	}
	return -1
}

const unreached = int(^uint(0) >> 1)

// solve computes a maximum matching: greedy smallest-fit first (it settles almost every
// node at its preferred host), then Hopcroft–Karp phases of shortest augmenting paths for
// the nodes the greedy pass left without a host.
func (m *matcher) solve() {
	for k := range m.matchN {
		for p := m.next(k, 0); p >= 0; p = m.next(k, p+1) {
			if m.matchH[p] < 0 {
				m.matchH[p], m.matchN[k] = k, p
				break
			}
		}
	}
	for m.bfs() {
		for k := range m.iter {
			m.iter[k] = 0
		}
		for k := range m.matchN {
			if m.matchN[k] < 0 {
				m.dfs(k)
			}
		}
	}
}

// bfs layers the nodes by alternating-path distance from the unmatched ones and reports
// whether some free host is reachable (an augmenting path exists).
func (m *matcher) bfs() bool {
	queue := make([]int, 0, len(m.matchN))
	for k, p := range m.matchN {
		if p < 0 {
			m.dist[k] = 0
			queue = append(queue, k)
		} else {
			m.dist[k] = unreached
		}
	}
	found := false
	for i := 0; i < len(queue); i++ {
		k := queue[i]
		for p := m.next(k, 0); p >= 0; p = m.next(k, p+1) {
			w := m.matchH[p]
			if w < 0 {
				found = true
			} else if m.dist[w] == unreached {
				m.dist[w] = m.dist[k] + 1
				queue = append(queue, w)
			}
		}
	}
	return found
}

// dfs follows the layers from node k to a free host and flips the path.
func (m *matcher) dfs(k int) bool {
	for p := m.next(k, m.iter[k]); p >= 0; p = m.next(k, p+1) {
		m.iter[k] = p + 1
		w := m.matchH[p]
		if w < 0 || (m.dist[w] == m.dist[k]+1 && m.dfs(w)) {
			m.matchH[p], m.matchN[k] = k, p
			return true
		}
	}
	m.iter[k] = len(m.cpu)
	m.dist[k] = unreached
	return false
}

// explain builds the error for node k left without a host by a maximum matching. If no
// host fits it at all, it says why each host was ruled out. Otherwise Hall's theorem gives
// a precise reason: the nodes reachable from k by alternating paths all compete for a set
// of hosts one smaller than themselves.
func (m *matcher) explain(k int, nodes []Node, free []int, hosts []host, avail []int, takenBy map[int]string) error {
	n := nodes[free[k]]
	if m.next(k, 0) < 0 {
		counts := map[string]int{}
		var reasons []string
		note := func(r string) {
			if counts[r] == 0 {
				reasons = append(reasons, r)
			}
			counts[r]++
		}
		for i := range hosts {
			h := &hosts[i]
			switch who, taken := takenBy[i]; {
			case h.excluded != "":
				note(h.excludedShort)
			case taken:
				note("taken by node " + who + " (by MAC)")
			case h.mac == "":
				note("without a MAC address")
			default:
				// A node the cluster already has stays where it is even if its requirements changed
				// since: moving it would mean removing it and adding it back.
				if miss := unmet(n, h); len(miss) > 0 && !n.Pinned {
					note(miss[0].short)
				}
			}
		}
		sort.SliceStable(reasons, func(i, j int) bool {
			if counts[reasons[i]] != counts[reasons[j]] {
				return counts[reasons[i]] > counts[reasons[j]]
			}
			return reasons[i] < reasons[j]
		})
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%d %s", counts[r], r)
		}
		detail := "there are no BareMetalHosts"
		if len(hosts) > 0 {
			detail = fmt.Sprintf("none of the %d BareMetalHosts qualifies (%s)", len(hosts), strings.Join(parts, "; "))
		}
		return fmt.Errorf("%w: node %s (%s, roles %s): %s",
			ErrNoAssignment, n.Name, n.requirements(), strings.Join(n.Roles(), "+"), detail)
	}
	seenN := map[int]bool{k: true}
	seenH := map[int]bool{}
	queue := []int{k}
	for i := 0; i < len(queue); i++ {
		for p := m.next(queue[i], 0); p >= 0; p = m.next(queue[i], p+1) {
			if seenH[p] {
				continue
			}
			seenH[p] = true
			if w := m.matchH[p]; w >= 0 && !seenN[w] {
				seenN[w] = true
				queue = append(queue, w)
			}
		}
	}
	names := make([]string, 0, len(queue))
	for _, q := range queue {
		names = append(names, nodes[free[q]].Name)
	}
	hostNames := make([]string, 0, len(seenH))
	for p := range seenH {
		hostNames = append(hostNames, hosts[avail[m.order[p]]].name)
	}
	sort.Strings(names)
	sort.Strings(hostNames)
	return fmt.Errorf("%w: %d nodes (%s) can only use %d BareMetalHosts (%s); node %s needs %s",
		ErrNoAssignment, len(names), list(names), len(hostNames), list(hostNames), n.Name, n.requirements())
}

// list joins names, eliding the middle of long lists.
func list(names []string) string {
	const most = 10
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:most], ", ") + fmt.Sprintf(", ... and %d more", len(names)-most)
}
