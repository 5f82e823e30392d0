package bench

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// BenchmarkCreate500Workflows compares the controller turning 500 Provisionings into 500
// Workflows with the floor: 8 parallel clients creating the same 500 Workflows directly.
//
//   - floor-s: the 8 workers' creates, first to last; the median of three runs (each in a
//     namespace of its own), because one run of a second or two swings by a third.
//   - bpa-s: from starting the in-process manager (the 500 CRs already exist, created while
//     no controller ran, so their creation is not timed) until all 500 CRs have
//     status.workflow set and all 500 Workflows exist. It includes the manager's start and
//     cache sync (tens of ms here), and each CR's finalizer patch, Workflow create and
//     status patch (and the RunStarted Event the recorder posts alongside), as seen
//     through a watch on the Provisionings.
//   - events-s: the same clock until the 500 RunStarted Events exist (they trail).
//   - ratio: bpa-s / floor-s; target <= 2.0.
func BenchmarkCreate500Workflows(b *testing.B) {
	const n = 500
	e := newWarmEnv(b)
	// Errors only: 500 "started run" lines would bury the results.
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))

	// (a) The floor.
	meter := cpuMeter{pids: e.rig.PIDs()}
	type floorRun struct {
		wall time.Duration
		cpu  cpuSample
	}
	var floors []floorRun
	for range 3 {
		floorNS := e.namespace(b, "floor")
		wfs := make([]*wfv1.Workflow, n)
		for i := range wfs {
			wfs[i] = workflowFor(b, newProvisioning(floorNS, i))
		}
		cpu0 := meter.sample(b)
		start := time.Now()
		must(b, parallel(n, func(ctx context.Context, i int) error { return e.client.Create(ctx, wfs[i]) }), "floor creates")
		floors = append(floors, floorRun{time.Since(start), meter.sample(b).sub(cpu0)})
	}
	slices.SortFunc(floors, func(a, b floorRun) int { return cmp.Compare(a.wall, b.wall) })
	floor, floorCPU := floors[1].wall, floors[1].cpu

	// (b) BPA.
	ns := e.namespace(b, "bpa")
	e.createProvisionings(b, ns, n)
	reconciled := newNameSet(n)
	e.watch(b, ns, &bpav1.Provisioning{}, func(o client.Object) {
		if o.(*bpav1.Provisioning).Status.Workflow != nil {
			reconciled.add(o.GetName())
		}
	})

	cfg := rest.CopyConfig(e.rig.RESTConfig)
	cfg.QPS, cfg.Burst = float32(*controllerQPS), *controllerBurst
	// The WorkflowTemplates stay unapplied (ApplyTemplates false): only Argo reads them.
	// SkipNameValidation: -count builds one manager per repeat in this process.
	mgr, err := controller.NewManager(cfg, controller.Options{Namespaces: []string{ns}, MetricsAddr: "0", ProbeAddr: "0",
		MaxConcurrentReconciles: *controllerWorkers, SkipNameValidation: true})
	must(b, err, "controller manager")
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	b.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			b.Errorf("manager: %v", err)
		}
	})
	cpu0 := meter.sample(b)
	start := time.Now()
	go func() { stopped <- mgr.Start(ctx) }()
	reconciled.await(b, "Provisionings with status.workflow", 5*time.Minute, nil)
	bpa := time.Since(start)
	bpaCPU := meter.sample(b).sub(cpu0)
	// status.workflow is written only once the Workflow was created, so the Workflows exist
	// by now; a List checks that without a second watch competing for CPU while timed.
	list := &wfv1.WorkflowList{}
	must(b, e.client.List(context.Background(), list, client.InNamespace(ns)), "listing Workflows")
	if len(list.Items) != n {
		b.Fatalf("%d Workflows, want %d", len(list.Items), n)
	}
	// The RunStarted Events go out asynchronously, one at a time, behind the status
	// writes. Wait for them (untimed polls, after the measurement) so that events-s shows
	// how far they trail, and so that none is still in flight when the rig stops.
	waitForEvents(b, e.client, ns, "RunStarted", n)
	eventsDone := time.Since(start)

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(floor.Seconds(), "floor-s")
	b.ReportMetric(bpa.Seconds(), "bpa-s")
	b.ReportMetric(bpa.Seconds()/floor.Seconds(), "ratio")
	b.ReportMetric(eventsDone.Seconds(), "events-s")
	// Where the time went: CPU per CR in the rig (apiserver and etcd) and in this process
	// (the controller, or the floor's clients; plus the watch that times BPA).
	b.ReportMetric(ms(floorCPU.rig)/n, "floor-rig-cpu-ms/CR")
	b.ReportMetric(ms(floorCPU.self)/n, "floor-self-cpu-ms/CR")
	b.ReportMetric(ms(bpaCPU.rig)/n, "bpa-rig-cpu-ms/CR")
	b.ReportMetric(ms(bpaCPU.self)/n, "bpa-self-cpu-ms/CR")
}

// workflowFor is what the controller would create for p once stored (generation 1, a UID
// for the owner reference).
func workflowFor(b *testing.B, p *bpav1.Provisioning) *wfv1.Workflow {
	p.Generation, p.UID = 1, uuid.NewUUID()
	wf, err := translator.Provisioning(p, translator.Options{})
	must(b, err, "translating "+p.Name)
	return wf
}

// waitForEvents polls until ns holds n Events with the given reason.
func waitForEvents(b *testing.B, c client.Client, ns, reason string, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list := &corev1.EventList{}
		must(b, c.List(context.Background(), list, client.InNamespace(ns)), "listing Events")
		got := 0
		for _, ev := range list.Items {
			if ev.Reason == reason {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d %s Events after 2 minutes", got, n, reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newWarmEnv is newEnv for a benchmark whose one iteration is a whole measurement on a
// fresh rig (run it with -benchtime 1x, and -count for repeats), with the rig warmed up:
// the first requests of a kind pay for lazy set-up (the apiserver's CRD handlers and watch
// caches, the client's connection), which belongs in no measurement.
func newWarmEnv(b *testing.B) *env {
	b.Helper()
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x (and -count N for repeats)")
	}
	e := newEnv(b)
	warm := e.namespace(b, "warmup")
	e.createProvisionings(b, warm, 2*workers)
	must(b, parallel(2*workers, func(ctx context.Context, i int) error {
		return e.client.Create(ctx, workflowFor(b, newProvisioning(warm, i)))
	}), "warm-up")
	return e
}
