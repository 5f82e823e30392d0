// Package discoverhosts is `bpa step discover-hosts`, the first step of a provisioning run:
// it chooses a BareMetalHost for every node of the Provisioning (pkg/hostmatch) and claims
// each chosen host for the cluster with the label bpa.akraino.org/cluster, so that two
// clusters never get one host. Its output is the hosts JSON the later steps read.
//
// Rerunning it is safe: hosts already claimed by this Provisioning are preferred, so a rerun
// with the same spec and hosts chooses, and keeps, the same hosts.
//
// With --applied it neither matches nor claims: it lists the hosts of status.applied, for a
// check that must only read (the drift check; the WorkflowTemplate's applied-hosts, whose
// account may not patch a host). A spec changed since the last run, or a host whose claim was
// taken off by hand, would otherwise make a read-only check claim hosts.
package discoverhosts

import (
	"context"
	"encoding/json"
	"fmt"

	"golang.org/x/sync/errgroup"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step discover-hosts`.
func Command() *cobra.Command {
	var cr stepio.CR
	var output string
	var applied bool
	return stepcmd.Command(stepcmd.Step{
		Name:  "discover-hosts",
		Short: "Choose a BareMetalHost for every node of a Provisioning and claim it for the cluster",
		Flags: func(cmd *cobra.Command) {
			cr.AddFlags(cmd.Flags())
			cmd.Flags().StringVar(&output, "output", stepio.Out(stepio.HostsFile), "file to write the chosen hosts to (JSON)")
			cmd.Flags().BoolVar(&applied, "applied", false, "list the hosts of status.applied, claiming nothing (a read-only check)")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error {
			logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
			run := Run
			if applied {
				run = Applied
			}
			hosts, err := run(ctx, c, cr, logf)
			if err != nil {
				return err
			}
			return stepio.WriteHosts(output, hosts)
		},
	})
}

// Run matches the Provisioning's nodes to the BareMetalHosts of its namespace and claims
// the chosen hosts. logf reports each claim (the step's log in Argo).
func Run(ctx context.Context, c client.Client, cr stepio.CR, logf func(string, ...any)) ([]bpav1.HostStatus, error) {
	p, me, list, err := load(ctx, c, cr)
	if err != nil {
		return nil, err
	}
	cluster, ns := me.Cluster, p.HostNamespace()
	byName := make(map[string]*metal3v1.BareMetalHost, len(list.Items))
	for i := range list.Items {
		b := &list.Items[i]
		byName[b.Name] = b
		if ref := b.Spec.ConsumerRef; ref != nil && !me.Owns(ref) {
			logf("BareMetalHost %s/%s skipped: used by %s", ns, b.Name, hostmatch.Describe(ref))
		}
	}
	hosts, err := hostmatch.Match(p, me, list.Items)
	if err != nil {
		// The error counts the hosts by reason; the log says, for each, why.
		logNotChosen(logf, me, nil, list.Items)
		return nil, fmt.Errorf("Provisioning %s: %w", p.Name, err)
	}
	logf("Provisioning %s: %d nodes placed on %d BareMetalHosts in namespace %s", p.Name, len(hosts), len(list.Items), ns)
	logNotChosen(logf, me, hosts, list.Items)
	// Claims are independent patches: up to claimWorkers at once (a first run claims every
	// host of a 1,000-node cluster). The log keeps node order.
	lines := make([][]string, len(hosts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(claimWorkers)
	for i, h := range hosts {
		say := func(format string, args ...any) { lines[i] = append(lines[i], fmt.Sprintf(format, args...)) }
		b := byName[h.BareMetalHost]
		switch {
		case h.Removing:
			// Leaving the cluster: listed as applied (its host may be dead, or gone), kept
			// claimed until the removal succeeds; the controller then releases it.
			say("node %s: leaves the cluster this run (BareMetalHost %s, IP %s)", h.Name, h.BareMetalHost, h.IP)
			continue
		case me.Owns(b.Spec.ConsumerRef) && b.Labels[bpav1.HostClaimLabel] == cluster:
			say("node %s: BareMetalHost %s/%s, already claimed by Provisioning %s", h.Name, ns, b.Name, p.Name)
			continue
		}
		g.Go(func() error {
			legacy := me.LegacyClaim(b)
			if err := claim(gctx, c, b, me); err != nil {
				return err
			}
			if legacy {
				msg := fmt.Sprintf("adopted BareMetalHost %s/%s: an earlier BPA claimed it for cluster %s with a label only; it now carries spec.consumerRef", ns, b.Name, cluster)
				say("node %s: %s", h.Name, msg)
				recordEvent(gctx, c, p, "AdoptedHostClaim", msg)
				return nil
			}
			say("node %s: claimed BareMetalHost %s/%s for Provisioning %s (cluster %s)", h.Name, ns, b.Name, p.Name, cluster)
			return nil
		})
	}
	err = g.Wait()
	for _, l := range lines {
		for _, line := range l {
			logf("%s", line)
		}
	}
	if err != nil {
		return nil, err
	}
	return hosts, nil
}

// Applied lists the hosts of the Provisioning's status.applied (those a run left in the
// cluster) and writes nothing. It reads the namespace's BareMetalHosts only to say, for each,
// whether this Provisioning still holds it: a claim taken off by hand is worth a line in the
// check's log, not a new claim.
func Applied(ctx context.Context, c client.Client, cr stepio.CR, logf func(string, ...any)) ([]bpav1.HostStatus, error) {
	p, me, list, err := load(ctx, c, cr)
	if err != nil {
		return nil, err
	}
	if p.Status.Applied == nil || len(p.Status.Applied.Hosts) == 0 {
		return nil, fmt.Errorf("Provisioning %s: status.applied lists no host: the cluster was never built", p.Name)
	}
	ns := p.HostNamespace()
	byName := make(map[string]*metal3v1.BareMetalHost, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var hosts []bpav1.HostStatus
	for _, h := range p.Status.Applied.Hosts {
		if h.Removing {
			continue
		}
		switch b := byName[h.BareMetalHost]; {
		case h.BareMetalHost == "":
			logf("node %s: IP %s (no BareMetalHost)", h.Name, h.IP)
		case b == nil:
			logf("node %s: BareMetalHost %s/%s is gone; the check reads the node at its applied IP %s", h.Name, ns, h.BareMetalHost, h.IP)
		case b.Spec.ConsumerRef == nil:
			logf("node %s: BareMetalHost %s/%s has no claim (spec.consumerRef); this check claims nothing", h.Name, ns, b.Name)
		case !me.Owns(b.Spec.ConsumerRef):
			logf("node %s: BareMetalHost %s/%s is claimed by %s, not Provisioning %s; this check claims nothing", h.Name, ns, b.Name, hostmatch.Describe(b.Spec.ConsumerRef), p.Name)
		default:
			logf("node %s: BareMetalHost %s/%s", h.Name, ns, b.Name)
		}
		hosts = append(hosts, h)
	}
	logf("Provisioning %s: %d applied nodes, nothing claimed", p.Name, len(hosts))
	return hosts, nil
}

// load reads the Provisioning, its claimant identity and the BareMetalHosts of its host
// namespace.
func load(ctx context.Context, c client.Client, cr stepio.CR) (*bpav1.Provisioning, hostmatch.Claimant, *metal3v1.BareMetalHostList, error) {
	p, err := cr.Get(ctx, c)
	if err != nil {
		return nil, hostmatch.Claimant{}, nil, err
	}
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return nil, hostmatch.Claimant{}, nil, fmt.Errorf("Provisioning %s: %w", p.Name, err)
	}
	list := &metal3v1.BareMetalHostList{}
	if err := c.List(ctx, list, client.InNamespace(p.HostNamespace())); err != nil {
		return nil, hostmatch.Claimant{}, nil, fmt.Errorf("listing BareMetalHosts in namespace %s: %w", p.HostNamespace(), err)
	}
	return p, hostmatch.ClaimantOf(p, cluster), list, nil
}

// claimWorkers bounds the claim patches in flight.
const claimWorkers = 8

// logNotChosen says why each host that was not chosen was left, beyond the foreign consumers
// already reported: a person debugging a match wants every host accounted for. hosts is nil
// when the match failed.
func logNotChosen(logf func(string, ...any), me hostmatch.Claimant, hosts []bpav1.HostStatus, all []metal3v1.BareMetalHost) {
	chosen := map[string]bool{}
	for _, h := range hosts {
		chosen[h.BareMetalHost] = true
	}
	for i := range all {
		b := &all[i]
		if chosen[b.Name] || (b.Spec.ConsumerRef != nil && !me.Owns(b.Spec.ConsumerRef)) {
			continue
		}
		if why, _ := hostmatch.Unfit(b, me); why != "" {
			logf("BareMetalHost %s/%s not chosen: it %s", b.Namespace, b.Name, why)
			continue
		}
		if hosts == nil { // the match failed
			logf("BareMetalHost %s/%s usable, but it meets no node's requirements the others leave (see the error)", b.Namespace, b.Name)
			continue
		}
		logf("BareMetalHost %s/%s not chosen: every node has a host (it matched no node's MAC, or another host was picked first)", b.Namespace, b.Name)
	}
}

// claim sets metal3's claim, spec.consumerRef, to the Provisioning, and the cluster label
// for selection and `kubectl get bmh -l`, in one merge patch that carries b's
// resourceVersion: if anything changed the host since it was listed (another claimant
// taking it, say), the patch fails with a conflict instead of taking the host from under
// it, and the step's retry matches again with fresh data. So two claimants never both win.
func claim(ctx context.Context, c client.Client, b *metal3v1.BareMetalHost, me hostmatch.Claimant) error {
	// The patch is written out rather than diffed from a copy: a first run sends 1,000.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": b.ResourceVersion, "labels": map[string]string{bpav1.HostClaimLabel: me.Cluster}},
		"spec":     map[string]any{"consumerRef": me.ConsumerRef()},
	})
	if err != nil {
		return err
	}
	err = c.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("claiming BareMetalHost %s/%s for Provisioning %s: it changed since it was listed; the retry matches again: %w",
			b.Namespace, b.Name, me.Name, err)
	case err != nil:
		return fmt.Errorf("claiming BareMetalHost %s/%s for Provisioning %s: %w", b.Namespace, b.Name, me.Name, err)
	}
	return nil
}

// recordEvent reports on the Provisioning what `kubectl describe` should show. An event is
// best effort: failing to write one never fails the step.
func recordEvent(ctx context.Context, c client.Client, p *bpav1.Provisioning, reason, msg string) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning",
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Reason: reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "bpa-step-discover-hosts"},
	}
	if err := c.Create(ctx, ev); err != nil {
		fmt.Printf("could not record event %s: %v\n", reason, err)
	}
}
