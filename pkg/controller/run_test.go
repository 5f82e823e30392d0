package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func newProvisioning() *bpav1.Provisioning {
	return &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 1, UID: "uid-p", Labels: map[string]string{"cluster": "c1"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}},
	}
}

func newTestReconciler(objs ...client.Object) (*runReconciler, client.Client, *record.FakeRecorder) {
	return newTestReconcilerWith(interceptor.Funcs{}, objs...)
}

// newTestReconcilerWith lets a test intercept the reconciler's client calls.
func newTestReconcilerWith(funcs interceptor.Funcs, objs ...client.Object) (*runReconciler, client.Client, *record.FakeRecorder) {
	if !slices.ContainsFunc(objs, func(o client.Object) bool { _, ok := o.(*corev1.Secret); return ok }) {
		objs = append(objs, sshSecret("c1-ssh", "c1"))
	}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&bpav1.Provisioning{}, &bpav1.Software{})
	for _, i := range cacheIndexes {
		b = b.WithIndex(i.obj, i.field, i.extract)
	}
	c := b.Build()
	rec := record.NewFakeRecorder(100)
	r := &runReconciler{Client: c, Reader: c, Recorder: rec, kind: runKind{
		kind: "Provisioning", nameLabel: bpav1.ProvisioningNameLabel, steps: translator.ProvisioningSteps,
		newObject: func() runObject { return &bpav1.Provisioning{} },
		translate: func(ctx context.Context, obj runObject, o translator.Options) (*wfv1.Workflow, error) {
			return translateProvisioning(ctx, c, obj.(*bpav1.Provisioning), o)
		},
		observe: observeProvisioning, stepsOf: observe.ProvisioningSteps,
	}}
	r.kind.finalize = func(ctx context.Context, obj runObject) error {
		return finalizeProvisioning(ctx, c, c, obj.(*bpav1.Provisioning))
	}
	r.kind.admit = func(ctx context.Context, obj runObject, cluster string) (*policy.Refusal, error) {
		return admitProvisioning(ctx, c, c, obj.(*bpav1.Provisioning), cluster)
	}
	withReplacements(&r.kind)
	return r, c, rec
}

// sshSecret is an SSH Secret whose owner consented to cluster's runs mounting it.
func sshSecret(name, cluster string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{bpav1.ClusterNameLabel: cluster}},
		Data: map[string][]byte{"ssh-privatekey": []byte("k"), "known_hosts": []byte("h")}}
}

func reconcile(t *testing.T, r *runReconciler) *bpav1.Provisioning {
	t.Helper()
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.NoError(t, err)
	p := &bpav1.Provisioning{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	return p
}

func workflows(t *testing.T, c client.Client) []wfv1.Workflow {
	list := &wfv1.WorkflowList{}
	require.NoError(t, c.List(context.Background(), list))
	return list.Items
}

func TestReconcileStartsOneRunPerGeneration(t *testing.T) {
	r, c, _ := newTestReconciler(newProvisioning())
	p := reconcile(t, r)
	require.Len(t, workflows(t, c), 1)
	assert.Equal(t, "p-provision-1", p.Status.Workflow.Name)
	assert.Equal(t, int64(1), p.Status.ObservedGeneration)
	assert.Contains(t, p.Finalizers, Finalizer)

	// Reconciling again, or after losing the status write (a crash), makes no second run.
	reconcile(t, r)
	p.Status = bpav1.ProvisioningStatus{}
	require.NoError(t, c.Status().Update(context.Background(), p))
	p = reconcile(t, r)
	require.Len(t, workflows(t, c), 1, "no duplicate Workflow")
	assert.Equal(t, "p-provision-1", p.Status.Workflow.Name, "the existing Workflow is adopted")
}

// forgetStatus plays a crash between the Workflow create and the status write.
func forgetStatus(t *testing.T, c client.Client) {
	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	p.Status = bpav1.ProvisioningStatus{}
	require.NoError(t, c.Status().Update(context.Background(), p))
}

func TestAdoptionFromTheCacheCreatesNothing(t *testing.T) {
	creates := 0
	r, c, rec := newTestReconcilerWith(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*wfv1.Workflow); ok {
			creates++
		}
		return c.Create(ctx, obj, opts...)
	}}, newProvisioning())
	reconcile(t, r)
	<-rec.Events // RunStarted
	forgetStatus(t, c)
	p := reconcile(t, r)
	assert.Equal(t, 1, creates, "a Workflow the cache holds is adopted without a create")
	assert.Equal(t, "p-provision-1", p.Status.Workflow.Name)
	assert.Empty(t, rec.Events, "adopting is not starting: no second RunStarted")
}

