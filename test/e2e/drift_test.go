package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/steps/checkdrift"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// driftTaint is the taint the test adds by hand, as an operator might.
var driftTaint = corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// detectDrift turns spec.driftCheck on for the built cluster and changes it by hand in the
// application cluster: a taint added on a worker, the control-plane role label removed from
// the master. Drifted turns True naming both, with one event, and False once they are
// reverted. The checks wrote nothing: the application apiserver's audit log holds only
// get/list/watch from check-drift's user agent, and over SSH the stand-ins saw only its
// reads. It logs the step's time and API calls per check.
func (d *day2) detectDrift(t *testing.T) {
	start := time.Now()
	p := &bpav1.Provisioning{}
	d.waitGeneration(t, d.currentGeneration(t), bpav1.PhaseSucceeded)
	auditFrom := fileSize(t, d.App.AuditLog)
	calls := d.machineCalls()
	runs := len(d.kubesprayRuns(t))
	edited, _ := d.edit(t, func(p *bpav1.Provisioning) {
		p.Spec.DriftCheck = &bpav1.DriftCheck{Interval: metav1.Duration{Duration: time.Minute}}
	})
	d.waitGeneration(t, edited.Generation, bpav1.PhaseSucceeded)
	assert.Equal(t, runs, len(d.kubesprayRuns(t)), "turning the check on runs nothing on the cluster")

	drifted := func(status metav1.ConditionStatus) *metav1.Condition {
		t.Helper()
		var c *metav1.Condition
		d.waitWithin(t, 6*time.Minute, p, d.p.Name, func() bool {
			c = meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionDrifted)
			return c != nil && c.Status == status
		}, "Drifted "+string(status))
		return c
	}
	c := drifted(metav1.ConditionFalse)
	assert.Equal(t, bpav1.ReasonNoDrift, c.Reason, c.Message)

	var master, worker string
	for _, h := range p.Status.Applied.Hosts {
		if slices.Contains(h.Roles, "master") {
			master = h.Name
		} else if worker == "" || h.Name < worker {
			worker = h.Name
		}
	}
	d.changeNode(t, worker, func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, driftTaint) })
	d.changeNode(t, master, func(n *corev1.Node) { delete(n.Labels, clusterdrift.ControlPlaneLabel) })
	c = drifted(metav1.ConditionTrue)
	want := []string{
		"node " + master + ": role control-plane missing (label node-role.kubernetes.io/control-plane)",
		"node " + worker + ": taint example.com/maintenance=true:NoSchedule not applied by BPA",
	}
	slices.Sort(want) // as the step lists them
	assert.Equal(t, bpav1.ReasonDriftFound, c.Reason)
	assert.Equal(t, "2 fields differ from what BPA applied: "+strings.Join(want, "; "), c.Message)
	assert.Equal(t, want, p.Status.Drift.Fields)
	d.waitEvent(t, d.p.Name, bpav1.EventDriftFound, c.Message)

	d.changeNode(t, worker, func(n *corev1.Node) {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == driftTaint.Key })
	})
	d.changeNode(t, master, func(n *corev1.Node) {
		if n.Labels == nil { // it was the Node's only label
			n.Labels = map[string]string{}
		}
		n.Labels[clusterdrift.ControlPlaneLabel] = ""
	})
	c = drifted(metav1.ConditionFalse)
	assert.Equal(t, bpav1.ReasonNoDrift, c.Reason, c.Message)

	// The check is turned off while one runs, before its resolve-leases: that check's
	// Provisioning changed under it, and it ends at once (its steps exit 3, which they never
	// retry). Retried, it held every later check back for its steps' 15 minutes.
	stale := d.runningDriftCheck(t)
	// Not d.edit: its `bpa plan` would let the check reach resolve-leases first.
	off := &bpav1.Provisioning{}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.Client.Get(d.ctx, client.ObjectKeyFromObject(d.p), off); err != nil {
			return err
		}
		off.Spec.DriftCheck = nil
		return d.Client.Update(d.ctx, off)
	}))
	d.waitGeneration(t, off.Generation, bpav1.PhaseSucceeded)
	checks := d.finishedDriftChecks(t)
	assertEndedAtOnce(t, checks, stale)
	d.assertReadOnly(t, auditFrom, calls, len(checks))
	d.logDriftCost(t, checks, len(p.Status.Applied.Hosts))
	t.Logf("drift detection added %s to the scenario", time.Since(start).Round(time.Second))
}

func (d *day2) currentGeneration(t *testing.T) int64 {
	p := &bpav1.Provisioning{}
	require.NoError(t, d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, p))
	return p.Generation
}

// changeNode changes a Node of the application cluster by hand.
func (d *day2) changeNode(t *testing.T, name string, change func(*corev1.Node)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := d.app.CoreV1().Nodes().Get(d.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = d.app.CoreV1().Nodes().Update(d.ctx, n, metav1.UpdateOptions{})
		return err
	}))
}

// runningDriftCheck waits for a drift check of the cluster that has not reached
// resolve-leases yet, and names it.
func (d *day2) runningDriftCheck(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // a check a minute
	for {
		for _, wf := range d.cachedWorkflowsOf(t, bpav1.DriftCheckOfLabel, d.p.Name) {
			if wf.Status.Phase == wfv1.WorkflowRunning && wf.Status.Nodes.FindByDisplayName("resolve-leases") == nil {
				return wf.Name
			}
		}
		require.True(t, time.Now().Before(deadline), "no drift check started")
		time.Sleep(50 * time.Millisecond)
	}
}

