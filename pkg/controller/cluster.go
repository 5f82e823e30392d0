package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ClusterReconciler aggregates the status of the Provisioning and Software a Cluster names.
// It owns neither: deleting a Cluster leaves them alone.
type ClusterReconciler struct {
	client.Client
}

// SetupCluster registers the Cluster reconciler.
func SetupCluster(mgr ctrl.Manager) error {
	r := &ClusterReconciler{Client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Cluster{}).
		Watches(&bpav1.Provisioning{}, handler.EnqueueRequestsFromMapFunc(r.clustersNaming), builder.WithPredicates(summaryChanged)).
		Watches(&bpav1.Software{}, handler.EnqueueRequestsFromMapFunc(r.clustersNaming), builder.WithPredicates(summaryChanged)).
		Named("cluster").
		Complete(r)
}

// summaryChanged passes the updates of a Provisioning or Software that change what a
// Cluster's aggregate reads of it: its phase (none counting as Pending) and its kubeconfig
// Secret. A run's status is written many times per phase (each step's progress), and the
// Cluster index lookups would otherwise run for every write, for the old object and the
// new one alike.
var summaryChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	summary := func(o client.Object) (bpav1.RunPhase, string) {
		switch o := o.(type) {
		case *bpav1.Provisioning:
			return orPending(o.Status.Phase), o.Status.KubeconfigSecretName
		case *bpav1.Software:
			return orPending(o.Status.Phase), ""
		}
		return "", ""
	}
	oldPhase, oldSecret := summary(e.ObjectOld)
	newPhase, newSecret := summary(e.ObjectNew)
	return oldPhase != newPhase || oldSecret != newSecret
}}

func (r *ClusterReconciler) clustersNaming(ctx context.Context, o client.Object) []ctrl.Request {
	kind := "Software"
	if _, ok := o.(*bpav1.Provisioning); ok {
		kind = "Provisioning"
	}
	list := &bpav1.ClusterList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexClusterMembers: memberKey(kind, o.GetName())}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
	}
	return reqs
}

func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &bpav1.Cluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := c.DeepCopy()
	if err := r.aggregate(ctx, c); err != nil {
		return ctrl.Result{}, err
	}
	if equality.Semantic.DeepEqual(before.Status, c.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Status().Patch(ctx, c, client.MergeFrom(before)))
}

func (r *ClusterReconciler) aggregate(ctx context.Context, c *bpav1.Cluster) error {
	st := &c.Status
	st.ObservedGeneration = c.Generation
	var phases []bpav1.RunPhase
	var missing []string
	if name := c.Spec.ProvisioningCR; name != "" {
		p := &bpav1.Provisioning{}
		switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, p); {
		case apierrors.IsNotFound(err):
			missing = append(missing, "Provisioning "+name)
			st.ProvisioningPhase = ""
		case err != nil:
			return err
		default:
			st.ProvisioningPhase = orPending(p.Status.Phase)
			st.KubeconfigSecretName = p.Status.KubeconfigSecretName
			phases = append(phases, st.ProvisioningPhase)
		}
	}
	if name := c.Spec.SoftwareCR; name != "" {
		s := &bpav1.Software{}
		switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); {
		case apierrors.IsNotFound(err):
			missing = append(missing, "Software "+name)
			st.SoftwarePhase = ""
		case err != nil:
			return err
		default:
			st.SoftwarePhase = orPending(s.Status.Phase)
			phases = append(phases, st.SoftwarePhase)
		}
	}
	st.Phase = aggregatePhase(phases)
	status, reason, msg := metav1.ConditionFalse, bpav1.ReasonProgressing, fmt.Sprintf("provisioning %s, software %s", orDash(st.ProvisioningPhase), orDash(st.SoftwarePhase))
	switch {
	case len(missing) > 0:
		st.Phase = bpav1.PhasePending
		reason, msg = bpav1.ReasonNotFound, fmt.Sprintf("waiting for %v to exist", missing)
	case st.Phase == bpav1.PhaseSucceeded:
		status, reason = metav1.ConditionTrue, bpav1.ReasonSucceeded
	case st.Phase == bpav1.PhaseFailed || st.Phase == bpav1.PhaseError:
		reason = bpav1.ReasonRunFailed
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: bpav1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
	return nil
}

// aggregatePhase: any failure wins, then anything still running, and Succeeded only when
// every named CR succeeded.
func aggregatePhase(phases []bpav1.RunPhase) bpav1.RunPhase {
	if len(phases) == 0 {
		return bpav1.PhasePending
	}
	has := map[bpav1.RunPhase]bool{}
	for _, p := range phases {
		has[p] = true
	}
	for _, p := range []bpav1.RunPhase{bpav1.PhaseError, bpav1.PhaseFailed, bpav1.PhaseRunning, bpav1.PhasePending} {
		if has[p] {
			return p
		}
	}
	return bpav1.PhaseSucceeded
}

func orPending(p bpav1.RunPhase) bpav1.RunPhase {
	if p == "" {
		return bpav1.PhasePending
	}
	return p
}

func orDash(p bpav1.RunPhase) string {
	if p == "" {
		return "-"
	}
	return string(p)
}
