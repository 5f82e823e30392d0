package controller

import (
	"context"
	"fmt"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// +kubebuilder:rbac:groups=bpa.akraino.org,resources=provisionings;softwares;clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bpa.akraino.org,resources=provisionings/status;softwares/status;clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bpa.akraino.org,resources=provisionings/finalizers;softwares/finalizers,verbs=update
// +kubebuilder:rbac:groups=argoproj.io,resources=workflows,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=argoproj.io,resources=workflowtemplates,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupProvisioning registers the Provisioning reconciler.
func SetupProvisioning(mgr ctrl.Manager, opts translator.Options) error {
	r := &runReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("bpa-controller"),
		Options:  opts,
		kind: runKind{
			kind:      "Provisioning",
			nameLabel: bpav1.ProvisioningNameLabel,
			steps:     translator.ProvisioningSteps,
			newObject: func() runObject { return &bpav1.Provisioning{} },
			translate: func(obj runObject, o translator.Options) (*wfv1.Workflow, error) {
				return translator.Provisioning(obj.(*bpav1.Provisioning), o)
			},
			observe: observeProvisioning,
		},
	}
	r.kind.finalize = func(ctx context.Context, obj runObject) error {
		return finalizeProvisioning(ctx, r.Client, r.Reader, obj.(*bpav1.Provisioning))
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Provisioning{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.ProvisioningNameLabel)), builder.WithPredicates(notCreatedByUs)).
		Named("provisioning").
		Complete(r)
}

// notCreatedByUs drops the create event of a Workflow the controller made: the reconcile
// that created it has already recorded it, and reacting would re-run that reconcile at once,
// against a CR cache that has not yet seen its status write (a conflict and a retry each).
// After a restart the CRs' own create events bring them back; runs made by `argo submit`
// carry no controller reference and still pass.
var notCreatedByUs = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		ref := metav1.GetControllerOf(e.Object)
		return ref == nil || ref.APIVersion != bpav1.GroupVersion.String()
	},
}

// byLabel maps an object to the CR named by one of its labels.
func byLabel(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []ctrl.Request {
		name := o.GetLabels()[label]
		if name == "" {
			return nil
		}
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}

func observeProvisioning(obj runObject, cluster string, o Observation) {
	p := obj.(*bpav1.Provisioning)
	for _, s := range o.Steps {
		if s.Name == "publish-kubeconfig" && s.Phase == string(wfv1.NodeSucceeded) {
			p.Status.KubeconfigSecretName = cluster + "-kubeconfig"
		}
	}
	etcd := len(p.Spec.Masters)
	if etcd%2 == 0 {
		setCondition(&p.Status.Conditions, p.Generation, ConditionEtcdQuorum, metav1.ConditionFalse, ReasonEvenEtcdCount,
			fmt.Sprintf("%d masters run %d etcd members, which tolerate no more failures than %d; use an odd number", etcd, etcd, etcd-1))
	} else {
		setCondition(&p.Status.Conditions, p.Generation, ConditionEtcdQuorum, metav1.ConditionTrue, ReasonOddEtcdCount,
			fmt.Sprintf("%d etcd members tolerate %d failures", etcd, (etcd-1)/2))
	}
}

// finalizeProvisioning removes the published kubeconfig and address ConfigMap (when this CR
// owns them) and releases the host claims no other Provisioning of the cluster holds.
func finalizeProvisioning(ctx context.Context, c client.Client, reader client.Reader, p *bpav1.Provisioning) error {
	cluster := p.Labels[bpav1.ClusterLabel]
	if cluster == "" {
		return nil
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: cluster + "-kubeconfig"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: cluster + "-configmap"}},
	} {
		if err := deleteIfControlledBy(ctx, c, reader, o, p); err != nil {
			return err
		}
	}
	return releaseHosts(ctx, c, reader, p, cluster)
}

func deleteIfControlledBy(ctx context.Context, c client.Client, reader client.Reader, o client.Object, owner metav1.Object) error {
	if err := reader.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(o, owner) {
		return nil
	}
	return client.IgnoreNotFound(c.Delete(ctx, o, client.Preconditions{UID: ptrUID(o.GetUID())}))
}

func ptrUID(u types.UID) *types.UID { return &u }

// releaseHosts reads through reader: the hosts may live in a namespace the cache does not
// watch, and a stale list could release a claim made since.
func releaseHosts(ctx context.Context, c client.Client, reader client.Reader, p *bpav1.Provisioning, cluster string) error {
	ns := p.Spec.BareMetalHostNamespace
	if ns == "" {
		ns = p.Namespace
	}
	hosts := &metal3v1.BareMetalHostList{}
	err := reader.List(ctx, hosts, client.InNamespace(ns), client.MatchingLabels{bpav1.HostClaimLabel: cluster})
	if meta.IsNoMatchError(err) {
		return nil // metal3 is not installed: nothing was claimed
	}
	if err != nil {
		return err
	}
	// The siblings are read after the hosts: one that starts a run in between is seen busy.
	keep, busy, err := hostsHeldByOthers(ctx, reader, p, cluster)
	if err != nil {
		return err
	}
	if busy != "" {
		// Claims name the cluster, not the CR: while another Provisioning of the cluster
		// may be claiming hosts its status does not list yet, keep them all. Its own
		// deletion, or a later one, releases what no run holds.
		log.FromContext(ctx).Info("keeping the cluster's host claims while another Provisioning runs", "cluster", cluster, "provisioning", busy)
		return nil
	}
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if keep[h.Name] {
			continue
		}
		// Optimistic lock: a host re-claimed since the list is not released.
		patch := client.MergeFromWithOptions(h.DeepCopy(), client.MergeFromWithOptimisticLock{})
		delete(h.Labels, bpav1.HostClaimLabel)
		if err := c.Patch(ctx, h, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing BareMetalHost %s: %w", h.Name, err)
		}
	}
	return nil
}

// hostsHeldByOthers lists the hosts other live Provisionings of the same cluster report,
// or names one of them that has not finished a run (busy), whose hosts are not known yet.
func hostsHeldByOthers(ctx context.Context, c client.Reader, p *bpav1.Provisioning, cluster string) (keep map[string]bool, busy string, err error) {
	others := &bpav1.ProvisioningList{}
	if err := c.List(ctx, others, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.ClusterLabel: cluster}); err != nil {
		return nil, "", err
	}
	keep = map[string]bool{}
	for _, o := range others.Items {
		if o.UID == p.UID || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if !isTerminal(o.Status.Phase) {
			return nil, o.Name, nil
		}
		for _, h := range o.Status.Hosts {
			keep[h.BareMetalHost] = true
		}
	}
	return keep, "", nil
}
