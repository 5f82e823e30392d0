package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/rebootnode"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// scenarioRemediation (r): graded remediation of workers (docs/remediation.md) with the
// shortest unhealthyFor and cooldown (1m). The cluster's verify publishes the node-reader
// kubeconfig. kubelet stopped on two of three workers (their Nodes turned Unknown by the
// application cluster's real node-lifecycle controller): more than maxUnhealthy's 40%, so
// no Workflow and one RemediationHeld Warning. One kubelet started again: the other worker
// alone is due, and gets the Restart rung (a Workflow named after its episode, whose
// restart-node restarts containerd then kubelet over SSH), and is Ready again. The time
// from the kubelet's stop to Ready is logged. Then the Reboot rung
// (rebootAfterRestartFails).
func (e *env) scenarioRemediation(t *testing.T) {
	p := e.newCluster(t, "heal", 170, 1, 3)
	// Node names of their own: the site's clusters share one application apiserver.
	for _, entries := range [][]bpav1.NodeEntry{p.Spec.Masters, p.Spec.Workers} {
		for _, entry := range entries {
			for name, req := range entry {
				delete(entry, name)
				entry["h"+name] = req
			}
		}
	}
	p.Spec.Remediation = &bpav1.Remediation{UnhealthyFor: &metav1.Duration{Duration: time.Minute}, Cooldown: &metav1.Duration{Duration: time.Minute}}
	e.create(t, p)
	built := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	sec := &corev1.Secret{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: kubeconfig.NodeReaderSecretName("heal")}, sec), "verify published the node-reader kubeconfig")
	kc, err := kubernetes.NewForConfig(e.App.RESTConfig)
	require.NoError(t, err)
	machine := func(node string) *simhost.Host {
		i := slices.IndexFunc(built.Status.Applied.Hosts, func(h bpav1.HostStatus) bool { return h.Name == node })
		require.GreaterOrEqual(t, i, 0, node)
		return e.Machine(built.Status.Applied.Hosts[i].IP)
	}

	stopped := time.Now()
	e.systemctl(t, machine("hw1"), "stop", "kubelet")
	e.systemctl(t, machine("hw2"), "stop", "kubelet")
	held := &bpav1.Provisioning{}
	e.waitWithin(t, 3*time.Minute, held, p.Name, func() bool {
		c := meta.FindStatusCondition(held.Status.Conditions, bpav1.ConditionRemediating)
		return c != nil && c.Reason == bpav1.ReasonRemediationHeld
	}, "RemediationHeld: two of three workers down")
	assert.Contains(t, meta.FindStatusCondition(held.Status.Conditions, bpav1.ConditionRemediating).Message, "2 of 3 workers unhealthy")
	assert.Empty(t, e.workflowsOf(t, bpav1.RemediationOfLabel, p.Name), "no action past maxUnhealthy")
	assert.Equal(t, 1, e.countEvents(t, p.Name, bpav1.ReasonRemediationHeld, corev1.EventTypeWarning))

	e.systemctl(t, machine("hw2"), "start", "kubelet")
	machine("hw1").ResetCalls()
	machine("hm1").ResetCalls() // cluster.yml's etcd role started etcd there
	var wf wfv1.Workflow
	e.waitWithin(t, 8*time.Minute, &bpav1.Provisioning{}, p.Name, func() bool {
		wfs := e.workflowsOf(t, bpav1.RemediationOfLabel, p.Name)
		if len(wfs) == 1 {
			wf = wfs[0]
		}
		return len(wfs) == 1 && wf.Status.Phase == wfv1.WorkflowSucceeded && nodeReady(t, kc, "hw1")
	}, "the Restart rung's Workflow to succeed and hw1 to be Ready")
	t.Logf("remediation: hw1 Ready %s after its kubelet stopped (unhealthyFor 1m, 2 workers held first)", time.Since(stopped).Round(time.Second))
	assert.Equal(t, "hw1", wf.Labels[bpav1.RemediationNodeLabel])
	assert.Equal(t, "Restart", wf.Annotations[translator.RemediationRungAnnotation])
	var calls []string
	for _, c := range machine("hw1").CallsTo("systemctl") {
		calls = append(calls, strings.Join(c.Args, " "))
	}
	assert.Equal(t, []string{"restart containerd", "restart kubelet"}, calls)
	assert.Equal(t, 1, e.countEvents(t, p.Name, bpav1.EventRemediationRestart, corev1.EventTypeNormal))
	assert.Empty(t, machine("hm1").CallsTo("systemctl"), "nothing ran on the master")

	e.rebootAfterRestartFails(t, p.Name, kc, machine)
}

