package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// ControlPlaneLabel is the role label kubeadm puts on a control-plane Node.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// State is what the invariants judge: a site (or several) once the workload has settled.
type State struct {
	Provisionings []bpav1.Provisioning
	Softwares     []bpav1.Software
	Clusters      []bpav1.Cluster
	// Workflows are those that exist now; History every Workflow seen during the soak
	// (polled), including those gone since.
	Workflows []wfv1.Workflow
	History   []WorkflowRecord
	Hosts     []metal3v1.BareMetalHost
	// Secrets and ConfigMaps are BPA's (ManagedByLabel) of the namespaces.
	Secrets    []corev1.Secret
	ConfigMaps []corev1.ConfigMap
	// Nodes are each application cluster's Nodes, by "namespace/cluster".
	Nodes map[string][]corev1.Node
	// Faults are the faults injected, with their targets.
	Faults []Injected
}

// Injected is one fault as it was injected.
type Injected struct {
	Fault
	// Target names what was taken down: a site's namespace, or a host.
	Target string
	// Names are what a message naming the fault would say: a host's name and address.
	Names      []string
	Start, End time.Time
	// Err is why the recovery failed (the fault was not survived), if it did.
	Err error
}

// WorkflowRecord is what the duplicate check needs of a Workflow.
type WorkflowRecord struct {
	Namespace, Name string
	UID             types.UID
	// Owner is the CR's kind/name, OwnerUID its uid.
	Owner    string
	OwnerUID types.UID
	// Generation and Rerun are the CR generation and rerun request the run is for.
	Generation, Rerun string
}

// RecordOf is wf's WorkflowRecord.
func RecordOf(wf *wfv1.Workflow) WorkflowRecord {
	r := WorkflowRecord{Namespace: wf.Namespace, Name: wf.Name, UID: wf.UID,
		Generation: wf.Labels[translator.GenerationLabel], Rerun: wf.Annotations[bpav1.RerunAnnotation]}
	if ref := metav1.GetControllerOf(wf); ref != nil {
		r.Owner, r.OwnerUID = ref.Kind+"/"+ref.Name, ref.UID
	}
	return r
}

// Violation is one broken invariant.
type Violation struct {
	Invariant, Object, Message string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Object + ": " + v.Message }

// Check runs every invariant on s. accepted lists the CRs Stalled by a fault (Converged).
func Check(s *State) (violations []Violation, accepted []string) {
	violations, accepted = Converged(s)
	violations = append(violations, NoDuplicateWorkflows(s)...)
	violations = append(violations, HostClaims(s)...)
	violations = append(violations, NoOrphans(s)...)
	violations = append(violations, AppliedIsNodes(s)...)
	return violations, accepted
}

// FaultReasons are the Stalled reasons a fault that takes a host away may cause: a step
// that reaches the host failed (kubespray's failure is its own, which is never retried), or
// a check of it.
var FaultReasons = []string{bpav1.ReasonRunFailed, bpav1.ReasonNodeUnreachable, bpav1.ReasonEtcdBackupFailed, bpav1.ReasonPreflightFailed}

// Converged checks that every Provisioning and Software has Succeeded for its current generation
// (phase Succeeded, observedGeneration = generation, Ready True), or is Stalled by a fault:
// its Stalled condition is True with one of FaultReasons and its message names a host that a
// FreezeHost or CutHostNetwork fault took away (name or address). Faults of the control
// plane, Argo and the node are to be survived: no CR may stall on them. accepted lists the
// CRs Stalled by a fault, for the report.
func Converged(s *State) (violations []Violation, accepted []string) {
	check := func(kind, name string, gen int64, st *bpav1.RunStatus) {
		obj := kind + " " + name
		ready := meta.FindStatusCondition(st.Conditions, bpav1.ConditionReady)
		if st.Phase == bpav1.PhaseSucceeded && st.ObservedGeneration == gen && ready != nil && ready.Status == metav1.ConditionTrue {
			return
		}
		if f := stalledByFault(s.Faults, st); f != "" {
			accepted = append(accepted, obj+" Stalled by "+f)
			return
		}
		msg := fmt.Sprintf("phase %q for generation %d of %d, not Succeeded", st.Phase, st.ObservedGeneration, gen)
		if c := meta.FindStatusCondition(st.Conditions, bpav1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			msg += fmt.Sprintf("; Stalled %s (%s) names no host a fault took away", c.Reason, c.Message)
		} else if st.Message != "" {
			msg += ": " + st.Message
		}
		violations = append(violations, Violation{"converged", obj, msg})
	}
	for i := range s.Provisionings {
		p := &s.Provisionings[i]
		check("Provisioning", p.Namespace+"/"+p.Name, p.Generation, &p.Status.RunStatus)
	}
	for i := range s.Softwares {
		sw := &s.Softwares[i]
		check("Software", sw.Namespace+"/"+sw.Name, sw.Generation, &sw.Status.RunStatus)
	}
	return violations, accepted
}

