package integration

import (
	"context"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// stepClient is a client that authenticates with a real token of the step's own
// ServiceAccount (TokenRequest), so RBAC and the admission policies judge it as they judge
// the step pod.
func stepClient(ctx context.Context, t *testing.T, r *rig.Rig, step string) client.Client {
	t.Helper()
	kc, err := kubernetes.NewForConfig(r.RESTConfig)
	require.NoError(t, err)
	tr, err := kc.CoreV1().ServiceAccounts(r.Namespace).CreateToken(ctx, "bpa-step-"+step,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.AnonymousClientConfig(r.RESTConfig)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	return c
}

func ptrInt64(v int64) *int64 { return &v }

// stepWritesRig is a real apiserver with BPA's CRDs, the BareMetalHost CRD, the admission
// policies and the step accounts in the rig's namespace, and an admin client of it; its
// context ends with t.
func stepWritesRig(t *testing.T) (*rig.Rig, context.Context, client.Client) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	admin, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallBareMetalHostCRD(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallAdmissionPolicy(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallStepRBAC(ctx, admin, r.Namespace))
	return r, ctx, admin
}

// patchHostAs patches h as c: mutate applied to h as admin reads it now, sent as a merge
// patch conditional on its resourceVersion.
func patchHostAs(t *testing.T, ctx context.Context, admin, c client.Client, h *metal3v1.BareMetalHost, mutate func(*metal3v1.BareMetalHost)) error {
	t.Helper()
	cur := &metal3v1.BareMetalHost{}
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(h), cur))
	orig := cur.DeepCopy()
	mutate(cur)
	return c.Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// forbidden asserts that err is admission's or RBAC's refusal, saying want.
func forbidden(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), want)
}

