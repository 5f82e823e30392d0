package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestSitePolicyOnTheAPIServer: what the admin's BPAPolicy grants a namespace is admitted
// there and nowhere else; tightening it later refuses new specs but never blocks the
// metadata updates (finalizers, labels) the controller makes on CRs admitted before.
func TestSitePolicyOnTheAPIServer(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallAdmissionPolicy(ctx, r.RESTConfig))
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)

	ca := func(host string) string { return string(nodetrusttest.NewCA(t, []string{host}).PEM) }
	grant := func(images ...string) {
		require.NoError(t, bpatest.CreatePolicy(ctx, r.RESTConfig, &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: bpav1.BPAPolicySpec{KubesprayImages: images,
				Namespaces: []bpav1.NamespaceGrant{{Names: []string{r.Namespace}, BareMetalHostNamespaces: []string{"metal3"}}},
				// One server for every namespace, one for this test's namespace only.
				ArtifactServers: []bpav1.ArtifactServer{{URL: "https://site:8443", CABundle: ca("site")},
					{URL: "https://tenant-a:8443", CABundle: ca("tenant-a"), Namespaces: []string{r.Namespace}}}}}))
	}
	prov := func(name, image string) *bpav1.Provisioning {
		return &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace, Labels: map[string]string{"cluster": name}},
			Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m": nil}}, BareMetalHostNamespace: "metal3",
				Kubespray: &bpav1.KubesprayConfig{Image: image}}}
	}
	grant("quay.io/kubespray/kubespray", "registry.site/kubespray")
	// The params are read asynchronously: wait until the grant admits.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return c.Create(ctx, prov("granted", "registry.site/kubespray")) == nil, nil
	}), "the granted image and host namespace were never admitted")

	err = c.Create(ctx, prov("other-image", "registry.evil/kubespray"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.kubespray.image: Forbidden: registry.evil/kubespray is not allowed by BPAPolicy default")

	// spec.offline.url: only a listed server, and a scoped one only in its namespaces.
	offline := func(name, ns, url string) *bpav1.Provisioning {
		p := prov(name, "quay.io/kubespray/kubespray")
		p.Namespace, p.Spec.BareMetalHostNamespace, p.Spec.Offline = ns, "", &bpav1.OfflineConfig{URL: url}
		return p
	}
	require.NoError(t, c.Create(ctx, offline("site-server", r.Namespace, "https://site:8443")))
	require.NoError(t, c.Create(ctx, offline("own-server", r.Namespace, "https://tenant-a:8443")))
	err = c.Create(ctx, offline("probe", r.Namespace, "https://169.254.169.254"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.offline.url: Forbidden: https://169.254.169.254 is not allowed by BPAPolicy default (spec.artifactServers[].url for namespace "+r.Namespace+")")
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}))
	require.NoError(t, c.Create(ctx, offline("site-server", "tenant-b", "https://site:8443")), "an entry without namespaces is for every namespace")
	err = c.Create(ctx, offline("others-server", "tenant-b", "https://tenant-a:8443"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.offline.url: Forbidden: https://tenant-a:8443 is not allowed by BPAPolicy default (spec.artifactServers[].url for namespace tenant-b)")

	// The admin's CA goes into every node's trust store: one that may vouch for any name
	// (no name constraints, here the second certificate of a bundle) is refused, naming the
	// field. Before, the apiserver took it and every program on the nodes trusted it.
	wide := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{
		{URL: "https://site:8443", CABundle: ca("site") + string(nodetrusttest.Unconstrained(t).PEM)}}}}
	err = bpatest.CreatePolicy(ctx, r.RESTConfig, wide)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.artifactServers[0].caBundle: Invalid value: \"string\": every certificate must carry X.509 name constraints")

	grant() // tightened: the default image only, still metal3
	attempt := 0
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		attempt++ // a probe admitted before the policy changed must not be mistaken for a refusal
		err := c.Create(ctx, prov(fmt.Sprintf("probe-%d", attempt), "registry.site/kubespray"))
		return err != nil && strings.Contains(err.Error(), "Forbidden"), nil
	}), "the tightened policy never took effect")

	p := &bpav1.Provisioning{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: "granted"}, p))
	p.Finalizers = append(p.Finalizers, "bpa.akraino.org/finalizer")
	p.Labels["owner"] = "c2"
	require.NoError(t, c.Update(ctx, p), "metadata of a CR admitted before is still writable")
	p.Spec.PodSubnet = "10.244.64.0/18"
	err = c.Update(ctx, p)
	require.Error(t, err, "a new spec is judged by the policy in force")
	assert.Contains(t, err.Error(), "spec.kubespray.image: Forbidden")

	// Another namespace has no grant: its hosts must come from its own namespace.
	other := prov("tenant-b", "quay.io/kubespray/kubespray")
	other.Namespace = "tenant-b"
	err = c.Create(ctx, other)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.bareMetalHostNamespace: Forbidden: metal3 is not allowed by BPAPolicy default")
}
