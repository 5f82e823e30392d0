package clusterdrift

import (
	"fmt"
	"sort"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/software"
)

// SoftwareNodes are the nodes a Software wants packages on (software.Nodes over the
// cluster's hosts), their `version: latest` items resolved to what the Software's last run
// installed (status.latest). A Software whose last run did not succeed for its generation
// says nothing yet of what its hosts have: none for it, and a reason why.
func SoftwareNodes(sw *bpav1.Software, hosts []bpav1.HostStatus) ([]software.Node, string, error) {
	if st := sw.Status; st.Phase != bpav1.PhaseSucceeded || st.ObservedGeneration != sw.Generation {
		return nil, fmt.Sprintf("Software %s: its generation %d has not succeeded (phase %q), its packages are not compared", sw.Name, sw.Generation, st.Phase), nil
	}
	nodes, err := software.Nodes(sw.Spec, hosts)
	if err != nil {
		return nil, "", fmt.Errorf("Software %s: %w", sw.Name, err)
	}
	var out []software.Node
	for _, n := range nodes {
		if len(n.Packages) == 0 {
			continue
		}
		if err := n.Resolve(sw.Status.Latest); err != nil {
			return nil, "", fmt.Errorf("Software %s: %w", sw.Name, err)
		}
		out = append(out, n)
	}
	return out, "", nil
}

// Packages compares what a Software wants on a node with what dpkg says is installed there
// (software.ParseDpkgQuery's result): a package missing, at another version than its pin,
// older than the version `latest` resolved to, or present where the Software wants it absent.
func Packages(sw string, n software.Node, installed map[string]string) ([]string, error) {
	plan, err := software.PlanHost(n.Packages, installed, n.Latest)
	if err != nil {
		return nil, fmt.Errorf("Software %s, node %s: %w", sw, n.Name, err)
	}
	var drift []string
	for _, u := range plan.Unsatisfied() {
		drift = append(drift, fmt.Sprintf("node %s: package %s (Software %s)", n.Name, u, sw))
	}
	sort.Strings(drift)
	return drift, nil
}