// assertEndedAtOnce checks that the drift check named stale, whose Provisioning changed
// while it ran, failed at the first of its steps that read the Provisioning after the
// change, in one attempt.
func assertEndedAtOnce(t *testing.T, checks []wfv1.Workflow, stale string) {
	t.Helper()
	i := slices.IndexFunc(checks, func(wf wfv1.Workflow) bool { return wf.Name == stale })
	require.GreaterOrEqual(t, i, 0, "drift check %s is kept", stale)
	wf := checks[i]
	assert.Equal(t, wfv1.WorkflowFailed, wf.Status.Phase, stale)
	var stopped []string
	for _, n := range wf.Status.Nodes {
		if n.Type != wfv1.NodeTypeRetry || n.Phase != wfv1.NodeFailed {
			continue
		}
		stopped = append(stopped, n.DisplayName)
		assert.Contains(t, []string{"resolve-leases", "render-inventory"}, n.DisplayName, "%s: %s", stale, n.Message)
		require.Len(t, n.Children, 1, "%s: %s ran once, not retried", stale, n.DisplayName)
		assert.Contains(t, wf.Status.Nodes[n.Children[0]].Message, "changed since this run started", stale)
	}
	assert.Len(t, stopped, 1, "%s stopped at one step", stale)
}

// finishedDriftChecks are the cluster's drift checks that ended, waiting for a running one.
func (d *day2) finishedDriftChecks(t *testing.T) []wfv1.Workflow {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		wfs := d.workflowsOf(t, bpav1.DriftCheckOfLabel, d.p.Name)
		if !slices.ContainsFunc(wfs, func(wf wfv1.Workflow) bool { return !wf.Status.Phase.Completed() }) {
			return wfs
		}
		require.True(t, time.Now().Before(deadline), "a drift check never ended")
		time.Sleep(time.Second)
	}
}

// machineCalls are the stand-in calls each of the cluster's machines recorded so far.
func (d *day2) machineCalls() map[string]int {
	out := map[string]int{}
	for name, m := range d.clusterMachines() {
		out[name] = len(m.Calls())
	}
	return out
}

func (d *day2) clusterMachines() map[string]*simhost.Host {
	out := map[string]*simhost.Host{}
	for name, h := range d.hosts {
		if len(h.Status.HardwareDetails.NIC) > 0 {
			if m := d.Machine(h.Status.HardwareDetails.NIC[0].IP); m != nil {
				out[name] = m
			}
		}
	}
	return out
}

// auditEvent is what the test reads of an audit log line.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
}

// assertReadOnly: since auditFrom, check-drift's requests to the application apiserver are
// get, list or watch; since calls, the stand-ins on the machines saw only check-drift's
// reads: `cat` of admin.conf and `dpkg-query -W`.
func (d *day2) assertReadOnly(t *testing.T, auditFrom int64, calls map[string]int, checks int) {
	t.Helper()
	f, err := os.Open(d.App.AuditLog)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(auditFrom, 0)
	require.NoError(t, err)
	var requests []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		if !strings.HasPrefix(ev.UserAgent, checkdrift.UserAgent) {
			continue
		}
		requests = append(requests, ev.Verb+" "+ev.RequestURI)
		assert.Contains(t, []string{"get", "list", "watch"}, ev.Verb, "check-drift wrote: %s %s", ev.Verb, ev.RequestURI)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, requests, "check-drift's requests are in the audit log")
	t.Logf("check-drift: %d requests to the application apiserver in %d checks: %v", len(requests), checks, uniq(requests))
	// The reads check-drift runs: admin.conf on the first master, and dpkg-query where a
	// Software wants packages (as root a session runs them without sudo; cat is no stand-in).
	sudo := []string{"-n", "--"}
	reads := [][]string{append(slices.Clone(sudo), "cat", "--", "/etc/kubernetes/admin.conf"), append(slices.Clone(sudo), software.QueryCommand()...)}
	for name, m := range d.clusterMachines() {
		for _, c := range m.Calls()[calls[name]:] {
			read := (c.Tool == "sudo" && slices.ContainsFunc(reads, func(r []string) bool { return slices.Equal(c.Args, r) })) ||
				(c.Tool == "dpkg-query" && slices.Equal(append([]string{"dpkg-query"}, c.Args...), software.QueryCommand()))
			assert.True(t, read, "machine %s: %s", name, c)
		}
	}
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// logDriftCost logs check-drift's time in each check that succeeded, with the node count.
func (d *day2) logDriftCost(t *testing.T, checks []wfv1.Workflow, nodes int) {
	for _, wf := range checks {
		for _, n := range wf.Status.Nodes {
			if n.DisplayName == translator.StepCheckDrift && n.Phase == wfv1.NodeSucceeded {
				t.Logf("drift check %s: check-drift took %s for %d nodes (the Workflow %s)", wf.Name,
					n.FinishedAt.Sub(n.StartedAt.Time), nodes, wf.Status.FinishedAt.Sub(wf.Status.StartedAt.Time))
			}
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}
