package bench

import (
	"context"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"go.uber.org/zap/zapcore"
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
//   - floor-s: the 8 workers' creates, first to last.
//   - bpa-s: from starting the in-process manager (the 500 CRs already exist, created while
//     no controller ran, so their creation is not timed) until all 500 CRs have
//     status.workflow set and all 500 Workflows exist. It includes the manager's start and
//     cache sync (tens of ms here), and each CR's finalizer patch, Workflow create and
//     status patch (and the RunStarted Event the recorder posts alongside), as seen
//     through a watch on the Provisionings.
//   - ratio: bpa-s / floor-s; target <= 2.0.
func BenchmarkCreate500Workflows(b *testing.B) {
	const n = 500
	// controller-runtime refuses a second controller named "provisioning" in one process
	// (its metrics would clash), and NewManager offers no SkipNameValidation: one manager
	// per test binary, hence one iteration.
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x: the in-process manager can be built once per process")
	}
	e := newEnv(b)
	// Errors only: 500 "started run" lines would bury the results.
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))

	// The first requests of a kind pay for lazy set-up (the apiserver's CRD handlers and
	// watch caches, the client's connection): pay it here, not in either measurement.
	warm := e.namespace(b, "warmup")
	e.createProvisionings(b, warm, 2*workers)
	must(b, parallel(2*workers, func(ctx context.Context, i int) error {
		return e.client.Create(ctx, workflowFor(b, newProvisioning(warm, i)))
	}), "warm-up")

	// (a) The floor.
	floorNS := e.namespace(b, "floor")
	wfs := make([]*wfv1.Workflow, n)
	for i := range wfs {
		wfs[i] = workflowFor(b, newProvisioning(floorNS, i))
	}
	start := time.Now()
	must(b, parallel(n, func(ctx context.Context, i int) error { return e.client.Create(ctx, wfs[i]) }), "floor creates")
	floor := time.Since(start)

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
	mgr, err := controller.NewManager(cfg, controller.Options{Namespaces: []string{ns}, MetricsAddr: "0", ProbeAddr: "0"})
	must(b, err, "controller manager")
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	b.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			b.Errorf("manager: %v", err)
		}
	})
	start = time.Now()
	go func() { stopped <- mgr.Start(ctx) }()
	reconciled.await(b, "Provisionings with status.workflow", 5*time.Minute, nil)
	bpa := time.Since(start)
	// status.workflow is written only once the Workflow was created, so the Workflows exist
	// by now; a List checks that without a second watch competing for CPU while timed.
	list := &wfv1.WorkflowList{}
	must(b, e.client.List(context.Background(), list, client.InNamespace(ns)), "listing Workflows")
	if len(list.Items) != n {
		b.Fatalf("%d Workflows, want %d", len(list.Items), n)
	}

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(floor.Seconds(), "floor-s")
	b.ReportMetric(bpa.Seconds(), "bpa-s")
	b.ReportMetric(bpa.Seconds()/floor.Seconds(), "ratio")
}

// workflowFor is what the controller would create for p once stored (generation 1, a UID
// for the owner reference).
func workflowFor(b *testing.B, p *bpav1.Provisioning) *wfv1.Workflow {
	p.Generation, p.UID = 1, uuid.NewUUID()
	wf, err := translator.Provisioning(p, translator.Options{})
	must(b, err, "translating "+p.Name)
	return wf
}
