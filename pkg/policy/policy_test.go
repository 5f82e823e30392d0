package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

func prov(ns string, mutate func(*bpav1.ProvisioningSpec)) *bpav1.Provisioning {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
	mutate(&p.Spec)
	return p
}

// The defaults grant nothing; a grant applies to the namespaces it names only, and grants
// naming one namespace add up.
func TestGrantsAreByNamespace(t *testing.T) {
	pol := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{Namespaces: []bpav1.NamespaceGrant{
		{Names: []string{"a", "b"}, BareMetalHostNamespaces: []string{"metal3"}},
		{Names: []string{"a"}, LeaseHostPaths: []string{"/var/lib/dhcp/dhcpd.leases"}, AllowInsecureHostKey: true, AllowReboot: true},
	}}}
	assert.True(t, pol.RebootAllowed("a"))
	assert.False(t, pol.RebootAllowed("b"), "a grant to a, not b, added to b's other grant")
	assert.False(t, Default().RebootAllowed("a"))
	everything := func(s *bpav1.ProvisioningSpec) {
		s.BareMetalHostNamespace = "metal3"
		s.Leases = &bpav1.LeaseSource{Type: bpav1.LeaseSourceISC, HostPath: "/var/lib/dhcp/dhcpd.leases"}
		s.SSH = &bpav1.SSHConfig{InsecureIgnoreHostKey: true}
	}
	assert.Empty(t, pol.CheckProvisioning(prov("a", everything)))
	errs := pol.CheckProvisioning(prov("b", everything))
	assert.Len(t, errs, 2)
	assert.Equal(t, "spec.leases.hostPath", errs[0].Field)
	assert.Contains(t, errs[0].Error(), "is not allowed by BPAPolicy default (spec.namespaces[].leaseHostPaths for namespace b: none)")
	assert.Equal(t, "spec.ssh.insecureIgnoreHostKey", errs[1].Field)
	assert.Len(t, Default().CheckProvisioning(prov("a", everything)), 3)
	assert.Empty(t, Default().CheckProvisioning(prov("a", func(s *bpav1.ProvisioningSpec) { s.BareMetalHostNamespace = "a" })),
		"a Provisioning's own namespace needs no grant")
}

func TestImages(t *testing.T) {
	withImage := func(img string) *bpav1.Provisioning {
		return prov("a", func(s *bpav1.ProvisioningSpec) { s.Kubespray = &bpav1.KubesprayConfig{Image: img} })
	}
	assert.Empty(t, Default().CheckProvisioning(withImage("quay.io/kubespray/kubespray")))
	assert.Len(t, Default().CheckProvisioning(withImage("quay.io/kubespray/kubespray-evil")), 1)
	site := Policy{Spec: bpav1.BPAPolicySpec{KubesprayImages: []string{"registry.site/kubespray"}}}
	assert.Len(t, site.CheckProvisioning(withImage("quay.io/kubespray/kubespray")), 1, "a list replaces the default")
	assert.Empty(t, site.CheckProvisioning(withImage("registry.site/kubespray")))
}

