package checkdrift

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// Check reads the Nodes and kubeadm-config with one list and one get, writes nothing, and
// reports the nodes' and kubeadm's differences and every Node's Ready condition.
func TestCheck(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	m := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1", Labels: map[string]string{clusterdrift.ControlPlaneLabel: ""}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: clusterdrift.ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.31.4"}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: since}}}}
	w := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.31.4"}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: since}}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: clusterdrift.KubeadmConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"ClusterConfiguration": "kubernetesVersion: v1.31.4\nnetworking:\n  podSubnet: 10.244.0.0/16\n"}}
	cs := fake.NewClientset(m, w, cm)
	applied := &bpav1.AppliedState{KubernetesVersion: "1.31.4", Immutable: map[string]string{"kube_pods_subnet": "10.233.64.0/18"},
		Hosts: []bpav1.HostStatus{{Name: "master-1", Roles: []string{"master"}}, {Name: "worker-1", Roles: []string{"worker"}}}}
	d, err := Check(context.Background(), cs, applied, clusterdrift.Applied{Labels: map[string]string{"example.com/role": "edge"}})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"node master-1: label example.com/role=edge missing",
		"node worker-1: label example.com/role=edge missing",
		`kube-system/kubeadm-config: networking.podSubnet is "10.244.0.0/16", BPA applied "10.233.64.0/18"`,
	}, d.Fields)
	assert.Equal(t, &stepio.DriftRerun{Provisioning: d.Fields[:2]}, d.Rerun, "a run relabels; kubeadm's config is no run's")
	require.Len(t, d.Nodes, 2)
	assert.Equal(t, "False", d.Nodes[1].Ready)
	assert.True(t, since.Equal(d.Nodes[1].LastTransitionTime))
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	assert.Equal(t, []string{"list nodes", "get configmaps"}, verbs)

	// It fails when it cannot read: no kubeadm-config is no finding.
	cs = fake.NewClientset(m)
	_, err = Check(context.Background(), cs, applied, clusterdrift.Applied{})
	assert.ErrorContains(t, err, "kubeadm-config not found")
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, assert.AnError })
	_, err = Check(context.Background(), cs, applied, clusterdrift.Applied{})
	assert.ErrorContains(t, err, "listing nodes")
}

// The package pins of the cluster's Softwares are compared over SSH with dpkg-query, the one
// command each host runs; a Software whose last run did not succeed is not compared, and a
// host that cannot be asked is a line of its own.
func TestPackages(t *testing.T) {
	sim := simhost.NewCluster(t)
	w := sim.Start("worker-1", "127.0.1.61")
	w.SetPackages(map[string]string{"jq": "1.6-1", "telnet": "0.17-44"})
	sw := func(name string, gen int64, items ...bpav1.SoftwareItem) *bpav1.Software {
		return &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: gen, Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
			Spec:   bpav1.SoftwareSpec{WorkerSoftware: items},
			Status: bpav1.SoftwareStatus{RunStatus: bpav1.RunStatus{Phase: bpav1.PhaseSucceeded, ObservedGeneration: 1}}}
	}
	other := sw("other-cluster", 1, bpav1.SoftwareItem{Name: "curl"})
	other.Labels[bpav1.ClusterLabel] = "c2"
	c := ctrlfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		sw("tools", 1, bpav1.SoftwareItem{Name: "jq", Version: "1.6-2"}, bpav1.SoftwareItem{Name: "telnet", State: bpav1.PackageAbsent}),
		sw("pending", 2, bpav1.SoftwareItem{Name: "htop"}), other).Build()
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{bpav1.ClusterLabel: "c1"}}}
	fs := pflag.NewFlagSet("check-drift", pflag.ContinueOnError)
	var logs []string
	o := &options{flags: fs, logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }}
	o.ssh.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--ssh-key=" + sim.ClientKeyPath(), "--known-hosts=" + sim.KnownHostsPath(),
		"--ssh-user=root", "--ssh-port=" + strconv.Itoa(w.Port), "--ssh-connect-timeout=3s"}))
	cfg := o.ssh.Config(fs, nil)
	hosts := []bpav1.HostStatus{{Name: "worker-1", IP: w.IP, Roles: []string{"worker"}}}
	drift, bySoftware, err := o.packages(context.Background(), c, p, hosts, cfg)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"node worker-1: package jq: installed 1.6-1, wanted 1.6-2 (Software tools)",
		"node worker-1: package telnet: installed (0.17-44), wanted absent (Software tools)",
	}, drift)
	assert.Equal(t, map[string][]string{"tools": drift}, bySoftware, "the Software whose rerun puts them back")
	assert.Contains(t, strings.Join(logs, "\n"), "Software pending: its generation 2 has not succeeded")
	var tools []string
	for _, call := range w.Calls() {
		tools = append(tools, call.Tool+" "+strings.Join(call.Args, " "))
	}
	assert.Equal(t, []string{strings.Join(software.QueryCommand(), " ")}, tools, "one read, nothing else")

	hosts[0].IP = "127.0.1.62" // nothing listens there
	drift, bySoftware, err = o.packages(context.Background(), c, p, hosts, cfg)
	require.NoError(t, err)
	require.Len(t, drift, 1)
	assert.Empty(t, bySoftware, "no run puts back a host that cannot be read")
	assert.Contains(t, drift[0], "node worker-1: packages not read: ")
}