func TestAdoptionWhenTheCacheLags(t *testing.T) {
	lagging := false
	r, c, _ := newTestReconcilerWith(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*wfv1.WorkflowList); ok && lagging {
			return nil // the cache has not seen the Workflow yet
		}
		return c.List(ctx, list, opts...)
	}}, newProvisioning())
	reconcile(t, r)
	forgetStatus(t, c)
	lagging = true
	p := reconcile(t, r)
	lagging = false
	require.Len(t, workflows(t, c), 1, "AlreadyExists on our own Workflow counts as created")
	assert.Equal(t, "p-provision-1", p.Status.Workflow.Name)
	assert.Empty(t, condition(p, bpav1.ConditionStalled).Type)
}

func TestAWorkflowNamedLikeOursButNotOwnedStalls(t *testing.T) {
	foreign := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-provision-1",
		Labels: map[string]string{bpav1.ProvisioningNameLabel: "p"}}}
	r, c, _ := newTestReconciler(newProvisioning(), foreign)
	p := reconcile(t, r)
	require.Len(t, workflows(t, c), 1)
	assert.Nil(t, p.Status.Workflow, "never adopt what this CR did not create")
	assert.Equal(t, bpav1.ReasonInvalidSpec, condition(p, bpav1.ConditionStalled).Reason)
	assert.Contains(t, condition(p, bpav1.ConditionStalled).Message, "not owned")
}

func TestSpecChangeWaitsForTheRunningWorkflow(t *testing.T) {
	r, c, _ := newTestReconciler(newProvisioning())
	reconcile(t, r)
	wf := &workflows(t, c)[0]
	wf.Status.Phase = wfv1.WorkflowRunning
	require.NoError(t, c.Update(context.Background(), wf))

	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	p.Generation = 2
	require.NoError(t, c.Update(context.Background(), p))
	p = reconcile(t, r)
	require.Len(t, workflows(t, c), 1, "the next run waits")
	assert.Equal(t, bpav1.ReasonWaitingForRun, condition(p, bpav1.ConditionReconciling).Reason)

	wf = &workflows(t, c)[0]
	wf.Status.Phase = wfv1.WorkflowSucceeded
	require.NoError(t, c.Update(context.Background(), wf))
	p = reconcile(t, r)
	require.Len(t, workflows(t, c), 2)
	assert.Equal(t, "p-provision-2", p.Status.Workflow.Name)
}

func TestWorkflowDeletedFromUnderUs(t *testing.T) {
	r, c, _ := newTestReconciler(newProvisioning())
	reconcile(t, r)
	wf := &workflows(t, c)[0]
	require.NoError(t, c.Delete(context.Background(), wf))
	p := reconcile(t, r)
	assert.Empty(t, workflows(t, c), "no new run without a new generation or a rerun request")
	assert.Equal(t, bpav1.PhaseError, p.Status.Phase)
	assert.Equal(t, bpav1.ReasonWorkflowDeleted, condition(p, bpav1.ConditionReady).Reason)

	p.Annotations = map[string]string{bpav1.RerunAnnotation: "again"}
	require.NoError(t, c.Update(context.Background(), p))
	p = reconcile(t, r)
	require.Len(t, workflows(t, c), 1, "the rerun request starts a run")
	assert.Equal(t, "again", p.Status.LastHandledRerun)
}

func TestMissingClusterLabelStalls(t *testing.T) {
	p := newProvisioning()
	p.Labels = nil
	r, c, _ := newTestReconciler(p)
	got := reconcile(t, r)
	assert.Empty(t, workflows(t, c))
	assert.Equal(t, bpav1.ReasonInvalidSpec, condition(got, bpav1.ConditionStalled).Reason)
	assert.Contains(t, got.Status.Message, "metadata.labels.cluster")
}

func TestRunFinishingEmitsOneEvent(t *testing.T) {
	r, c, rec := newTestReconciler(newProvisioning())
	reconcile(t, r)
	<-rec.Events // RunStarted
	wf := &workflows(t, c)[0]
	wf.Status.Phase = wfv1.WorkflowFailed
	require.NoError(t, c.Update(context.Background(), wf))
	p := reconcile(t, r)
	reconcile(t, r)
	assert.Equal(t, bpav1.PhaseFailed, p.Status.Phase)
	assert.Len(t, rec.Events, 1, "one RunFailed event, however often it is reconciled")
}

