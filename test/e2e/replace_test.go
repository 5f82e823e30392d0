package e2e

import (
	"slices"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
)

const replaceBase = 220

// scenarioReplace (s): graded remediation's Replace rung (docs/remediation.md). A master
// named by MAC and one worker, rw1, chosen by workerSelector among two hosts (rp-a, where it
// lands, and rp-b, the spare), rungs [Replace] and the shortest unhealthyFor and cooldown.
// rp-a's machine is stopped for good: its Node goes Unknown, and a minute later the
// remediator records the replacement; the spec unchanged, one run removes rw1 from rp-a
// without drain (spec.nodeRemoval does not allow it: the remediator decided), the next adds
// rw1 back on rp-b. status.applied shows rw1 on rp-b, the application cluster's Node rw1 is
// Ready, rp-a is released with the unhealthy mark, rp-b claimed. The etcd snapshot before
// day-2 runs is skipped, to keep the scenario short (scenario p covers it).
func (e *env) scenarioReplace(t *testing.T) {
	hosts := []metal3v1.BareMetalHost{e.NewHost("rp-m", replaceBase), e.NewHost("rp-a", replaceBase+1), e.NewHost("rp-b", replaceBase+2)}
	for i := range hosts[1:] {
		hosts[1+i].Labels = map[string]string{"bpa-e2e/replace": "worker"}
	}
	e.AddHosts(e.ctx, hosts)
	minute := &metav1.Duration{Duration: time.Minute}
	p := &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "rp", Labels: map[string]string{bpav1.ClusterLabel: "rp"}},
		Spec: bpav1.ProvisioningSpec{
			Masters:        []bpav1.NodeEntry{{"rm1": {MACAddress: hosts[0].Spec.BootMACAddress}}},
			Workers:        []bpav1.NodeEntry{{"rw1": nil}},
			WorkerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bpa-e2e/replace": "worker"}},
			EtcdBackup:     &bpav1.EtcdBackup{BeforeDay2: bpav1.BackupSkip},
			Remediation:    &bpav1.Remediation{UnhealthyFor: minute, Cooldown: minute, Rungs: []bpav1.RemediationRung{bpav1.RungReplace}},
		},
	}
	e.create(t, p)
	built := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	i := slices.IndexFunc(built.Status.Applied.Hosts, func(h bpav1.HostStatus) bool { return h.Name == "rw1" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "rp-a", built.Status.Applied.Hosts[i].BareMetalHost, "the smallest fit, then by name")
	dead := e.Machine(built.Status.Applied.Hosts[i].IP)
	before, err := kubespraysim.HostLog(dead.KubernetesDir())
	require.NoError(t, err)

	stopped := time.Now()
	dead.Stop()
	got := &bpav1.Provisioning{}
	e.waitWithin(t, 2*runTimeout, got, p.Name, func() bool {
		if got.Status.Phase == bpav1.PhaseFailed || got.Status.Phase == bpav1.PhaseError {
			t.Fatalf("a run of the replacement %s: %s", got.Status.Phase, got.Status.Message)
		}
		j := slices.IndexFunc(got.Status.Applied.Hosts, func(h bpav1.HostStatus) bool { return h.Name == "rw1" })
		return got.Status.Phase == bpav1.PhaseSucceeded && j >= 0 && got.Status.Applied.Hosts[j].BareMetalHost == "rp-b" &&
			len(got.Status.Applied.Replacements) == 0
	}, "rw1 applied on the spare rp-b")
	t.Logf("replace: rw1 joined on the spare %s after its machine stopped (unhealthyFor 1m)", time.Since(stopped).Round(time.Second))

	assert.Equal(t, 1, e.countEvents(t, p.Name, bpav1.EventRemediationReplace, corev1.EventTypeNormal))
	assert.Equal(t, int64(1), got.Status.ObservedGeneration, "the spec was not edited")
	var ops []string
	for _, o := range got.Status.Operations {
		if o.Generation == 1 && slices.Equal(o.Nodes, []string{"rw1"}) && o.Result == "Succeeded" {
			ops = append(ops, o.Name)
		}
	}
	assert.Equal(t, []string{translator.StepRemoveWorkers, translator.StepScaleWorkers}, ops, "removed, then added back, by two runs")
	rec := got.Status.Remediation.Nodes
	require.Len(t, rec, 1)
	assert.Equal(t, bpav1.RungReplace, rec[0].Rung)
	assert.NotNil(t, rec[0].ReplacedAt)
	after, err := kubespraysim.HostLog(dead.KubernetesDir())
	require.NoError(t, err)
	var did []string
	for _, l := range after[len(before):] {
		did = append(did, l.Playbook+": "+l.Did)
	}
	assert.Equal(t, []string{"remove-node.yml: removed ungracefully, not drained, Node deleted, not reset"}, did, "the dead host")

	kc, err := kubernetes.NewForConfig(e.App.RESTConfig)
	require.NoError(t, err)
	e.waitWithin(t, time.Minute, &bpav1.Provisioning{}, p.Name, func() bool { return nodeReady(t, kc, "rw1") }, "Node rw1 Ready")
	old := &metal3v1.BareMetalHost{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: "rp-a"}, old))
	assert.Nil(t, old.Spec.ConsumerRef, "the dead host is released")
	assert.Contains(t, old.Annotations[bpav1.HostUnhealthyAnnotation], "node rw1 of Provisioning "+e.Namespace+"/rp")
	spare := &metal3v1.BareMetalHost{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: "rp-b"}, spare))
	require.NotNil(t, spare.Spec.ConsumerRef)
	assert.Equal(t, got.UID, spare.Spec.ConsumerRef.UID)
}
