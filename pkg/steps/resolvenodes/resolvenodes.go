// Package resolvenodes is `bpa step resolve-nodes`, the first step of a software run. It
// lists the cluster's hosts with the packages each should have, as the JSON list Argo fans
// install-software out over (one object per host, see software.Node):
//
//	[{"name":"master-1","ip":"10.0.0.1","roles":["master","worker"],"packages":["curl",{"jq":{"version":"1.6-2"}}]}, ...]
//
// The hosts come from the cluster's `<cluster>-configmap` (MASTER_<node>/WORKER_<node>
// keys, which publish-kubeconfig writes and an ICN user may edit to add a node). Without
// that ConfigMap, they come from the status of the cluster's Provisioning. The output is
// sorted and deterministic, so equal inputs give byte-equal outputs.
//
// It writes the node names too (--output-names, a JSON list of strings): install-software
// fans out over them, so Argo names each host's node install-software(0:master-1).
//
// It also writes a short hash of the node set (--output-hash), computed as the controller
// computes it from the ConfigMap, so the controller can tell which node set a run covered
// and start a new run when a node joins.
//
// Items saying `version: latest` get the versions the controller resolved for the run from
// the artifact server's index (--latest), each node the ones of its own items. A run started
// by an upload (--scope outdated) lists only the nodes that need the new versions, by what
// the Software's status records of each (software.NeedsLatest): a node with them, or with
// newer ones, is not contacted at all.
//
// Every software item is validated here, before any host is contacted, and again by
// install-software.
package resolvenodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step resolve-nodes`.
func Command() *cobra.Command {
	o := options{logf: log.Printf}
	return stepcmd.Command(stepcmd.Step{
		Name:  "resolve-nodes",
		Short: "List a Software CR's cluster nodes with the packages each should have",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Software")
			fs.StringVar(&o.software, "software", "", "name of the Software")
			fs.Int64Var(&o.generation, "generation", 0, "generation of the Software the run was started for (a newer one is logged, and its spec used)")
			fs.StringVar(&o.output, "output", stepio.Out(stepio.NodesFile), "file to write the JSON list of nodes to")
			fs.StringVar(&o.outputNames, "output-names", "", "file to write the JSON list of node names to")
			fs.StringVar(&o.outputHash, "output-hash", "", "file to write the node-set hash to")
			fs.StringVar(&o.latest, "latest", "", "the versions the items saying latest resolve to: name=version words, space-separated")
			fs.StringVar(&o.scope, "scope", translator.ScopeAll, "which nodes to list: all, or outdated (those the Software's status shows without the --latest versions)")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	namespace, software, output, outputNames, outputHash string
	latest, scope                                        string
	generation                                           int64
	logf                                                 func(format string, args ...any)
}

func (o *options) run(ctx context.Context, c client.Client) error {
	nodes, hash, err := o.resolve(ctx, c)
	if err != nil {
		return err
	}
	data, err := json.Marshal(nodes)
	if err != nil {
		return err
	}
	if err := stepio.WriteOutput(o.output, data); err != nil {
		return err
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
		o.logf("node %s (%s), roles %s: %s", n.Name, n.IP, strings.Join(n.Roles, ","), describeItems(n.Packages))
	}
	if o.outputNames != "" {
		data, err := json.Marshal(names)
		if err != nil {
			return err
		}
		if err := stepio.WriteOutput(o.outputNames, data); err != nil {
			return err
		}
	}
	if o.outputHash != "" {
		if err := stepio.WriteOutput(o.outputHash, []byte(hash)); err != nil {
			return err
		}
	}
	o.logf("%d nodes, node set %s", len(nodes), hash)
	return nil
}

// describeItems is a host's wanted packages for the log: "curl, jq=1.6-2, telnet (absent)".
func describeItems(items []bpav1.SoftwareItem) string {
	if len(items) == 0 {
		return "no packages"
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s := it.Name
		if it.Version == bpav1.VersionLatest {
			s += " (latest)"
		} else if it.Version != "" {
			s += "=" + it.Version
		}
		if it.State == bpav1.PackageAbsent {
			s += " (absent)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// resolve returns the nodes and the node-set hash.
func (o *options) resolve(ctx context.Context, c client.Client) ([]software.Node, string, error) {
	if o.software == "" || o.namespace == "" {
		return nil, "", errors.New("--software and --namespace are required")
	}
	sw := &bpav1.Software{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.software}, sw); err != nil {
		return nil, "", fmt.Errorf("reading Software %s/%s: %w", o.namespace, o.software, err)
	}
	if o.generation != 0 && sw.Generation != o.generation {
		o.logf("Software %s is at generation %d, the run was started for %d: using its current spec", sw.Name, sw.Generation, o.generation)
	}
	cluster, err := translator.ClusterOf(sw)
	if err != nil {
		return nil, "", err
	}
	// Fail on a bad item now, with the field named, rather than in every host's task.
	if _, err := software.Normalize(sw.Spec.MasterSoftware); err != nil {
		return nil, "", fmt.Errorf("spec.masterSoftware: %w", err)
	}
	if _, err := software.Normalize(sw.Spec.WorkerSoftware); err != nil {
		return nil, "", fmt.Errorf("spec.workerSoftware: %w", err)
	}

	hosts, addresses, err := o.clusterHosts(ctx, c, cluster)
	if err != nil {
		return nil, "", err
	}
	nodes, err := software.Nodes(sw.Spec, hosts)
	if err != nil {
		return nil, "", err
	}
	if nodes, err = o.resolveLatest(sw, nodes); err != nil {
		return nil, "", err
	}
	return nodes, software.NodesHash(addresses), nil
}

// resolveLatest gives each node's latest items their versions and, for an upload's run,
// keeps only the nodes that need them. Should none need them (the controller checked the
// same status before starting the run, so only a race gets here) it keeps every node: each
// then finds its packages current and changes nothing, and the run's DAG stays whole.
func (o *options) resolveLatest(sw *bpav1.Software, nodes []software.Node) ([]software.Node, error) {
	newest, err := software.ParseLatest(o.latest)
	if err != nil {
		return nil, fmt.Errorf("--latest: %w", err)
	}
	for i := range nodes {
		if err := nodes[i].Resolve(newest); err != nil {
			return nil, err
		}
	}
	switch o.scope {
	case translator.ScopeAll, "":
		return nodes, nil
	case translator.ScopeOutdated:
	default:
		return nil, fmt.Errorf("--scope: %q is neither %s nor %s", o.scope, translator.ScopeAll, translator.ScopeOutdated)
	}
	recorded := map[string]*bpav1.HostSoftwareStatus{}
	for i, h := range sw.Status.HostSoftware {
		recorded[h.Name] = &sw.Status.HostSoftware[i]
	}
	var outdated []software.Node
	for _, n := range nodes {
		if software.NeedsLatest(n, recorded[n.Name]) {
			outdated = append(outdated, n)
		} else {
			o.logf("node %s already has %s or newer: not contacted", n.Name, describeLatest(n.Latest))
		}
	}
	if len(outdated) == 0 {
		o.logf("no node's recorded versions are older than %s; listing every node, each of which finds its packages current", o.latest)
		return nodes, nil
	}
	return outdated, nil
}

// describeLatest is a node's resolved versions for the log: "htop 3.2.2-3, jq 1.7".
func describeLatest(latest map[string]string) string {
	var parts []string
	for name, v := range latest {
		parts = append(parts, name+" "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// clusterHosts reads the cluster's hosts from its ConfigMap, or else from its Provisioning.
// It also returns their MASTER_/WORKER_ address map, the input of the node-set hash.
func (o *options) clusterHosts(ctx context.Context, c client.Client, cluster string) ([]bpav1.HostStatus, map[string]string, error) {
	ns := o.namespace
	name := kubeconfig.AddressConfigMapName(cluster)
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
	switch {
	case err == nil:
		if err := publishedByProvisioning(ctx, c, cm, cluster); err != nil {
			return nil, nil, fmt.Errorf("ConfigMap %s/%s: %w", ns, name, err)
		}
		hosts, err := software.HostsFromAddressData(cm.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("ConfigMap %s/%s: %w", ns, name, err)
		}
		if len(hosts) == 0 {
			return nil, nil, fmt.Errorf("ConfigMap %s/%s has no MASTER_<node> or WORKER_<node> keys", ns, name)
		}
		o.logf("cluster %s: %d hosts from ConfigMap %s (published by Provisioning %s)", cluster, len(hosts), name, metav1.GetControllerOf(cm).Name)
		return hosts, cm.Data, nil
	case !apierrors.IsNotFound(err):
		return nil, nil, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}

	hosts, from, err := provisionedHosts(ctx, c, ns, cluster)
	if err != nil {
		return nil, nil, err
	}
	o.logf("cluster %s: no ConfigMap %s yet; %d hosts from the status of Provisioning %s", cluster, name, len(hosts), from)
	addresses, err := software.AddressData(hosts)
	if err != nil {
		return nil, nil, fmt.Errorf("Provisioning hosts of cluster %s: %w", cluster, err)
	}
	return hosts, addresses, nil
}

// publishedByProvisioning checks that the node list came from a live Provisioning of the
// cluster in this namespace (publish-kubeconfig makes it the ConfigMap's controller): a
// Software acts only on a cluster provisioned in its own namespace, never on nodes a
// hand-made ConfigMap names.
func publishedByProvisioning(ctx context.Context, c client.Client, cm *corev1.ConfigMap, cluster string) error {
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.Kind != "Provisioning" || !strings.HasPrefix(ref.APIVersion, bpav1.GroupVersion.Group+"/") {
		return fmt.Errorf("it was not published by a Provisioning (no Provisioning controls it); a Software installs only on clusters provisioned in its namespace")
	}
	p := &bpav1.Provisioning{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: ref.Name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("its Provisioning %s no longer exists", ref.Name)
		}
		return fmt.Errorf("reading its Provisioning %s: %w", ref.Name, err)
	}
	if p.UID != ref.UID || p.Labels[bpav1.ClusterLabel] != cluster {
		return fmt.Errorf("its Provisioning %s is not the one of cluster %s that published it", ref.Name, cluster)
	}
	return nil
}

// provisionedHosts picks the hosts of the cluster's Provisioning: a Succeeded one first,
// then by name, the first that lists hosts. There is normally one Provisioning per cluster.
// It also returns the Provisioning's name.
func provisionedHosts(ctx context.Context, c client.Client, ns, cluster string) ([]bpav1.HostStatus, string, error) {
	var list bpav1.ProvisioningList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{bpav1.ClusterLabel: cluster}); err != nil {
		return nil, "", fmt.Errorf("listing Provisionings of cluster %s: %w", cluster, err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		si, sj := items[i].Status.Phase == bpav1.PhaseSucceeded, items[j].Status.Phase == bpav1.PhaseSucceeded
		if si != sj {
			return si
		}
		return items[i].Name < items[j].Name
	})
	for _, p := range items {
		if len(p.Status.Hosts) > 0 {
			return p.Status.Hosts, p.Name, nil
		}
	}
	return nil, "", fmt.Errorf("cluster %s has no nodes yet: no ConfigMap %s and no Provisioning of the cluster lists hosts",
		cluster, kubeconfig.AddressConfigMapName(cluster))
}
