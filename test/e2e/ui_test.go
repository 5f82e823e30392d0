package e2e

import (
	"context"
	"encoding/json"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
)

// ---- scenario u: BPA's runs in Argo's own web UI ----
//
// Argo's web UI (built from the pinned Argo sources into bin/argo-ui and embedded in
// bin/argo), served by `argo server` on the lane's site, driven in Debian's chromium with
// playwright-core (ui.cjs). Screenshots go to bin/ui-screenshots.

// requireUI fails (never skips) when what the test needs was not built: on such a machine
// the UI is untested, which is a failure with a reason.
func requireUI(t *testing.T, root string) (playwright string) {
	// The line hack/build-tools.sh said when it could not build the UI, or what to run.
	if why := rig.ArgoUIMissing(filepath.Join(root, "bin")); why != "" {
		t.Fatal(why)
	}
	if _, err := os.Stat(filepath.Join(root, "bin/playwright/node_modules/playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed (bin/playwright/node_modules/playwright-core missing): run hack/build-tools.sh playwright, " +
			"which needs Node.js >= 20 (hack/deps.sh --ui says what is missing)")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatalf("no chromium on PATH: run hack/deps.sh --ui")
	}
	return filepath.Join(root, "bin/playwright/node_modules")
}

func (e *env) scenarioArgoUI(t *testing.T) {
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	modules := requireUI(t, root)
	shots := filepath.Join(root, "bin", "ui-screenshots")
	require.NoError(t, os.MkdirAll(shots, 0o755))

	site := e.Site
	// Three runs (provision, a failed rerun, its retry) with runTimeout each.
	ctx, cancel := context.WithTimeout(e.ctx, 3*runTimeout)
	defer cancel()
	ui, err := site.Rig.StartArgoServer(ctx, 0)
	require.NoError(t, err)
	assertLoopbackOnly(t, ui)
	workflows := ui + "/workflows/" + site.Namespace

	browse := func(mode, url, shot string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "node", append([]string{"ui.cjs", mode, url, filepath.Join(shots, shot)}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		out, err := cmd.Output()
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		require.NoError(t, err, "ui.cjs %s %s: %s", mode, url, stderr)
		return string(out)
	}

	// The example's hosts, which scenario a added to this lane's site (and released after
	// each example); added here when the scenario runs alone.
	hosts, err := hostmatch.ReadBareMetalHostsFile(filepath.Join(root, "examples/bmh/provisioning-mac-and-resources.yaml"))
	require.NoError(t, err)
	if err := site.Client.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: hosts[0].Name}, &metal3v1.BareMetalHost{}); apierrors.IsNotFound(err) {
		e.addExampleHosts(t)
	}
	path := filepath.Join(root, "examples/provisioning-mac-and-resources.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	docs, problems := validation.ValidateFile(ctx, path, data)
	require.Empty(t, problems)
	p := docs[0].Object.(*bpav1.Provisioning)
	p.Namespace = site.Namespace
	p.Spec.SSH = &bpav1.SSHConfig{Port: int32(site.SSH.Port)}
	site.CreateSSHSecret(ctx, p.Labels["cluster"])
	require.NoError(t, site.Client.Create(ctx, p))
	done := waitPhaseOther(t, site, p.Name, bpav1.PhaseSucceeded, "")

	// The succeeded run: the DAG's six steps, each shown Succeeded.
	var graph struct {
		Nodes []struct {
			Label   string
			Classes []string
		}
	}
	out := browse("inspect", workflows+"/"+done.Status.Workflow.Name, "provisioning-succeeded.png")
	require.NoError(t, json.Unmarshal([]byte(out), &graph), out)
	phases := map[string]string{}
	for _, n := range graph.Nodes {
		phases[n.Label] = strings.Join(n.Classes, " ")
	}
	for _, step := range translator.ProvisioningSteps {
		assert.Equal(t, "Succeeded", phases[step], "step %s in the UI (nodes: %v)", step, phases)
	}
	assert.Equal(t, "Succeeded", phases[done.Status.Workflow.Name], "the DAG itself")

	// The log tab of run-kubespray, the first thing a user opens when a step fails, shows
	// the step's output: (SIMULATED) kubespray's recap.
	wf := &wfv1.Workflow{}
	require.NoError(t, site.Client.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: done.Status.Workflow.Name}, wf))
	var podNode string
	for id, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePod && strings.HasPrefix(n.DisplayName, "run-kubespray") {
			podNode = id
		}
	}
	require.NotEmpty(t, podNode, "run-kubespray's pod node")
	out = browse("logs", workflows+"/"+wf.Name+"?tab=workflow&nodeId="+podNode+"&sidePanel=logs:"+podNode+":main", "provisioning-logs.png", "PLAY RECAP")
	var logs struct {
		Found bool
		Bytes int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &logs), out)
	assert.True(t, logs.Found, "the log tab shows run-kubespray's output (%d bytes received)", logs.Bytes)

	// A failed run (kubespray fails), retried from the UI: the CR goes back to Running
	// on the same Workflow, then succeeds.
	require.NoError(t, os.WriteFile(site.FailFile, nil, 0o644))
	require.NoError(t, site.Client.Get(ctx, client.ObjectKeyFromObject(p), p))
	p.Annotations = map[string]string{bpav1.RerunAnnotation: "ui"}
	require.NoError(t, site.Client.Update(ctx, p))
	failed := waitPhaseOther(t, site, p.Name, bpav1.PhaseFailed, done.Status.Workflow.Name)
	require.NoError(t, os.Remove(site.FailFile))
	out = browse("inspect", workflows+"/"+failed.Status.Workflow.Name, "provisioning-failed.png")
	require.NoError(t, json.Unmarshal([]byte(out), &graph), out)
	failedPhases := map[string]string{}
	for _, n := range graph.Nodes {
		failedPhases[n.Label] = strings.Join(n.Classes, " ")
	}
	// The rerun of a built cluster is planned as one operation, reconfigure (cluster.yml on
	// every host), after its etcd snapshot.
	assert.Equal(t, "Failed", failedPhases[translator.StepReconfigure], "nodes: %v", failedPhases)
	assert.Equal(t, "Succeeded", failedPhases[translator.StepBackupEtcd], "the etcd snapshot before it: %v", failedPhases)

	browse("retry", workflows+"/"+failed.Status.Workflow.Name, "provisioning-retried.png")
	running := waitPhaseOther(t, site, p.Name, bpav1.PhaseRunning, "")
	assert.Equal(t, failed.Status.Workflow.Name, running.Status.Workflow.Name, "retried in place")
	again := waitPhaseOther(t, site, p.Name, bpav1.PhaseSucceeded, "")
	assert.Equal(t, failed.Status.Workflow.Name, again.Status.Workflow.Name)
	browse("inspect", workflows+"/"+again.Status.Workflow.Name, "provisioning-after-retry.png")
}

