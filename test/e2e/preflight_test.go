package e2e

import (
	"bytes"
	"sort"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// ---- scenario l: the preflight before an upgrade, and an upgrade that stops safely ----
//
// The cluster "pf" (one master, two workers, nodes pfm1, pfw1, pfw2) is built at Kubernetes
// 1.30.4 and asked for 1.31.4:
//
//  1. with 1 GiB free on pfw1 (the simulated host's df): the preflight step fails naming
//     disk-space and the host, the CR is Stalled PreflightFailed, kubespray never ran and no
//     node changed, and the controller starts nothing more by itself;
//  2. with the disk freed and the rerun annotation: the preflight passes and the upgrade
//     runs, but pfw2's kubelet stays at 1.30.4 (the test sets it back as soon as the
//     SIMULATED upgrade bumped it, as a kubelet that came back on the old binary would):
//     verify fails at once with NodeNotUpgraded naming pfw2, ran once (not retried), and
//     status.applied still says 1.30.4.

const pfBase = 190

func (e *env) scenarioPreflight(t *testing.T) {
	d := e.newDay2(t)
	var bmhs []metal3v1.BareMetalHost
	entry := func(name string) bpav1.NodeEntry {
		n := pfBase + len(bmhs)
		h, mac := d.dayTwoHost("pf-"+name, n)
		d.hosts[name] = h
		bmhs = append(bmhs, h)
		return bpav1.NodeEntry{name: {MACAddress: mac}}
	}
	d.p = &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "pf", Labels: map[string]string{"cluster": "pf"}},
		Spec: bpav1.ProvisioningSpec{
			Masters:    []bpav1.NodeEntry{entry("pfm1")},
			Workers:    []bpav1.NodeEntry{entry("pfw1"), entry("pfw2")},
			Kubernetes: &bpav1.KubernetesConfig{Version: "1.30.4"},
			Kubespray:  &bpav1.KubesprayConfig{Version: "v2.28.0"},
		},
	}
	e.AddHosts(e.ctx, bmhs)
	e.create(t, d.p)
	e.waitPhase(t, d.p.Name, bpav1.PhaseSucceeded)

	t.Run("a failed check stalls, names itself, and touches nothing", d.failedPreflight)
	t.Run("a node that does not come back stops the upgrade", d.nodeNotBack)
}

func (d *day2) machine(name string) interface{ SetFreeDisk(int64) } {
	return d.Machine(d.hosts[name].Status.HardwareDetails.NIC[0].IP)
}

func (d *day2) failedPreflight(t *testing.T) {
	d.machine("pfw1").SetFreeDisk(1 << 30)
	t.Cleanup(func() { d.machine("pfw1").SetFreeDisk(-1) })
	before, logs := len(d.kubesprayRuns(t)), d.hostLogs(t)

	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.Kubernetes.Version = "1.31.4" })
	assert.Contains(t, plan, "Step 2/3 preflight: check before the upgrade", "bpa plan shows the preflight step, after the snapshot")
	failed := d.waitGeneration(t, p.Generation, bpav1.PhaseFailed)

	stalled := findCondition(failed.Status.Conditions, bpav1.ConditionStalled)
	require.NotNil(t, stalled)
	assert.Equal(t, bpav1.ReasonPreflightFailed, stalled.Reason)
	assert.Equal(t, bpav1.ReasonPreflightFailed, findCondition(failed.Status.Conditions, bpav1.ConditionReady).Reason, "Ready says why too")
	assert.Contains(t, stalled.Message, "check disk-space failed: host pfw1: 1Gi free on /")
	assert.Contains(t, stalled.Message, "nothing was changed")
	assert.NotContains(t, stalled.Message, "check etcd", "the other checks passed")
	assert.Empty(t, d.runsSince(t, before), "kubespray never ran")
	assert.Empty(t, d.touched(t, logs), "no host changed")
	d.assertKubelets(t, "v1.30.4")
	assert.Equal(t, "1.30.4", failed.Status.Applied.KubernetesVersion)

	// `bpa describe` shows the failed check.
	cmd := cli.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"describe", "provisioning", p.Name, "--kubeconfig", d.Rig.Kubeconfig, "-n", d.Namespace})
	require.NoError(t, cmd.ExecuteContext(d.ctx))
	assert.Regexp(t, "(?m)^│ [├└]─preflight +Failed", out.String())
	assert.Contains(t, out.String(), bpav1.ReasonPreflightFailed)
	assert.Contains(t, out.String(), "check disk-space failed")

	// It ran once, and nothing re-runs it: no retry, no second Workflow.
	wfs := d.workflowsOf(t, bpav1.ProvisioningNameLabel, p.Name)
	time.Sleep(10 * time.Second)
	assert.Len(t, d.workflowsOf(t, bpav1.ProvisioningNameLabel, p.Name), len(wfs), "the controller started no other run")
	wf := latest(wfs)
	assert.Equal(t, 1, pods(wf, translator.StepPreflight), "the preflight ran once")
	assert.Zero(t, pods(wf, translator.StepUpgrade), "the upgrade never started")
}

