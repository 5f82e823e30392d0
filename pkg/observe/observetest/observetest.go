// Package observetest holds Workflows in the shapes Argo leaves them (retries, fan-outs,
// skipped variants, failed steps) for the tests of observe and of the controller's cache.
package observetest

import (
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// T0 is the time the fixtures' runs start.
var T0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// At is min minutes after T0.
func At(min int) metav1.Time { return metav1.NewTime(T0.Add(time.Duration(min) * time.Minute)) }

// Node is a Workflow node named after its DAG task.
func Node(id, display string, typ wfv1.NodeType, phase wfv1.NodePhase, start int, children ...string) wfv1.NodeStatus {
	return wfv1.NodeStatus{ID: id, Name: "wf." + display, DisplayName: display, Type: typ, Phase: phase, StartedAt: At(start), Children: children}
}

// WithOutput gives n one output parameter.
func WithOutput(n wfv1.NodeStatus, name, value string) wfv1.NodeStatus {
	n.Outputs = &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: name, Value: wfv1.AnyStringPtr(value)}}}
	return n
}

// FailedProvisioning is a run where discover and resolve succeeded (resolve after a retry), kubespray
// failed, the rest never ran.
func FailedProvisioning() *wfv1.Workflow {
	hosts := `[{"name":"master-1","roles":["master","worker"],"mac":"00:c6:14:04:61:b2","ip":"127.0.1.1","bareMetalHost":"bmh-1"}]`
	kubespray := Node("k", "run-kubespray", wfv1.NodeTypePod, wfv1.NodeFailed, 5)
	kubespray.Message = "ansible-playbook exited 2: UNREACHABLE master-1"
	wf := &wfv1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "wf"},
		Status: wfv1.WorkflowStatus{
			Phase: wfv1.WorkflowFailed, Progress: "3/4", StartedAt: At(0), FinishedAt: At(9),
			Nodes: wfv1.Nodes{
				"d":  WithOutput(Node("d", "discover-hosts", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0, "d0"), "hosts", `[{"name":"master-1","roles":["master","worker"]}]`),
				"d0": Node("d0", "discover-hosts(0)", wfv1.NodeTypePod, wfv1.NodeSucceeded, 0),
				"r":  WithOutput(Node("r", "resolve-leases", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 1, "r0", "r1"), "hosts", hosts),
				"r0": Node("r0", "resolve-leases(0)", wfv1.NodeTypePod, wfv1.NodeFailed, 1),
				"r1": Node("r1", "resolve-leases(1)", wfv1.NodeTypePod, wfv1.NodeSucceeded, 2),
				"i":  WithOutput(Node("i", "render-inventory", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 3), "hosts", hosts),
				"k":  kubespray,
			},
		},
	}
	return wf
}

// FailedLeases is a run whose resolve-leases ran out of retries.
func FailedLeases() *wfv1.Workflow {
	wf := FailedProvisioning()
	r := Node("r", "resolve-leases", wfv1.NodeTypeRetry, wfv1.NodeFailed, 1, "r0", "r1")
	r.Message = "No more retries left"
	r0 := Node("r0", "resolve-leases(0)", wfv1.NodeTypePod, wfv1.NodeFailed, 1)
	r0.Message = "no lease for 00:c6:14:04:61:b2 (old)"
	r1 := Node("r1", "resolve-leases(1)", wfv1.NodeTypePod, wfv1.NodeFailed, 2)
	r1.Message = "no lease for 00:c6:14:04:61:b2"
	wf.Status.Nodes["r"], wf.Status.Nodes["r0"], wf.Status.Nodes["r1"] = r, r0, r1
	delete(wf.Status.Nodes, "i")
	delete(wf.Status.Nodes, "k")
	return wf
}

// AdHocRun is an `argo submit --from` run: the controller's resolve-leases skipped, its
// from-file variant running.
func AdHocRun() *wfv1.Workflow {
	return &wfv1.Workflow{Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, Nodes: wfv1.Nodes{
		"l": Node("l", "lookup", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0),
		"s": Node("s", "resolve-leases", wfv1.NodeTypeSkipped, wfv1.NodeSkipped, 1),
		"f": Node("f", "resolve-leases-from-file", wfv1.NodeTypeRetry, wfv1.NodeRunning, 1),
	}}}
}

// FailedSoftware is a Software run where one host installed, one was unreachable.
func FailedSoftware() *wfv1.Workflow {
	group := Node("g", "install-software", wfv1.NodeTypeTaskGroup, wfv1.NodeFailed, 1, "h0", "h1")
	ok := WithOutput(Node("h0", "install-software(0:m1)", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 1),
		"result", `{"name":"m1","ip":"127.0.1.1","changed":true,"packages":[{"name":"jq","wanted":"1.6","installed":"1.6"}]}`)
	bad := Node("h1", "install-software(1:w1)", wfv1.NodeTypeRetry, wfv1.NodeFailed, 1, "h1p")
	bad.Inputs = &wfv1.Inputs{Parameters: []wfv1.Parameter{{Name: "host", Value: wfv1.AnyStringPtr(`{"name":"w1","ip":"127.0.1.9"}`)}}}
	badPod := Node("h1p", "install-software(1:w1)(0)", wfv1.NodeTypePod, wfv1.NodeFailed, 1)
	badPod.Message = "dial tcp 127.0.1.9:22: connection refused"
	verify := Node("v", "verify-software", wfv1.NodeTypePod, wfv1.NodeFailed, 2)
	verify.Message = "1 of 2 hosts failed: w1 (dial tcp 127.0.1.9:22: connection refused)"
	return &wfv1.Workflow{Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowFailed, Nodes: wfv1.Nodes{"g": group, "h0": ok, "h1": bad, "h1p": badPod, "v": verify}}}
}
