package translator

import (
	"fmt"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// Plan returns the kubespray operations a run of p executes, in order. Today that is the
// creation of the whole cluster; the day-2 planner extends it with the applied state
// (spec, applied) → operations, each becoming its own steps, and `bpa plan` prints them all.
func Plan(p *bpav1.Provisioning) ([]kubespray.Operation, error) {
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	if _, _, err := kubespray.ProfileForImage(params["kubespray-image"]); err != nil {
		return nil, fmt.Errorf("spec.kubespray.version: %w", err)
	}
	return []kubespray.Operation{kubespray.CreateCluster(fmt.Sprintf("build the cluster on all %d hosts", nodeCount(p)))}, nil
}

func nodeCount(p *bpav1.Provisioning) int {
	names := map[string]bool{}
	for _, l := range [][]bpav1.NodeEntry{p.Spec.Masters, p.Spec.Workers} {
		for _, e := range l {
			for n := range e {
				names[n] = true
			}
		}
	}
	return len(names)
}
