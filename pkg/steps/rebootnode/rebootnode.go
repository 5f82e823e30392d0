// Package rebootnode is `bpa step reboot-node`: graded remediation's second rung
// (docs/remediation.md). It asks metal3 to power cycle one worker's BareMetalHost through
// metal3's reboot annotation, then waits, bounded, for metal3 to have taken the request
// and the Node to report Ready again (read as restart-node reads it, with the admin.conf of
// the first master).
//
// It is the one step that touches power, and only on a site whose BPAPolicy grants the
// namespace allowReboot: the controller leaves the rung out otherwise. Its account
// (bpa-step-reboot-node) may get its Provisioning and get and patch BareMetalHosts, and
// config/admission/reboot-writes.yaml lets it change nothing on a host but the two
// annotations below, on a host a Provisioning of its namespace claims.
package rebootnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/remediation/rungnode"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
)

// Annotation is metal3's reboot request in its suffixless form: the baremetal-operator
// powers a provisioned host off, removes the annotation, and powers it on again as
// spec.online says. (A suffixed reboot.metal3.io/<key> would keep the host off until its
// client removes it: the step never sets one, and admission refuses it.)
const Annotation = metal3v1.RebootAnnotationPrefix

// Mode is Annotation's value: a hard power cycle. The host is already NotReady and a restart
// of its units did not help, so a soft power-off (ACPI) would ask a sick OS to shut down
// cleanly and wait out Ironic's soft_power_off_timeout before the hard one anyway; an empty
// value means exactly that in metal3 (soft first).
const Mode = `{"mode":"hard"}`

// RequestAnnotation records which request (the rung's Workflow) set Annotation. metal3
// removes Annotation once the host is off, so only this says, to a rerun of the step after
// a crash, that this rung already rebooted the host: it waits instead of rebooting twice.
const RequestAnnotation = "bpa.akraino.org/reboot-request"

// DefaultWait bounds the reboot: metal3's power off and on, the host's boot and its kubelet
// reporting Ready.
const DefaultWait = 10 * time.Minute

// UserAgent is what the step's requests to the application cluster carry.
const UserAgent = "bpa-reboot-node"

// Command returns `bpa step reboot-node`.
func Command() *cobra.Command {
	o := options{Step: rungnode.NewStep()}
	return stepcmd.Command(stepcmd.Step{
		Name:  "reboot-node",
		Short: "Ask metal3 to power cycle one worker's BareMetalHost (reboot.metal3.io) and wait for its Node to be Ready (graded remediation's second rung)",
		Flags: func(cmd *cobra.Command) {
			o.AddFlags(cmd.Flags(), DefaultWait, "the reboot request (metal3's power cycle and the host's boot)")
			cmd.Flags().StringVar(&o.request, "request", "", "what names this request on the host ("+RequestAnnotation+"): the rung's Workflow, so a rerun does not reboot twice")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	rungnode.Step
	request string
}

func (o *options) run(ctx context.Context, c client.Client) error {
	if o.request == "" {
		return errors.New("--request is required")
	}
	p, hosts, _, err := o.Load(ctx, c)
	if err != nil {
		return err
	}
	b, err := Host(ctx, c, p, o.Node)
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	if err := Request(ctx, c, b, o.request, o.Logf); err != nil {
		return err
	}
	if err := WaitTaken(ctx, c, client.ObjectKeyFromObject(b), o.Poll); err != nil {
		return fmt.Errorf("node %s: %w", o.Node, err)
	}
	o.Logf("node %s: metal3 took the reboot of BareMetalHost %s/%s after %s", o.Node, b.Namespace, b.Name, time.Since(start).Round(time.Second))
	return o.AwaitReady(ctx, p, hosts, o.Wait-time.Since(start), UserAgent, "rebooted "+o.Node)
}

// Host is the BareMetalHost of node as status.applied records it (in p's host namespace),
// refused unless p claims it (spec.consumerRef, with p's uid) and metal3 has provisioned it
// and keeps it online: metal3 reboots only a provisioned host, and would leave one that is
// not online off.
func Host(ctx context.Context, c client.Reader, p *bpav1.Provisioning, node string) (*metal3v1.BareMetalHost, error) {
	name := ""
	for _, h := range p.Status.Applied.Hosts {
		if h.Name == node {
			name = h.BareMetalHost
		}
	}
	if name == "" {
		return nil, fmt.Errorf("node %s has no BareMetalHost in status.applied: only metal3's hosts can be rebooted", node)
	}
	b := &metal3v1.BareMetalHost{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.HostNamespace(), Name: name}, b); err != nil {
		return nil, fmt.Errorf("node %s: reading BareMetalHost %s/%s: %w", node, p.HostNamespace(), name, err)
	}
	me := hostmatch.ClaimantOf(p, "")
	switch state := b.Status.Provisioning.State; {
	case !me.Owns(b.Spec.ConsumerRef):
		return nil, fmt.Errorf("node %s: BareMetalHost %s/%s is not claimed by Provisioning %s (spec.consumerRef): BPA reboots only its own hosts", node, b.Namespace, b.Name, p.Name)
	case state != metal3v1.StateProvisioned && state != metal3v1.StateExternallyProvisioned:
		return nil, fmt.Errorf("node %s: BareMetalHost %s/%s is %q, not provisioned: metal3 reboots only a provisioned host", node, b.Namespace, b.Name, state)
	case !b.Spec.Online:
		return nil, fmt.Errorf("node %s: BareMetalHost %s/%s has spec.online false: metal3 would power it off and leave it so", node, b.Namespace, b.Name)
	}
	return b, nil
}

// Request sets Annotation (Mode) and RequestAnnotation (request) on b, in a merge patch of
// those two annotations alone, conditional on b's resourceVersion (so the checks of Host
// hold when it lands). A host that already records request was rebooted by this request
// (metal3 may have removed Annotation since): nothing is set again.
func Request(ctx context.Context, c client.Writer, b *metal3v1.BareMetalHost, request string, logf func(string, ...any)) error {
	if b.Annotations[RequestAnnotation] == request {
		logf("BareMetalHost %s/%s: reboot already requested by %s; waiting for it, not rebooting again", b.Namespace, b.Name, request)
		return nil
	}
	orig := b.DeepCopy()
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[Annotation], b.Annotations[RequestAnnotation] = Mode, request
	if err := c.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("requesting the reboot of BareMetalHost %s/%s: %w", b.Namespace, b.Name, err)
	}
	logf("BareMetalHost %s/%s: set %s=%s (request %s)", b.Namespace, b.Name, Annotation, Mode, request)
	return nil
}

// WaitTaken polls the host until metal3 has removed Annotation, which it does once it has
// powered the host off; it then powers it on.
func WaitTaken(ctx context.Context, c client.Reader, key client.ObjectKey, poll time.Duration) error {
	last := "not read"
	for {
		b := &metal3v1.BareMetalHost{}
		err := c.Get(ctx, key, b)
		switch _, pending := b.Annotations[Annotation]; {
		case err == nil && !pending:
			return nil
		case err == nil:
			last = fmt.Sprintf("%s still set; state %s, poweredOn %t", Annotation, b.Status.Provisioning.State, b.Status.PoweredOn)
		case ctx.Err() == nil:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("metal3 did not take the reboot of BareMetalHost %s in time (%s)", key, last)
		case <-time.After(poll):
		}
	}
}
