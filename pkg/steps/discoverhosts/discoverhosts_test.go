package discoverhosts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

const ns = "bpa"

// example reads an examples/ Provisioning into namespace ns at generation 3, and the
// BareMetalHosts examples/bmh gives it.
func example(t *testing.T, name string) (*bpav1.Provisioning, []client.Object) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../../examples", name+".yaml"))
	require.NoError(t, err)
	p := &bpav1.Provisioning{}
	require.NoError(t, yaml.UnmarshalStrict(data, p))
	p.Namespace, p.Generation = ns, 3
	bmhs, err := hostmatch.ReadBareMetalHostsFile(filepath.Join("../../../examples/bmh", name+".yaml"))
	require.NoError(t, err)
	var objs []client.Object
	for i := range bmhs {
		bmhs[i].Namespace = ns
		objs = append(objs, &bmhs[i])
	}
	return p, objs
}

func newClient(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
}

func claims(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	var list metal3v1.BareMetalHostList
	require.NoError(t, c.List(context.Background(), &list))
	out := map[string]string{}
	for _, b := range list.Items {
		out[b.Namespace+"/"+b.Name] = b.Labels[bpav1.HostClaimLabel]
		if ref := b.Spec.ConsumerRef; ref != nil {
			out[b.Namespace+"/"+b.Name] += " " + hostmatch.Describe(ref)
		}
	}
	return out
}

func TestDiscoverAndClaim(t *testing.T) {
	p, bmhs := example(t, "provisioning-by-resources")
	// Two hosts left over, and the log says why.
	spare := bmhs[0].(*metal3v1.BareMetalHost).DeepCopy()
	spare.Name, spare.Spec.BootMACAddress, spare.Status.HardwareDetails = "spare", "52:54:00:00:00:99", nil
	other := spare.DeepCopy()
	other.Name, other.Labels = "other", map[string]string{bpav1.HostClaimLabel: "cluster-other"}
	c := newClient(append(bmhs, p, spare, other)...)
	var log []string
	logf := func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	cr := stepio.CR{Namespace: ns, Name: p.Name, Generation: 3}

	hosts, err := Run(context.Background(), c, cr, logf)
	require.NoError(t, err)
	assert.Equal(t, []bpav1.HostStatus{
		{Name: "master-1", Roles: []string{"master"}, MAC: "52:54:00:00:00:08", BareMetalHost: "node-08", Etcd: true},
		{Name: "worker-1", Roles: []string{"worker"}, MAC: "52:54:00:00:00:07", BareMetalHost: "node-07"},
		{Name: "worker-2", Roles: []string{"worker"}, MAC: "52:54:00:00:00:06", BareMetalHost: "node-06"},
	}, hosts)
	mine := "cluster-res Provisioning bpa/provisioning-by-resources"
	assert.Equal(t, map[string]string{"bpa/node-06": mine, "bpa/node-07": mine, "bpa/node-08": mine, "bpa/spare": "", "bpa/other": "cluster-other"}, claims(t, c))
	assert.Equal(t, []string{
		fmt.Sprintf("Provisioning provisioning-by-resources: 3 nodes placed on %d BareMetalHosts in namespace bpa", len(bmhs)+2),
		`BareMetalHost bpa/other not chosen: it is claimed by cluster "cluster-other" (label bpa.akraino.org/cluster)`,
		"BareMetalHost bpa/spare not chosen: every node has a host (it matched no node's MAC, or another host was picked first)",
		"node master-1: claimed BareMetalHost bpa/node-08 for Provisioning provisioning-by-resources (cluster cluster-res)",
		"node worker-1: claimed BareMetalHost bpa/node-07 for Provisioning provisioning-by-resources (cluster cluster-res)",
		"node worker-2: claimed BareMetalHost bpa/node-06 for Provisioning provisioning-by-resources (cluster cluster-res)",
	}, log)

	// A rerun chooses the same hosts and has nothing to claim.
	log = nil
	again, err := Run(context.Background(), c, cr, logf)
	require.NoError(t, err)
	assert.Equal(t, hosts, again)
	assert.Len(t, log, 6)
	assert.Contains(t, log, "node worker-2: BareMetalHost bpa/node-06, already claimed by Provisioning provisioning-by-resources")

	// The output is the JSON list the next step reads.
	out := filepath.Join(t.TempDir(), "out", "hosts.json")
	require.NoError(t, stepio.WriteHosts(out, hosts))
	back, err := stepio.ReadHosts(out)
	require.NoError(t, err)
	assert.Equal(t, hosts, back)
}

