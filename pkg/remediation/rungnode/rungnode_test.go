package rungnode

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// TestWorker: only a worker BPA built, with a current address; never a master or an etcd
// member, whatever the hosts file says.
func TestWorker(t *testing.T) {
	applied := &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}}, {Name: "e1", Roles: []string{"worker"}, Etcd: true}, {Name: "w1", Roles: []string{"worker"}}, {Name: "w2", Roles: []string{"worker"}},
	}}
	hosts := []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, IP: "10.0.0.1"}, {Name: "e1", Roles: []string{"worker"}, Etcd: true, IP: "10.0.0.2"},
		{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.3"}, {Name: "w2", Roles: []string{"worker"}}, {Name: "x", Roles: []string{"worker"}, IP: "10.0.0.9"},
	}
	h, err := Worker(applied, hosts, "w1")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.3", h.IP)
	for node, why := range map[string]string{
		"":   "--node is required",
		"m1": "never acts on",
		"e1": "never acts on",
		"w2": "no current address",
		"x":  "not in status.applied",
	} {
		_, err := Worker(applied, hosts, node)
		if assert.Error(t, err, node) {
			assert.Contains(t, err.Error(), why, node)
		}
	}
	_, err = Worker(nil, hosts, "w1")
	assert.ErrorContains(t, err, "not in status.applied")
}

// TestWaitReady returns once the Node is Ready, and otherwise fails after the wait naming
// the condition it last read.
func TestWaitReady(t *testing.T) {
	node := func(s corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}}
	}
	ctx := context.Background()
	assert.NoError(t, WaitReady(ctx, fake.NewClientset(node(corev1.ConditionTrue)), "w1", time.Second, 10*time.Millisecond, t.Logf))
	err := WaitReady(ctx, fake.NewClientset(node(corev1.ConditionUnknown)), "w1", 100*time.Millisecond, 10*time.Millisecond, t.Logf)
	assert.ErrorContains(t, err, "not Ready within 100ms (Ready: Unknown)")
	err = WaitReady(ctx, fake.NewClientset(), "w1", 100*time.Millisecond, 10*time.Millisecond, t.Logf)
	assert.ErrorContains(t, err, "not found")
}

// TestWorkerAsBuilt: the hosts file is rendered from the spec as the Workflow runs, which its
// author may have edited since the controller decided; what BPA built (status.applied) says
// which node is a master, and which host a worker is. A master named a worker, a worker
// entry moved onto another host, or onto a control-plane node's address is refused.
func TestWorkerAsBuilt(t *testing.T) {
	applied := &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true, IP: "10.0.0.1", BareMetalHost: "bmh-m1"},
		{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.3", BareMetalHost: "bmh-w1"},
	}}
	for name, x := range map[string]struct {
		hosts []bpav1.HostStatus
		node  string
		why   string
	}{
		"master named a worker":  {[]bpav1.HostStatus{{Name: "m1", Roles: []string{"worker"}, IP: "10.0.0.1", BareMetalHost: "bmh-m1"}}, "m1", "never acts on"},
		"worker on another host": {[]bpav1.HostStatus{{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.7", BareMetalHost: "bmh-m1"}}, "w1", "not the host"},
		"worker at a master's address": {[]bpav1.HostStatus{{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.1", BareMetalHost: "bmh-w1"},
			{Name: "m1", Roles: []string{"master"}, IP: "10.0.0.5", BareMetalHost: "bmh-m1"}}, "w1", "control-plane"},
	} {
		_, err := Worker(applied, x.hosts, x.node)
		assert.ErrorContains(t, err, x.why, name)
	}
	h, err := Worker(applied, []bpav1.HostStatus{{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.8", BareMetalHost: "bmh-w1"}}, "w1")
	require.NoError(t, err, "a worker's new lease")
	assert.Equal(t, "10.0.0.8", h.IP)
}
