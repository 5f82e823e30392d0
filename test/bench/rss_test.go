package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// BenchmarkControllerRSS measures the memory of the real `bpa controller` process (default
// settings) holding 1,000 Provisionings and their 1,000 running Workflows of 50 Pod nodes
// each (plus Argo's DAG and Retry nodes; see runningStatus) in its caches. The Workflows
// exist, owned by their CRs, before the controller starts, so it adopts them; memory is
// read from /proc once every CR has status.workflow set, i.e. once the caches have synced
// and every CR has been reconciled.
//
// Reported: rss-MiB (VmRSS then; target < 150), anon-MiB (its RssAnon part: the rest is
// the binary's own mapped pages), peak-MiB (VmHWM, the high-water mark, which includes the
// initial List), sync-s (controller start to all CRs reconciled) and wf-KiB (the JSON size
// of one Workflow as stored).
func BenchmarkControllerRSS(b *testing.B) {
	const n, nodes = 1000, 50
	e := newEnv(b)
	ns := e.rig.Namespace
	crs := e.createProvisionings(b, ns, n)
	var size int
	must(b, parallel(n, func(ctx context.Context, i int) error {
		wf, err := translator.Provisioning(crs[i], translator.Options{})
		if err != nil {
			return err
		}
		wf.Status = runningStatus(wf, nodes)
		if i == 0 {
			data, err := json.Marshal(wf)
			if err != nil {
				return err
			}
			size = len(data)
		}
		return e.client.Create(ctx, wf)
	}), "creating Workflows")

	reconciled := newNameSet(n)
	e.watch(b, ns, &bpav1.Provisioning{}, func(o client.Object) {
		if o.(*bpav1.Provisioning).Status.Workflow != nil {
			reconciled.add(o.GetName())
		}
	})
	start := time.Now()
	ctl := startController(b, e.rig, ns)
	reconciled.await(b, "Provisionings with status.workflow", 5*time.Minute, ctl.exited)
	synced := time.Since(start)
	rss, anon, peak, err := memory(ctl.pid)
	must(b, err, "reading the controller's memory")

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(anon, "anon-MiB")
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(synced.Seconds(), "sync-s")
	b.ReportMetric(float64(size)/1024, "wf-KiB")
}

// runningStatus is the status Argo keeps for wf midway through a run that needed retries:
// discover-hosts, resolve-leases and render-inventory done, run-kubespray running. As Argo
// builds it, each task is a Retry node whose children are its Pod attempts, and a task's
// successful attempt leads to the next task; resolve-leases waited for its DHCP leases
// through many failed attempts. n Pod nodes in all (n >= 6), each with a name, display name,
// template reference, host, timestamps, resource usage and inputs, and once finished an exit
// code and a ~200-byte output parameter.
func runningStatus(wf *wfv1.Workflow, n int) wfv1.WorkflowStatus {
	started := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	st := wfv1.WorkflowStatus{
		Phase: wfv1.WorkflowRunning, StartedAt: started, Progress: wfv1.Progress(fmt.Sprintf("%d/%d", n-1, n)),
		EstimatedDuration: 5400, Nodes: wfv1.Nodes{},
	}
	// Pod attempts per task: resolve-leases takes what the others leave.
	attempts := []int{1, n - 5, 1, 3}
	seq := 0
	node := func(name, display string, typ wfv1.NodeType, phase wfv1.NodePhase, step string) *wfv1.NodeStatus {
		seq++
		return &wfv1.NodeStatus{
			ID: fmt.Sprintf("%s-%d", wf.Name, 1000000000+seq*7919), Name: wf.Name + "." + name, DisplayName: display, Type: typ,
			TemplateRef: &wfv1.TemplateRef{Name: "bpa-provision", Template: step}, TemplateScope: "local/" + wf.Name,
			Phase: phase, BoundaryID: wf.Name, StartedAt: metav1.NewTime(started.Add(time.Duration(seq) * time.Minute)),
		}
	}
	finish := func(n *wfv1.NodeStatus) {
		if n.Phase == wfv1.NodeRunning {
			return
		}
		n.FinishedAt = metav1.NewTime(n.StartedAt.Add(40 * time.Second))
	}
	root := &wfv1.NodeStatus{ID: wf.Name, Name: wf.Name, DisplayName: wf.Name, Type: wfv1.NodeTypeDAG, Phase: wfv1.NodeRunning, StartedAt: started}
	prev := root
	for t, count := range attempts {
		step := translator.ProvisioningSteps[t]
		retry := node(step, step, wfv1.NodeTypeRetry, wfv1.NodeSucceeded, step)
		if t == len(attempts)-1 {
			retry.Phase = wfv1.NodeRunning
		}
		prev.Children = append(prev.Children, retry.ID)
		var last *wfv1.NodeStatus
		for a := range count {
			display := fmt.Sprintf("%s(%d)", step, a)
			pod := node(display, display, wfv1.NodeTypePod, wfv1.NodeFailed, step)
			exit := "1"
			pod.Message = "Error (exit code 1): no DHCP lease yet for 2 of 3 hosts"
			if a == count-1 {
				pod.Phase, pod.Message, exit = retry.Phase, "", "0"
			}
			pod.HostNodeName = fmt.Sprintf("node-%d", seq%8)
			pod.Progress = "1/1"
			pod.ResourcesDuration = wfv1.ResourcesDuration{"cpu": 12, "memory": 34}
			pod.Inputs = &wfv1.Inputs{Parameters: []wfv1.Parameter{
				{Name: "provisioning", Value: wfv1.AnyStringPtr(wf.Labels[bpav1.ProvisioningNameLabel])},
				{Name: "generation", Value: wfv1.AnyStringPtr("1")},
			}}
			if pod.Phase != wfv1.NodeRunning {
				pod.Outputs = &wfv1.Outputs{ExitCode: &exit, Parameters: []wfv1.Parameter{{Name: "hosts", Value: wfv1.AnyStringPtr(hostsJSON)}}}
			}
			finish(pod)
			retry.Children = append(retry.Children, pod.ID)
			st.Nodes[pod.ID] = *pod
			last = pod
		}
		finish(retry)
		retry.Outputs = last.Outputs // Argo gives the Retry node its last attempt's outputs
		st.Nodes[retry.ID] = *retry
		prev = last
	}
	st.Nodes[root.ID] = *root
	return st
}
