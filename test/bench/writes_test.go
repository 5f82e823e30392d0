package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
)

// BenchmarkRunStartWrites prices, one kind at a time, the four writes with which the
// controller starts a run (see BenchmarkCreate500Workflows), 500 of each by 8 workers with
// no watch open, sent as the controller sends them: the Workflow create (the floor's only
// write), the finalizer update, the status update and the RunStarted Event. It shows what
// the create ratio is made of.
//
// Reported, per write kind: <kind>-s (wall time for 500) and <kind>-rig-ms (kube-apiserver
// and etcd CPU per write); writes-ratio, the four walls summed over the Workflow creates'
// wall: the ratio a controller doing exactly these writes with no reads, watches or CPU
// of its own would reach. watched-writes-ratio is the same four writes again, on 500 fresh
// CRs, while an informer of this process watches their Provisionings and Workflows as the
// controller's do (over the same unwatched creates): what the writes cost a controller
// that sees their results, without any reconcile logic.
func BenchmarkRunStartWrites(b *testing.B) {
	const n = 500
	e := newWarmEnv(b)
	meter := cpuMeter{pids: e.rig.PIDs()}

	ns := e.namespace(b, "writes")
	w := runStartWrites(b, e, meter, ns, e.createProvisionings(b, ns, n), true)
	create, total := w.create, w.total()

	watchedNS := e.namespace(b, "watched")
	crs := e.createProvisionings(b, watchedNS, n)
	e.watch(b, watchedNS, &bpav1.Provisioning{}, func(client.Object) {})
	e.watch(b, watchedNS, &wfv1.Workflow{}, func(client.Object) {})
	watched := runStartWrites(b, e, meter, watchedNS, crs, false).total()

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(total.Seconds()/create.Seconds(), "writes-ratio")
	b.ReportMetric(watched.Seconds()/create.Seconds(), "watched-writes-ratio")
}

// startWrites are the walls of the four writes with which the controller starts runs.
type startWrites struct{ create, finalizer, status, event time.Duration }

func (w startWrites) total() time.Duration { return w.create + w.finalizer + w.status + w.event }

// runStartWrites sends the four writes for crs, one kind at a time, and returns the wall of
// each; report adds the per-kind metrics.
func runStartWrites(b *testing.B, e *env, meter cpuMeter, ns string, crs []*bpav1.Provisioning, report bool) (w startWrites) {
	n := len(crs)
	measure := func(kind string, wall *time.Duration, write func(ctx context.Context, i int) error) {
		cpu0 := meter.sample(b)
		start := time.Now()
		must(b, parallel(n, write), kind)
		*wall = time.Since(start)
		cpu := meter.sample(b).sub(cpu0)
		if report {
			b.ReportMetric(wall.Seconds(), kind+"-s")
			b.ReportMetric(ms(cpu.rig)/float64(n), kind+"-rig-ms")
		}
	}
	measure("workflow-create", &w.create, func(ctx context.Context, i int) error {
		return e.client.Create(ctx, workflowFor(b, newProvisioning(ns, i)))
	})
	measure("finalizer-update", &w.finalizer, func(ctx context.Context, i int) error {
		crs[i].Finalizers = []string{controller.Finalizer}
		return e.client.Update(ctx, crs[i])
	})
	measure("status-update", &w.status, func(ctx context.Context, i int) error {
		// The status the first reconcile writes, less the step list and two conditions,
		// with the resourceVersion of the copy it started from.
		st := &crs[i].Status
		st.Phase, st.Progress, st.ObservedGeneration = bpav1.PhasePending, "0/6", 1
		st.Workflow = &bpav1.WorkflowReference{Name: crs[i].Name + "-provision-1"}
		st.Conditions = []metav1.Condition{{Type: bpav1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing",
			Message: "Workflow " + st.Workflow.Name + " is Pending", LastTransitionTime: metav1.Now(), ObservedGeneration: 1}}
		return e.client.Status().Update(ctx, crs[i])
	})
	measure("event-create", &w.event, func(ctx context.Context, i int) error {
		return e.client.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.run-started", crs[i].Name)},
			InvolvedObject: corev1.ObjectReference{Kind: "Provisioning", APIVersion: bpav1.GroupVersion.String(), Namespace: ns, Name: crs[i].Name, UID: crs[i].UID},
			Reason:         "RunStarted", Message: "Started Workflow " + crs[i].Name + "-provision-1 for generation 1", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "bpa-controller"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		})
	})
	return w
}

// statusAsWritten times the status update alone as the controller sends it: each of crs
// (given the finalizer first, untimed) gets written, the status the controller wrote for a
// generated CR named from, renamed for it. runStartWrites' status is smaller: it leaves out
// the step list, the plan and two conditions.
func statusAsWritten(b *testing.B, e *env, crs []*bpav1.Provisioning, written bpav1.ProvisioningStatus, from string) time.Duration {
	raw, err := json.Marshal(written)
	must(b, err, "encoding the written status")
	must(b, parallel(len(crs), func(ctx context.Context, i int) error {
		crs[i].Finalizers = []string{controller.Finalizer}
		if err := e.client.Update(ctx, crs[i]); err != nil {
			return err
		}
		return json.Unmarshal([]byte(strings.ReplaceAll(string(raw), from, crs[i].Name)), &crs[i].Status)
	}), "finalizer updates")
	start := time.Now()
	must(b, parallel(len(crs), func(ctx context.Context, i int) error { return e.client.Status().Update(ctx, crs[i]) }), "status updates")
	return time.Since(start)
}