// rebootAfterRestartFails: with the admin's allowReboot for the site's namespace, hw3's
// kubelet broken until a reboot (sim.BreakUntilReboot): its Restart rung fails at once
// (systemctl restart kubelet exits 1), and after the cooldown the Reboot rung's reboot-node
// sets reboot.metal3.io on hw3's BareMetalHost; metal3's stand-in power cycles it, and hw3 is
// Ready again. Events: a second RemediationRestart, then one RemediationReboot. The time from
// the fault to Ready is logged.
func (e *env) rebootAfterRestartFails(t *testing.T, name string, kc kubernetes.Interface, machine func(string) *simhost.Host) {
	e.allowReboot(t)
	hw3 := machine("hw3")
	broken := time.Now()
	require.NoError(t, sim.BreakUntilReboot(hw3, sim.KubeletUnit))
	rung := func(wf wfv1.Workflow) string { return wf.Annotations[translator.RemediationRungAnnotation] }
	var reboot wfv1.Workflow
	e.waitWithin(t, 8*time.Minute, &bpav1.Provisioning{}, name, func() bool {
		for _, wf := range e.workflowsOf(t, bpav1.RemediationOfLabel, name) {
			if wf.Labels[bpav1.RemediationNodeLabel] == "hw3" && rung(wf) == "Reboot" {
				reboot = wf
			}
		}
		return reboot.Status.Phase == wfv1.WorkflowSucceeded && nodeReady(t, kc, "hw3")
	}, "hw3's Reboot rung to succeed and hw3 to be Ready")
	t.Logf("remediation: hw3 Ready %s after its kubelet broke until a reboot (Restart failed, cooldown 1m, then Reboot)", time.Since(broken).Round(time.Second))

	var restart *wfv1.Workflow
	for _, wf := range e.workflowsOf(t, bpav1.RemediationOfLabel, name) {
		if wf.Labels[bpav1.RemediationNodeLabel] == "hw3" && rung(wf) == "Restart" {
			restart = &wf
		}
	}
	require.NotNil(t, restart, "the Restart rung came first")
	assert.Equal(t, wfv1.WorkflowFailed, restart.Status.Phase, "a restart cannot start a kubelet broken until a reboot")
	// Argo's times are whole seconds: the Reboot may start in the second the Restart ended.
	assert.False(t, reboot.Status.StartedAt.Before(&restart.Status.FinishedAt), "the Reboot started (%s) before the Restart ended (%s)", reboot.Status.StartedAt, restart.Status.FinishedAt)
	assert.Equal(t, 2, e.countEvents(t, name, bpav1.EventRemediationRestart, corev1.EventTypeNormal))
	assert.Equal(t, 1, e.countEvents(t, name, bpav1.EventRemediationReboot, corev1.EventTypeNormal))
	p := &bpav1.Provisioning{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, p))
	h := &metal3v1.BareMetalHost{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: hostOf(t, p, "hw3")}, h))
	assert.NotContains(t, h.Annotations, rebootnode.Annotation, "metal3 took the request")
	assert.Equal(t, reboot.Name, h.Annotations[rebootnode.RequestAnnotation], "the request that rebooted it")
	assert.True(t, h.Status.PoweredOn)
}

// allowReboot grants the site's namespace allowReboot in the shared BPAPolicy for the rest of t.
func (e *env) allowReboot(t *testing.T) {
	t.Helper()
	grant := bpav1.NamespaceGrant{Names: []string{e.Namespace}, AllowReboot: true}
	e.editPolicy(t, func(pol *bpav1.BPAPolicy) { pol.Spec.Namespaces = append(pol.Spec.Namespaces, grant) })
	t.Cleanup(func() {
		e.editPolicy(t, func(pol *bpav1.BPAPolicy) {
			pol.Spec.Namespaces = slices.DeleteFunc(pol.Spec.Namespaces, func(g bpav1.NamespaceGrant) bool { return g.AllowReboot && slices.Equal(g.Names, grant.Names) })
		})
	})
}

// systemctl runs `systemctl verb unit` on the machine as the site's SSH user (root).
func (e *env) systemctl(t *testing.T, m *simhost.Host, verb, unit string) {
	t.Helper()
	c, err := sshexec.Dial(e.ctx, m.IP, sshexec.Config{Port: m.Port, KeyFile: e.SSH.ClientKeyPath(), KnownHostsFile: e.SSH.KnownHostsPath()})
	require.NoError(t, err)
	defer c.Close()
	_, stderr, code, err := c.Run(e.ctx, []string{"systemctl", verb, unit})
	require.NoError(t, err)
	require.Zero(t, code, "%s: systemctl %s %s: %s", m.Name, verb, unit, stderr)
}

// countEvents counts the events of the Provisioning name with reason and type.
func (e *env) countEvents(t *testing.T, name, reason, typ string) int {
	t.Helper()
	list := &corev1.EventList{}
	require.NoError(t, e.Client.List(e.ctx, list, client.InNamespace(e.Namespace)))
	n := 0
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.Reason == reason && ev.Type == typ {
			n += max(1, int(ev.Count))
		}
	}
	return n
}

func nodeReady(t *testing.T, kc kubernetes.Interface, name string) bool {
	t.Helper()
	n, err := kc.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
