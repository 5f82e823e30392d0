package v1alpha1

import (
	"fmt"
	"sort"
	"strings"
)

// HostNamespace is the namespace the Provisioning's BareMetalHosts live in:
// spec.bareMetalHostNamespace, else the CR's own. The controller (releasing hosts), `bpa
// plan` and the steps (claiming them) all ask it here, so they never look in different places.
func (p *Provisioning) HostNamespace() string {
	if p.Spec.BareMetalHostNamespace != "" {
		return p.Spec.BareMetalHostNamespace
	}
	return p.Namespace
}

// KeptHosts are the hosts a run leaves in the cluster: all but those it removes (Removing).
// The steps that read a cluster (verify, preflight, check-drift) judge these.
func KeptHosts(hosts []HostStatus) []HostStatus {
	var out []HostStatus
	for _, h := range hosts {
		if !h.Removing {
			out = append(out, h)
		}
	}
	return out
}

// Leaving says whether r's node is still applied on its dead host: the next run removes it
// from there. Once it is not, the run after adds it back on a spare.
func (r Replacement) Leaving(a *AppliedState) bool {
	for _, h := range a.Hosts {
		if h.Name == r.Node && h.BareMetalHost == r.BareMetalHost {
			return true
		}
	}
	return false
}

// ReplacementRevision names the run the replacements of a still need: each node, when it
// was decided, and whether its removal or its addition is next. A new value starts a run
// of the unchanged spec (the Provisioning's revision, as a Software's is its nodes), and
// names that run's Workflow, so a controller that restarts finds the run it made. "" when
// nothing is being replaced.
func ReplacementRevision(a *AppliedState) string {
	if a == nil || len(a.Replacements) == 0 {
		return ""
	}
	parts := make([]string, len(a.Replacements))
	for i, r := range a.Replacements {
		next := "add"
		if r.Leaving(a) {
			next = "remove"
		}
		parts[i] = fmt.Sprintf("replace %s@%d: %s", r.Node, r.DecidedAt.Unix(), next)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
