package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// ---- scenario n: the latest package versions (issue 32) ----
//
// scenarioLatest: a new package version uploaded reaches the hosts that need it, with
// no CR edit.
//
// A real bpa serve records its signed apt repository in ArtifactIndex bpa-artifacts, as
// config/serve's ServiceAccount with config/serve's role; the BPAPolicy names that index for
// the server. On an offline cluster of three hosts, a Software tracks bpa-tool
// (`version: latest`) and pins bpa-pinned, both packages built here with dpkg-deb and pushed
// with tus; w2 already has a newer bpa-tool than the first upload.
//   - The first run installs bpa-tool 1.0-1 on m1 and w1 and leaves w2's newer one alone.
//   - Uploading bpa-tool 1.0-2 starts one run by itself, for m1 and w1 only: w2 (recorded
//     with 1.0-3) is not contacted at all (its stand-in logs no call). The reason shows in
//     the conditions, the RunStarted event, status.trigger and `bpa describe`.
//   - Uploading bpa-pinned 2.0-2, after a controller restart, starts nothing: the pinned
//     item is never touched by an upload, and the restart replays nothing.
//   - A node joining gets the newest bpa-tool.
//   - The REST status shows each step: per host, installed and target version, and whether
//     they differ.
func (e *env) scenarioLatest(t *testing.T) {
	ctx, site := e.ctx, e.Site

	// The artifact server, recording its repository as config/serve deploys it.
	require.NoError(t, e.Client.Create(ctx, &bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: "bpa-artifacts"}}))
	signing, public := artifactstest.AptKey(t)
	url, ca, up := artifactstest.Server(ctx, t, e.Rig, func(o *artifacts.Options) {
		server := artifactstest.ServerClient(ctx, t, e.Rig, scheme.New())
		o.AptSigningKey, o.Index, o.IndexClient, o.Status = signing, "bpa-artifacts", server, server
	})
	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	artifactstest.Upload(ctx, t, up, d.Files, d.Images)
	e.SetKubesprayEnv("SSL_CERT_FILE=" + e.File("latest-ca.crt", ca))
	key, err := os.ReadFile(public)
	require.NoError(t, err)
	e.addArtifactServer(t, bpav1.ArtifactServer{URL: url, CABundle: string(ca), AptKey: string(key), Index: "bpa-artifacts"})

	p := e.newCluster(t, "latest", 200, 1, 2)
	p.Spec.Offline = &bpav1.OfflineConfig{URL: url}
	p.Spec.Kubernetes = &bpav1.KubernetesConfig{Version: "1.32.5"}
	e.create(t, p)
	prov := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	machines := map[string]*simhost.Host{}
	for _, h := range prov.Status.Hosts {
		machines[h.Name] = e.Machine(h.IP)
	}
	// w2 has a newer bpa-tool than any upload yet (installed by other means).
	w2 := machines["w2"].Packages()
	w2["bpa-tool"] = "1.0-3"
	machines["w2"].SetPackages(w2)

	push := func(name, version string) {
		t.Helper()
		_, err := up.Push(ctx, debPackage(t, name, version), fmt.Sprintf("deb.example.org/pool/%s_%s_all.deb", name, version))
		require.NoError(t, err)
	}
	push("bpa-tool", "1.0-1")
	push("bpa-pinned", "2.0-1")
	e.waitIndex(t, map[string]string{"bpa-tool": "1.0-1", "bpa-pinned": "2.0-1"})

	sw := &bpav1.Software{
		ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: e.Namespace, Labels: map[string]string{"cluster": "latest"}},
		Spec: bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA, SSH: &bpav1.SSHConfig{Port: int32(e.SSH.Port)},
			MasterSoftware: []bpav1.SoftwareItem{{Name: "bpa-tool", Version: bpav1.VersionLatest}, {Name: "bpa-pinned", Version: "2.0-1"}},
			WorkerSoftware: []bpav1.SoftwareItem{{Name: "bpa-tool", Version: bpav1.VersionLatest}, {Name: "bpa-pinned", Version: "2.0-1"}}},
	}
	require.NoError(t, e.Client.Create(ctx, sw))
	got := e.waitSoftware(t, sw.Name, 1, "")
	first := got.Status.Workflow.Name
	assert.Equal(t, []bpav1.PackageVersion{{Name: "bpa-tool", Version: "1.0-1"}}, got.Status.Latest)
	e.assertPackages(t, machines, map[string]string{"m1": "1.0-1", "w1": "1.0-1", "w2": "1.0-3"})
	for _, c := range installCalls(machines["w2"]) {
		assert.NotContains(t, strings.Join(c.Args, " "), "bpa-tool", "w2 has a newer bpa-tool: latest never downgrades")
	}
	e.assertREST(t, url, ca, map[string][2]string{"m1": {"1.0-1", "1.0-1"}, "w1": {"1.0-1", "1.0-1"}, "w2": {"1.0-3", "1.0-1"}})

	// The second version: one run by itself, for the hosts whose recorded version is older.
	for _, m := range machines {
		m.ResetCalls()
	}
	push("bpa-tool", "1.0-2")
	e.waitFor(t, got, sw.Name, func() bool {
		failed(t, got)
		return got.Status.Workflow.Name != first && got.Status.Phase == bpav1.PhaseSucceeded
	}, "a run for bpa-tool 1.0-2")
	assert.Equal(t, int64(1), got.Generation, "no CR edit")
	assert.Equal(t, "bpa-tool 1.0-2 uploaded", got.Status.Trigger)
	assert.Contains(t, readyMessage(got), "bpa-tool 1.0-2 uploaded: Workflow "+got.Status.Workflow.Name)
	e.waitEvent(t, sw.Name, "RunStarted", "Started Workflow "+got.Status.Workflow.Name+" for generation 1: bpa-tool 1.0-2 uploaded")
	e.assertPackages(t, machines, map[string]string{"m1": "1.0-2", "w1": "1.0-2", "w2": "1.0-3"})
	for _, name := range []string{"m1", "w1"} {
		installs := installCalls(machines[name])
		require.Len(t, installs, 1, name)
		assert.Equal(t, []string{"install", "-y", "--no-install-recommends", "bpa-tool=1.0-2"}, installs[0].Args, "%s: the tracked package only, and no --allow-downgrades", name)
	}
	assert.Empty(t, machines["w2"].Calls(), "w2 is not contacted: its recorded bpa-tool is newer")
	require.Len(t, got.Status.HostSoftware, 3, "w2 keeps the record of its last run")
	e.assertREST(t, url, ca, map[string][2]string{"m1": {"1.0-2", "1.0-2"}, "w1": {"1.0-2", "1.0-2"}, "w2": {"1.0-3", "1.0-2"}})
	out := describeSoftware(t, e, sw.Name)
	assert.Regexp(t, `Trigger +bpa-tool 1.0-2 uploaded`, out)
	assert.Regexp(t, `m1 +`+regexp.QuoteMeta(e.HostIP(200))+` +Succeeded +[0-9]+[smh] +changed, bpa-tool 1.0-2`, out)

	// After a controller restart, an upload of the pinned package: the index changes, the
	// Software sees it (its indexRevision catches up), and nothing runs.
	site.StopController(false)
	site.StartController()
	runs := len(e.workflowsOf(t, bpav1.SoftwareNameLabel, sw.Name))
	push("bpa-pinned", "2.0-2")
	idx := e.waitIndex(t, map[string]string{"bpa-tool": "1.0-2", "bpa-pinned": "2.0-2"})
	e.waitFor(t, got, sw.Name, func() bool { return got.Status.IndexRevision == idx.Status.Revision }, "the Software to see the index")
	assert.Len(t, e.workflowsOf(t, bpav1.SoftwareNameLabel, sw.Name), runs, "a pinned item is not touched by an upload, and a restart replays nothing")
	for name, m := range machines {
		assert.Equal(t, "2.0-1", m.Packages()["bpa-pinned"], name)
	}

	// A node joins: it gets the newest version.
	w3 := e.StartMachine("latest-w3", e.HostIP(209))
	e.CreateSSHSecret(ctx, "latest")
	cm := &corev1.ConfigMap{}
	require.NoError(t, e.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: "latest-configmap"}, cm))
	cm.Data["WORKER_w3"] = e.HostIP(209)
	require.NoError(t, e.Client.Update(ctx, cm))
	got = e.waitSoftware(t, sw.Name, 1, got.Status.NodesHash)
	machines["w3"] = w3
	e.assertPackages(t, machines, map[string]string{"m1": "1.0-2", "w1": "1.0-2", "w2": "1.0-3", "w3": "1.0-2"})
	assert.Equal(t, "2.0-1", w3.Packages()["bpa-pinned"])
	e.assertREST(t, url, ca, map[string][2]string{"m1": {"1.0-2", "1.0-2"}, "w1": {"1.0-2", "1.0-2"}, "w2": {"1.0-3", "1.0-2"}, "w3": {"1.0-2", "1.0-2"}})

	// Drift put back: w1's kubelet and its pinned package.
	e.assertDriftPutBack(t, p.Name, sw.Name, "w1", machines["w1"], "bpa-pinned")
}