// assertLoopbackOnly: argo server in server auth mode acts as the rig's admin for any
// caller, so it must not answer on the machine's other addresses.
func assertLoopbackOnly(t *testing.T, url string) {
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		ip, ok := a.(*net.IPNet)
		if !ok || ip.IP.IsLoopback() || ip.IP.IsLinkLocalUnicast() {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.IP.String(), u.Port()), time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "argo server answers on %s", ip.IP)
	}
}

// waitPhaseOther waits until the Provisioning has phase (on a Workflow other than
// notWorkflow, when given), polling often enough to see a short Running: the cache
// (Base.Reader), which costs the apiserver nothing however often it is read.
func waitPhaseOther(t *testing.T, site *sim.Site, name string, phase bpav1.RunPhase, notWorkflow string) *bpav1.Provisioning {
	t.Helper()
	p := &bpav1.Provisioning{}
	// runTimeout, as every other wait for a run: three minutes, once the limit here, was
	// less than a 2-core CI machine needs for a run while the rest of make test runs beside.
	deadline := time.Now().Add(runTimeout)
	for {
		err := site.Reader.Get(context.Background(), client.ObjectKey{Namespace: site.Namespace, Name: name}, p)
		if err == nil && p.Status.Phase == phase && p.Status.Workflow != nil && p.Status.Workflow.Name != notWorkflow {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %s (now %s: %s; error %v)", name, phase, p.Status.Phase, p.Status.Message, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
