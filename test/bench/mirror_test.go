package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// BenchmarkStatusMirrorLatency measures how long a Workflow node change takes to show in
// its CR's status, with 500 active Workflows in the controller's cache. The controller is
// the real `bpa controller` binary with its default settings.
//
// Each sample plays Argo on one Workflow: it sets status.phase Running and the
// discover-hosts Pod node to Running, or then to Succeeded (with its hosts output), by
// updating the whole object (the Workflow CRD has no status subresource). A sample's clock
// starts just before that update is sent and stops when a watch on the Provisioning delivers
// a status whose discover-hosts step has the new phase. One change is in flight at a time;
// 150 Workflows spread over the 500 take two changes each, 300 samples per iteration.
//
// Reported: p50-ms and p99-ms (target p99 < 1 s), and samples.
func BenchmarkStatusMirrorLatency(b *testing.B) {
	const n, sampled = 500, 150
	e := newEnv(b)
	ns := e.rig.Namespace
	e.createProvisionings(b, ns, n)

	// The one change being waited for, matched by the Provisioning watch.
	type expectation struct {
		cr    string
		phase string
		start time.Time
		seen  chan time.Duration
	}
	var mu sync.Mutex
	var want *expectation
	reconciled := newNameSet(n)
	e.watch(b, ns, &bpav1.Provisioning{}, func(o client.Object) {
		p := o.(*bpav1.Provisioning)
		if p.Status.Workflow != nil {
			reconciled.add(p.Name)
		}
		mu.Lock()
		defer mu.Unlock()
		if want != nil && p.Name == want.cr && p.Status.Phase == bpav1.PhaseRunning &&
			len(p.Status.Steps) > 0 && p.Status.Steps[0].Name == "discover-hosts" && p.Status.Steps[0].Phase == want.phase {
			want.seen <- time.Since(want.start)
			want = nil
		}
	})
	ctl := startController(b, e.rig, ns)
	reconciled.await(b, "Provisionings with status.workflow", 5*time.Minute, ctl.exited)

	ctx := context.Background()
	sample := func(cr string, phase wfv1.NodePhase) time.Duration {
		wf := &wfv1.Workflow{}
		key := client.ObjectKey{Namespace: ns, Name: translator.WorkflowName(cr, "provision", 1, "", "")}
		must(b, e.client.Get(ctx, key, wf), "getting Workflow")
		setDiscoverHosts(wf, phase)
		w := &expectation{cr: cr, phase: string(phase), seen: make(chan time.Duration, 1)}
		mu.Lock()
		want = w
		w.start = time.Now()
		mu.Unlock()
		must(b, e.client.Update(ctx, wf), "updating Workflow")
		select {
		case d := <-w.seen:
			return d
		case <-ctl.exited:
			b.Fatal("the controller exited")
		case <-time.After(30 * time.Second):
			b.Fatalf("%s never showed discover-hosts %s", cr, phase)
		}
		return 0
	}

	var samples []time.Duration
	for range b.N {
		for i := range sampled {
			cr := newProvisioning(ns, i*n/sampled).Name
			samples = append(samples, sample(cr, wfv1.NodeRunning), sample(cr, wfv1.NodeSucceeded))
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(len(samples)), "samples")
	b.ReportMetric(ms(percentile(samples, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(samples, 99)), "p99-ms")
}

// setDiscoverHosts makes wf look as Argo leaves it with the first step at phase: the
// Workflow Running, and a Pod node for discover-hosts (with its hosts output once done).
func setDiscoverHosts(wf *wfv1.Workflow, phase wfv1.NodePhase) {
	now := metav1.Now()
	wf.Status.Phase = wfv1.WorkflowRunning
	if wf.Status.StartedAt.IsZero() {
		wf.Status.StartedAt = now
	}
	id := wf.Name + "-1815391843" // Argo's node IDs are <workflow>-<hash of the node name>
	node := wfv1.NodeStatus{
		ID: id, Name: wf.Name + ".discover-hosts", DisplayName: "discover-hosts", Type: wfv1.NodeTypePod,
		TemplateRef: &wfv1.TemplateRef{Name: "bpa-provision", Template: "discover-hosts"},
		Phase:       phase, BoundaryID: wf.Name, StartedAt: now, HostNodeName: "node-1",
	}
	if phase == wfv1.NodeSucceeded {
		node.FinishedAt = now
		node.Outputs = &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: "hosts", Value: wfv1.AnyStringPtr(hostsJSON)}}}
	}
	if wf.Status.Nodes == nil {
		wf.Status.Nodes = wfv1.Nodes{}
	}
	wf.Status.Nodes[id] = node
}

// hostsJSON is a discover-hosts output of two hosts, about 200 bytes.
const hostsJSON = `[{"name":"master-1","roles":["master"],"mac":"02:00:00:00:00:01","bareMetalHost":"rack1-host-01"},` +
	`{"name":"worker-1","roles":["worker"],"mac":"02:00:00:00:00:02","bareMetalHost":"rack1-host-02"}]`
