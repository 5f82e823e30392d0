package clusterdrift

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// liveNode is a Node as BPA leaves it: its kubelet, its role label, node_labels, and the
// control-plane taint on a master that is no worker.
func liveNode(name string, master, worker bool) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"example.com/role": "edge", "kubernetes.io/hostname": name}}}
	n.Status.NodeInfo.KubeletVersion = "v1.31.4"
	n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}
	if master {
		n.Labels[ControlPlaneLabel] = ""
		if !worker {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	return n
}

func TestNodes(t *testing.T) {
	applied := &bpav1.AppliedState{KubernetesVersion: "1.31.4", Hosts: []bpav1.HostStatus{
		{Name: "master-1", Roles: []string{"master"}},
		{Name: "both-1", Roles: []string{"master", "worker"}},
		{Name: "worker-1", Roles: []string{"worker"}},
		{Name: "leaving", Roles: []string{"worker"}, Removing: true},
	}}
	a := Applied{Labels: map[string]string{"example.com/role": "edge"}, Taints: []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}}
	same := func() []corev1.Node {
		return []corev1.Node{liveNode("master-1", true, false), liveNode("both-1", true, true), liveNode("worker-1", false, true)}
	}
	for _, tc := range []struct {
		name   string
		change func(n []corev1.Node) []corev1.Node
		want   []string
		// byRun: the lines of want a run of the spec puts back (cluster.yml).
		byRun bool
	}{
		{"as applied", func(n []corev1.Node) []corev1.Node { return n }, nil, false},
		{"transient taints and other labels are Kubernetes'", func(n []corev1.Node) []corev1.Node {
			n[2].Spec.Taints = append(n[2].Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute})
			n[2].Labels["topology.kubernetes.io/zone"] = "a"
			return n
		}, nil, false},
		{"label removed", func(n []corev1.Node) []corev1.Node { delete(n[2].Labels, "example.com/role"); return n },
			[]string{"node worker-1: label example.com/role=edge missing"}, true},
		{"label changed", func(n []corev1.Node) []corev1.Node { n[2].Labels["example.com/role"] = "core"; return n },
			[]string{"node worker-1: label example.com/role=core, applied example.com/role=edge"}, true},
		{"taint added", func(n []corev1.Node) []corev1.Node {
			n[2].Spec.Taints = append(n[2].Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute})
			return n
		}, []string{"node worker-1: taint example.com/maintenance=true:NoExecute not applied by BPA"}, false},
		{"taints removed", func(n []corev1.Node) []corev1.Node { n[0].Spec.Taints = nil; return n },
			[]string{"node master-1: taint dedicated=edge:NoSchedule missing", "node master-1: taint node-role.kubernetes.io/control-plane:NoSchedule missing"}, false},
		{"kubelet", func(n []corev1.Node) []corev1.Node { n[0].Status.NodeInfo.KubeletVersion = "v1.31.1"; return n },
			[]string{"node master-1: kubelet v1.31.1, applied v1.31.4"}, true},
		{"roles", func(n []corev1.Node) []corev1.Node {
			delete(n[0].Labels, ControlPlaneLabel)
			n[2].Labels[ControlPlaneLabel] = ""
			return n
		}, []string{"node master-1: role control-plane missing (label node-role.kubernetes.io/control-plane)",
			"node worker-1: role control-plane (label node-role.kubernetes.io/control-plane), applied as worker"}, false},
		{"node set", func(n []corev1.Node) []corev1.Node {
			return append(n[1:], liveNode("stranger", false, true))
		},
			[]string{"node master-1: not registered, applied as master", "node stranger: registered, not applied by BPA"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drift, rerun := Nodes(tc.change(same()), applied, a)
			assert.Equal(t, tc.want, drift)
			if tc.byRun {
				assert.Equal(t, tc.want, rerun, "put back by a run")
			} else {
				assert.Empty(t, rerun, "no run puts it back")
			}
		})
	}
}

func TestAppliedFromVars(t *testing.T) {
	a, err := AppliedFromVars(map[string]any{"node_labels": map[string]any{"example.com/role": "edge", "n": 1},
		"node_taints": []any{"dedicated=edge:NoSchedule", "example.com/gpu:NoExecute"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"example.com/role": "edge", "n": "1"}, a.Labels)
	assert.Equal(t, []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}, {Key: "example.com/gpu", Effect: corev1.TaintEffectNoExecute}}, a.Taints)

	a, err = AppliedFromVars(map[string]any{})
	require.NoError(t, err)
	assert.Empty(t, a)
	for _, bad := range []map[string]any{{"node_labels": "x"}, {"node_taints": []any{"no-effect"}}, {"node_taints": []any{"k=v:Sometimes"}}} {
		_, err := AppliedFromVars(bad)
		assert.Error(t, err, "%v", bad)
	}
}

func TestCap(t *testing.T) {
	assert.Equal(t, []string{"a", "b"}, Cap([]string{"a", "b"}, 2))
	assert.Equal(t, []string{"a", "... and 2 more (the check-drift step's output lists them all)"}, Cap([]string{"a", "b", "c"}, 2))
	long := Cap([]string{"kube-system/kubeadm-config: clusterName is \"" + strings.Repeat("é", 600) + "\""}, 2)[0]
	assert.LessOrEqual(t, len(long), MaxFieldLength, "a line the CRD admits")
	assert.True(t, utf8.ValidString(long) && strings.HasSuffix(long, "..."), "cut on a rune: %q", long[len(long)-8:])
}

// BenchmarkNodes compares MaxNodes Nodes as BPA left them: the comparison's share of a
// check's cost per node.
func BenchmarkNodes(b *testing.B) {
	applied := &bpav1.AppliedState{KubernetesVersion: "1.31.4"}
	var nodes []corev1.Node
	for i := range bpav1.MaxNodes {
		name := fmt.Sprintf("worker-%d", i)
		applied.Hosts = append(applied.Hosts, bpav1.HostStatus{Name: name, Roles: []string{"worker"}})
		nodes = append(nodes, liveNode(name, false, true))
	}
	a := Applied{Labels: map[string]string{"example.com/role": "edge"}, Taints: []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}}
	for b.Loop() {
		if d, _ := Nodes(nodes, applied, a); len(d) != 0 {
			b.Fatal(d)
		}
	}
}