// TestAppliedClaimsNothing: a read-only check lists status.applied's hosts and writes
// nothing, though the spec now asks for a node more and one applied host lost its claim by
// hand: Run would claim both (a new host for the new node, the old one back).
func TestAppliedClaimsNothing(t *testing.T) {
	p, bmhs := example(t, "provisioning-by-resources")
	c := newClient(append(bmhs, p)...)
	cr := stepio.CR{Namespace: ns, Name: p.Name}
	hosts, err := Run(context.Background(), c, cr, func(string, ...any) {})
	require.NoError(t, err)
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(p), p))
	p.Status.Applied = &bpav1.AppliedState{Hosts: append(hosts, bpav1.HostStatus{Name: "worker-9", BareMetalHost: "node-gone", IP: "10.0.0.9", Removing: true})}
	p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{"worker-3": nil}) // a scale-out not run yet
	require.NoError(t, c.Update(context.Background(), p))
	b := &metal3v1.BareMetalHost{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "node-07"}, b))
	b.Spec.ConsumerRef, b.Labels = nil, nil
	require.NoError(t, c.Update(context.Background(), b))
	before := claims(t, c)

	var log []string
	got, err := Applied(context.Background(), c, cr, func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) })
	require.NoError(t, err)
	assert.Equal(t, hosts, got, "the applied hosts, without the one being removed")
	assert.Equal(t, before, claims(t, c), "nothing claimed")
	assert.Contains(t, log, "node worker-1: BareMetalHost bpa/node-07 has no claim (spec.consumerRef); this check claims nothing")
	assert.Contains(t, log, "Provisioning provisioning-by-resources: 3 applied nodes, nothing claimed")

	p.Status.Applied = nil
	require.NoError(t, c.Update(context.Background(), p))
	_, err = Applied(context.Background(), c, cr, func(string, ...any) {})
	assert.EqualError(t, err, "Provisioning provisioning-by-resources: status.applied lists no host: the cluster was never built")
}

func TestAnotherClusterCannotTakeClaimedHosts(t *testing.T) {
	p, bmhs := example(t, "provisioning-by-mac")
	bmhs[0].(*metal3v1.BareMetalHost).Labels = map[string]string{bpav1.HostClaimLabel: "cluster-xyz"}
	c := newClient(append(bmhs, p)...)
	_, err := Run(context.Background(), c, stepio.CR{Namespace: ns, Name: p.Name}, func(string, ...any) {})
	assert.EqualError(t, err, `Provisioning provisioning-sample: node master: the host with MAC 00:c6:14:04:61:b2 cannot be used: `+
		`BareMetalHost node-01 is claimed by cluster "cluster-xyz" (label bpa.akraino.org/cluster)`)
	assert.Equal(t, "cluster-xyz", claims(t, c)["bpa/node-01"])
	assert.Empty(t, claims(t, c)["bpa/node-02"], "nothing is claimed when the match fails")
}

func TestBareMetalHostNamespace(t *testing.T) {
	p, bmhs := example(t, "provisioning-kud-plugins")
	p.Spec.BareMetalHostNamespace = "metal3"
	bmhs[0].SetNamespace("metal3")
	c := newClient(append(bmhs, p)...)
	hosts, err := Run(context.Background(), c, stepio.CR{Namespace: ns, Name: p.Name}, func(string, ...any) {})
	require.NoError(t, err)
	assert.Equal(t, []bpav1.HostStatus{{Name: "master-1", Roles: []string{"master", "worker"}, MAC: "00:e1:ba:ce:df:bd", BareMetalHost: "node-09", Etcd: true}}, hosts)
	assert.Equal(t, "cluster-efg Provisioning bpa/sample-kud-plugins", claims(t, c)["metal3/node-09"])
}

// TestClaimConflict: another run labels the host between our list and our patch. The
// patch carries the listed resourceVersion, so it fails instead of stealing the host.
func TestClaimConflict(t *testing.T) {
	p, bmhs := example(t, "provisioning-kud-plugins")
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(bmhs, p)...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			other := &metal3v1.BareMetalHost{}
			require.NoError(t, cl.Get(ctx, client.ObjectKeyFromObject(obj), other))
			other.Labels = map[string]string{bpav1.HostClaimLabel: "cluster-other"}
			require.NoError(t, cl.Update(ctx, other))
			return cl.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	_, err := Run(context.Background(), c, stepio.CR{Namespace: ns, Name: p.Name}, func(string, ...any) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "claiming BareMetalHost bpa/node-09 for Provisioning sample-kud-plugins: it changed since it was listed; the retry matches again")
	assert.Equal(t, "cluster-other", claims(t, c)["bpa/node-09"])
}

