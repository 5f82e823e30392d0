package lookup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

func TestLookupWritesTheControllersParameters(t *testing.T) {
	p := &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", Generation: 4, Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.ProvisioningSpec{
			Masters: []bpav1.NodeEntry{{"m1": nil}},
			Leases: &bpav1.LeaseSource{Type: bpav1.LeaseSourceISC, HostPath: "/var/lib/dhcp/dhcpd.leases",
				NodeSelector: map[string]bpav1.LabelValue{"kubernetes.io/hostname": "dhcp-1"}},
			SSH: &bpav1.SSHConfig{SecretName: "keys", User: "ubuntu", Port: 2222},
		},
	}
	pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: bpav1.BPAPolicySpec{
		Namespaces: []bpav1.NamespaceGrant{{Names: []string{"ns"}, LeaseHostPaths: []string{"/var/lib/dhcp/dhcpd.leases"}}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, pol, sshSecret("keys", "c1")).Build()
	dir := t.TempDir()
	require.NoError(t, options{namespace: "ns", provisioning: "p1", outputDir: dir}.run(context.Background(), c))

	// The controller's parameters, and the plan of the run (a first creation here), which
	// the template's steps and slots read.
	want, err := translator.AdHocParameters(p, translator.Options{})
	require.NoError(t, err)
	require.Len(t, want, len(translator.AdHocParameterNames()))
	for _, name := range translator.AdHocParameterNames() {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Equal(t, want[name], string(got), name)
	}
	controllers, err := translator.ProvisioningParameters(p)
	require.NoError(t, err)
	for k, v := range controllers {
		assert.Equal(t, v, want[k], k)
	}
	assert.Equal(t, "true", want["step-run-kubespray"])
	assert.Equal(t, "false", want["step-reconfigure"])
	assert.Equal(t, "true", want["leases-from-file"])
	assert.Equal(t, "c1", want["cluster"])
	assert.Equal(t, "4", want["generation"])
	assert.Equal(t, "ISC", want["lease-source"])
	assert.Equal(t, "keys", want["ssh-secret"])
	assert.Equal(t, `{"nodeSelector":{"kubernetes.io/hostname":"dhcp-1"}}`, want["lease-pod-spec-patch"])
}

func sshSecret(name, cluster string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{bpav1.ClusterNameLabel: cluster}}}
}

