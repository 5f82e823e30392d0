package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
)

// BenchmarkRunStartWrites prices, one kind at a time, the four writes with which the
// controller starts a run (see BenchmarkCreate500Workflows), 500 of each by 8 workers with
// no watch open: the Workflow create (the floor's only write), the finalizer update, the
// status patch and the RunStarted Event. It shows what the create ratio is made of.
//
// Reported, per write kind: <kind>-s (wall time for 500) and <kind>-rig-ms (kube-apiserver
// and etcd CPU per write); writes-ratio, the four walls summed over the Workflow creates'
// wall: the ratio a controller doing exactly these writes with no reads, watches or CPU
// of its own would reach.
func BenchmarkRunStartWrites(b *testing.B) {
	const n = 500
	e := newWarmEnv(b)

	ns := e.namespace(b, "writes")
	crs := e.createProvisionings(b, ns, n)
	meter := cpuMeter{pids: e.rig.PIDs()}
	var total, create time.Duration
	measure := func(kind string, write func(ctx context.Context, i int) error) {
		cpu0 := meter.sample(b)
		start := time.Now()
		must(b, parallel(n, write), kind)
		wall := time.Since(start)
		cpu := meter.sample(b).sub(cpu0)
		total += wall
		b.ReportMetric(wall.Seconds(), kind+"-s")
		b.ReportMetric(ms(cpu.rig)/n, kind+"-rig-ms")
	}
	measure("workflow-create", func(ctx context.Context, i int) error {
		return e.client.Create(ctx, workflowFor(b, newProvisioning(ns, i)))
	})
	create = total
	measure("finalizer-update", func(ctx context.Context, i int) error {
		crs[i].Finalizers = []string{controller.Finalizer}
		return e.client.Update(ctx, crs[i])
	})
	measure("status-patch", func(ctx context.Context, i int) error {
		// The status the first reconcile writes, less the step list and two conditions.
		before := crs[i].DeepCopy()
		st := &crs[i].Status
		st.Phase, st.Progress, st.ObservedGeneration = bpav1.PhasePending, "0/6", 1
		st.Workflow = &bpav1.WorkflowReference{Name: crs[i].Name + "-provision-1"}
		st.Conditions = []metav1.Condition{{Type: bpav1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing",
			Message: "Workflow " + st.Workflow.Name + " is Pending", LastTransitionTime: metav1.Now(), ObservedGeneration: 1}}
		return e.client.Status().Patch(ctx, crs[i], client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	measure("event-create", func(ctx context.Context, i int) error {
		return e.client.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.run-started", crs[i].Name)},
			InvolvedObject: corev1.ObjectReference{Kind: "Provisioning", APIVersion: bpav1.GroupVersion.String(), Namespace: ns, Name: crs[i].Name, UID: crs[i].UID},
			Reason:         "RunStarted", Message: "Started Workflow " + crs[i].Name + "-provision-1 for generation 1", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "bpa-controller"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		})
	})
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(total.Seconds()/create.Seconds(), "writes-ratio")
}
