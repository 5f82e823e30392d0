package controller

import (
	"context"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Cache indexes. A label selector on a cached List visits every object in the namespace,
// so each reconcile of 500 CRs in one namespace would scan 500 Workflows; an index makes
// the lookups done on every reconcile or event (a CR's Workflows, a cluster's CRs, the
// Clusters naming a CR) cost what they return.
const (
	indexProvisioningRuns = "bpa.provisioningRuns" // Workflow: label bpa.akraino.org/provisioning
	indexSoftwareRuns     = "bpa.softwareRuns"     // Workflow: label bpa.akraino.org/software
	indexCluster          = "bpa.cluster"          // Provisioning, Software: label cluster
	indexClusterMembers   = "bpa.clusterMembers"   // Cluster: "Provisioning/<name>", "Software/<name>"
	indexTracksLatest     = "bpa.tracksLatest"     // Software: "true" when an item says version latest
)

// runIndex is the index of a kind's Workflows, by the label naming their CR.
var runIndex = map[string]string{
	bpav1.ProvisioningNameLabel: indexProvisioningRuns,
	bpav1.SoftwareNameLabel:     indexSoftwareRuns,
}

type cacheIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

var cacheIndexes = []cacheIndex{
	{&wfv1.Workflow{}, indexProvisioningRuns, labelValue(bpav1.ProvisioningNameLabel)},
	{&wfv1.Workflow{}, indexSoftwareRuns, labelValue(bpav1.SoftwareNameLabel)},
	{&bpav1.Provisioning{}, indexCluster, labelValue(bpav1.ClusterLabel)},
	{&bpav1.Software{}, indexCluster, labelValue(bpav1.ClusterLabel)},
	{&bpav1.Software{}, indexTracksLatest, func(o client.Object) []string {
		if len(o.(*bpav1.Software).Spec.Tracked()) > 0 {
			return []string{"true"}
		}
		return nil
	}},
	{&bpav1.Cluster{}, indexClusterMembers, func(o client.Object) []string {
		c := o.(*bpav1.Cluster)
		var keys []string
		if c.Spec.ProvisioningCR != "" {
			keys = append(keys, memberKey("Provisioning", c.Spec.ProvisioningCR))
		}
		if c.Spec.SoftwareCR != "" {
			keys = append(keys, memberKey("Software", c.Spec.SoftwareCR))
		}
		return keys
	}},
}

func setupIndexes(ctx context.Context, mgr ctrl.Manager, argo bool) error {
	for _, i := range cacheIndexes {
		if _, wf := i.obj.(*wfv1.Workflow); wf && !argo {
			continue // not served: indexing it would fail the start (argo.go)
		}
		if err := mgr.GetFieldIndexer().IndexField(ctx, i.obj, i.field, i.extract); err != nil {
			return err
		}
	}
	return nil
}

func labelValue(label string) client.IndexerFunc {
	return func(o client.Object) []string {
		if v := o.GetLabels()[label]; v != "" {
			return []string{v}
		}
		return nil
	}
}

func memberKey(kind, name string) string { return kind + "/" + name }
