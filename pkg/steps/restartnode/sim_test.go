package restartnode

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/remediation/rungnode"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
)

// This package's bridge for its simulated machines: one no other test uses.
const (
	simBridge     = "bpasimrstn0"
	simBridgeCIDR = "10.221.0.1/24"
)

// TestRestartOnSimulatedCluster: w1's kubelet stopped, the application cluster's real
// node-lifecycle controller marks its Node Unknown; the step restarts containerd then kubelet
// on w1 (recorded by its systemctl, in that order) and returns once the Node is Ready. It
// refuses the master and touches nothing there. With w1's machine stopped, it fails at SSH
// and names the node.
func TestRestartOnSimulatedCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := sim.StartCluster(t, ctx, sim.ClusterOptions{Bridge: simBridge, CIDR: simBridgeCIDR, Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true}, {Name: "w1", Roles: []string{"worker"}},
	}})
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov"}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: c.Hosts}
	cr := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).Build()
	hostsFile := filepath.Join(t.TempDir(), "hosts.json")
	require.NoError(t, stepio.WriteHosts(hostsFile, c.Hosts))
	fs := pflag.NewFlagSet("restart-node", pflag.ContinueOnError)
	o := &options{Step: rungnode.NewStep()}
	o.CR, o.HostsFile, o.Wait, o.Poll, o.Flags, o.Logf = stepio.CR{Namespace: "bpa", Name: "prov"}, hostsFile, DefaultWait, 200*time.Millisecond, fs, t.Logf
	o.SSH.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--ssh-key=" + c.SSH.ClientKeyPath(), "--known-hosts=" + c.SSH.KnownHostsPath()}))
	kc, err := kubernetes.NewForConfig(c.App.RESTConfig)
	require.NoError(t, err)
	w1, m1 := c.Machines["w1"], c.Machines["m1"]

	sc, err := sshexec.Dial(ctx, w1.IP, sshexec.Config{Port: w1.Port, KeyFile: w1.ClientKeyPath(), KnownHostsFile: w1.KnownHostsPath()})
	require.NoError(t, err)
	_, _, code, err := sc.Run(ctx, []string{"systemctl", "stop", "kubelet"})
	require.NoError(t, err)
	require.Zero(t, code)
	sc.Close()
	require.Eventually(t, func() bool { return ready(ctx, kc, "w1") == corev1.ConditionUnknown },
		rig.NodeMonitorGracePeriod+10*time.Second, 200*time.Millisecond, "the node-lifecycle controller marks w1 Unknown")
	w1.ResetCalls()
	m1.ResetCalls()

	o.Node = "w1"
	start := time.Now()
	require.NoError(t, o.run(ctx, cr))
	t.Logf("restart-node: w1 Ready %s after the step started", time.Since(start).Round(100*time.Millisecond))
	assert.Equal(t, corev1.ConditionTrue, ready(ctx, kc, "w1"))
	var calls []string
	for _, call := range w1.CallsTo("systemctl") {
		calls = append(calls, strings.Join(call.Args, " "))
	}
	assert.Equal(t, []string{"restart containerd", "restart kubelet"}, calls)

	o.Node = "m1"
	err = o.run(ctx, cr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "never acts on")
	assert.Empty(t, m1.CallsTo("systemctl"), "nothing was run on the master")

	w1.Stop()
	o.Node = "w1"
	err = o.run(ctx, cr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "node w1")
}

func ready(ctx context.Context, kc kubernetes.Interface, node string) corev1.ConditionStatus {
	n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return corev1.ConditionStatus(fmt.Sprint(err))
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
