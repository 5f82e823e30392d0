package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

// ---- scenario k: an air-gapped site ----
//
// A real bpa serve holds every file and image kubespray v2.28.0 fetches for Kubernetes
// 1.32.5 (tiny stand-ins, uploaded with tus and pushed with go-containerregistry). Its
// certificate comes from a CA name-constrained to its address, which no trust store holds.
//   - The server must be listed in the BPAPolicy for spec.offline.url to be admitted. Listed
//     with a CA that did not sign its certificate, the run fails ON THE HOSTS: the SIMULATED
//     kubespray fetches with each host's curl and trust store, which reject the server
//     (the kubespray container is made to trust it, so the pre-flight passes and only the
//     nodes' trust is tested).
//   - With the admin's right caBundle, run-kubespray installs the CA on every
//     host (the real update-ca-certificates, in each host's own store) and trusts it for
//     the pre-flight; every host fetches every file and image manifest.
//   - A rerun installs nothing again. A Software installs a package only the server's signed
//     apt repository has (offlineSoftware). With one file deleted, the next run fails before
//     touching a host, naming it.
func (e *env) scenarioOffline(t *testing.T) {
	signing, public := artifactstest.AptKey(t)
	url, ca, up := artifactstest.Server(e.ctx, t, e.Rig, func(o *artifacts.Options) { o.AptSigningKey = signing })
	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	artifactstest.Upload(e.ctx, t, up, d.Files, d.Images)

	e.SetKubesprayEnv("SSL_CERT_FILE=" + e.File("offline-ca.crt", ca))
	// The admin lists the server in the site's BPAPolicy (config/ ships one), first with a
	// CA that did not sign its certificate.
	e.addArtifactServer(t, bpav1.ArtifactServer{URL: url, CABundle: e.otherCA(t)})
	p := e.newCluster(t, "offline", 250, 1, 1)
	p.Spec.Offline = &bpav1.OfflineConfig{URL: url}
	p.Spec.Kubernetes = &bpav1.KubernetesConfig{Version: "1.32.5"}
	e.create(t, p)
	failed := e.waitPhase(t, p.Name, bpav1.PhaseFailed)
	assert.Regexp(t, `fatal: \[(m|w)1\]: .*could not be fetched from \S+/files on (m|w)1.*SSL certificate problem: unable to get local issuer certificate`, failed.Status.Message)
	e.SetKubesprayEnv()

	// Now with the CA that signed it.
	e.editArtifactServer(t, url, func(s *bpav1.ArtifactServer) { s.CABundle = string(ca) })
	// A rerun is a Workflow of its own: wait for it before its phase (the last one's may be
	// the same).
	rerun := func(why string, phase bpav1.RunPhase) *bpav1.Provisioning {
		require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(p), p))
		last := p.Status.Workflow.Name
		p.Annotations = map[string]string{bpav1.RerunAnnotation: why}
		require.NoError(t, e.Client.Update(e.ctx, p))
		e.waitFor(t, p, p.Name, func() bool { return p.Status.Workflow != nil && p.Status.Workflow.Name != last }, "the rerun's Workflow")
		return e.waitPhase(t, p.Name, phase)
	}
	got := rerun("with-ca", bpav1.PhaseSucceeded)
	logs := e.argoLogs(t, got.Status.Workflow.Name)
	assertLogLines(t, logs, "run-kubespray",
		`offline: the artifact server \S+ holds all 23 artifacts kubespray v2.28.0 downloads`,
		`artifact server CA: installed on m1 `, `artifact server CA: installed on w1 `,
		`artifact server CA \(1 certificates\): installed on 2 hosts, already current on 0, failed on 0`,
		`offline: 2 hosts downloaded every file and image manifest \(\d+ bytes\) from \S+/files`)
	for _, ip := range []string{e.HostIP(250), e.HostIP(251)} {
		data, err := os.ReadFile(e.Machine(ip).File(nodetrust.Path))
		require.NoError(t, err)
		assert.Equal(t, string(ca), string(data), ip)
	}

	got = rerun("again", bpav1.PhaseSucceeded)
	assertLogLines(t, e.argoLogs(t, got.Status.Workflow.Name), "run-kubespray",
		`artifact server CA \(1 certificates\): installed on 0 hosts, already current on 2, failed on 0`)
	e.offlineSoftware(t, p, url, up, public)

	require.NoError(t, up.Remove(e.ctx, d.Files[0]))
	failed = rerun("after-delete", bpav1.PhaseFailed)
	assert.Contains(t, failed.Status.Message, "lacks 1 of the 23 artifacts")
	assert.Contains(t, failed.Status.Message, d.Files[0])
	e.deleteAndCheckCleanup(t, failed)
}