func TestDeletionFinalizes(t *testing.T) {
	r, c, _ := newTestReconciler(newProvisioning())
	reconcile(t, r)
	deleteAndReconcile(t, r, c)
	assert.Empty(t, workflows(t, c))
	p := &bpav1.Provisioning{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p)
	assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "the CR is gone once the finalizer ran")
}

// deleteAndReconcile deletes the CR p and reconciles it, which runs its finalizer.
func deleteAndReconcile(t *testing.T, r *runReconciler, c client.Client) {
	t.Helper()
	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	require.NoError(t, c.Delete(context.Background(), p))
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.NoError(t, err)
}

func condition(p *bpav1.Provisioning, typ string) metav1.Condition {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestAnExpiredNewerRunDoesNotBringBackAnOldFailure: generation 1 failed (kept for retry),
// generation 2 succeeded and its Workflow then expired. The CR stays Succeeded.
func TestAnExpiredNewerRunDoesNotBringBackAnOldFailure(t *testing.T) {
	r, c, _ := newTestReconciler(newProvisioning())
	reconcile(t, r)
	old := &workflows(t, c)[0]
	old.Status.Phase = wfv1.WorkflowFailed
	require.NoError(t, c.Update(context.Background(), old))
	reconcile(t, r)

	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
	p.Generation = 2
	require.NoError(t, c.Update(context.Background(), p))
	reconcile(t, r)
	var newer *wfv1.Workflow
	for _, wf := range workflows(t, c) {
		if wf.Name == "p-provision-2" {
			newer = &wf
		}
	}
	require.NotNil(t, newer)
	newer.Status.Phase = wfv1.WorkflowSucceeded
	require.NoError(t, c.Update(context.Background(), newer))
	require.Equal(t, bpav1.PhaseSucceeded, reconcile(t, r).Status.Phase)

	require.NoError(t, c.Delete(context.Background(), newer)) // its TTL ran out
	p = reconcile(t, r)
	assert.Equal(t, bpav1.PhaseSucceeded, p.Status.Phase)
	assert.True(t, condition(p, bpav1.ConditionReady).Status == metav1.ConditionTrue)
}

func host(name string, ref *corev1.ObjectReference, cluster string) *metal3v1.BareMetalHost {
	h := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if cluster != "" {
		h.Labels = map[string]string{bpav1.HostClaimLabel: cluster}
	}
	h.Spec.ConsumerRef = ref
	return h
}

func provisioningRef(name, uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Namespace: "ns", Name: name, UID: types.UID(uid)}
}

func claimed(t *testing.T, c client.Client, host string) bool {
	h := &metal3v1.BareMetalHost{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: host}, h))
	return h.Labels[bpav1.HostClaimLabel] != "" || h.Spec.ConsumerRef != nil
}

// Deleting a Provisioning releases exactly the claims it made: hosts whose consumerRef names
// its UID, and an earlier BPA's label-only claims of its cluster in its namespace when no
// other live Provisioning holds the cluster. Never another consumer's host (a Metal3Machine,
// a sibling, an older CR of the same name), whatever its labels say.
func TestDeletionReleasesOnlyItsOwnClaims(t *testing.T) {
	capm3 := &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3Machine", Namespace: "ns", Name: "m"}
	hosts := func() []client.Object {
		return []client.Object{
			host("mine", provisioningRef("p", "uid-p"), "c1"),
			host("old-uid", provisioningRef("p", "uid-old"), "c1"),
			host("capm3", capm3, "c1"),
			host("sibling", provisioningRef("q", "uid-q"), "c1"),
			host("legacy", nil, "c1"),
			host("other-cluster", nil, "c2"),
		}
	}
	t.Run("alone", func(t *testing.T) {
		r, cl, _ := newTestReconciler(append(hosts(), newProvisioning())...)
		reconcile(t, r)
		deleteAndReconcile(t, r, cl)
		for h, kept := range map[string]bool{"mine": false, "old-uid": true, "capm3": true, "sibling": true, "legacy": false, "other-cluster": true} {
			assert.Equal(t, kept, claimed(t, cl, h), h)
		}
	})
	t.Run("a live sibling holds the cluster: label-only claims stay", func(t *testing.T) {
		q := newProvisioning()
		q.Name, q.UID = "q", "uid-q"
		q.CreationTimestamp = metav1.NewTime(q.CreationTimestamp.Add(-time.Hour))
		r, cl, _ := newTestReconciler(append(hosts(), newProvisioning(), q)...)
		reconcile(t, r)
		deleteAndReconcile(t, r, cl)
		for h, kept := range map[string]bool{"mine": false, "legacy": true, "sibling": true} {
			assert.Equal(t, kept, claimed(t, cl, h), h)
		}
	})
	t.Run("a host namespace the policy does not allow is left alone", func(t *testing.T) {
		p := newProvisioning()
		p.Spec.BareMetalHostNamespace = "ns" // allowed: its own
		other := host("elsewhere", provisioningRef("p", "uid-p"), "c1")
		other.Namespace = "metal3"
		p2 := newProvisioning()
		p2.Spec.BareMetalHostNamespace = "metal3"
		r, cl, _ := newTestReconciler(other, p2)
		deleteAndReconcile(t, r, cl)
		h := &metal3v1.BareMetalHost{}
		require.NoError(t, cl.Get(context.Background(), client.ObjectKey{Namespace: "metal3", Name: "elsewhere"}, h))
		assert.NotNil(t, h.Spec.ConsumerRef, "metal3 is not granted to namespace ns by the policy")
	})
}

