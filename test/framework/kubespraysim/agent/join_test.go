package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
)

// join is as strict as kubeadm and kubespray v2.28.0 on a rerun: node_labels and the kubelet's
// release come back (node-label's "Set label to node", node's "Install | Copy kubelet binary
// from download dir"), the role label and the registration taints do not (kubeadm sets them
// once): drift that only a person can put back stays.
func TestJoinAgainPutsBackOnlyWhatKubesprayDoes(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewClientset()
	f := flags{node: "m1", address: "10.0.0.1", version: "v1.32.5", controlPlane: true,
		labels: `{"example.com/role":"edge"}`, taints: `["dedicated=edge:NoSchedule"]`}
	did, err := join(ctx, kc, f)
	require.NoError(t, err)
	assert.Equal(t, "joined", did)
	n, err := kc.CoreV1().Nodes().Get(ctx, "m1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"example.com/role": "edge", clusterdrift.ControlPlaneLabel: ""}, n.Labels)
	assert.Len(t, n.Spec.Taints, 2, "node_taints and kubeadm's control-plane taint")

	delete(n.Labels, "example.com/role")
	delete(n.Labels, clusterdrift.ControlPlaneLabel)
	n.Spec.Taints = nil
	n, err = kc.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	n.Status.NodeInfo.KubeletVersion = "v1.31.0"
	_, err = kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	did, err = join(ctx, kc, f)
	require.NoError(t, err)
	assert.Equal(t, "reconfigured", did)
	n, err = kc.CoreV1().Nodes().Get(ctx, "m1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"example.com/role": "edge"}, n.Labels, "node_labels again; the role label is kubeadm's, once")
	assert.Empty(t, n.Spec.Taints, "taints are the registration's")
	assert.Equal(t, "v1.32.5", n.Status.NodeInfo.KubeletVersion, "kube_version's kubelet")
}
