package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// +kubebuilder:rbac:groups=bpa.akraino.org,resources=provisionings;softwares;clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bpa.akraino.org,resources=provisionings/status;softwares/status;clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bpa.akraino.org,resources=provisionings/finalizers;softwares/finalizers,verbs=update
// +kubebuilder:rbac:groups=argoproj.io,resources=workflows,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=argoproj.io,resources=workflowtemplates,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=bpa.akraino.org,resources=bpapolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupProvisioning registers the Provisioning reconciler.
func SetupProvisioning(mgr ctrl.Manager, opts translator.Options, argo bool) error {
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
			translate: func(ctx context.Context, obj runObject, o translator.Options) (*wfv1.Workflow, error) {
				return translateProvisioning(ctx, mgr.GetClient(), obj.(*bpav1.Provisioning), o)
			},
			observe: observeProvisioning,
			stepsOf: observe.ProvisioningSteps,
			report: func(obj, before runObject) {
				rec := mgr.GetEventRecorderFor("bpa-controller")
				reportOperations(rec, obj.(*bpav1.Provisioning), before.(*bpav1.Provisioning).Status.Operations)
				reportCertificates(rec, obj.(*bpav1.Provisioning), before.(*bpav1.Provisioning).Status.Conditions)
			},
			timed: func(obj runObject) time.Duration {
				return certificatesExpiring(obj.(*bpav1.Provisioning), time.Now())
			},
		},
	}
	r.kind.settle = func(ctx context.Context, obj runObject, cluster string) error {
		return releaseRemoved(ctx, r.Client, r.Reader, obj.(*bpav1.Provisioning), cluster)
	}
	r.kind.finalize = func(ctx context.Context, obj runObject) error {
		return finalizeProvisioning(ctx, r.Client, r.Reader, obj.(*bpav1.Provisioning))
	}
	r.kind.admit = func(ctx context.Context, obj runObject, cluster string) (*policy.Refusal, error) {
		return admitProvisioning(ctx, r.Client, r.Reader, obj.(*bpav1.Provisioning), cluster)
	}
	r.kind.reset = r.resetBeforeRelease
	withReplacements(&r.kind)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&bpav1.Provisioning{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, replacementChanged)))
	if argo { // see argo.go
		b = b.Watches(&wfv1.Workflow{}, handler.EnqueueRequestsFromMapFunc(byLabel(bpav1.ProvisioningNameLabel)), builder.WithPredicates(notCreatedByUs))
	}
	return b.
		// When the Provisioning holding a cluster goes, the next one may act.
		Watches(&bpav1.Provisioning{}, handler.EnqueueRequestsFromMapFunc(siblingsOf(r.Client)),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(e event.UpdateEvent) bool {
					return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
				},
			})).
		Watches(&bpav1.BPAPolicy{}, handler.EnqueueRequestsFromMapFunc(allOf(r.Client, &bpav1.ProvisioningList{}))).
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

func observeProvisioning(obj runObject, cluster string, wf *wfv1.Workflow, o observe.Observation) {
	p := obj.(*bpav1.Provisioning)
	observePlan(p, wf, o)
	mergeBackups(p, wf, o.Backups)
	observeCertificates(p, o)
	for _, s := range o.Steps {
		if s.Name == "publish-kubeconfig" && s.Phase == string(wfv1.NodeSucceeded) {
			p.Status.KubeconfigSecretName = kubeconfig.PublishedSecretName(cluster)
		}
	}
	// Who runs etcd is the spec's choice (kubespray.EtcdMembers), the same that
	// discover-hosts records in status.hosts[].etcd and the inventory's [etcd] follows.
	nodes, err := hostmatch.Nodes(&p.Spec)
	var members []string
	for _, n := range nodes {
		if n.Etcd {
			members = append(members, n.Name)
		}
	}
	if err != nil {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdQuorum, metav1.ConditionFalse, bpav1.ReasonEvenEtcdCount, err.Error())
		return
	}
	etcd := len(members)
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdQuorum, metav1.ConditionTrue, bpav1.ReasonOddEtcdCount,
		fmt.Sprintf("%d etcd members tolerate %d failures: %s (of %d masters)", etcd, (etcd-1)/2, strings.Join(members, ", "), len(p.Spec.Masters)))
}