// spec.offline.url names a server the BPAPolicy lists for the CR's namespace, or nothing:
// the step and the nodes fetch from it, so any other URL is a probe of the CR author's
// choosing. An entry scoped to other namespaces grants nothing, CA included.
func TestOfflineURLMustBeListed(t *testing.T) {
	ca := "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	pol := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{
		{URL: "https://site:8443", CABundle: ca},
		{URL: "https://tenant-a:8443", CABundle: ca, Namespaces: []string{"a"}},
	}}}
	offline := func(ns, url string) *bpav1.Provisioning {
		return prov(ns, func(s *bpav1.ProvisioningSpec) { s.Offline = &bpav1.OfflineConfig{URL: url} })
	}
	assert.Empty(t, pol.CheckProvisioning(offline("a", "https://site:8443")), "no namespaces: every namespace")
	assert.Empty(t, pol.CheckProvisioning(offline("b", "https://site:8443")))
	assert.Empty(t, pol.CheckProvisioning(offline("a", "https://tenant-a:8443")))
	for _, p := range []*bpav1.Provisioning{
		offline("b", "https://tenant-a:8443"),
		offline("a", "https://169.254.169.254"),
		offline("a", "https://site:8444"),
	} {
		errs := pol.CheckProvisioning(p)
		require.Len(t, errs, 1, p.Spec.Offline.URL)
		assert.Equal(t, "spec.offline.url", errs[0].Field)
		assert.Contains(t, errs[0].Error(), p.Spec.Offline.URL+" is not allowed by BPAPolicy default (spec.artifactServers[].url for namespace "+p.Namespace+":")
	}
	errs := Default().CheckProvisioning(offline("a", "https://site:8443"))
	require.Len(t, errs, 1, "without a BPAPolicy no artifact server is allowed")
	assert.Contains(t, errs[0].Error(), "spec.artifactServers[].url for namespace a: none")

	got, err := pol.ArtifactsCA(offline("b", "https://tenant-a:8443"))
	require.NoError(t, err)
	assert.Empty(t, got, "an entry for other namespaces gives b's nodes no CA")
	assert.Equal(t, []string{"https://site:8443"}, pol.ArtifactServers("b"))
}

// The holder is the oldest live Provisioning of the cluster; a deleted one holds nothing.
func TestHolder(t *testing.T) {
	at := func(name string, age time.Duration, deleting bool) bpav1.Provisioning {
		p := bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1e9, 0)}
		}
		return p
	}
	assert.Nil(t, Holder(nil))
	assert.Equal(t, "old", Holder([]bpav1.Provisioning{at("new", 0, false), at("old", time.Hour, false)}).Name)
	assert.Equal(t, "new", Holder([]bpav1.Provisioning{at("new", 0, false), at("old", time.Hour, true)}).Name)
	assert.Equal(t, "a", Holder([]bpav1.Provisioning{at("b", 0, false), at("a", 0, false)}).Name, "same second: by name")
	p := at("new", 0, false)
	r := CheckHolder(&p, "c1", []bpav1.Provisioning{at("old", time.Hour, false)})
	assert.Equal(t, bpav1.ReasonClusterHeldByOther, r.Reason)
	assert.Nil(t, CheckHolder(&p, "c1", []bpav1.Provisioning{p}))
}

// The CA a Provisioning's nodes get is the admin's entry for exactly its spec.offline.url,
// re-encoded; none otherwise; and a bundle that is not certificates, or holds a CA that may
// vouch for more than the entry's server (issue 26 item 7: the nodes' whole OS trust store
// takes it), is refused naming the entry, by the run (ArtifactsCA) and by lint (CheckPolicy).
func TestArtifactsCA(t *testing.T) {
	ca := nodetrusttest.NewCA(t, []string{"artifacts"}).PEM
	pol := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{
		{URL: "https://other:8443", CABundle: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
		{URL: "https://artifacts:8443", CABundle: strings.ReplaceAll(string(ca), "\n", "\r\n")},
		{URL: "https://wide:8443", CABundle: string(nodetrusttest.Unconstrained(t).PEM)},
		{URL: "https://elsewhere:8443", CABundle: string(ca)},
	}}}
	offline := func(url string) *bpav1.Provisioning {
		return prov("a", func(s *bpav1.ProvisioningSpec) { s.Offline = &bpav1.OfflineConfig{URL: url} })
	}
	got, err := pol.ArtifactsCA(offline("https://artifacts:8443"))
	require.NoError(t, err)
	assert.Equal(t, string(ca), got)
	for _, p := range []*bpav1.Provisioning{offline("https://artifacts:9443"), prov("a", func(*bpav1.ProvisioningSpec) {})} {
		got, err := pol.ArtifactsCA(p)
		require.NoError(t, err)
		assert.Empty(t, got)
	}
	_, err = pol.ArtifactsCA(offline("https://other:8443"))
	assert.ErrorContains(t, err, "BPAPolicy default spec.artifactServers[0].caBundle: certificate 1:")
	_, err = pol.ArtifactsCA(offline("https://wide:8443"))
	assert.ErrorContains(t, err, "BPAPolicy default spec.artifactServers[2].caBundle: certificate 1 (CN=BPA test unconstrained CA): no X.509 name constraints")
	_, err = pol.ArtifactsCA(offline("https://elsewhere:8443"))
	assert.ErrorContains(t, err, "BPAPolicy default spec.artifactServers[3].caBundle: certificate 1 (CN=BPA test artifact server CA): its name constraints ")
	assert.ErrorContains(t, err, "do not permit the artifact server's host elsewhere")
	errs := CheckPolicy(&pol.Spec)
	require.Len(t, errs, 3)
	for i, want := range []string{"spec.artifactServers[0].caBundle", "spec.artifactServers[2].caBundle", "spec.artifactServers[3].caBundle"} {
		assert.Equal(t, want, errs[i].Field)
	}
}

