package translator_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Issue 14's "plan plus translation for a 1,000-node cluster (pools)" target (< 20 ms): what
// the controller computes per reconcile of a 15-master cluster with a worker pool.
// translator.Provisioning plans (PlanChange) then translates; the PlanChange benchmarks
// show the planner's share.

// poolCluster is a Provisioning of 15 masters (by MAC) and one pool of the given size.
func poolCluster(replicas int32) *bpav1.Provisioning {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default", Generation: 2, UID: "u",
		Labels: map[string]string{bpav1.ClusterLabel: "big"}}}
	for i := 1; i <= 15; i++ {
		p.Spec.Masters = append(p.Spec.Masters, bpav1.NodeEntry{fmt.Sprintf("master-%d", i): {MACAddress: fmt.Sprintf("00:00:00:00:00:%02x", i)}})
	}
	cpu := int32(8)
	p.Spec.WorkerPools = []bpav1.WorkerPool{{Name: "edge", Replicas: replicas, CPU: &cpu}}
	return p
}

// appliedCluster is the status.applied of a poolCluster(replicas) that this release built:
// every desired node on a host of its own.
func appliedCluster(b *testing.B, replicas int32) *bpav1.AppliedState {
	p := poolCluster(replicas)
	nodes, err := hostmatch.Desired(p)
	require.NoError(b, err)
	c, err := translator.PlanChange(p)
	require.NoError(b, err)
	applied := &bpav1.AppliedState{KubesprayVersion: c.KubesprayVersion, KubernetesVersion: c.KubernetesVersion, Settings: c.Settings, Generation: 1}
	for i, n := range nodes {
		applied.Hosts = append(applied.Hosts, bpav1.HostStatus{Name: n.Name, Roles: n.Roles(), Etcd: n.Etcd,
			MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", i>>8, i&0xff), IP: fmt.Sprintf("10.0.%d.%d", i>>8, i&0xff), BareMetalHost: fmt.Sprintf("bmh-%04d", i)})
	}
	return applied
}

// benchPlanAndTranslate times PlanChange alone, and translator.Provisioning, which plans
// and translates as the controller's reconcile does, for p; it checks once that the plan
// is the one named.
func benchPlanAndTranslate(b *testing.B, p *bpav1.Provisioning, step string, nodes int) {
	c, err := translator.PlanChange(p)
	require.NoError(b, err)
	require.Len(b, c.Steps, 1)
	require.Equal(b, step, c.Steps[0].Name)
	require.Len(b, c.Steps[0].Nodes, nodes)
	b.Run("plan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := translator.PlanChange(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plan+translate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := translator.Provisioning(p, translator.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPlan1000Create: first creation, 15 masters and 1,000 pool workers.
func BenchmarkPlan1000Create(b *testing.B) {
	benchPlanAndTranslate(b, poolCluster(1000), translator.StepCreate, 0)
}

// BenchmarkPlan1000ScaleUp: day 2, 990 pool members applied, the spec asks for 1,000.
func BenchmarkPlan1000ScaleUp(b *testing.B) {
	p := poolCluster(1000)
	p.Status.Applied = appliedCluster(b, 990)
	benchPlanAndTranslate(b, p, translator.StepScaleWorkers, 10)
}

// BenchmarkPlan1000Removal: day 2, 1,000 pool members applied, the spec asks for 990.
func BenchmarkPlan1000Removal(b *testing.B) {
	p := poolCluster(990)
	p.Status.Applied = appliedCluster(b, 1000)
	benchPlanAndTranslate(b, p, translator.StepRemoveWorkers, 10)
}
