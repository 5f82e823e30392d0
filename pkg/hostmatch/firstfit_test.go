package hostmatch

import (
	"fmt"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/labels"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// firstFit is the naive baseline the benchmarks compare Match with: each node, in order,
// takes the first free host in list order that meets its requirements, reading the
// BareMetalHost objects directly. It is what ICN-style code would do, and it is wrong:
// it misses assignments that exist (TestFirstFitTrap).
func firstFit(nodes []Node, sel Selectors, cluster string, bmhs []metal3v1.BareMetalHost) ([]bpav1.HostStatus, error) {
	taken := make([]bool, len(bmhs))
	out := make([]bpav1.HostStatus, 0, len(nodes))
	everything := labels.Everything()
	if sel.Master == nil {
		sel.Master = everything
	}
	if sel.Worker == nil {
		sel.Worker = everything
	}
next:
	for _, n := range nodes {
		for i := range bmhs {
			b := &bmhs[i]
			if taken[i] || b.DeletionTimestamp != nil || b.Status.ErrorMessage != "" ||
				b.Status.OperationalStatus == metal3v1.OperationalStatusError {
				continue
			}
			if c, ok := b.Labels[bpav1.HostClaimLabel]; ok && c != cluster {
				continue
			}
			l := labels.Set(b.Labels)
			if (n.Master && !sel.Master.Matches(l)) || (n.Worker && !sel.Worker.Matches(l)) {
				continue
			}
			hw := b.Status.HardwareDetails
			if hw == nil || hw.CPU.Count < n.CPU || int64(hw.RAMMebibytes) < n.MemoryMiB ||
				(n.SRIOV && b.Labels[bpav1.SRIOVFeatureLabel] != "true") || (n.QAT && b.Labels[bpav1.QATFeatureLabel] != "true") {
				continue
			}
			taken[i] = true
			out = append(out, bpav1.HostStatus{Name: n.Name, Roles: n.Roles(), MAC: b.Spec.BootMACAddress, BareMetalHost: b.Name})
			continue next
		}
		return nil, fmt.Errorf("first-fit: no host for node %s", n.Name)
	}
	return out, nil
}