// stalledByFault names the host fault st's Stalled condition names, or "".
func stalledByFault(faults []Injected, st *bpav1.RunStatus) string {
	c := meta.FindStatusCondition(st.Conditions, bpav1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || !slices.Contains(FaultReasons, c.Reason) {
		return ""
	}
	for _, f := range faults {
		if !f.Kind.HostFault() {
			continue
		}
		for _, n := range f.Names {
			if n != "" && strings.Contains(c.Message, n) {
				return fmt.Sprintf("%s of %s (%s)", f.Kind, f.Target, c.Reason)
			}
		}
	}
	return ""
}

// NoDuplicateWorkflows checks that one run is one Workflow. Two Workflows (two uids, even one after the
// other) for one CR (by uid) and one run (its generation and rerun request) are a duplicate,
// whatever their names, but for Software, whose runs of one generation differ by the
// revision (the cluster's nodes) their names carry.
func NoDuplicateWorkflows(s *State) []Violation {
	records := slices.Clone(s.History)
	for i := range s.Workflows {
		records = append(records, RecordOf(&s.Workflows[i]))
	}
	runs := map[string]map[types.UID]string{}
	for _, r := range records {
		if r.OwnerUID == "" {
			continue // not a run of a CR (an ad-hoc argo submit)
		}
		key := fmt.Sprintf("%s %s (uid %s) generation %s rerun %q", r.Namespace, r.Owner, r.OwnerUID, r.Generation, r.Rerun)
		if strings.HasPrefix(r.Owner, "Software/") {
			key += " workflow " + r.Name
		}
		if runs[key] == nil {
			runs[key] = map[types.UID]string{}
		}
		runs[key][r.UID] = r.Name
	}
	var out []Violation
	for _, key := range sortedKeys(runs) {
		if uids := runs[key]; len(uids) > 1 {
			names := slices.Sorted(maps.Values(uids))
			out = append(out, Violation{"no-duplicate-workflow", key, fmt.Sprintf("%d Workflows for one run: %s", len(uids), strings.Join(names, ", "))})
		}
	}
	return out
}

// HostClaims checks that no BareMetalHost is claimed twice (in the status of two Provisionings) nor
// leaked (its consumerRef names a Provisioning that is gone, or one whose status does not
// list it), and every host a Provisioning lists is claimed by it.
func HostClaims(s *State) []Violation {
	var out []Violation
	byUID := map[types.UID]*bpav1.Provisioning{}
	listedBy := map[string][]string{} // namespace/host -> Provisionings listing it
	for i := range s.Provisionings {
		p := &s.Provisionings[i]
		byUID[p.UID] = p
		for _, h := range p.Status.Hosts {
			if h.BareMetalHost != "" && !h.Removing {
				key := p.Namespace + "/" + h.BareMetalHost
				listedBy[key] = append(listedBy[key], p.Name)
			}
		}
	}
	hosts := map[string]*metal3v1.BareMetalHost{}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		key := h.Namespace + "/" + h.Name
		hosts[key] = h
		ref := h.Spec.ConsumerRef
		if ref == nil {
			continue
		}
		owner := byUID[ref.UID]
		switch {
		case owner == nil:
			out = append(out, Violation{"host-claims", "BareMetalHost " + key, fmt.Sprintf("leaked: claimed by %s %s (uid %s), which is gone", ref.Kind, ref.Name, ref.UID)})
		case !slices.Contains(listedBy[key], owner.Name):
			out = append(out, Violation{"host-claims", "BareMetalHost " + key, fmt.Sprintf("leaked: claimed by Provisioning %s, whose status does not list it", owner.Name)})
		}
	}
	for _, key := range sortedKeys(listedBy) {
		by := listedBy[key]
		if len(by) > 1 {
			out = append(out, Violation{"host-claims", "BareMetalHost " + key, "claimed twice: listed by Provisionings " + strings.Join(by, ", ")})
		}
		h := hosts[key]
		for _, name := range by {
			if h == nil || h.Spec.ConsumerRef == nil || h.Spec.ConsumerRef.Name != name {
				out = append(out, Violation{"host-claims", "BareMetalHost " + key, "listed by Provisioning " + name + " but not claimed by it"})
			}
		}
	}
	return out
}

