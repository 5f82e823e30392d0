package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

const site = "https://artifacts.site:8443"

func index(name string, revision int64, pkgs ...bpav1.PackageVersion) *bpav1.ArtifactIndex {
	return &bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: bpav1.ArtifactIndexStatus{Revision: revision, Packages: pkgs}}
}

func tracking(ns string, items ...bpav1.SoftwareItem) *bpav1.Software {
	return &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sw", Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA, MasterSoftware: []bpav1.SoftwareItem{{Name: "jq", Version: "1.6-2.1"}}, WorkerSoftware: items}}
}

func offlineProvisioning(ns string) *bpav1.Provisioning {
	return &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: site}}, Status: bpav1.ProvisioningStatus{RunStatus: bpav1.RunStatus{Phase: bpav1.PhaseSucceeded}}}
}

func latestOf(t *testing.T, pol Policy, sw *bpav1.Software, objs ...client.Object) (*Latest, error) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, bpav1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return SoftwareLatest(context.Background(), pol, c, sw, "c1")
}

// latest resolves only through the index the BPAPolicy names for the cluster's server, for
// the Software's namespace: another ArtifactIndex (one a rogue server, or anyone who can
// create one, wrote) is never read, nor a server's index outside its namespaces.
func TestSoftwareLatest(t *testing.T) {
	htop := bpav1.SoftwareItem{Name: "htop", Version: bpav1.VersionLatest}
	named := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{{URL: site, Index: "site"}}}}
	objs := []client.Object{offlineProvisioning("a"),
		index("site", 4, bpav1.PackageVersion{Name: "htop", Version: "3.2.2-3"}, bpav1.PackageVersion{Name: "jq", Version: "1.7.1-3"}),
		index("rogue", 9, bpav1.PackageVersion{Name: "htop", Version: "99.0"})}

	l, err := latestOf(t, named, tracking("a", htop), objs...)
	require.NoError(t, err)
	assert.Equal(t, &Latest{Versions: []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-3"}}, Index: "site", Revision: 4}, l,
		"the named index, and only the tracked package: jq is pinned")

	l, err = latestOf(t, named, tracking("a", bpav1.SoftwareItem{Name: "htop"}), objs...)
	assert.Nil(t, l, "nothing tracked")
	assert.NoError(t, err)

	refused := func(pol Policy, sw *bpav1.Software, objs []client.Object, field, msg string) {
		t.Helper()
		_, err := latestOf(t, pol, sw, objs...)
		var r *LatestRefusal
		require.ErrorAs(t, err, &r)
		assert.Equal(t, field, r.Field)
		assert.Contains(t, r.Message, msg)
	}
	unnamed := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{{URL: site}}}}
	refused(unnamed, tracking("a", htop), objs, "spec.workerSoftware[0].htop.version", "BPAPolicy default names no index for artifact server "+site)
	scoped := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{{URL: site, Index: "site", Namespaces: []string{"a"}}}}}
	refused(scoped, tracking("b", htop), append(objs, offlineProvisioning("b")), "spec.workerSoftware[0].htop.version", "is not listed by BPAPolicy default for namespace b")
	refused(named, tracking("a", bpav1.SoftwareItem{Name: "curl"}, htop, bpav1.SoftwareItem{Name: "bpa-tool", Version: bpav1.VersionLatest}), objs,
		"spec.workerSoftware[2].bpa-tool.version", "holds no bpa-tool (ArtifactIndex site revision 4); the run starts when one is uploaded")
	refused(named, tracking("a", htop), []client.Object{offlineProvisioning("a"), index("site", 1, bpav1.PackageVersion{Name: "htop", Version: "-o APT::x"})},
		"spec.workerSoftware[0].htop.version", `gives htop the version "-o APT::x", which is not a Debian version`)
	refused(named, tracking("a", htop), []client.Object{offlineProvisioning("a"), index("site", 0)}, "spec.workerSoftware[0].htop.version", "has recorded nothing in ArtifactIndex site yet")
	refused(named, tracking("a", htop), []client.Object{offlineProvisioning("a")}, "spec.workerSoftware[0].htop.version", "ArtifactIndex site, which BPAPolicy default names for artifact server "+site+", does not exist")
}
