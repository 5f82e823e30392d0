package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/pkg/steps/discoverhosts"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework/hostfixture"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestReleasedHostIsNotHandedToAnotherTenant is the attack of the security review's host
// reuse finding, on a real kube-apiserver with the real controller: tenant A's cluster is
// deleted (deletionPolicy Retain, the default), the controller releases its host, and
// tenant B, whose Provisioning draws from the same BareMetalHost namespace, tries to claim
// it with the discover-hosts step. Before the fix B got the host with A's disk on it.
//
// Under the default policy (Deprovision) the release removes the host's image in the same
// write that clears the claim, so metal3 deprovisions and cleans it; B is refused until
// metal3 has done so and the admin provisioned it again. Under Retain the OS stays: A's
// namespace may take the host back at once, B only after metal3 has deprovisioned it. The
// test plays metal3's part by writing the host's status as the baremetal-operator does.
func TestReleasedHostIsNotHandedToAnotherTenant(t *testing.T) {
	ctx, r, c, stop, stopped := controllerOnRig(t, rig.Options{MinimalArgoCRDs: true}, controller.Options{ArgoPollInterval: time.Hour})
	defer func() { stop(); require.NoError(t, <-stopped) }()
	tenantA, tenantB := r.Namespace, "tenant-b"
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantB}}))

	// B asks for one master from A's host namespace (the policy grants it: admission is
	// not what is under test here).
	// claimAsB runs the step for B and returns what it chose, or its error followed by
	// its log, which says why each host was not chosen.
	claimAsB := func(t *testing.T, name string) ([]bpav1.HostStatus, error) {
		p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: tenantB, Name: name, Labels: map[string]string{bpav1.ClusterLabel: name}},
			Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, BareMetalHostNamespace: tenantA}}
		require.NoError(t, c.Create(ctx, p))
		var log []string
		hosts, err := discoverhosts.Run(ctx, c, stepio.CR{Namespace: tenantB, Name: name}, func(f string, args ...any) { log = append(log, fmt.Sprintf(f, args...)) })
		if err != nil {
			return nil, fmt.Errorf("%w\n%s", err, strings.Join(log, "\n"))
		}
		return hosts, nil
	}
	host := func(name string) *metal3v1.BareMetalHost {
		h := &metal3v1.BareMetalHost{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: tenantA, Name: name}, h))
		return h
	}
	// metal3 at work: a host whose image was removed is deprovisioned (cleaned) and becomes
	// available; the admin then provisions it again with an image.
	metal3Deprovisions := func(t *testing.T, name string, reprovision bool) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h := host(name)
			start := metav1.NewTime(time.Now().Add(time.Second))
			h.Status.OperationHistory.Deprovision = metal3v1.OperationMetric{Start: start, End: metav1.NewTime(start.Add(time.Minute))}
			h.Status.Provisioning.State, h.Status.Provisioning.Image = metal3v1.StateAvailable, metal3v1.Image{}
			return c.Status().Update(ctx, h)
		}))
		if !reprovision {
			return
		}
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h := host(name)
			h.Spec.Image = &hostfixture.Image
			return c.Update(ctx, h)
		}))
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h := host(name)
			h.Status.Provisioning.State, h.Status.Provisioning.Image = metal3v1.StateProvisioned, hostfixture.Image
			return c.Status().Update(ctx, h)
		}))
	}
	// A's cluster, built on <name>-host, deleted with Retain: the controller releases it.
	builtThenDeleted := func(t *testing.T, name string) *metal3v1.BareMetalHost {
		provisionedOn(ctx, t, c, tenantA, name, name, bpav1.DeletionRetain)
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h := host(name + "-host")
			h.Spec.Image, h.Spec.Online, h.Spec.BootMACAddress = &hostfixture.Image, true, "00:00:5e:00:53:01"
			h.Spec.UserData = &corev1.SecretReference{Name: name + "-user-data"}
			return c.Update(ctx, h)
		}))
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h := host(name + "-host")
			status := hostfixture.Provisioned(h.DeepCopy()).Status
			h.Status = status
			return c.Status().Update(ctx, h)
		}))
		before := time.Now().Add(-time.Second)
		require.NoError(t, c.Delete(ctx, getProvisioning(ctx, t, c, tenantA, name)))
		eventually(t, name+" gone", func() bool { return getProvisioning(ctx, t, c, tenantA, name) == nil })
		h := host(name + "-host")
		assert.Nil(t, h.Spec.ConsumerRef, "the claim is released")
		assert.Equal(t, tenantA+"/"+name, h.Annotations[bpav1.HostReleasedFromAnnotation])
		at, err := time.Parse(time.RFC3339, h.Annotations[bpav1.HostReleasedAtAnnotation])
		require.NoError(t, err, "released-at")
		assert.False(t, at.Before(before.Truncate(time.Second)), "released-at %s is the release's time", at)
		return h
	}

	t.Run("Deprovision (default): the image goes with the claim, and B waits for a clean host", func(t *testing.T) {
		h := builtThenDeleted(t, "a1")
		assert.Nil(t, h.Spec.Image, "the release removes the image, so metal3 deprovisions the host")
		assert.Nil(t, h.Spec.UserData, "and A's user data")
		assert.True(t, h.Spec.Online, "power is never touched")

		_, err := claimAsB(t, "b1")
		require.Error(t, err, "B must not get A's host")
		assert.Contains(t, err.Error(), "(1 being deprovisioned)")
		assert.Contains(t, err.Error(), "BareMetalHost bpa-system/a1-host not chosen: it is provisioned but has no spec.image any more, so metal3 is about to deprovision it")
		assert.Nil(t, host("a1-host").Spec.ConsumerRef)

		metal3Deprovisions(t, "a1-host", false)
		_, err = claimAsB(t, "b2")
		require.Error(t, err, "an available host has no operating system for kubespray")
		assert.Contains(t, err.Error(), "not chosen: it is available (status.provisioning.state); BPA takes only hosts with an operating system installed")

		metal3Deprovisions(t, "a1-host", true)
		hosts, err := claimAsB(t, "b3")
		require.NoError(t, err, "cleaned and provisioned again: B may have it")
		require.Len(t, hosts, 1)
		assert.Equal(t, "a1-host", hosts[0].BareMetalHost)
		assert.Equal(t, tenantB, host("a1-host").Spec.ConsumerRef.Namespace)
	})

	t.Run("Retain: A may take its host back, B only once metal3 has cleaned it", func(t *testing.T) {
		require.NoError(t, c.Create(ctx, &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName},
			Spec: bpav1.BPAPolicySpec{HostRelease: bpav1.HostReleaseRetain}}))
		t.Cleanup(func() {
			_ = c.Delete(ctx, &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}})
		})
		h := builtThenDeleted(t, "a2")
		assert.Equal(t, hostfixture.Image, *h.Spec.Image, "Retain keeps the OS")

		_, err := claimAsB(t, "b4")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(1 released, not deprovisioned; 1 used by another consumer)")
		assert.Contains(t, err.Error(), "BareMetalHost bpa-system/a2-host not chosen: it was released by Provisioning "+tenantA+"/a2 at ")
		assert.Contains(t, err.Error(), "and metal3 has not deprovisioned it since (status.operationHistory.deprovision), so it may still hold that tenant's data")

		// A deprovisioning that ended before the release proves nothing.
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			h := host("a2-host")
			old := metav1.NewTime(time.Now().Add(-time.Hour))
			h.Status.OperationHistory.Deprovision = metal3v1.OperationMetric{Start: old, End: metav1.NewTime(old.Add(time.Minute))}
			return c.Status().Update(ctx, h)
		}))
		_, err = claimAsB(t, "b5")
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), "has not deprovisioned it since"), "%v", err)

		// A's own namespace takes it back as it is.
		again := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "a2-again", Labels: map[string]string{bpav1.ClusterLabel: "a2-again"}},
			Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}}}
		require.NoError(t, c.Create(ctx, again))
		hosts, err := discoverhosts.Run(ctx, c, stepio.CR{Namespace: tenantA, Name: again.Name}, t.Logf)
		require.NoError(t, err, "the releasing namespace may reclaim a retained host")
		assert.Equal(t, "a2-host", hosts[0].BareMetalHost)
	})
}