// debPackage builds an (empty) Debian package with the real dpkg-deb.
func debPackage(t *testing.T, name, version string) string {
	root := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte("Package: "+name+"\nVersion: "+version+"\n"+
		"Architecture: all\nMaintainer: BPA tests <bpa@example.org>\nDescription: a package only the artifact server has\n"), 0o644))
	out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, root+".deb").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return root + ".deb"
}

// waitIndex waits until the server has recorded these newest versions.
func (e *env) waitIndex(t *testing.T, want map[string]string) *bpav1.ArtifactIndex {
	t.Helper()
	idx := &bpav1.ArtifactIndex{}
	deadline := time.Now().Add(runTimeout)
	for {
		err := e.Reader.Get(e.ctx, client.ObjectKey{Name: "bpa-artifacts"}, idx)
		got := map[string]string{}
		for _, p := range idx.Status.Packages {
			got[p.Name] = p.Version
		}
		if err == nil && assert.ObjectsAreEqual(want, got) {
			return idx
		}
		require.True(t, time.Now().Before(deadline), "ArtifactIndex: want %v, have %v (%v)", want, got, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// assertPackages checks each host's bpa-tool, as its stand-in dpkg records it.
func (e *env) assertPackages(t *testing.T, machines map[string]*simhost.Host, want map[string]string) {
	t.Helper()
	for name, v := range want {
		assert.Equal(t, v, machines[name].Packages()["bpa-tool"], name)
	}
}

// assertREST reads bpa serve's status endpoint for the cluster as a site operator: each
// host's bpa-tool, installed and target, and whether they differ.
func (e *env) assertREST(t *testing.T, url string, ca []byte, want map[string][2]string) {
	t.Helper()
	token := artifactstest.Token(e.ctx, t, e.Rig, "status-reader", "cluster-admin")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, url+"/api/v1/status/"+e.Namespace+"/latest", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	t.Logf("GET /api/v1/status/%s/latest: hosts %s", e.Namespace, hostsJSON(body))
	var st artifacts.ClusterStatus
	require.NoError(t, json.Unmarshal(body, &st))
	got := map[string][2]string{}
	for _, h := range st.Hosts {
		require.Equal(t, "tools", h.Software)
		require.Len(t, h.Packages, 1, "the tracked package only: %+v", h)
		pk := h.Packages[0]
		assert.Equal(t, "bpa-tool", pk.Name)
		assert.Equal(t, pk.Installed != pk.Target, pk.Differs, h.Host)
		got[h.Host] = [2]string{pk.Installed, pk.Target}
	}
	assert.Equal(t, want, got, "REST status: host -> [installed, target]")
}

// waitEvent waits for an event of the controller's about a Software.
func (e *env) waitEvent(t *testing.T, name, reason, message string) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		list := &corev1.EventList{}
		require.NoError(t, e.Reader.List(e.ctx, list, client.InNamespace(e.Namespace)))
		var seen []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name == name && ev.Reason == reason {
				if ev.Message == message {
					return
				}
				seen = append(seen, ev.Message)
			}
		}
		require.True(t, time.Now().Before(deadline), "no %s event %q; seen %q", reason, message, seen)
		time.Sleep(100 * time.Millisecond)
	}
}

func readyMessage(sw *bpav1.Software) string {
	for _, c := range sw.Status.Conditions {
		if c.Type == bpav1.ConditionReady {
			return c.Message
		}
	}
	return ""
}

func failed(t *testing.T, sw *bpav1.Software) {
	t.Helper()
	if sw.Status.Phase == bpav1.PhaseFailed || sw.Status.Phase == bpav1.PhaseError {
		t.Fatalf("Software %s: %s", sw.Status.Phase, sw.Status.Message)
	}
}

func describeSoftware(t *testing.T, e *env, name string) string {
	t.Helper()
	cmd := cli.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"describe", "software", name, "--kubeconfig", e.Rig.Kubeconfig, "-n", e.Namespace})
	require.NoError(t, cmd.ExecuteContext(e.ctx))
	t.Logf("bpa describe software %s:\n%s", name, out.String())
	return strings.TrimSpace(out.String()) + "\n"
}

// hostsJSON is the "hosts" part of a status response, for the log.
func hostsJSON(body []byte) string {
	var st struct {
		Hosts json.RawMessage `json:"hosts"`
	}
	_ = json.Unmarshal(body, &st)
	return string(st.Hosts)
}
