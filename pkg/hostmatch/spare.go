package hostmatch

import (
	"fmt"
	"slices"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Spare is the BareMetalHost that would take applied worker node once it has left its dead
// host: the match discover-hosts makes in the run that adds it back, with the dead host
// released and marked unhealthy (as the run that removes the node leaves it). An error
// says why there is none, naming the node's entry: graded remediation's Replace rung is
// then not taken, and nothing is touched.
func Spare(p *bpav1.Provisioning, cluster Claimant, hosts []metal3v1.BareMetalHost, node string) (string, error) {
	applied := p.Status.Applied
	if applied == nil {
		return "", fmt.Errorf("node %s is not in status.applied", node)
	}
	i := slices.IndexFunc(applied.Hosts, func(h bpav1.HostStatus) bool { return h.Name == node && !h.Removing })
	if i < 0 {
		return "", fmt.Errorf("node %s is not in status.applied", node)
	}
	dead := applied.Hosts[i].BareMetalHost
	after := applied.DeepCopy()
	after.Hosts = slices.Delete(after.Hosts, i, i+1)
	after.Replacements = nil
	marked := make([]metal3v1.BareMetalHost, len(hosts))
	for j := range hosts {
		marked[j] = *hosts[j].DeepCopy()
		if h := &marked[j]; h.Name == dead {
			h.Spec.ConsumerRef = nil
			delete(h.Labels, bpav1.HostClaimLabel)
			if h.Annotations == nil {
				h.Annotations = map[string]string{}
			}
			h.Annotations[bpav1.HostUnhealthyAnnotation] = "replaced"
		}
	}
	out, err := MatchSpec(&p.Spec, after, p.Annotations, cluster, marked)
	if err != nil {
		return "", fmt.Errorf("no spare BareMetalHost for worker %s: %w", node, err)
	}
	for _, h := range out {
		if h.Name == node {
			return h.BareMetalHost, nil
		}
	}
	return "", fmt.Errorf("worker %s is no longer in the spec", node)
}