// An ad-hoc run (`argo submit --from workflowtemplate/...`) is refused exactly where the
// controller would refuse a run: it gets nothing a controller run would not.
func TestLookupAppliesTheControllersChecks(t *testing.T) {
	p := func(mutate func(*bpav1.Provisioning)) *bpav1.Provisioning {
		p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", UID: "u1", Labels: map[string]string{"cluster": "c1"},
			CreationTimestamp: metav1.Now()}, Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}}}
		mutate(p)
		return p
	}
	older := p(func(p *bpav1.Provisioning) {
		p.Name, p.UID = "p0", "u0"
		p.CreationTimestamp = metav1.NewTime(p.CreationTimestamp.Add(-time.Hour))
	})
	for name, tc := range map[string]struct {
		objs []client.Object
		want string
	}{
		"lease file not granted": {[]client.Object{sshSecret("c1-ssh", "c1"), p(func(p *bpav1.Provisioning) {
			p.Spec.Leases = &bpav1.LeaseSource{Type: bpav1.LeaseSourceISC, HostPath: "/etc/kubernetes/admin.conf"}
		})}, "spec.leases.hostPath: Forbidden: /etc/kubernetes/admin.conf is not allowed"},
		"host namespace not granted": {[]client.Object{sshSecret("c1-ssh", "c1"), p(func(p *bpav1.Provisioning) { p.Spec.BareMetalHostNamespace = "other" })},
			"spec.bareMetalHostNamespace: Forbidden"},
		"insecure host keys not granted": {[]client.Object{sshSecret("c1-ssh", "c1"), p(func(p *bpav1.Provisioning) {
			p.Spec.SSH = &bpav1.SSHConfig{InsecureIgnoreHostKey: true}
		})}, "spec.ssh.insecureIgnoreHostKey: Forbidden"},
		"another cluster's kubeconfig as the SSH Secret": {[]client.Object{sshSecret("c9-kubeconfig", "c9"), p(func(p *bpav1.Provisioning) {
			p.Spec.SSH = &bpav1.SSHConfig{SecretName: "c9-kubeconfig"}
		})}, `Secret c9-kubeconfig is labelled bpa.akraino.org/cluster="c9", not c1`},
		"cluster held by another Provisioning": {[]client.Object{sshSecret("c1-ssh", "c1"), older, p(func(*bpav1.Provisioning) {})},
			"cluster c1 is held by Provisioning p0"},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objs...).Build()
			err := options{namespace: "ns", provisioning: "p1", outputDir: t.TempDir()}.run(context.Background(), c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// The plan task of an ad-hoc run looks the CR up again under the cluster's mutex: a CR that
// moved to another cluster meanwhile, or whose change is refused, runs nothing.
func TestLookupRefusesWhatTheRunCannotDo(t *testing.T) {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.30.4"}},
		Status: bpav1.ProvisioningStatus{Applied: &bpav1.AppliedState{KubernetesVersion: "1.31.4",
			Hosts: []bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}, Etcd: true}}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, sshSecret("c1-ssh", "c1")).WithStatusSubresource(p).Build()
	err := options{namespace: "ns", provisioning: "p1", cluster: "c0", outputDir: t.TempDir()}.run(context.Background(), c)
	require.EqualError(t, err, "Provisioning ns/p1 now belongs to cluster c1, not c0, whose lock this run holds: submit the run again")
	err = options{namespace: "ns", provisioning: "p1", cluster: "c1", outputDir: t.TempDir()}.run(context.Background(), c)
	require.ErrorContains(t, err, "spec.kubernetes.version: the cluster runs Kubernetes 1.31.4; 1.30.4 is older")
}

func TestLookupFailsClearly(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	err := options{namespace: "ns", provisioning: "missing", outputDir: t.TempDir()}.run(context.Background(), c)
	require.ErrorContains(t, err, "reading Provisioning ns/missing")
	err = options{namespace: "ns", outputDir: t.TempDir()}.run(context.Background(), c)
	require.ErrorContains(t, err, "exactly one of")
}

// An ad-hoc run gets the CA the site policy gives its artifact server, as the controller's
// Workflow does, and is refused, naming spec.offline.url, for a server the policy does not
// list for its namespace, and naming the caBundle for a CA that may vouch for any name.
func TestLookupWritesThePolicysCA(t *testing.T) {
	ca := nodetrusttest.NewCA(t, []string{"artifacts"}).PEM
	pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: bpav1.BPAPolicySpec{
		ArtifactServers: []bpav1.ArtifactServer{{URL: "https://artifacts:8443", CABundle: "\n" + string(ca)},
			{URL: "https://tenant-b:8443", CABundle: string(nodetrusttest.NewCA(t, []string{"tenant-b"}).PEM), Namespaces: []string{"b"}},
			{URL: "https://wide:8443", CABundle: string(nodetrusttest.Unconstrained(t).PEM)}}}}
	for url, want := range map[string]string{"https://artifacts:8443": string(ca), "https://elsewhere:8443": "", "https://tenant-b:8443": "",
		"https://wide:8443": "BPAPolicy default spec.artifactServers[2].caBundle: certificate 1 (CN=BPA test unconstrained CA): no X.509 name constraints"} {
		p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", Labels: map[string]string{"cluster": "c1"}},
			Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, Offline: &bpav1.OfflineConfig{URL: url}}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, pol, sshSecret("c1-ssh", "c1")).Build()
		dir := t.TempDir()
		err := options{namespace: "ns", provisioning: "p1", outputDir: dir}.run(context.Background(), c)
		if !strings.HasPrefix(want, "-----BEGIN") {
			if want == "" {
				want = "PolicyViolation: spec.offline.url: Forbidden: " + url + " is not allowed by BPAPolicy default (spec.artifactServers[].url for namespace ns: https://artifacts:8443, https://wide:8443)"
			}
			require.ErrorContains(t, err, want)
			assert.NoFileExists(t, filepath.Join(dir, "artifacts-ca"))
			continue
		}
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, "artifacts-ca"))
		require.NoError(t, err)
		assert.Equal(t, want, string(got), url)
	}
}