// admitProvisioning checks, right before a run, what admission could not or may no longer
// vouch for: the site policy, that this Provisioning holds its cluster in its namespace,
// and the SSH Secret's consent label. secrets reads around the cache (BPA watches no
// Secrets).
func admitProvisioning(ctx context.Context, c client.Client, secrets client.Reader, p *bpav1.Provisioning, cluster string) (*policy.Refusal, error) {
	pol, err := policy.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	siblings := &bpav1.ProvisioningList{}
	if err := c.List(ctx, siblings, client.InNamespace(p.Namespace), client.MatchingFields{indexCluster: cluster}); err != nil {
		return nil, err
	}
	params, err := translator.ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	return policy.AdmitProvisioning(ctx, pol, secrets, p, cluster, params["ssh-secret"], siblings.Items)
}

// translateProvisioning plans p's run with what the site policy gives it (siteOptions).
func translateProvisioning(ctx context.Context, c client.Reader, p *bpav1.Provisioning, o translator.Options) (*wfv1.Workflow, error) {
	o, err := siteOptions(ctx, c, p, o)
	if err != nil {
		return nil, err
	}
	return translator.Provisioning(p, o)
}

// siteOptions gives o what the site policy, read once, gives p's runs: the CA its artifact
// server's run installs on the nodes, and the etcd backup server with its CA. A bundle that
// cannot be used refuses the run, naming the field.
func siteOptions(ctx context.Context, c client.Reader, p *bpav1.Provisioning, o translator.Options) (translator.Options, error) {
	pol, err := policy.Get(ctx, c)
	if err != nil {
		return o, err
	}
	if o.ArtifactsCA, err = pol.ArtifactsCA(p); err != nil {
		return o, &translator.Refusal{Field: "spec.offline.url", Reason: bpav1.ReasonPolicyViolation,
			Message: "the site policy's CA for this artifact server cannot be used: " + err.Error()}
	}
	if o.BackupServer, o.BackupServerCA, err = pol.BackupServer(p); err != nil {
		return o, &translator.Refusal{Field: "spec.etcdBackup", Reason: bpav1.ReasonPolicyViolation,
			Message: "the site policy's CA for its etcd backup server cannot be used: " + err.Error()}
	}
	return o, nil
}

// siblingsOf maps a Provisioning to the others of its cluster in its namespace.
func siblingsOf(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		cluster := o.GetLabels()[bpav1.ClusterLabel]
		if cluster == "" {
			return nil
		}
		list := &bpav1.ProvisioningList{}
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexCluster: cluster}); err != nil {
			return nil
		}
		var reqs []ctrl.Request
		for _, p := range list.Items {
			if p.UID != o.GetUID() {
				reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
			}
		}
		return reqs
	}
}

// allOf maps any event to every object of a kind: a changed site policy may let stalled
// runs start (or stop the next ones).
func allOf(c client.Client, list client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []ctrl.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l); err != nil {
			return nil
		}
		var reqs []ctrl.Request
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			m := o.(client.Object)
			reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			return nil
		})
		return reqs
	}
}

// finalizeProvisioning removes the published kubeconfig and address ConfigMap (when this CR
// controls them) and releases the hosts this CR claimed.
func finalizeProvisioning(ctx context.Context, c client.Client, reader client.Reader, p *bpav1.Provisioning) error {
	cluster := p.Labels[bpav1.ClusterLabel]
	if cluster == "" {
		return nil
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: kubeconfig.PublishedSecretName(cluster)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: kubeconfig.AddressConfigMapName(cluster)}},
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

