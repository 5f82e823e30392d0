package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
)

// BenchmarkSixStepRun compares, on one simulated site (test/framework/sim: a real
// workflow-controller and BPA controller, step pods on a real node with Argo's real
// executor), a Provisioning's six-step run with a plain Argo DAG of six no-op container steps
// (`bpa version` in the same bpa image) on the same node, three of each, alternating. Issue 14's target: the
// run's own overhead, everything but kubespray's playbook time, <= 1.3x the DAG.
//
//   - dag-s: the DAG's Workflow create until its phase is Succeeded (the median run);
//   - run-s: the Provisioning's create until its status.phase is Succeeded (one master on
//     a host of its own each time, so every run is a first creation); kubespray-s: the
//     time the SIMULATED ansible-playbook processes took within it; overhead-s: run-s less
//     kubespray-s (all the medians of the overheads' run);
//   - ratio: overhead-s / dag-s;
//   - start-s, wf-s, mirror-s: where the run's time goes: the create until its Workflow
//     exists (the BPA controller), the Workflow's own run (Argo and the steps), its end
//     until the CR says Succeeded (the BPA controller again).
func BenchmarkSixStepRun(b *testing.B) {
	const runs = 3
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x")
	}
	s := sim.New(b, sim.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	type runTimes struct{ total, kubespray, start, wf, mirror time.Duration }
	var dags []time.Duration
	var bpaRuns []runTimes
	for i := range runs {
		dags = append(dags, noopDAG(ctx, b, s, i))

		p, cluster := siteCluster(ctx, s, i)
		before := playbookTime(b, s)
		var seen runTimes
		var wfDone time.Duration
		start := time.Now()
		must(b, s.Client.Create(ctx, p), "creating "+p.Name)
		poll(b, 30*time.Second*runs, func() bool {
			list := &wfv1.WorkflowList{}
			must(b, s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{bpav1.ProvisioningNameLabel: p.Name}), "listing Workflows")
			if len(list.Items) > 0 && seen.start == 0 {
				seen.start = time.Since(start)
			}
			if len(list.Items) > 0 && list.Items[0].Status.Phase == wfv1.WorkflowSucceeded && wfDone == 0 {
				wfDone = time.Since(start)
			}
			got := &bpav1.Provisioning{}
			must(b, s.Client.Get(ctx, client.ObjectKeyFromObject(p), got), "reading "+p.Name)
			if got.Status.Phase == bpav1.PhaseFailed {
				b.Fatalf("Provisioning %s (cluster %s) failed: %s", p.Name, cluster, got.Status.Message)
			}
			return got.Status.Phase == bpav1.PhaseSucceeded && got.Status.ObservedGeneration == got.Generation
		}, "Provisioning "+p.Name+" to succeed")
		seen.total = time.Since(start)
		seen.kubespray = playbookTime(b, s) - before
		if seen.kubespray <= 0 {
			b.Fatal("the simulated kubespray recorded no run: is TestMain timing it?")
		}
		if wfDone == 0 { // the Workflow's end and the CR's fell between two polls
			wfDone = seen.total
		}
		seen.wf, seen.mirror = wfDone-seen.start, seen.total-wfDone
		bpaRuns = append(bpaRuns, seen)
	}
	slices.Sort(dags)
	slices.SortFunc(bpaRuns, func(x, y runTimes) int { return int((x.total - x.kubespray) - (y.total - y.kubespray)) })
	dag, run := dags[runs/2], bpaRuns[runs/2]
	overhead := run.total - run.kubespray
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(dag.Seconds(), "dag-s")
	b.ReportMetric(run.total.Seconds(), "run-s")
	b.ReportMetric(run.kubespray.Seconds(), "kubespray-s")
	b.ReportMetric(overhead.Seconds(), "overhead-s")
	b.ReportMetric(overhead.Seconds()/dag.Seconds(), "ratio")
	b.ReportMetric(run.start.Seconds(), "start-s")
	b.ReportMetric(run.wf.Seconds(), "wf-s")
	b.ReportMetric(run.mirror.Seconds(), "mirror-s")
	for i := range runs {
		r := bpaRuns[i]
		b.Logf("DAG %.2fs; BPA run %.2fs: kubespray %.2fs, start %.2fs, Workflow %.2fs, mirror %.2fs",
			dags[i].Seconds(), r.total.Seconds(), r.kubespray.Seconds(), r.start.Seconds(), r.wf.Seconds(), r.mirror.Seconds())
	}
}

