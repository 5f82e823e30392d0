package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// maxOperations is how many operations status.operations keeps.
const maxOperations = 10

// observePlan mirrors the plan's steps into status.plan and status.operations, and folds
// every step that succeeded into status.applied. Folding is idempotent (a node added is in
// the set, a node removed is not), so a reconcile that sees the same Workflow again, or
// one resumed by `argo retry`, changes nothing twice.
func observePlan(p *bpav1.Provisioning, wf *wfv1.Workflow, o observe.Observation) {
	// Only a Workflow this Provisioning made says what its cluster is: anyone who may create
	// Workflows can label one with the CR's name, but not make the CR its controller. An
	// ad-hoc run's plan counts once it checks out against the CR.
	c := observe.PlanOf(wf)
	gen, _ := strconv.ParseInt(wf.Labels[translator.GenerationLabel], 10, 64)
	if c == nil || !metav1.IsControlledBy(wf, p) {
		if c, gen = trustedAdHocPlan(p, wf); c == nil {
			seedApplied(p, o)
			return
		}
	}
	phase := map[string]bpav1.StepStatus{}
	for _, s := range o.Steps {
		phase[s.Name] = s
	}
	p.Status.Plan = p.Status.Plan[:0]
	// A removal is folded in only once verify found the removed Nodes gone: kubespray exits 0
	// on a name that matches no host, removing nothing. Until then the node stays applied
	// and the next run removes it again, which is safe: kubespray's pre_remove skips a name
	// that is no longer a Node ("ignore servers that are not nodes", v2.27 and v2.28).
	// An upgrade likewise counts once verify saw every node back at the new release: one
	// left behind (NodeNotUpgraded) keeps the old one applied. verify runs after the last
	// hop of a chain; an earlier hop counts once its upgrade-cluster.yml succeeded (whose
	// own roles wait for each node to come back), so a retry resumes after it.
	verified := phase[translator.StepVerify].Phase == string(wfv1.NodeSucceeded)
	for _, s := range c.Steps {
		st := phase[s.Name]
		p.Status.Plan = append(p.Status.Plan, bpav1.OperationStatus{Name: s.Name, Playbooks: s.Playbooks(), Nodes: s.Nodes, Reason: s.Reason, Phase: st.Phase})
		needsVerify := s.Removes || translator.StepBase(s.Name) == translator.StepUpgrade && lastHop(c, s)
		if st.Phase == string(wfv1.NodeSucceeded) && (!needsVerify || verified) {
			apply(p, c, s, o.Hosts, gen)
		}
		if st.StartedAt != nil {
			recordOperation(p, bpav1.OperationRecord{Generation: gen, Name: s.Name, Nodes: s.Nodes, Workflow: wf.Name,
				Result: st.Phase, StartedAt: st.StartedAt, FinishedAt: st.FinishedAt})
		}
	}
	dropReplaced(p)
	if o.Phase == bpav1.PhaseSucceeded && p.Status.Applied != nil {
		// Every step succeeded: the cluster is what the plan aimed at.
		a := p.Status.Applied
		a.KubesprayVersion, a.KubernetesVersion, a.Settings, a.Generation = c.KubesprayVersion, c.KubernetesVersion, c.Settings, gen
		a.Immutable = c.Immutable
	}
}

// seedApplied gives a cluster built before BPA kept status.applied (or by a run without a
// plan, `argo submit --from`) an applied state: the hosts of its last successful run. Its
// versions and settings are unknown, so the next change also reconfigures every host.
func seedApplied(p *bpav1.Provisioning, o observe.Observation) {
	if p.Status.Applied != nil || o.Phase != bpav1.PhaseSucceeded || len(o.Hosts) == 0 {
		return
	}
	p.Status.Applied = &bpav1.AppliedState{Hosts: slices.DeleteFunc(slices.Clone(o.Hosts), func(h bpav1.HostStatus) bool { return h.Removing })}
}

// apply folds one succeeded step into status.applied. hosts are the run's hosts (with the
// addresses resolve-leases found); without them nodes cannot be recorded, and the step is
// folded in once they are known.
func apply(p *bpav1.Provisioning, c *translator.ChangePlan, s translator.Step, hosts []bpav1.HostStatus, gen int64) {
	if hosts == nil {
		return
	}
	a := p.Status.Applied
	if a == nil {
		a = &bpav1.AppliedState{}
		p.Status.Applied = a
	}
	byName := map[string]bpav1.HostStatus{}
	for _, h := range hosts {
		byName[h.Name] = h
	}
	switch {
	case s.Name == translator.StepCreate:
		a.Hosts = slices.DeleteFunc(slices.Clone(hosts), func(h bpav1.HostStatus) bool { return h.Removing })
		a.KubesprayVersion, a.KubernetesVersion, a.Settings, a.Immutable = c.KubesprayVersion, c.KubernetesVersion, c.Settings, c.Immutable
	case s.Adds:
		for _, n := range s.Nodes {
			h, ok := byName[n]
			if !ok {
				continue
			}
			i := slices.IndexFunc(a.Hosts, func(x bpav1.HostStatus) bool { return x.Name == n })
			if i < 0 {
				a.Hosts = append(a.Hosts, h)
			} else {
				a.Hosts[i] = h
			}
		}
		sort.Slice(a.Hosts, func(i, j int) bool { return a.Hosts[i].Name < a.Hosts[j].Name })
	case s.Removes:
		a.Hosts = slices.DeleteFunc(a.Hosts, func(h bpav1.HostStatus) bool { return slices.Contains(s.Nodes, h.Name) })
	case translator.StepBase(s.Name) == translator.StepUpgrade:
		applyHop(a, c, s)
	case s.Name == translator.StepReconfigure:
		// A cluster built before BPA recorded them learns them here; an applied value
		// never changes, since the planner refuses that.
		a.Settings, a.Immutable = c.Settings, c.Immutable
	}
	a.Generation = gen
}