// The admission checks run again right before a run starts; each refusal stalls the CR with
// a reason and a message naming the field and the rule, and creates no Workflow.
func TestRunsAreAdmittedBeforeTheyStart(t *testing.T) {
	older := newProvisioning()
	older.Name, older.UID = "q", "uid-q"
	older.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(-time.Hour))
	evil := newProvisioning()
	evil.Spec.Kubespray = &bpav1.KubesprayConfig{Image: "registry.evil/kubespray"}
	probe := newProvisioning()
	probe.Spec.Offline = &bpav1.OfflineConfig{URL: "https://169.254.169.254"}
	for name, tc := range map[string]struct {
		objs        []client.Object
		reason, msg string
		requeue     bool
	}{
		"a second Provisioning of the cluster touches nothing": {
			[]client.Object{newProvisioning(), older}, bpav1.ReasonClusterHeldByOther, "cluster c1 is held by Provisioning q", false},
		"an image the policy does not list": {
			[]client.Object{evil}, bpav1.ReasonPolicyViolation, "spec.kubespray.image: Forbidden: registry.evil/kubespray is not allowed by the built-in default policy", false},
		"an artifact server the policy does not list": {
			[]client.Object{probe}, bpav1.ReasonPolicyViolation, "spec.offline.url: Forbidden: https://169.254.169.254 is not allowed by the built-in default policy (no BPAPolicy default) (spec.artifactServers[].url for namespace ns: none)", false},
		"an SSH Secret without the owner's consent": {
			[]client.Object{newProvisioning(), sshSecret("c1-ssh", "c2")}, bpav1.ReasonSSHSecretRefused, `Secret c1-ssh is labelled bpa.akraino.org/cluster="c2", not c1`, true},
		"no SSH Secret": {
			[]client.Object{newProvisioning(), sshSecret("unrelated", "c1")}, bpav1.ReasonSSHSecretRefused, "no Secret c1-ssh labelled bpa.akraino.org/cluster=c1", true},
	} {
		t.Run(name, func(t *testing.T) {
			r, c, _ := newTestReconciler(tc.objs...)
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
			require.NoError(t, err)
			p := &bpav1.Provisioning{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
			assert.Empty(t, workflows(t, c))
			stalled := condition(p, bpav1.ConditionStalled)
			assert.Equal(t, tc.reason, stalled.Reason)
			assert.Contains(t, stalled.Message, tc.msg)
			assert.Equal(t, tc.requeue, res.RequeueAfter > 0)
		})
	}
	t.Run("the admin's policy allows the image", func(t *testing.T) {
		pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: bpav1.BPAPolicySpec{KubesprayImages: []string{"quay.io/kubespray/kubespray", "registry.evil/kubespray"}}}
		r, c, _ := newTestReconciler(evil, pol)
		reconcile(t, r)
		assert.Len(t, workflows(t, c), 1)
	})
}