// noopDAG runs a Workflow of six chained no-op steps and returns its create until
// Succeeded. Its pods run as bpa-step, the account with no rights but the executor's.
func noopDAG(ctx context.Context, b *testing.B, s *sim.Site, i int) time.Duration {
	// The site's bpa image (this tree's bpa), printing its version.
	noop := wfv1.Template{Name: "noop", Container: &corev1.Container{Image: sim.StepImage, Command: []string{"bpa", "version"}}}
	var tasks []wfv1.DAGTask
	for n := range 6 {
		t := wfv1.DAGTask{Name: fmt.Sprintf("step-%d", n+1), Template: "noop"}
		if n > 0 {
			t.Depends = fmt.Sprintf("step-%d", n)
		}
		tasks = append(tasks, t)
	}
	wf := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: fmt.Sprintf("noop-dag-%d", i)},
		Spec: wfv1.WorkflowSpec{Entrypoint: "main", ServiceAccountName: "bpa-step",
			Templates: []wfv1.Template{{Name: "main", DAG: &wfv1.DAGTemplate{Tasks: tasks}}, noop}}}
	start := time.Now()
	must(b, s.Client.Create(ctx, wf), "creating the no-op DAG")
	poll(b, time.Minute, func() bool {
		must(b, s.Client.Get(ctx, client.ObjectKeyFromObject(wf), wf), "reading the no-op DAG")
		if wf.Status.Phase == wfv1.WorkflowFailed || wf.Status.Phase == wfv1.WorkflowError {
			b.Fatalf("the no-op DAG %s: %s", wf.Status.Phase, wf.Status.Message)
		}
		return wf.Status.Phase == wfv1.WorkflowSucceeded
	}, "the no-op DAG to succeed")
	return time.Since(start)
}

// siteCluster makes the i-th cluster: one master on a BareMetalHost of its own, whose
// machine (a real sshd) the site starts, its SSH Secret, and the Provisioning (not created).
func siteCluster(ctx context.Context, s *sim.Site, i int) (*bpav1.Provisioning, string) {
	cluster := fmt.Sprintf("bench-%d", i)
	mac, ip := fmt.Sprintf("52:54:00:00:f0:%02x", i), s.HostIP(200+i)
	s.AddHosts(ctx, []metal3v1.BareMetalHost{{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-m1"},
		Spec:       metal3v1.BareMetalHostSpec{BootMACAddress: mac},
		Status: metal3v1.BareMetalHostStatus{OperationalStatus: metal3v1.OperationalStatusOK, HardwareDetails: &metal3v1.HardwareDetails{
			CPU: metal3v1.CPU{Count: 8}, RAMMebibytes: 16384, NIC: []metal3v1.NIC{{Name: "eth0", MAC: mac, IP: ip}}}},
	}})
	s.CreateSSHSecret(ctx, cluster)
	return &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: cluster, Labels: map[string]string{bpav1.ClusterLabel: cluster}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": {MACAddress: mac}}},
			SSH: &bpav1.SSHConfig{Port: int32(s.SSH.Port)}},
	}, cluster
}

// poll calls done every 50 ms until it is true, failing b after timeout.
func poll(b *testing.B, timeout time.Duration, done func() bool, what string) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			b.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// playbookTimesSuffix names the file, beside the simulated kubespray's record directory,
// where each of its runs appends how long it took (the tree's bpa_record callback).
const playbookTimesSuffix = ".ns"

// playbookTime sums the simulated kubespray's runs on s so far.
func playbookTime(b *testing.B, s *sim.Site) time.Duration {
	data, err := os.ReadFile(s.KubesprayRuns + playbookTimesSuffix)
	if os.IsNotExist(err) {
		return 0
	}
	must(b, err, "reading the simulated kubespray's times")
	var sum time.Duration
	for _, line := range strings.Fields(string(data)) {
		ns, err := strconv.ParseInt(line, 10, 64)
		must(b, err, "parsing "+filepath.Base(s.KubesprayRuns)+playbookTimesSuffix)
		sum += time.Duration(ns)
	}
	return sum
}