func TestNoAssignment(t *testing.T) {
	p, bmhs := example(t, "provisioning-by-resources")
	c := newClient(append(bmhs[1:], p)...) // without node-06, the only SR-IOV host
	_, err := Run(context.Background(), c, stepio.CR{Namespace: ns, Name: p.Name}, func(string, ...any) {})
	require.ErrorIs(t, err, hostmatch.ErrNoAssignment)
	assert.Contains(t, err.Error(), "Provisioning provisioning-by-resources: no assignment of BareMetalHosts satisfies every node: node worker-2")
}

func TestCRErrors(t *testing.T) {
	p, bmhs := example(t, "provisioning-by-mac")
	c := newClient(append(bmhs, p)...)
	for name, tc := range map[string]struct {
		cr   stepio.CR
		want string
	}{
		"changed":   {stepio.CR{Namespace: ns, Name: p.Name, Generation: 2}, "Provisioning provisioning-sample changed since this run started (generation 2, now 3); the controller starts a new run"},
		"no name":   {stepio.CR{Namespace: ns}, "--provisioning is required"},
		"no ns":     {stepio.CR{Name: p.Name}, "--namespace is required (or set POD_NAMESPACE)"},
		"not found": {stepio.CR{Namespace: ns, Name: "nope"}, `reading Provisioning bpa/nope: provisionings.bpa.akraino.org "nope" not found`},
		"other ns":  {stepio.CR{Namespace: "x", Name: p.Name}, "reading Provisioning x/provisioning-sample"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Run(context.Background(), c, tc.cr, func(string, ...any) {})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	unlabelled := p.DeepCopy()
	unlabelled.Name, unlabelled.Labels, unlabelled.ResourceVersion = "unlabelled", nil, ""
	require.NoError(t, c.Create(context.Background(), unlabelled))
	_, err := Run(context.Background(), c, stepio.CR{Namespace: ns, Name: "unlabelled"}, func(string, ...any) {})
	assert.ErrorContains(t, err, "Provisioning unlabelled: metadata.labels.cluster: required")
}

func TestCommandFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "from-env")
	cmd := Command()
	require.NoError(t, cmd.ParseFlags([]string{"--provisioning=p", "--generation=4"}))
	for flag, want := range map[string]string{"namespace": "from-env", "provisioning": "p", "generation": "4", "output": stepio.Out(stepio.HostsFile)} {
		assert.Equal(t, want, cmd.Flag(flag).Value.String(), flag)
	}
	assert.Equal(t, "discover-hosts", cmd.Name())
}

// TestForeignConsumerIsSkippedAndNamed: a host Cluster API's Metal3 provider (or anything
// else) holds through spec.consumerRef is never chosen; when it is the one a node needs,
// the error names the consumer; and the host keeps its consumer.
func TestForeignConsumerIsSkippedAndNamed(t *testing.T) {
	p, bmhs := example(t, "provisioning-by-mac")
	capm3 := &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3Machine", Namespace: ns, Name: "workload-md-0-x"}
	bmhs[0].(*metal3v1.BareMetalHost).Spec.ConsumerRef = capm3
	c := newClient(append(bmhs, p)...)
	var log []string
	_, err := Run(context.Background(), c, stepio.CR{Namespace: ns, Name: p.Name}, func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BareMetalHost node-01 is used by Metal3Machine bpa/workload-md-0-x (spec.consumerRef)")
	assert.Contains(t, log, "BareMetalHost bpa/node-01 skipped: used by Metal3Machine bpa/workload-md-0-x")
	assert.Equal(t, " Metal3Machine bpa/workload-md-0-x", claims(t, c)["bpa/node-01"])
}

// TestLegacyLabelClaimIsAdoptedOnce: a host an earlier BPA claimed with the cluster label
// only gets this Provisioning's consumerRef, with an event, once; the next run finds it
// already claimed.
func TestLegacyLabelClaimIsAdoptedOnce(t *testing.T) {
	p, bmhs := example(t, "provisioning-kud-plugins")
	bmhs[0].(*metal3v1.BareMetalHost).Labels = map[string]string{bpav1.HostClaimLabel: "cluster-efg"}
	c := newClient(append(bmhs, p)...)
	cr := stepio.CR{Namespace: ns, Name: p.Name}
	_, err := Run(context.Background(), c, cr, func(string, ...any) {})
	require.NoError(t, err)
	assert.Equal(t, "cluster-efg Provisioning bpa/sample-kud-plugins", claims(t, c)["bpa/node-09"])
	_, err = Run(context.Background(), c, cr, func(string, ...any) {})
	require.NoError(t, err)
	var events corev1.EventList
	require.NoError(t, c.List(context.Background(), &events))
	require.Len(t, events.Items, 1, "adopted once")
	assert.Equal(t, "AdoptedHostClaim", events.Items[0].Reason)
	assert.Equal(t, p.Name, events.Items[0].InvolvedObject.Name)
}
