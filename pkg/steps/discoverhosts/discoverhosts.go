// Package discoverhosts is `bpa step discover-hosts`, the first step of a provisioning run:
// it chooses a BareMetalHost for every node of the Provisioning (pkg/hostmatch) and claims
// each chosen host for the cluster with the label bpa.akraino.org/cluster, so that two
// clusters never get one host. Its output is the hosts JSON the later steps read.
//
// Rerunning it is safe: hosts already claimed for this cluster are preferred, so a rerun
// with the same spec and hosts chooses, and keeps, the same hosts.
package discoverhosts

import (
	"context"
	"fmt"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step discover-hosts`.
func Command() *cobra.Command {
	var cr CR
	var output string
	return stepcmd.Command(stepcmd.Step{
		Name:  "discover-hosts",
		Short: "Choose a BareMetalHost for every node of a Provisioning and claim it for the cluster",
		Flags: func(cmd *cobra.Command) {
			cr.AddFlags(cmd)
			cmd.Flags().StringVar(&output, "output", "/tmp/bpa/out/hosts.json", "file to write the chosen hosts to (JSON)")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error {
			hosts, err := Run(ctx, c, cr, func(format string, args ...any) { fmt.Printf(format+"\n", args...) })
			if err != nil {
				return err
			}
			return WriteHosts(output, hosts)
		},
	})
}

// Run matches the Provisioning's nodes to the BareMetalHosts of its namespace and claims
// the chosen hosts. logf reports each claim (the step's log in Argo).
func Run(ctx context.Context, c client.Client, cr CR, logf func(string, ...any)) ([]bpav1.HostStatus, error) {
	p, err := cr.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return nil, fmt.Errorf("Provisioning %s: %w", p.Name, err)
	}
	ns := BareMetalHostNamespace(p)
	var list metal3v1.BareMetalHostList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing BareMetalHosts in namespace %s: %w", ns, err)
	}
	hosts, err := hostmatch.Match(&p.Spec, cluster, list.Items)
	if err != nil {
		return nil, fmt.Errorf("Provisioning %s: %w", p.Name, err)
	}
	byName := make(map[string]*metal3v1.BareMetalHost, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	for _, h := range hosts {
		b := byName[h.BareMetalHost]
		if b.Labels[bpav1.HostClaimLabel] == cluster {
			logf("node %s: BareMetalHost %s/%s, already claimed for cluster %s", h.Name, ns, b.Name, cluster)
			continue
		}
		if err := claim(ctx, c, b, cluster); err != nil {
			return nil, err
		}
		logf("node %s: claimed BareMetalHost %s/%s for cluster %s", h.Name, ns, b.Name, cluster)
	}
	return hosts, nil
}

// claim labels b for cluster with a merge patch that carries b's resourceVersion: if
// anything changed the host since it was listed (another cluster's run claiming it, say),
// the patch fails with a conflict instead of taking the host from under it, and the
// step's retry matches again with fresh data.
func claim(ctx context.Context, c client.Client, b *metal3v1.BareMetalHost, cluster string) error {
	orig := b.DeepCopy()
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	b.Labels[bpav1.HostClaimLabel] = cluster
	err := c.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("claiming BareMetalHost %s/%s for cluster %s: it changed since it was listed; the retry matches again: %w",
			b.Namespace, b.Name, cluster, err)
	case err != nil:
		return fmt.Errorf("claiming BareMetalHost %s/%s for cluster %s: %w", b.Namespace, b.Name, cluster, err)
	}
	return nil
}
