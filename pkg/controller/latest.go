package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Softwares whose items say `version: latest` follow the index their cluster's artifact
// server records (policy.SoftwareLatest). The newest versions are part of a Software's
// revision, next to its node set: "<nodes hash> htop=3.2.2-3 jq=1.7.1-3". A newer version
// recorded gives a new revision, hence one new run (its Workflow is named after the
// revision, so a crash or a lost status write adopts it rather than starting another); a run
// in progress finishes first, and the next one takes every version uploaded meanwhile. What
// the status records as handled (NodesHash and Latest) is compared, never the index's own
// revision, so neither a restart of the controller nor an index written again repeats a run.

// +kubebuilder:rbac:groups=bpa.akraino.org,resources=artifactindexes,verbs=get;list;watch

// softwareRevision is the Software's revision: its node set, and the newest versions of the
// packages it tracks. When they cannot be resolved now it keeps the versions last acted on
// (a run due for another reason says why: planLatest).
func softwareRevision(ctx context.Context, c client.Client, sw *bpav1.Software) (string, error) {
	cluster := sw.Labels[bpav1.ClusterLabel]
	nodes, err := nodesRevision(ctx, c, sw.Namespace, cluster)
	if err != nil || len(sw.Spec.Tracked()) == 0 {
		return nodes, err
	}
	pol, err := policy.Get(ctx, c)
	if err != nil {
		return "", err
	}
	latest, err := policy.SoftwareLatest(ctx, pol, c, sw, cluster)
	var refused *policy.LatestRefusal
	if errors.As(err, &refused) {
		return joinRevision(nodes, sw.Status.Latest), nil
	}
	if err != nil {
		return "", err
	}
	sw.Status.IndexRevision = latest.Revision
	return joinRevision(nodes, latest.Versions), nil
}

// joinRevision and splitRevision write and read a Software's revision. Neither a nodes hash
// nor a package name or version holds a space.
func joinRevision(nodes string, latest []bpav1.PackageVersion) string {
	if len(latest) == 0 {
		return nodes
	}
	return nodes + " " + software.FormatLatest(latest)
}

func splitRevision(revision string) (nodes string, latest []bpav1.PackageVersion) {
	nodes, rest, _ := strings.Cut(revision, " ")
	latest, _ = software.ParseLatest(rest) // joinRevision's own output
	return nodes, latest
}

// planLatest sets what a Software's run installs for its latest items (o.Latest), from the
// revision the run is named after, and, when nothing but those versions changed since the
// last run, makes it an upload's run: only the hosts whose recorded versions are older
// (o.Scope), and why (o.Trigger). An upload no host needs is *translator.UpToDate.
func planLatest(ctx context.Context, c client.Client, pol policy.Policy, sw *bpav1.Software, cluster string, o *translator.Options) error {
	if len(sw.Spec.Tracked()) == 0 {
		return nil
	}
	// Asked again, not taken from the revision alone: a latest item that cannot be resolved
	// now (the policy no longer names the index, say) stops the run, whatever was known.
	fresh, err := policy.SoftwareLatest(ctx, pol, c, sw, cluster)
	var refused *policy.LatestRefusal
	if errors.As(err, &refused) {
		return &translator.Refusal{Field: refused.Field, Reason: bpav1.ReasonLatestUnavailable, Message: refused.Message}
	}
	if err != nil {
		return err
	}
	nodes, planned := splitRevision(o.Revision)
	if o.Latest = software.FormatLatest(planned); o.Latest != software.FormatLatest(fresh.Versions) {
		return fmt.Errorf("ArtifactIndex %s changed while the run was planned (revision %d); the next reconcile plans it again", fresh.Index, fresh.Revision)
	}
	st := sw.Status
	if st.Workflow == nil || st.ObservedGeneration != sw.Generation || st.LastHandledRerun != sw.Annotations[bpav1.RerunAnnotation] || st.NodesHash != nodes {
		return nil // the first run, a spec change, a rerun or a node change: every host
	}
	o.Scope, o.Trigger = translator.ScopeOutdated, software.Uploaded(st.Latest, planned)
	hosts, err := clusterNodeNames(ctx, c, sw.Namespace, cluster)
	if err != nil {
		return err
	}
	if !software.RecordsNeedLatest(st.HostSoftware, hosts, planned) {
		why := o.Trigger
		if why == "" {
			why = "the artifact server's newest versions are now " + o.Latest
		}
		return &translator.UpToDate{Message: why + ": every host has that version or a newer one; nothing to run"}
	}
	return nil
}

// clusterNodeNames are the nodes of <cluster>-configmap, sorted; nil without it.
func clusterNodeNames(ctx context.Context, c client.Client, ns, cluster string) ([]string, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubeconfig.AddressConfigMapName(cluster)}, cm); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	hosts, err := software.HostsFromAddressData(cm.Data)
	if err != nil {
		return nil, nil // resolve-nodes refuses it, naming the key
	}
	names := make([]string, 0, len(hosts))
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	return names, nil
}

// observeSoftware copies a software run's per-host results and trigger into the status. An
// upload's run covers only some hosts: the others keep the record of their last run.
func observeSoftware(obj runObject, _ string, wf *wfv1.Workflow, o observe.Observation) {
	s := obj.(*bpav1.Software)
	s.Status.Trigger = wf.Annotations[bpav1.TriggerAnnotation]
	if o.HostSoftware == nil {
		return
	}
	if workflowParameter(wf, "scope") != translator.ScopeOutdated {
		s.Status.HostSoftware = o.HostSoftware
		return
	}
	byName := map[string]bpav1.HostSoftwareStatus{}
	for _, h := range s.Status.HostSoftware {
		byName[h.Name] = h
	}
	for _, h := range o.HostSoftware {
		byName[h.Name] = h
	}
	merged := make([]bpav1.HostSoftwareStatus, 0, len(byName))
	for _, h := range byName {
		merged = append(merged, h)
	}
	sort.Slice(merged, func(i, j int) bool { return merged[i].Name < merged[j].Name })
	s.Status.HostSoftware = merged
}

func workflowParameter(wf *wfv1.Workflow, name string) string {
	for _, p := range wf.Spec.Arguments.Parameters {
		if p.Name == name && p.Value != nil {
			return p.Value.String()
		}
	}
	return ""
}

// trackingSoftwares maps an ArtifactIndex event to every Software that tracks a package:
// each one finds out itself whether the index is its server's (policy.SoftwareLatest).
func trackingSoftwares(c client.Client) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []ctrl.Request {
		list := &bpav1.SoftwareList{}
		if err := c.List(ctx, list, client.MatchingFields{indexTracksLatest: "true"}); err != nil {
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(list.Items))
		for _, s := range list.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
		return reqs
	}
}