func (d *day2) nodeNotBack(t *testing.T) {
	before := len(d.kubesprayRuns(t))
	// pfw2's kubelet comes back at the old release, once the upgrade has bumped it.
	stop := make(chan struct{})
	reverted := make(chan struct{})
	go d.revertKubelet("pfw2", "v1.31.4", "v1.30.4", stop, reverted)
	defer close(stop)

	p := &bpav1.Provisioning{}
	require.NoError(t, d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, p))
	p.Annotations = map[string]string{bpav1.RerunAnnotation: "after-freeing-disk"}
	require.NoError(t, d.Client.Update(d.ctx, p))
	start := time.Now()
	failed := &bpav1.Provisioning{}
	// A run, then verify's grace for a node left behind (90 s) on top.
	d.waitWithin(t, runTimeout+2*time.Minute, failed, d.p.Name, func() bool {
		c := findCondition(failed.Status.Conditions, bpav1.ConditionStalled)
		return c != nil && c.Reason == bpav1.ReasonNodeNotUpgraded
	}, "Stalled "+bpav1.ReasonNodeNotUpgraded)
	t.Logf("NodeNotUpgraded %v after the rerun", time.Since(start).Round(time.Second))
	select {
	case <-reverted:
	default:
		t.Fatal("the kubelet was never set back")
	}

	stalled := findCondition(failed.Status.Conditions, bpav1.ConditionStalled)
	assert.Contains(t, stalled.Message, `node pfw2: kubelet "v1.30.4", want v1.31.4`)
	assert.Contains(t, stalled.Message, "is not retried")
	assert.Contains(t, stalled.Message, "journalctl -u kubelet")
	assert.NotContains(t, stalled.Message, "pfw1")
	assert.Equal(t, []string{"upgrade-cluster"}, d.runsSince(t, before), "the preflight passed and the upgrade ran once")
	assert.Equal(t, "1.30.4", failed.Status.Applied.KubernetesVersion, "an upgrade counts once verify saw every node back")

	// verify's last attempt found the node behind, and none followed it. (An attempt before
	// it may have failed for what passes, an SSH blip on a loaded machine, say: those are
	// retried, as they should be.)
	wf := latest(d.workflowsOf(t, bpav1.ProvisioningNameLabel, d.p.Name))
	attempts := podsOf(wf, translator.StepVerify)
	for _, a := range attempts {
		t.Logf("verify attempt %s: %s %s", a.StartedAt.Format(time.TimeOnly), a.Phase, a.Message)
	}
	require.NotEmpty(t, attempts)
	assert.Contains(t, attempts[len(attempts)-1].Message, bpav1.ReasonNodeNotUpgraded+":", "verify's last attempt")
	assert.Equal(t, wfv1.WorkflowFailed, wf.Status.Phase, "and the run ended there, without another")
	assert.Equal(t, 1, pods(wf, translator.StepUpgrade), "the upgrade ran once")
}

// revertKubelet waits until node reports kubelet to, then sets it back to from, once.
func (d *day2) revertKubelet(node, to, from string, stop <-chan struct{}, done chan<- struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		n, err := d.app.CoreV1().Nodes().Get(d.ctx, node, metav1.GetOptions{})
		if err != nil || n.Status.NodeInfo.KubeletVersion != to {
			continue
		}
		n.Status.NodeInfo.KubeletVersion = from
		if _, err := d.app.CoreV1().Nodes().UpdateStatus(d.ctx, n, metav1.UpdateOptions{}); err == nil {
			close(done)
			return
		}
	}
}

// latest is the newest Workflow of a list.
func latest(wfs []wfv1.Workflow) *wfv1.Workflow {
	var out *wfv1.Workflow
	for i := range wfs {
		if out == nil || out.CreationTimestamp.Before(&wfs[i].CreationTimestamp) {
			out = &wfs[i]
		}
	}
	return out
}

// pods counts the pods a Workflow ran for task (its retries included).
func pods(wf *wfv1.Workflow, task string) int { return len(podsOf(wf, task)) }

// podsOf are the pod nodes a Workflow ran for task (its retries included), oldest first.
func podsOf(wf *wfv1.Workflow, task string) []wfv1.NodeStatus {
	var out []wfv1.NodeStatus
	for _, node := range wf.Status.Nodes {
		name, _, _ := strings.Cut(node.DisplayName, "(")
		if node.Type == wfv1.NodeTypePod && name == task {
			out = append(out, node)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(&out[j].StartedAt) })
	return out
}