// NoOrphans checks that every Secret and ConfigMap BPA made (ManagedByLabel) has a live owner: one of
// its ownerReferences is a CR or Workflow that exists, or, without any, its cluster label
// names a cluster a Provisioning still provisions.
func NoOrphans(s *State) []Violation {
	live := map[types.UID]bool{}
	clusters := map[string]bool{}
	for i := range s.Provisionings {
		p := &s.Provisionings[i]
		live[p.UID] = true
		clusters[p.Namespace+"/"+p.Labels[bpav1.ClusterLabel]] = true
	}
	for i := range s.Softwares {
		live[s.Softwares[i].UID] = true
	}
	for i := range s.Clusters {
		live[s.Clusters[i].UID] = true
	}
	for i := range s.Workflows {
		live[s.Workflows[i].UID] = true
	}
	var out []Violation
	check := func(kind string, o metav1.Object) {
		if o.GetLabels()[bpav1.ManagedByLabel] != bpav1.ManagedByValue {
			return
		}
		obj := kind + " " + o.GetNamespace() + "/" + o.GetName()
		refs := o.GetOwnerReferences()
		if len(refs) == 0 {
			cluster := o.GetLabels()[bpav1.ClusterNameLabel]
			if !clusters[o.GetNamespace()+"/"+cluster] {
				out = append(out, Violation{"no-orphans", obj, fmt.Sprintf("orphaned: no owner, and no Provisioning of cluster %q", cluster)})
			}
			return
		}
		var owners []string
		for _, r := range refs {
			if live[r.UID] {
				return
			}
			owners = append(owners, fmt.Sprintf("%s %s (uid %s)", r.Kind, r.Name, r.UID))
		}
		out = append(out, Violation{"no-orphans", obj, "orphaned: its owners are gone: " + strings.Join(owners, ", ")})
	}
	for i := range s.Secrets {
		check("Secret", &s.Secrets[i])
	}
	for i := range s.ConfigMaps {
		check("ConfigMap", &s.ConfigMaps[i])
	}
	return out
}

// AppliedIsNodes checks that, for every Succeeded Provisioning, status.applied's hosts (but those being
// removed) are the application cluster's Nodes, name for name, and a host is a master
// exactly when its Node has the control-plane role.
func AppliedIsNodes(s *State) []Violation {
	var out []Violation
	for i := range s.Provisionings {
		p := &s.Provisionings[i]
		if p.Status.Phase != bpav1.PhaseSucceeded || p.Status.ObservedGeneration != p.Generation {
			continue // Converged reports it
		}
		key := p.Namespace + "/" + p.Labels[bpav1.ClusterLabel]
		want := map[string]string{}
		if a := p.Status.Applied; a != nil {
			for _, h := range a.Hosts {
				if !h.Removing {
					want[h.Name] = role(slices.Contains(h.Roles, "master"))
				}
			}
		}
		got := map[string]string{}
		for _, n := range s.Nodes[key] {
			_, cp := n.Labels[ControlPlaneLabel]
			got[n.Name] = role(cp)
		}
		if diff := diffRoles(want, got); diff != "" {
			out = append(out, Violation{"applied-is-nodes", "Provisioning " + p.Namespace + "/" + p.Name, diff})
		}
	}
	return out
}

func role(master bool) string {
	if master {
		return "master"
	}
	return "worker"
}

// diffRoles says how got (the Nodes) differs from want (status.applied), or "".
func diffRoles(want, got map[string]string) string {
	var d []string
	for _, name := range sortedKeys(want) {
		switch g, ok := got[name]; {
		case !ok:
			d = append(d, "applied "+name+" ("+want[name]+") has no Node")
		case g != want[name]:
			d = append(d, fmt.Sprintf("%s is a %s in status.applied, a %s Node", name, want[name], g))
		}
	}
	for _, name := range sortedKeys(got) {
		if _, ok := want[name]; !ok {
			d = append(d, "Node "+name+" ("+got[name]+") is not in status.applied")
		}
	}
	return strings.Join(d, "; ")
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
