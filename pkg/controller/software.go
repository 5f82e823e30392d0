package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// SetupSoftware registers the Software reconciler.
func SetupSoftware(mgr ctrl.Manager, opts translator.Options, argo bool) error {
	c := mgr.GetClient()
	r := &runReconciler{
		Client:   c,
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("bpa-controller"),
		Options:  opts,
		kind:     softwareKind(c, mgr.GetAPIReader()),
	}
	toSoftwares := func(ctx context.Context, o client.Object) []ctrl.Request {
		cluster := o.GetLabels()[bpav1.ClusterLabel]
		if _, ok := o.(*corev1.ConfigMap); ok {
			cluster, _ = kubeconfig.AddressConfigMapCluster(o.GetName())
		}
		return softwaresOfCluster(ctx, c, o.GetNamespace(), cluster)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Software{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})))
	if argo { // see argo.go
		b = b.Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.SoftwareNameLabel)), builder.WithPredicates(notCreatedByUs))
	}
	return b.
		Watches(&bpav1.Provisioning{}, handler.EnqueueRequestsFromMapFunc(toSoftwares), builder.WithPredicates(gateChanged)).
		Watches(&bpav1.BPAPolicy{}, handler.EnqueueRequestsFromMapFunc(allOf(c, &bpav1.SoftwareList{}))).
		Watches(&bpav1.ArtifactIndex{}, handler.EnqueueRequestsFromMapFunc(trackingSoftwares(c))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(toSoftwares),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				_, ok := kubeconfig.AddressConfigMapCluster(o.GetName())
				return ok
			}))).
		Named("software").
		Complete(r)
}

// softwareKind is what a Software's runs need: c reads through the cache, secrets around it.
func softwareKind(c client.Client, secrets client.Reader) runKind {
	return runKind{
		kind:      "Software",
		nameLabel: bpav1.SoftwareNameLabel,
		operation: "install-software",
		steps:     translator.SoftwareSteps,
		newObject: func() runObject { return &bpav1.Software{} },
		translate: func(ctx context.Context, obj runObject, o translator.Options) (*wfv1.Workflow, error) {
			sw := obj.(*bpav1.Software)
			pol, err := policy.Get(ctx, c)
			if err != nil {
				return nil, err
			}
			cluster := sw.Labels[bpav1.ClusterLabel]
			repo, err := policy.SoftwareAptRepo(ctx, pol, c, sw, cluster)
			var refused *policy.AptRefusal
			if errors.As(err, &refused) {
				return nil, &translator.Refusal{Field: "spec.aptSource", Reason: bpav1.ReasonPolicyViolation, Message: err.Error()}
			} else if err != nil {
				return nil, err
			}
			if repo != nil {
				o.AptURL, o.AptKey, o.ArtifactsCA = repo.URL, repo.Key, repo.CA
			}
			if err := planLatest(ctx, c, pol, sw, cluster, &o); err != nil {
				return nil, err
			}
			return translator.Software(sw, o)
		},
		revision: func(ctx context.Context, obj runObject) (string, error) {
			return softwareRevision(ctx, c, obj.(*bpav1.Software))
		},
		handledRevision: func(obj runObject) string {
			st := obj.(*bpav1.Software).Status
			return joinRevision(st.NodesHash, st.Latest)
		},
		setRevision: func(obj runObject, revision string) {
			st := &obj.(*bpav1.Software).Status
			st.NodesHash, st.Latest = splitRevision(revision)
		},
		triggerReason: bpav1.ReasonPackageUploaded,
		gate: func(ctx context.Context, obj runObject, cluster string) (bool, string, error) {
			return provisioningSucceeded(ctx, c, obj.GetNamespace(), cluster)
		},
		admit: func(ctx context.Context, obj runObject, cluster string) (*policy.Refusal, error) {
			sw := obj.(*bpav1.Software)
			pol, err := policy.Get(ctx, c)
			if err != nil {
				return nil, err
			}
			params, err := translator.SoftwareParameters(sw)
			if err != nil {
				return nil, err
			}
			return policy.AdmitSoftware(ctx, pol, secrets, sw, cluster, params["ssh-secret"])
		},
		observe: observeSoftware,
	}
}

// gateChanged passes the updates of a Provisioning that change what its cluster's Software
// reads of it: whether it succeeded and is not being deleted (provisioningSucceeded), its
// spec (the artifact server, policy.SoftwareAptRepo) and its cluster label. Status writes
// within a run change none of these, and the Software index lookups would otherwise run
// for each, for the old object and the new one alike.
var gateChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	succeeded := func(o client.Object) bool {
		p, ok := o.(*bpav1.Provisioning)
		return ok && p.Status.Phase == bpav1.PhaseSucceeded && p.DeletionTimestamp.IsZero()
	}
	return succeeded(e.ObjectOld) != succeeded(e.ObjectNew) ||
		e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
		e.ObjectOld.GetLabels()[bpav1.ClusterLabel] != e.ObjectNew.GetLabels()[bpav1.ClusterLabel]
}}

func softwaresOfCluster(ctx context.Context, c client.Client, ns, cluster string) []ctrl.Request {
	if cluster == "" {
		return nil
	}
	list := &bpav1.SoftwareList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{indexCluster: cluster}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for _, s := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	return reqs
}

// provisioningSucceeded gates Software runs: packages go on a cluster that exists.
func provisioningSucceeded(ctx context.Context, c client.Client, ns, cluster string) (bool, string, error) {
	list := &bpav1.ProvisioningList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{indexCluster: cluster}); err != nil {
		return false, "", err
	}
	for _, p := range list.Items {
		if p.Status.Phase == bpav1.PhaseSucceeded && p.DeletionTimestamp.IsZero() {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("waiting for a Provisioning of cluster %s to succeed", cluster), nil
}

// nodesRevision hashes the cluster's node addresses from <cluster>-configmap, so a node
// joining (or changing address) starts a run that installs the packages there too, and the
// Provisioning that published it: a cluster deleted and built again on the same addresses
// (its hosts deprovisioned, their packages gone) is a new node set, and its run's Workflow
// is not the old cluster's, adopted again.
func nodesRevision(ctx context.Context, c client.Client, ns, cluster string) (string, error) {
	if cluster == "" {
		return "", nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubeconfig.AddressConfigMapName(cluster)}, cm); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	var keys []string
	for k := range cm.Data {
		if strings.HasPrefix(k, "MASTER_") || strings.HasPrefix(k, "WORKER_") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	if owner := metav1.GetControllerOf(cm); owner != nil {
		fmt.Fprintf(h, "published-by=%s\n", owner.UID)
	}
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, cm.Data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
