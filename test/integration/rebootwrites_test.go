package integration

import (
	"context"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/rebootnode"
)

// TestRebootAccountOnlyRequestsReboots makes, as bpa-step-reboot-node's own ServiceAccount on
// a real apiserver, the writes an attacker holding it would try. RBAC gives it patch on
// every BareMetalHost of its namespace; config/admission/reboot-writes.yaml refuses all but
// the reboot request on a host its namespace's Provisioning claims: power off (spec.online),
// a new image, releasing the claim, another annotation or label, a suffixed reboot
// annotation (which would keep the host off), a value metal3 refuses, and any write to a host
// another tenant claims or nobody does. The last subtest removes the policy's binding and
// sees the same account power a host off: the refusals are the policy's, not RBAC's. Nothing
// passes for a namespace the admin's BPAPolicy does not grant allowReboot.
func TestRebootAccountOnlyRequestsReboots(t *testing.T) {
	r, ctx, admin := stepWritesRig(t)
	ns := r.Namespace

	ours := &corev1.ObjectReference{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Namespace: ns, Name: "p", UID: "uid-p"}
	newHost := func(name string, claim *corev1.ObjectReference) *metal3v1.BareMetalHost {
		h := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{bpav1.HostClaimLabel: "c1"}},
			Spec: metal3v1.BareMetalHostSpec{Online: true, BootMACAddress: "00:11:22:33:44:55", ConsumerRef: claim,
				Image: &metal3v1.Image{URL: "http://images/os.img", Checksum: "abc"},
				BMC:   metal3v1.BMCDetails{Address: "ipmi://10.0.0.1", CredentialsName: "bmc"}}}
		require.NoError(t, admin.Create(ctx, h))
		return h
	}
	reboot := stepClient(ctx, t, r, "reboot-node")
	patch := func(h *metal3v1.BareMetalHost, mutate func(*metal3v1.BareMetalHost)) error {
		return patchHostAs(t, ctx, admin, reboot, h, func(h *metal3v1.BareMetalHost) {
			if h.Annotations == nil {
				h.Annotations = map[string]string{}
			}
			mutate(h)
		})
	}
	powerOff := func(h *metal3v1.BareMetalHost) { h.Spec.Online = !h.Spec.Online }

	// The admin grants this namespace reboots (the policy's parameter, BPAPolicy default, which
	// config/admission installs with the safe defaults).
	grant := &bpav1.BPAPolicy{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: "default"}, grant))
	grant.Spec.Namespaces = append(grant.Spec.Namespaces, bpav1.NamespaceGrant{Names: []string{ns}, AllowReboot: true})
	require.NoError(t, admin.Update(ctx, grant))

	// The policy loads asynchronously: wait until a power change by the account is refused.
	probe := newHost("probe", ours)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return patch(probe, powerOff) != nil, nil
	}), "the reboot-writes policy never took effect")

	t.Run("requests a reboot of its own host, and records the request", func(t *testing.T) {
		h := newHost("h-own", ours)
		require.NoError(t, patch(h, func(h *metal3v1.BareMetalHost) {
			h.Annotations[rebootnode.Annotation], h.Annotations[rebootnode.RequestAnnotation] = rebootnode.Mode, "wf-1"
		}))
		got := &metal3v1.BareMetalHost{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(h), got))
		assert.Equal(t, rebootnode.Mode, got.Annotations[rebootnode.Annotation])
	})
	t.Run("may not power a host off, reimage it, release it or relabel it", func(t *testing.T) {
		h := newHost("h-spec", ours)
		const msg = "only the annotations reboot.metal3.io and bpa.akraino.org/reboot-request"
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Spec.Online = false }), msg)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "http://evil/img" }), msg)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.6.6.6" }), msg)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = nil }), msg)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { delete(h.Labels, bpav1.HostClaimLabel) }), msg)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Annotations[bpav1.HostReleasedFromAnnotation] = "x/y" }), msg)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Annotations["inspect.metal3.io"] = "" }), msg)
	})
	t.Run("may not keep a host off (a suffixed reboot annotation) or write a value metal3 refuses", func(t *testing.T) {
		h := newHost("h-suffix", ours)
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Annotations[rebootnode.Annotation+"/hold"] = "" }), "only the annotations")
		forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Annotations[rebootnode.Annotation] = `{"mode":"evil"}` }), "may set only")
	})
	t.Run("may not touch a host another tenant claims, nor an unclaimed one", func(t *testing.T) {
		theirs := ours.DeepCopy()
		theirs.Namespace = "tenant-b"
		for _, h := range []*metal3v1.BareMetalHost{newHost("h-theirs", theirs), newHost("h-free", nil)} {
			forbidden(t, patch(h, func(h *metal3v1.BareMetalHost) { h.Annotations[rebootnode.Annotation] = rebootnode.Mode }), "own namespace claims")
		}
	})
	t.Run("RBAC: may not create, delete or write the status of hosts, nor read Secrets", func(t *testing.T) {
		h := newHost("h-rbac", ours)
		assert.True(t, apierrors.IsForbidden(reboot.Delete(ctx, h.DeepCopy())))
		fresh := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "h-new", Namespace: ns}}
		assert.True(t, apierrors.IsForbidden(reboot.Create(ctx, fresh)))
		cur := &metal3v1.BareMetalHost{}
		require.NoError(t, reboot.Get(ctx, client.ObjectKeyFromObject(h), cur))
		cur.Status.PoweredOn = false
		assert.True(t, apierrors.IsForbidden(reboot.Status().Update(ctx, cur)))
		assert.True(t, apierrors.IsForbidden(reboot.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bmc"}, &corev1.Secret{})))
	})
	t.Run("without the admin's grant, no reboot at all", func(t *testing.T) {
		h := newHost("h-ungranted", ours)
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(grant), grant))
		grant.Spec.Namespaces[len(grant.Spec.Namespaces)-1].AllowReboot = false
		require.NoError(t, admin.Update(ctx, grant))
		var err error
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			err = patch(h, func(h *metal3v1.BareMetalHost) { h.Annotations[rebootnode.Annotation] = rebootnode.Mode })
			return err != nil, nil
		}), "a namespace without allowReboot requested a reboot")
		forbidden(t, err, "does not grant it allowReboot")
	})
	t.Run("without the policy RBAC alone lets the account power a host off", func(t *testing.T) {
		h := newHost("h-unguarded", ours)
		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: "bpa.akraino.org-reboot-writes"}, b))
		require.NoError(t, admin.Delete(ctx, b))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return patch(h, func(h *metal3v1.BareMetalHost) { h.Spec.Online = false }) == nil, nil
		}), "with the binding gone the patch should pass: else the test proves RBAC, not the policy")
	})
}