// releaseHosts clears the claims this Provisioning made: hosts whose spec.consumerRef names
// its UID, and, if it holds its cluster, an earlier BPA's label-only claims in its own
// namespace. A host another consumer holds is never touched, whatever its labels say, and
// nothing is released in a namespace the site policy does not let this CR draw from (a
// namespace named in the spec is not enough). It reads through reader: the hosts may live
// in a namespace the cache does not watch, and a stale list could release a claim made
// since.
func releaseHosts(ctx context.Context, c client.Client, reader client.Reader, p *bpav1.Provisioning, cluster string) error {
	hosts, pol, err := claimedHosts(ctx, reader, p, cluster)
	if err != nil || hosts == nil {
		return err
	}
	me := hostmatch.ClaimantOf(p, cluster)
	holder := false
	for i := range hosts.Items {
		h := &hosts.Items[i]
		mine := me.Owns(h.Spec.ConsumerRef) && h.Spec.ConsumerRef.UID == p.UID
		if !mine && me.LegacyClaim(h) {
			if !holder {
				siblings := &bpav1.ProvisioningList{}
				if err := reader.List(ctx, siblings, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.ClusterLabel: cluster}); err != nil {
					return err
				}
				// p is being deleted, so it is no longer live: it held the cluster if
				// no live sibling does.
				holder = policy.Holder(siblings.Items) == nil
			}
			mine = holder
		}
		if !mine {
			continue
		}
		if err := releaseHost(ctx, c, h, p, pol.HostRelease(), unhealthyMark(p, h.Name)); err != nil {
			return err
		}
	}
	return nil
}

// claimedHosts lists, through reader, the BareMetalHosts labelled as claimed for cluster in
// the namespace p draws hosts from, or nil when there is nothing to release there: a
// namespace the site policy does not let p draw from (one named in the spec is not enough),
// or no metal3. It reads around the cache: the hosts may live in a namespace the cache does
// not watch, and a stale list could release a claim made since.
func claimedHosts(ctx context.Context, reader client.Reader, p *bpav1.Provisioning, cluster string) (*metal3v1.BareMetalHostList, policy.Policy, error) {
	ns := p.HostNamespace()
	pol, err := policy.Get(ctx, reader)
	if err != nil {
		return nil, pol, err
	}
	if !pol.BareMetalHostNamespaceAllowed(p.Namespace, ns) {
		log.FromContext(ctx).Info("not releasing hosts in a namespace the policy does not allow", "bareMetalHostNamespace", ns)
		return nil, pol, nil
	}
	hosts := &metal3v1.BareMetalHostList{}
	err = reader.List(ctx, hosts, client.InNamespace(ns), client.MatchingLabels{bpav1.HostClaimLabel: cluster})
	if meta.IsNoMatchError(err) {
		return nil, pol, nil // metal3 is not installed: nothing was claimed
	}
	return hosts, pol, err
}

// releaseHost clears a host's claim and, in the same write, marks it released by p now
// and, under the Deprovision policy, removes its image so that metal3 deprovisions and
// cleans it: no other tenant's Provisioning claims it before that has finished
// (hostmatch.Unfit), and a Metal3Machine's provider waits for available. The optimistic
// lock spares a host re-claimed since it was listed. Power and BMC fields are left alone.
//
// unhealthy, when set, marks the host bpav1.HostUnhealthyAnnotation in the same write: a
// host graded remediation replaced is never claimed again, by anyone, before an admin has
// looked at it, whatever the release policy leaves on its disk.
func releaseHost(ctx context.Context, c client.Client, h *metal3v1.BareMetalHost, p *bpav1.Provisioning, how bpav1.HostReleasePolicy, unhealthy string) error {
	patch := client.MergeFromWithOptions(h.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(h.Labels, bpav1.HostClaimLabel)
	h.Spec.ConsumerRef = nil
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	h.Annotations[bpav1.HostReleasedFromAnnotation] = p.Namespace + "/" + p.Name
	h.Annotations[bpav1.HostReleasedAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
	if unhealthy != "" {
		h.Annotations[bpav1.HostUnhealthyAnnotation] = unhealthy
	}
	if how != bpav1.HostReleaseRetain {
		h.Spec.Image, h.Spec.CustomDeploy = nil, nil
		h.Spec.UserData, h.Spec.MetaData, h.Spec.NetworkData = nil, nil, nil
	}
	if err := c.Patch(ctx, h, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing BareMetalHost %s: %w", h.Name, err)
	}
	return nil
}