// TestDeletionSparesAStagingSecretItDoesNotOwn: a Secret named like a Workflow's staging
// Secret is deleted with the CR only when that Workflow owns it. Anyone who may create
// Secrets in the namespace can create `<workflow>-admin-conf`; deleting the CR must not
// delete it for them.
func TestDeletionSparesAStagingSecretItDoesNotOwn(t *testing.T) {
	ref := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "p-provision-1", UID: uid}}
	}
	for _, tc := range []struct {
		name    string
		owners  func(wf *wfv1.Workflow) []metav1.OwnerReference
		deleted bool
	}{
		{"no owner", func(*wfv1.Workflow) []metav1.OwnerReference { return nil }, false},
		{"another Workflow of that name", func(*wfv1.Workflow) []metav1.OwnerReference { return ref("another-uid") }, false},
		{"the Workflow's own", func(wf *wfv1.Workflow) []metav1.OwnerReference { return ref(wf.UID) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c, _ := newTestReconciler(newProvisioning())
			reconcile(t, r)
			wf := &workflows(t, c)[0]
			require.Equal(t, "p-provision-1", wf.Name)
			wf.UID = "wf-uid" // the fake client sets none; the apiserver always does
			require.NoError(t, c.Update(context.Background(), wf))
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-provision-1-admin-conf", OwnerReferences: tc.owners(wf)}}
			require.NoError(t, c.Create(context.Background(), s))
			deleteAndReconcile(t, r, c)
			err := c.Get(context.Background(), client.ObjectKeyFromObject(s), &corev1.Secret{})
			if tc.deleted {
				assert.True(t, apierrors.IsNotFound(err), "the Workflow's own staging Secret goes with the CR: %v", err)
			} else {
				assert.NoError(t, err, "a Secret the Workflow does not own survives the CR's deletion")
			}
		})
	}
}

// A reconcile that started from a stale copy (the cache lags a newer status write) must
// not overwrite the newer status: its write fails with a conflict, and the retry sees
// the truth.
func TestStatusWriteFromAStaleCopyConflicts(t *testing.T) {
	var stale *bpav1.Provisioning
	r, c, _ := newTestReconcilerWith(interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p, ok := obj.(*bpav1.Provisioning); ok && stale != nil {
				stale.DeepCopyInto(p)
				return nil
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	}, newProvisioning())
	p := reconcile(t, r)
	stale = p.DeepCopy()
	stale.Status = bpav1.ProvisioningStatus{} // as the cache had it before the first status write
	newer := p.DeepCopy()
	newer.Status.Message = "written by a newer reconcile"
	require.NoError(t, c.Status().Update(context.Background(), newer))

	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.True(t, apierrors.IsConflict(err), "want a conflict, got %v", err)
	stale = nil
	got := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, got))
	assert.Equal(t, "written by a newer reconcile", got.Status.Message)
	assert.Len(t, workflows(t, c), 1, "the run was adopted, not started again")
}

// A day-2 change of a setting the live cluster keeps (here PodSubnet, kube_pods_subnet)
// stalls the CR with reason ImmutableSetting naming the field, and starts no run.
func TestImmutableSettingStalls(t *testing.T) {
	p := newProvisioning()
	p.Spec.PodSubnet = "10.244.0.0/16"
	built, err := translator.PlanChange(p.DeepCopy())
	require.NoError(t, err)
	p.Status.Applied = &bpav1.AppliedState{Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master", "worker"}, Etcd: true, IP: "10.0.0.1"}},
		KubesprayVersion: built.KubesprayVersion, KubernetesVersion: built.KubernetesVersion, Settings: built.Settings, Immutable: built.Immutable}
	p.Spec.PodSubnet = "10.245.0.0/16"
	p.Generation = 2
	r, c, _ := newTestReconciler(p)
	reconcile(t, r)
	got := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, got))
	assert.Empty(t, workflows(t, c))
	stalled := condition(got, bpav1.ConditionStalled)
	require.NotNil(t, stalled)
	assert.Equal(t, bpav1.ReasonImmutableSetting, stalled.Reason)
	assert.Contains(t, stalled.Message, "spec.PodSubnet: kube_pods_subnet is 10.244.0.0/16 in the running cluster and would become 10.245.0.0/16")
}

// A step's error that starts with one of its reasons becomes the CR's Stalled reason.
func TestStepReason(t *testing.T) {
	for msg, want := range map[string]string{
		"step preflight failed: PreflightFailed: check disk-space failed: host w1: 1Gi free on /": bpav1.ReasonPreflightFailed,
		"step verify failed: NodeNotUpgraded: after the upgrade, a node did not come back":        bpav1.ReasonNodeNotUpgraded,
		"step remove-workers failed: NodeUnreachable: cannot reach node w1":                       bpav1.ReasonNodeUnreachable,
		"step upgrade failed: exit code 2":                                                        "",
		"the word PreflightFailed without its colon":                                              "",
	} {
		if got := stepReason(msg); got != want {
			t.Errorf("stepReason(%q) = %q, want %q", msg, got, want)
		}
	}
}
