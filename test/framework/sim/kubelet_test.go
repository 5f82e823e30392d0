package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// kubeletBridge is this file's own bridge (see etcdBridge).
const (
	kubeletBridge     = "bpasimkblt0"
	kubeletBridgeCIDR = "10.219.0.1/24"
)

// TestSimulatedKubeletHeartbeat: after the stand-in's cluster.yml every Node is Ready and its
// kubelet renews its Lease. `systemctl stop kubelet` on w1 and `systemctl stop containerd` on
// w2 (as root, over SSH) stop their heartbeats, and the application cluster's real
// node-lifecycle controller (not the test) marks both Ready Unknown, with the unreachable
// taint, within its grace period; m1 stays Ready. `systemctl start` brings each back Ready.
// A stopped machine's Node goes Unknown too.
func TestSimulatedKubeletHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := StartCluster(t, ctx, ClusterOptions{Bridge: kubeletBridge, CIDR: kubeletBridgeCIDR, Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true}, {Name: "w1", Roles: []string{"worker"}}, {Name: "w2", Roles: []string{"worker"}},
	}})
	kc, err := kubernetes.NewForConfig(c.App.RESTConfig)
	require.NoError(t, err)
	for _, n := range []string{"m1", "w1", "w2"} {
		waitReady(t, ctx, kc, n, corev1.ConditionTrue, 10*time.Second)
	}
	require.Eventually(t, func() bool {
		l, err := kc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "w1", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 2*KubeletHeartbeat
	}, 10*time.Second, 200*time.Millisecond, "w1's kubelet renews its Lease")

	systemctl := func(machine, verb, unit string) (string, int) {
		out, _, code, err := sshClient(t, ctx, c.Machines[machine]).Run(ctx, []string{"systemctl", verb, unit})
		require.NoError(t, err)
		return string(out), code
	}
	_, code := systemctl("w1", "stop", KubeletUnit)
	require.Zero(t, code)
	_, code = systemctl("w2", "stop", ContainerdUnit)
	require.Zero(t, code)
	stopped := time.Now()
	out, code := systemctl("w1", "is-active", KubeletUnit)
	assert.Equal(t, "inactive\n", out)
	assert.Equal(t, 3, code)
	// The controller looks every second; a heartbeat may have landed just before the stop.
	limit := rig.NodeMonitorGracePeriod + KubeletHeartbeat + 5*time.Second
	for _, n := range []string{"w1", "w2"} {
		waitReady(t, ctx, kc, n, corev1.ConditionUnknown, limit)
	}
	t.Logf("Ready Unknown %s after the stop (grace %s)", time.Since(stopped).Round(100*time.Millisecond), rig.NodeMonitorGracePeriod)
	for _, n := range []string{"w1", "w2"} {
		// The controller taints in a pass of its own, after it set the condition.
		assert.Eventually(t, func() bool {
			node, err := kc.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			return err == nil && hasTaint(node, corev1.TaintNodeUnreachable)
		}, 5*time.Second, 100*time.Millisecond, "%s: the controller's unreachable taint", n)
	}
	assert.Equal(t, corev1.ConditionTrue, readyOf(t, ctx, kc, "m1"), "m1's kubelet runs")

	_, code = systemctl("w1", "start", KubeletUnit)
	require.Zero(t, code)
	_, code = systemctl("w2", "restart", ContainerdUnit)
	require.Zero(t, code)
	for _, n := range []string{"w1", "w2"} {
		waitReady(t, ctx, kc, n, corev1.ConditionTrue, 3*KubeletHeartbeat)
	}

	c.Machines["w1"].Stop()
	waitReady(t, ctx, kc, "w1", corev1.ConditionUnknown, limit)
	assert.Equal(t, corev1.ConditionTrue, readyOf(t, ctx, kc, "w2"))
}

// waitReady waits up to limit for node's Ready condition to be want.
func waitReady(t *testing.T, ctx context.Context, kc kubernetes.Interface, node string, want corev1.ConditionStatus, limit time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && readyStatus(n) == want
	}, limit, 200*time.Millisecond, "node %s Ready %s within %s", node, want, limit)
}

func readyOf(t *testing.T, ctx context.Context, kc kubernetes.Interface, node string) corev1.ConditionStatus {
	t.Helper()
	n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	return readyStatus(n)
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
