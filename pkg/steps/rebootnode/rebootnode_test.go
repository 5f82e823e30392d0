package rebootnode

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/remediation/rungnode"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

func provisioning() *bpav1.Provisioning {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov", UID: types.UID("u1")}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true, IP: "10.0.0.1", BareMetalHost: "bmh-m1"},
		{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.3", BareMetalHost: "bmh-w1"},
		{Name: "w2", Roles: []string{"worker"}, IP: "10.0.0.4"},
	}}
	return p
}

// host is w1's BareMetalHost as metal3 leaves a host it provisioned, claimed by p.
func host(p *bpav1.Provisioning) *metal3v1.BareMetalHost {
	b := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "bmh-w1", Annotations: map[string]string{"site/owner": "ops"}}}
	b.Spec.ConsumerRef, b.Spec.Online = hostmatch.ClaimantOf(p, "").ConsumerRef(), true
	b.Status.Provisioning.State, b.Status.PoweredOn = metal3v1.StateProvisioned, true
	return b
}

// TestHost refuses a node with no BareMetalHost, and a host another consumer (or a
// Provisioning of the same name with another uid) claims, one metal3 has not provisioned, or
// one metal3 would leave off; it takes the claimed, provisioned, online host.
func TestHost(t *testing.T) {
	ctx := context.Background()
	p := provisioning()
	for name, x := range map[string]struct {
		node   string
		change func(*metal3v1.BareMetalHost)
		why    string
	}{
		"no host":         {"w2", nil, "no BareMetalHost in status.applied"},
		"unclaimed":       {"w1", func(b *metal3v1.BareMetalHost) { b.Spec.ConsumerRef = nil }, "not claimed by Provisioning prov"},
		"another's":       {"w1", func(b *metal3v1.BareMetalHost) { b.Spec.ConsumerRef.Namespace = "other" }, "not claimed"},
		"old uid":         {"w1", func(b *metal3v1.BareMetalHost) { b.Spec.ConsumerRef.UID = "u0" }, "not claimed"},
		"available":       {"w1", func(b *metal3v1.BareMetalHost) { b.Status.Provisioning.State = metal3v1.StateAvailable }, `"available", not provisioned`},
		"offline":         {"w1", func(b *metal3v1.BareMetalHost) { b.Spec.Online = false }, "spec.online false"},
		"no such host":    {"w1", func(b *metal3v1.BareMetalHost) { b.Name = "elsewhere" }, "not found"},
		"other namespace": {"w1", func(b *metal3v1.BareMetalHost) { b.Namespace = "metal3" }, "not found"},
	} {
		b := host(p)
		if x.change != nil {
			x.change(b)
		}
		c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(b).Build()
		_, err := Host(ctx, c, p, x.node)
		assert.ErrorContains(t, err, x.why, name)
	}
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(host(p)).Build()
	b, err := Host(ctx, c, p, "w1")
	require.NoError(t, err)
	assert.Equal(t, "bmh-w1", b.Name)
}

// TestRequest sets the reboot annotation and the request's, touching no other field, in
// one patch that names the host's resourceVersion; again for the same request it writes
// nothing (metal3 may have removed the reboot annotation since: a second write would
// reboot the host twice), and a new request sets both again.
func TestRequest(t *testing.T) {
	ctx := context.Background()
	p := provisioning()
	var patches []string
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(host(p)).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			require.NoError(t, err)
			patches = append(patches, string(data))
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	b, err := Host(ctx, c, p, "w1")
	require.NoError(t, err)
	rv := b.ResourceVersion
	require.NoError(t, Request(ctx, c, b, "wf-1", t.Logf))
	require.Len(t, patches, 1)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"`+rv+`","annotations":{"reboot.metal3.io":"{\"mode\":\"hard\"}","bpa.akraino.org/reboot-request":"wf-1"}}}`, patches[0])

	got := &metal3v1.BareMetalHost{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(b), got))
	assert.Equal(t, map[string]string{"site/owner": "ops", Annotation: Mode, RequestAnnotation: "wf-1"}, got.Annotations)
	assert.Equal(t, host(p).Spec, got.Spec)

	delete(got.Annotations, Annotation) // metal3 powered it off
	require.NoError(t, c.Update(ctx, got))
	require.NoError(t, Request(ctx, c, got, "wf-1", t.Logf))
	assert.Len(t, patches, 1, "a rerun of the same request writes nothing")

	require.NoError(t, Request(ctx, c, got, "wf-2", t.Logf))
	assert.Len(t, patches, 2, "a new episode's rung reboots again")
}

// TestRequestConflict: a host changed since it was checked is not patched (its claim or
// state may be another now).
func TestRequestConflict(t *testing.T) {
	ctx := context.Background()
	p := provisioning()
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(host(p)).Build()
	b, err := Host(ctx, c, p, "w1")
	require.NoError(t, err)
	changed := b.DeepCopy()
	changed.Spec.ConsumerRef = nil
	require.NoError(t, c.Update(ctx, changed))
	err = Request(ctx, c, b, "wf-1", t.Logf)
	assert.ErrorContains(t, err, "requesting the reboot")
	got := &metal3v1.BareMetalHost{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(b), got))
	assert.NotContains(t, got.Annotations, Annotation)
}

// TestWaitTaken returns once metal3 removed the annotation, and otherwise fails after the
// wait naming what it last read.
func TestWaitTaken(t *testing.T) {
	p := provisioning()
	b := host(p)
	b.Annotations[Annotation] = Mode
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(b).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := WaitTaken(ctx, c, client.ObjectKeyFromObject(b), 10*time.Millisecond)
	assert.ErrorContains(t, err, "did not take the reboot of BareMetalHost bpa/bmh-w1 in time (reboot.metal3.io still set; state provisioned, poweredOn true)")

	go func() {
		time.Sleep(50 * time.Millisecond)
		got := &metal3v1.BareMetalHost{}
		_ = c.Get(context.Background(), client.ObjectKeyFromObject(b), got)
		delete(got.Annotations, Annotation)
		_ = c.Update(context.Background(), got)
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	assert.NoError(t, WaitTaken(ctx2, c, client.ObjectKeyFromObject(b), 10*time.Millisecond))
}

// TestRunRefuses: the step refuses a control-plane node before it reads or writes any host,
// and a worker whose host is not provisioned without writing to it.
func TestRunRefuses(t *testing.T) {
	ctx := context.Background()
	p := provisioning()
	b := host(p)
	b.Status.Provisioning.State = metal3v1.StateDeprovisioning
	m := host(p)
	m.Name = "bmh-m1"
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, b, m).Build()
	hostsFile := filepath.Join(t.TempDir(), "hosts.json")
	require.NoError(t, stepio.WriteHosts(hostsFile, p.Status.Applied.Hosts))
	o := &options{Step: rungnode.Step{CR: stepio.CR{Namespace: "bpa", Name: "prov"}, HostsFile: hostsFile, Wait: time.Second, Poll: 10 * time.Millisecond,
		Flags: pflag.NewFlagSet("x", pflag.ContinueOnError), Logf: t.Logf}, request: "wf-1"}
	for node, why := range map[string]string{"m1": "never acts on", "w1": "not provisioned", "x": "not in status.applied"} {
		o.Node = node
		assert.ErrorContains(t, o.run(ctx, c), why, node)
	}
	o.Node, o.request = "w1", ""
	assert.ErrorContains(t, o.run(ctx, c), "--request is required")
	for _, name := range []string{"bmh-w1", "bmh-m1"} {
		got := &metal3v1.BareMetalHost{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "bpa", Name: name}, got))
		assert.NotContains(t, got.Annotations, Annotation, name)
	}
}