// TestStepAccountsAreNarrow makes, as each step's own ServiceAccount on a real apiserver,
// the writes an attacker holding that account would try: RBAC refuses what the step never
// needs, and the step-writes admission policy refuses what RBAC cannot narrow (any field of
// a BareMetalHost but the claim; a user's Secret).
func TestStepAccountsAreNarrow(t *testing.T) {
	r, ctx, admin := stepWritesRig(t)
	ns := r.Namespace

	newHost := func(name string) *metal3v1.BareMetalHost {
		h := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: metal3v1.BareMetalHostSpec{Online: true, BootMACAddress: "00:11:22:33:44:55", BMC: metal3v1.BMCDetails{Address: "ipmi://10.0.0.1", CredentialsName: "bmc"}}}
		require.NoError(t, admin.Create(ctx, h))
		return h
	}
	ours := &corev1.ObjectReference{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Namespace: ns, Name: "p", UID: "uid-p"}
	discover := stepClient(ctx, t, r, "discover-hosts")
	patch := func(c client.Client, h *metal3v1.BareMetalHost, mutate func(*metal3v1.BareMetalHost)) error {
		return patchHostAs(t, ctx, admin, c, h, mutate)
	}

	// The policy loads asynchronously: wait until a spec change by the step is refused.
	probe := newHost("probe")
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		// Toggle: a patch that went through before the policy loaded must not make the
		// next one a no-op, which any policy lets pass.
		return patch(discover, probe, func(h *metal3v1.BareMetalHost) { h.Spec.Online = !h.Spec.Online }) != nil, nil
	}), "the step-writes policy never took effect")

	t.Run("discover-hosts may not power a host off, reimage it or point it at another BMC", func(t *testing.T) {
		h := newHost("h-spec")
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { h.Spec.Online = false }), "only spec.consumerRef")
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) {
			h.Spec.Image = &metal3v1.Image{URL: "http://evil/img", Checksum: "x"}
		}), "only spec.consumerRef")
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.6.6.6" }), "only spec.consumerRef")
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { h.Labels = map[string]string{"rack": "evil"} }), "only the label")
	})
	t.Run("discover-hosts claims and releases for a Provisioning of its namespace", func(t *testing.T) {
		h := newHost("h-claim")
		require.NoError(t, patch(discover, h, func(h *metal3v1.BareMetalHost) {
			h.Spec.ConsumerRef = ours.DeepCopy()
			h.Labels = map[string]string{bpav1.HostClaimLabel: "c1"}
		}))
		require.NoError(t, patch(discover, h, func(h *metal3v1.BareMetalHost) {
			h.Spec.ConsumerRef = nil
			delete(h.Labels, bpav1.HostClaimLabel)
		}))
	})
	t.Run("discover-hosts may not wash a released host by removing its release mark", func(t *testing.T) {
		h := newHost("h-released")
		require.NoError(t, patch(admin, h, func(h *metal3v1.BareMetalHost) {
			h.Annotations = map[string]string{bpav1.HostReleasedFromAnnotation: "tenant-a/p", bpav1.HostReleasedAtAnnotation: "2026-11-27T10:00:00Z"}
		}))
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { delete(h.Annotations, bpav1.HostReleasedFromAnnotation) }), "bpa.akraino.org/ annotations")
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) {
			h.Annotations[bpav1.HostReleasedAtAnnotation] = "2000-01-01T00:00:00Z"
		}), "bpa.akraino.org/ annotations")
	})
	t.Run("discover-hosts may not wash a host graded remediation replaced by removing its unhealthy mark", func(t *testing.T) {
		h := newHost("h-unhealthy")
		require.NoError(t, patch(admin, h, func(h *metal3v1.BareMetalHost) {
			h.Annotations = map[string]string{bpav1.HostUnhealthyAnnotation: "node w1 of Provisioning tenant-a/p stayed unhealthy and was replaced"}
		}))
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { delete(h.Annotations, bpav1.HostUnhealthyAnnotation) }), "bpa.akraino.org/ annotations")
	})
	t.Run("discover-hosts never claims for another namespace, nor takes another consumer's host", func(t *testing.T) {
		h := newHost("h-foreign")
		other := ours.DeepCopy()
		other.Namespace = "tenant-b"
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = other }), "own namespace")

		capm3 := &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3Machine", Namespace: ns, Name: "m"}
		require.NoError(t, patch(admin, h, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = capm3 }))
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = ours.DeepCopy() }), "another consumer")
		forbidden(t, patch(discover, h, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = nil }), "another consumer")
	})
	t.Run("RBAC: steps that never write hosts cannot", func(t *testing.T) {
		h := newHost("h-rbac")
		for _, step := range []string{"resolve-leases", "verify", "publish-kubeconfig", "run-kubespray", "install-software", "lookup", "preflight", "backup-etcd", "restore-etcd", "renew-certificates", "check-drift", "applied-hosts", "restart-node"} {
			err := patch(stepClient(ctx, t, r, step), h, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = ours.DeepCopy() })
			require.Error(t, err, step)
			assert.True(t, apierrors.IsForbidden(err), "%s: %v", step, err)
		}
	})

	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-secret", Namespace: ns}, StringData: map[string]string{"k": "v"}}
	require.NoError(t, admin.Create(ctx, userSecret))
	publish := stepClient(ctx, t, r, "publish-kubeconfig")
	t.Run("publish-kubeconfig writes only BPA's Secrets and ConfigMaps", func(t *testing.T) {
		s := &corev1.Secret{}
		require.NoError(t, publish.Get(ctx, client.ObjectKeyFromObject(userSecret), s))
		s.Labels = map[string]string{bpav1.ManagedByLabel: bpav1.ManagedByValue} // claim it: the old object is still the user's
		forbidden(t, publish.Update(ctx, s), "managed-by=bpa")
		forbidden(t, publish.Delete(ctx, userSecret.DeepCopy()), "managed-by=bpa")
		forbidden(t, publish.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled", Namespace: ns}}), "managed-by=bpa")

		mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1-configmap", Namespace: ns,
			Labels: map[string]string{bpav1.ManagedByLabel: bpav1.ManagedByValue, bpav1.ClusterNameLabel: "c1"}}}
		require.NoError(t, publish.Create(ctx, mine))
		require.NoError(t, publish.Delete(ctx, mine))
	})
	t.Run("RBAC: only verify and publish write Secrets; no step but lookup and publish reads them", func(t *testing.T) {
		for _, step := range []string{"discover-hosts", "resolve-leases", "render-inventory", "run-kubespray", "install-software", "verify-software", "resolve-nodes", "verify", "preflight", "backup-etcd", "restore-etcd", "renew-certificates", "check-drift", "applied-hosts", "restart-node", "reboot-node"} {
			err := stepClient(ctx, t, r, step).Get(ctx, client.ObjectKeyFromObject(userSecret), &corev1.Secret{})
			assert.True(t, apierrors.IsForbidden(err), "%s read a Secret: %v", step, err)
		}
		for _, step := range []string{"discover-hosts", "resolve-leases", "render-inventory", "run-kubespray", "install-software", "lookup", "preflight", "backup-etcd", "restore-etcd", "renew-certificates", "check-drift", "applied-hosts", "restart-node", "reboot-node"} {
			err := stepClient(ctx, t, r, step).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-", Namespace: ns,
				Labels: map[string]string{bpav1.ManagedByLabel: bpav1.ManagedByValue}}})
			assert.True(t, apierrors.IsForbidden(err), "%s created a Secret: %v", step, err)
		}
	})
	t.Run("RBAC: only backup-etcd writes or deletes etcd snapshots; restore-etcd reads them", func(t *testing.T) {
		kc, err := kubernetes.NewForConfig(r.RESTConfig)
		require.NoError(t, err)
		may := func(step, verb string) bool {
			t.Helper()
			sar, err := kc.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:" + ns + ":bpa-step-" + step, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: bpav1.GroupVersion.Group, Resource: "etcdbackups", Name: "c1"}}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return sar.Status.Allowed
		}
		for _, verb := range []string{"get", "list"} {
			assert.True(t, may("restore-etcd", verb), verb)
		}
		for _, verb := range []string{"create", "delete", "update"} {
			assert.False(t, may("restore-etcd", verb), "restore-etcd may %s snapshots", verb)
		}
		for _, step := range []string{"verify", "run-kubespray", "preflight", "renew-certificates", "check-drift", "restart-node"} {
			assert.False(t, may(step, "get"), "%s may read snapshots", step)
		}
	})
	t.Run("RBAC: check-drift and restart-node may read their Provisioning (check-drift: list Softwares), nothing else", func(t *testing.T) {
		kc, err := kubernetes.NewForConfig(r.RESTConfig)
		require.NoError(t, err)
		may := func(step, verb, group, resource, sub string) bool {
			t.Helper()
			sar, err := kc.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:" + ns + ":bpa-step-" + step, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub, Name: "p"}}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return sar.Status.Allowed
		}
		for _, step := range []string{"check-drift", "restart-node"} {
			assert.True(t, may(step, "get", bpav1.GroupVersion.Group, "provisionings", ""), step)
			assert.Equal(t, step == "check-drift", may(step, "list", bpav1.GroupVersion.Group, "softwares", ""), step)
			for _, a := range [][4]string{
				{"update", bpav1.GroupVersion.Group, "softwares", ""}, {"update", bpav1.GroupVersion.Group, "softwares", "status"},
				{"list", bpav1.GroupVersion.Group, "provisionings", ""}, {"update", bpav1.GroupVersion.Group, "provisionings", ""},
				{"patch", bpav1.GroupVersion.Group, "provisionings", "status"}, {"update", bpav1.GroupVersion.Group, "provisionings", "status"},
				{"get", "", "secrets", ""}, {"list", "", "secrets", ""}, {"get", "", "configmaps", ""}, {"create", "", "configmaps", ""},
				{"get", "metal3.io", "baremetalhosts", ""}, {"patch", "metal3.io", "baremetalhosts", ""},
				{"create", "argoproj.io", "workflows", ""}, {"get", "argoproj.io", "workflows", ""}, {"create", "", "events", ""},
			} {
				assert.False(t, may(step, a[0], a[1], a[2], a[3]), "%s may %v", step, a)
			}
		}
	})
}