func TestAptRepo(t *testing.T) {
	ca := func(host string) string { return string(nodetrusttest.NewCA(t, []string{host}).PEM) }
	_, public := artifactstest.AptKey(t)
	key, err := os.ReadFile(public)
	require.NoError(t, err)
	pol := Policy{Source: "BPAPolicy default", Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{
		{URL: "https://nokey:8443", CABundle: ca("nokey")},
		{URL: "https://artifacts:8443", CABundle: ca("artifacts"), AptKey: string(key)},
		{URL: "https://badkey:8443", CABundle: ca("badkey"), AptKey: "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n"},
	}}}
	sw := &bpav1.Software{Spec: bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA}}
	offline := func(url string) *bpav1.Provisioning {
		return prov("a", func(s *bpav1.ProvisioningSpec) { s.Offline = &bpav1.OfflineConfig{URL: url} })
	}
	repo, err := pol.AptRepo(sw, offline("https://artifacts:8443"))
	require.NoError(t, err)
	assert.Equal(t, "https://artifacts:8443", repo.URL)
	assert.Equal(t, pol.Spec.ArtifactServers[1].CABundle, repo.CA)
	assert.Contains(t, repo.Key, "-----BEGIN PGP PUBLIC KEY BLOCK-----")

	none, err := pol.AptRepo(&bpav1.Software{}, offline("https://artifacts:8443"))
	require.NoError(t, err)
	assert.Nil(t, none, "no aptSource, no repository")
	for want, p := range map[string]*bpav1.Provisioning{
		"has no spec.offline.url":                                   prov("a", func(*bpav1.ProvisioningSpec) {}),
		"gives artifact server https://nokey:8443 no aptKey":        offline("https://nokey:8443"),
		"gives artifact server https://unlisted:8443 no aptKey":     offline("https://unlisted:8443"),
		"spec.artifactServers[2].aptKey: not an OpenPGP public key": offline("https://badkey:8443"),
	} {
		_, err := pol.AptRepo(sw, p)
		assert.ErrorContains(t, err, want)
	}
	_, err = pol.AptRepo(sw, nil)
	assert.ErrorContains(t, err, "has no spec.offline.url")
	errs := CheckPolicy(&pol.Spec)
	require.Len(t, errs, 1)
	assert.Equal(t, "spec.artifactServers[2].aptKey", errs[0].Field)

	// The CA that comes with the repository is held to the same scope.
	pol.Spec.ArtifactServers[1].CABundle = string(nodetrusttest.Unconstrained(t).PEM)
	_, err = pol.AptRepo(sw, offline("https://artifacts:8443"))
	assert.ErrorContains(t, err, "BPAPolicy default spec.artifactServers[1].caBundle: certificate 1 (CN=BPA test unconstrained CA): no X.509 name constraints")
}