// An ad-hoc Software run gets the apt repository the controller's Workflow would: the server
// of its cluster's Provisioning that succeeded, with the admin's key and CA; and is refused,
// naming spec.aptSource, where the site gives that server no key.
func TestLookupWritesTheSoftwaresAptRepo(t *testing.T) {
	ca, key, p := offlineCluster(t)
	sw := &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA, MasterSoftware: []bpav1.SoftwareItem{{Name: "jq"}}}}
	for aptKey, want := range map[string]string{string(key): "", "": "spec.aptSource: BPAPolicy default gives artifact server https://artifacts:8443 no aptKey"} {
		pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: bpav1.BPAPolicySpec{
			ArtifactServers: []bpav1.ArtifactServer{{URL: "https://artifacts:8443", CABundle: ca, AptKey: aptKey}}}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, sw, pol, sshSecret("c1-ssh", "c1")).WithStatusSubresource(p).Build()
		dir := t.TempDir()
		err := options{namespace: "ns", software: "s1", outputDir: dir}.run(context.Background(), c)
		if want != "" {
			require.ErrorContains(t, err, want)
			continue
		}
		require.NoError(t, err)
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err, name)
			return string(b)
		}
		assert.Equal(t, "https://artifacts:8443", read("apt-url"))
		assert.Equal(t, ca, read("artifacts-ca"))
		assert.Contains(t, read("apt-key"), "-----BEGIN PGP PUBLIC KEY BLOCK-----")
		for _, name := range translator.SoftwareParameterNames() {
			read(name)
		}
	}
}

// An ad-hoc run of a Software tracking latest gets the newest versions from the index the
// BPAPolicy names for the cluster's server, as the controller's runs do, and visits every
// host.
func TestSoftwareLatest(t *testing.T) {
	ca, key, p := offlineCluster(t)
	sw := &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA, MasterSoftware: []bpav1.SoftwareItem{{Name: "htop", Version: "latest"}, {Name: "jq", Version: "1.6-2.1"}}}}
	pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: bpav1.BPAPolicySpec{
		ArtifactServers: []bpav1.ArtifactServer{{URL: "https://artifacts:8443", CABundle: ca, AptKey: string(key), Index: "site"}}}}
	idx := &bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: "site"}, Status: bpav1.ArtifactIndexStatus{Revision: 2,
		Packages: []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-3"}, {Name: "jq", Version: "1.7.1-3"}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, sw, pol, idx, sshSecret("c1-ssh", "c1")).Build()
	dir := t.TempDir()
	require.NoError(t, options{namespace: "ns", software: "s1", outputDir: dir}.run(context.Background(), c))
	for name, want := range map[string]string{"latest": "htop=3.2.2-3", "scope": "all"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), name)
	}
}

// offlineCluster is a CA and an apt key the site admin could list for an artifact server,
// and a Provisioning of cluster c1 that succeeded with that server as spec.offline.url.
func offlineCluster(t *testing.T) (ca string, key []byte, p *bpav1.Provisioning) {
	ca = string(nodetrusttest.NewCA(t, []string{"artifacts"}).PEM)
	_, public := artifactstest.AptKey(t)
	key, err := os.ReadFile(public)
	require.NoError(t, err)
	p = &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", Labels: map[string]string{"cluster": "c1"}},
		Spec:   bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, Offline: &bpav1.OfflineConfig{URL: "https://artifacts:8443"}},
		Status: bpav1.ProvisioningStatus{RunStatus: bpav1.RunStatus{Phase: bpav1.PhaseSucceeded}}}
	return ca, key, p
}