// lastHop reports whether upgrade step s takes the cluster to the plan's releases (a plan
// from before chains names none: its one upgrade is the last).
func lastHop(c *translator.ChangePlan, s translator.Step) bool {
	return cmp.Or(s.Release, c.KubesprayVersion) == c.KubesprayVersion && cmp.Or(s.Kubernetes, c.KubernetesVersion) == c.KubernetesVersion
}

// applyHop folds an upgrade hop that succeeded: the cluster now runs its releases. Only the
// last hop applied the plan's settings too; after an earlier one the next run (a rerun, or
// the next edit) plans the rest of the chain from here, and its upgrade-cluster.yml applies
// them. A plan from before chains names no release: the plan's.
func applyHop(a *bpav1.AppliedState, c *translator.ChangePlan, s translator.Step) {
	a.KubesprayVersion, a.KubernetesVersion = cmp.Or(s.Release, c.KubesprayVersion), cmp.Or(s.Kubernetes, c.KubernetesVersion)
	if a.KubesprayVersion == c.KubesprayVersion && a.KubernetesVersion == c.KubernetesVersion {
		a.Settings, a.Immutable = c.Settings, c.Immutable
	}
}

// recordOperation adds or updates (same Workflow and step: a retry) an entry of
// status.operations, keeping the newest maxOperations.
func recordOperation(p *bpav1.Provisioning, r bpav1.OperationRecord) {
	ops := p.Status.Operations
	if i := slices.IndexFunc(ops, func(x bpav1.OperationRecord) bool { return x.Workflow == r.Workflow && x.Name == r.Name }); i >= 0 {
		ops[i] = r
		return
	}
	ops = append(ops, r)
	if len(ops) > maxOperations {
		ops = ops[len(ops)-maxOperations:]
	}
	p.Status.Operations = ops
}

// reportOperations emits an event, and observes the duration, of each operation that
// finished since before.
func reportOperations(rec record.EventRecorder, p *bpav1.Provisioning, before []bpav1.OperationRecord) {
	for _, r := range p.Status.Operations {
		if !isTerminalStep(r.Result) {
			continue
		}
		if i := slices.IndexFunc(before, func(x bpav1.OperationRecord) bool { return x.Workflow == r.Workflow && x.Name == r.Name }); i >= 0 && before[i].Result == r.Result {
			continue
		}
		observeOperation("Provisioning", translator.StepBase(r.Name), r.Result, r.StartedAt, r.FinishedAt)
		eventType, reason := corev1.EventTypeNormal, "Operation"+r.Result
		if r.Result != string(wfv1.NodeSucceeded) {
			eventType = corev1.EventTypeWarning
		}
		msg := fmt.Sprintf("%s %s", r.Name, strings.ToLower(r.Result))
		if len(r.Nodes) > 0 {
			msg += " (" + strings.Join(abbreviate(r.Nodes, 10), ", ") + ")"
		}
		if r.StartedAt != nil && r.FinishedAt != nil {
			msg += " in " + r.FinishedAt.Sub(r.StartedAt.Time).Round(time.Second).String()
		}
		rec.Eventf(p, eventType, reason, "%s, Workflow %s, generation %d", msg, r.Workflow, r.Generation)
	}
}

func isTerminalStep(phase string) bool {
	return phase == string(wfv1.NodeSucceeded) || phase == string(wfv1.NodeFailed) || phase == string(wfv1.NodeError)
}

// abbreviate keeps the first n names and counts the rest.
func abbreviate(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(slices.Clone(names[:n]), fmt.Sprintf("and %d more", len(names)-n))
}

// releaseRemoved clears the claims of hosts that left the cluster: claimed by this
// Provisioning (its UID in spec.consumerRef) but neither applied nor chosen by the last run.
// It acts once per successful run (status.releasedAfter records the run), not on every
// reconcile: a removal, or an addition that failed and was scaled back, leaves claims that
// the next successful run settles; a host whose removal failed stays claimed until then.
func releaseRemoved(ctx context.Context, c client.Client, reader client.Reader, p *bpav1.Provisioning, cluster string) error {
	st := &p.Status
	if st.Phase != bpav1.PhaseSucceeded || st.Applied == nil || st.Workflow == nil || st.ReleasedAfter == string(st.Workflow.UID) {
		return nil
	}
	keep := map[string]bool{}
	for _, h := range st.Applied.Hosts {
		keep[h.BareMetalHost] = true
	}
	for _, h := range st.Hosts {
		if !h.Removing {
			keep[h.BareMetalHost] = true
		}
	}
	hosts, pol, err := claimedHosts(ctx, reader, p, cluster)
	if err != nil {
		return err
	}
	if hosts == nil {
		hosts = &metal3v1.BareMetalHostList{} // nothing this Provisioning may release
	}
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if keep[h.Name] || h.Spec.ConsumerRef == nil || h.Spec.ConsumerRef.UID != p.UID {
			continue
		}
		if err := releaseHost(ctx, c, h, p, pol.HostRelease(), unhealthyMark(p, h.Name)); err != nil {
			return err
		}
	}
	st.ReleasedAfter = string(st.Workflow.UID)
	return nil
}