// offlineSoftware: a Software from the server's signed apt repository (issue 15 item 5).
// Without the admin's aptKey it is Stalled naming spec.aptSource and nothing runs; with it,
// every host gets BPA's source and key, its apt-get update checks the server's InRelease
// with the real gpgv, and the package built here with dpkg-deb and pushed with tus is
// installed at its version.
func (e *env) offlineSoftware(t *testing.T, p *bpav1.Provisioning, url string, up *artifacts.Client, publicKey string) {
	dir := t.TempDir()
	root := filepath.Join(dir, "bpa-offline-tool")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte("Package: bpa-offline-tool\nVersion: 1.2-1\n"+
		"Architecture: all\nMaintainer: BPA tests <bpa@example.org>\nDescription: a package only the artifact server has\n"), 0o644))
	out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, root+".deb").CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, err = up.Push(e.ctx, root+".deb", "deb.example.org/pool/b/bpa-offline-tool_1.2-1_all.deb")
	require.NoError(t, err)

	tool := []bpav1.SoftwareItem{{Name: "bpa-offline-tool"}}
	sw := &bpav1.Software{
		ObjectMeta: metav1.ObjectMeta{Name: "offline", Namespace: e.Namespace, Labels: map[string]string{"cluster": p.Labels["cluster"]}},
		Spec:       bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA, MasterSoftware: tool, WorkerSoftware: tool, SSH: &bpav1.SSHConfig{Port: int32(e.SSH.Port)}},
	}
	require.NoError(t, e.Client.Create(e.ctx, sw))
	got := &bpav1.Software{}
	var stalled *metav1.Condition
	e.waitFor(t, got, sw.Name, func() bool {
		stalled = meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionStalled)
		return stalled != nil && stalled.Status == metav1.ConditionTrue
	}, "Stalled")
	assert.Contains(t, stalled.Message, "spec.aptSource: BPAPolicy default gives artifact server "+url+" no aptKey")
	assert.Nil(t, got.Status.Workflow, "nothing ran")

	key, err := os.ReadFile(publicKey)
	require.NoError(t, err)
	e.editArtifactServer(t, url, func(s *bpav1.ArtifactServer) { s.AptKey = string(key) })
	got = e.waitSoftware(t, sw.Name, 1, "")
	for _, ip := range []string{e.HostIP(250), e.HostIP(251)} {
		m := e.Machine(ip)
		assert.Equal(t, "1.2-1", m.Packages()["bpa-offline-tool"], ip)
		src, err := os.ReadFile(m.File(bpav1.AptSourcePath))
		require.NoError(t, err, ip)
		assert.Contains(t, string(src), "URIs: "+url+"/apt/\n", ip)
	}
	require.NoError(t, e.Client.Delete(e.ctx, sw))
	e.waitGone(t, sw)
}

// otherCA is a CA for the artifact server's address (as the policy requires: name-constrained
// to it) that signed nothing the test serves.
func (e *env) otherCA(t *testing.T) string {
	return string(nodetrusttest.NewCA(t, nil, e.Rig.ServiceAddress()).PEM)
}
