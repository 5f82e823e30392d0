package preflight

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func node(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
}

func TestNodesReady(t *testing.T) {
	cs := fake.NewClientset(node("m1", corev1.ConditionTrue), node("w1", corev1.ConditionFalse), node("stranger", corev1.ConditionFalse))
	hosts := []bpav1.HostStatus{{Name: "m1"}, {Name: "w1"}, {Name: "w2"}}
	bad, err := NodesReady(context.Background(), cs, hosts)
	require.NoError(t, err)
	// A Node of no host BPA lists is not BPA's to judge.
	assert.Equal(t, []string{"node w1: not Ready", "node w2: not registered"}, bad)

	bad, err = NodesReady(context.Background(), cs, hosts[:1])
	require.NoError(t, err)
	assert.Empty(t, bad)
}

func TestEtcd(t *testing.T) {
	three := []string{"m1", "m2", "m3"}
	warning, err := Etcd(three, nil, nil)
	assert.NoError(t, err)
	assert.Empty(t, warning)

	_, err = Etcd(three, errors.New("etcd failed: reason withheld"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/readyz/etcd")

	// A member on a Node that is down: the upgrade's restart of another would lose quorum.
	_, err = Etcd(three, nil, []string{"node m2: not Ready", "node w1: not Ready"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd member m2 ")
	assert.NotContains(t, err.Error(), "w1")
	_, err = Etcd(three, nil, []string{"node m22: not Ready"})
	assert.NoError(t, err, "m22 is not m2")

	// A single member cannot lose one: allowed, with a warning that says so.
	warning, err = Etcd([]string{"m1"}, nil, nil)
	assert.NoError(t, err)
	assert.Contains(t, warning, "single member (m1)")

	assert.Equal(t, []string{"m1", "m3"}, EtcdMembers([]bpav1.HostStatus{
		{Name: "m3", Etcd: true}, {Name: "m1", Etcd: true}, {Name: "m2"}, {Name: "m4", Etcd: true, Removing: true}}))
}

func TestLowDisk(t *testing.T) {
	min := resource.MustParse("2Gi")
	out := `Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/vda         264000000  34000000  61000000      36% /
/dev/vdb           4000000   3500000    500000      88% /var/lib
`
	low, err := LowDisk("w1", out, min)
	require.NoError(t, err)
	assert.Equal(t, []string{"host w1: 500000Ki free on /var/lib, want 2Gi"}, low)

	// The same filesystem asked about twice (/var/lib on /) counts once.
	same := "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 10 5 1024 50% /\n/dev/vda 10 5 1024 50% /\n"
	low, err = LowDisk("w1", same, min)
	require.NoError(t, err)
	assert.Len(t, low, 1)

	low, err = LowDisk("w1", "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 10 5 3145728 1% /\n", min)
	require.NoError(t, err)
	assert.Empty(t, low, "3 GiB is enough")

	_, err = LowDisk("w1", "df: /var/lib: No such file or directory\n", min)
	assert.ErrorContains(t, err, "host w1")
	_, err = LowDisk("w1", "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 10 5 lots 1% /\n", min)
	assert.ErrorContains(t, err, "available")
}

// Every check runs, each failure is named, the error carries the Stalled reason, and a check
// that needs an API that could not be reached is skipped rather than reported twice.
func TestRunChecksNamesEachFailure(t *testing.T) {
	var logs []string
	o := &options{logf: func(f string, a ...any) { logs = append(logs, f) }}
	ran := 0
	err := o.runChecks([]check{
		{CheckNodesReady, func() error { ran++; return errors.New(apiPrefix + ": no route") }},
		{CheckEtcd, func() error { ran++; return errNoAPI }},
		{CheckDiskSpace, func() error { ran++; return errors.New("host w1: 1Gi free on /, want 2Gi") }},
		{CheckOffline, func() error { ran++; return nil }},
	})
	require.Error(t, err)
	assert.Equal(t, 4, ran)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, bpav1.ReasonPreflightFailed+": "), msg)
	assert.Contains(t, msg, "check nodes-ready failed: cannot ask the cluster's API")
	assert.Contains(t, msg, "check disk-space failed: host w1: 1Gi free on /")
	assert.NotContains(t, msg, "check etcd")
	assert.NotContains(t, msg, "offline")
	assert.Contains(t, msg, "nothing was changed")
	assert.Contains(t, msg, bpav1.RerunAnnotation)

	assert.NoError(t, o.runChecks([]check{{CheckOffline, func() error { return nil }}}))
}
