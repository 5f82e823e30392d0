package controller

import (
	"encoding/json"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func at(min int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(min) * time.Minute)) }

func node(id, display string, typ wfv1.NodeType, phase wfv1.NodePhase, start int, children ...string) wfv1.NodeStatus {
	return wfv1.NodeStatus{ID: id, Name: "wf." + display, DisplayName: display, Type: typ, Phase: phase, StartedAt: at(start), Children: children}
}

func withOutput(n wfv1.NodeStatus, name, value string) wfv1.NodeStatus {
	n.Outputs = &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: name, Value: wfv1.AnyStringPtr(value)}}}
	return n
}

// failedProvisioning: discover and resolve succeeded (resolve after a retry), kubespray
// failed, the rest never ran.
func failedProvisioning() *wfv1.Workflow {
	hosts := `[{"name":"master-1","roles":["master","worker"],"mac":"00:c6:14:04:61:b2","ip":"127.0.1.1","bareMetalHost":"bmh-1"}]`
	kubespray := node("k", "run-kubespray", wfv1.NodeTypePod, wfv1.NodeFailed, 5)
	kubespray.Message = "ansible-playbook exited 2: UNREACHABLE master-1"
	wf := &wfv1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "wf"},
		Status: wfv1.WorkflowStatus{
			Phase: wfv1.WorkflowFailed, Progress: "3/4", StartedAt: at(0), FinishedAt: at(9),
			Nodes: wfv1.Nodes{
				"d":  withOutput(node("d", "discover-hosts", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0, "d0"), "hosts", `[{"name":"master-1","roles":["master","worker"]}]`),
				"d0": node("d0", "discover-hosts(0)", wfv1.NodeTypePod, wfv1.NodeSucceeded, 0),
				"r":  withOutput(node("r", "resolve-leases", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 1, "r0", "r1"), "hosts", hosts),
				"r0": node("r0", "resolve-leases(0)", wfv1.NodeTypePod, wfv1.NodeFailed, 1),
				"r1": node("r1", "resolve-leases(1)", wfv1.NodeTypePod, wfv1.NodeSucceeded, 2),
				"i":  withOutput(node("i", "render-inventory", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 3), "hosts", hosts),
				"k":  kubespray,
			},
		},
	}
	return wf
}

func TestObserveFailedRunNamesTheFailingStep(t *testing.T) {
	o := Observe(failedProvisioning(), translator.ProvisioningSteps)
	assert.Equal(t, bpav1.PhaseFailed, o.Phase)
	assert.Equal(t, "3/6", o.Progress, "progress counts BPA steps, not pods")
	assert.Equal(t, "step run-kubespray failed: ansible-playbook exited 2: UNREACHABLE master-1", o.Message)
	require.Len(t, o.Steps, 6)
	var phases []string
	for _, s := range o.Steps {
		phases = append(phases, s.Phase)
	}
	assert.Equal(t, []string{"Succeeded", "Succeeded", "Succeeded", "Failed", "Pending", "Pending"}, phases)
	require.Len(t, o.Hosts, 1)
	assert.Equal(t, "127.0.1.1", o.Hosts[0].IP, "hosts come from the most complete step output")
}

// failedLeases: resolve-leases ran out of retries.
func failedLeases() *wfv1.Workflow {
	wf := failedProvisioning()
	r := node("r", "resolve-leases", wfv1.NodeTypeRetry, wfv1.NodeFailed, 1, "r0", "r1")
	r.Message = "No more retries left"
	r0 := node("r0", "resolve-leases(0)", wfv1.NodeTypePod, wfv1.NodeFailed, 1)
	r0.Message = "no lease for 00:c6:14:04:61:b2 (old)"
	r1 := node("r1", "resolve-leases(1)", wfv1.NodeTypePod, wfv1.NodeFailed, 2)
	r1.Message = "no lease for 00:c6:14:04:61:b2"
	wf.Status.Nodes["r"], wf.Status.Nodes["r0"], wf.Status.Nodes["r1"] = r, r0, r1
	delete(wf.Status.Nodes, "i")
	delete(wf.Status.Nodes, "k")
	return wf
}

func TestObserveRetryNodeReportsTheLastAttempt(t *testing.T) {
	o := Observe(failedLeases(), translator.ProvisioningSteps)
	assert.Equal(t, "no lease for 00:c6:14:04:61:b2 (after 2 attempts)", o.Steps[1].Message)
	assert.Equal(t, "step resolve-leases failed: no lease for 00:c6:14:04:61:b2 (after 2 attempts)", o.Message)
}

func TestObserveCompressedNodes(t *testing.T) {
	wf := failedProvisioning()
	plain := Observe(wf, translator.ProvisioningSteps)
	defer packer.SetMaxWorkflowSize(1500)()
	require.NoError(t, packer.CompressWorkflowIfNeeded(wf))
	require.NotEmpty(t, wf.Status.CompressedNodes)
	require.Empty(t, wf.Status.Nodes)
	want, _ := json.Marshal(plain)
	got, _ := json.Marshal(Observe(wf, translator.ProvisioningSteps))
	assert.JSONEq(t, string(want), string(got))
}

func TestObserveOffloadedNodesDoesNotCrash(t *testing.T) {
	wf := failedProvisioning()
	wf.Status.Nodes = nil
	wf.Status.OffloadNodeStatusVersion = "fnv:123"
	wf.Status.Phase = wfv1.WorkflowRunning
	o := Observe(wf, translator.ProvisioningSteps)
	assert.Equal(t, bpav1.PhaseRunning, o.Phase)
	assert.Contains(t, o.Message, "offloaded")
	assert.Empty(t, o.Steps)
}

func adHocRun() *wfv1.Workflow {
	return &wfv1.Workflow{Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, Nodes: wfv1.Nodes{
		"l": node("l", "lookup", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0),
		"s": node("s", "resolve-leases", wfv1.NodeTypeSkipped, wfv1.NodeSkipped, 1),
		"f": node("f", "resolve-leases-from-file", wfv1.NodeTypeRetry, wfv1.NodeRunning, 1),
	}}}
}

func TestObserveAdHocRunAliasesAndSkips(t *testing.T) {
	o := Observe(adHocRun(), translator.ProvisioningSteps)
	assert.Equal(t, "resolve-leases", o.Steps[1].Name)
	assert.Equal(t, "Running", o.Steps[1].Phase)
}

// failedSoftware: one host installed, one was unreachable.
func failedSoftware() *wfv1.Workflow {
	group := node("g", "install-software", wfv1.NodeTypeTaskGroup, wfv1.NodeFailed, 1, "h0", "h1")
	ok := withOutput(node("h0", "install-software(0:m1)", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 1),
		"result", `{"name":"m1","ip":"127.0.1.1","changed":true,"packages":[{"name":"jq","wanted":"1.6","installed":"1.6"}]}`)
	bad := node("h1", "install-software(1:w1)", wfv1.NodeTypeRetry, wfv1.NodeFailed, 1, "h1p")
	bad.Inputs = &wfv1.Inputs{Parameters: []wfv1.Parameter{{Name: "host", Value: wfv1.AnyStringPtr(`{"name":"w1","ip":"127.0.1.9"}`)}}}
	badPod := node("h1p", "install-software(1:w1)(0)", wfv1.NodeTypePod, wfv1.NodeFailed, 1)
	badPod.Message = "dial tcp 127.0.1.9:22: connection refused"
	verify := node("v", "verify-software", wfv1.NodeTypePod, wfv1.NodeFailed, 2)
	verify.Message = "1 of 2 hosts failed: w1 (dial tcp 127.0.1.9:22: connection refused)"
	return &wfv1.Workflow{Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowFailed, Nodes: wfv1.Nodes{"g": group, "h0": ok, "h1": bad, "h1p": badPod, "v": verify}}}
}

func TestObserveSoftwareFanOut(t *testing.T) {
	o := Observe(failedSoftware(), translator.SoftwareSteps)
	assert.Equal(t, "step verify-software failed: 1 of 2 hosts failed: w1 (dial tcp 127.0.1.9:22: connection refused)", o.Message,
		"the CR says how many hosts failed")
	require.Len(t, o.HostSoftware, 2)
	assert.Equal(t, "m1", o.HostSoftware[0].Name)
	assert.Equal(t, "Succeeded", o.HostSoftware[0].Phase)
	assert.Equal(t, "1.6", o.HostSoftware[0].Packages[0].Installed)
	assert.Equal(t, "w1", o.HostSoftware[1].Name)
	assert.Equal(t, "Failed", o.HostSoftware[1].Phase)
	assert.Equal(t, "dial tcp 127.0.1.9:22: connection refused", o.HostSoftware[1].Message)
}

// The cache keeps only the nodes Observe reads: it must observe the same from them.
func TestObserveSameOnTrimmedNodes(t *testing.T) {
	compressed := failedLeases()
	restore := packer.SetMaxWorkflowSize(1000)
	require.NoError(t, packer.CompressWorkflowIfNeeded(compressed))
	restore()
	require.NotEmpty(t, compressed.Status.CompressedNodes)
	for name, c := range map[string]struct {
		wf    *wfv1.Workflow
		steps []string
	}{
		"failed provisioning": {failedProvisioning(), translator.ProvisioningSteps},
		"retries ran out":     {failedLeases(), translator.ProvisioningSteps},
		"compressed nodes":    {compressed, translator.ProvisioningSteps},
		"ad-hoc run":          {adHocRun(), translator.ProvisioningSteps},
		"software fan-out":    {failedSoftware(), translator.SoftwareSteps},
	} {
		want := Observe(c.wf, c.steps)
		trimmed, err := trimWorkflow(c.wf.DeepCopy())
		require.NoError(t, err)
		assert.Equal(t, want, Observe(trimmed.(*wfv1.Workflow), c.steps), name)
	}
}

func TestTrimDropsWhatObserveDoesNotRead(t *testing.T) {
	wf := failedProvisioning()
	wf.Status.StoredTemplates = map[string]wfv1.Template{"x": {Name: "x"}}
	wf.Spec.Templates = []wfv1.Template{{Name: "main"}}
	wf.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "argo"}}
	trimmed, _ := trimWorkflow(wf)
	got := trimmed.(*wfv1.Workflow)
	assert.Empty(t, got.Status.StoredTemplates)
	assert.Empty(t, got.Spec.Templates)
	assert.Empty(t, got.ManagedFields)
	// d0 and r1 succeeded under a succeeded Retry node, r0 failed under one: none says more
	// than its parent. k failed, but as the task's own Pod node it is kept.
	assert.ElementsMatch(t, []string{"d", "r", "i", "k"}, keys(got.Status.Nodes))
	assert.Empty(t, got.Status.Nodes["d"].Name, "fields Observe does not read are dropped")
}

func keys(nodes wfv1.Nodes) []string {
	var out []string
	for id := range nodes {
		out = append(out, id)
	}
	return out
}

// EtcdQuorum says which masters run etcd: the largest odd number, first in CR order (two
// masters: the first), as discover-hosts records and the inventory's [etcd] holds.
func TestEtcdQuorumNamesTheMembers(t *testing.T) {
	for _, tc := range []struct {
		masters []bpav1.NodeEntry
		want    string
	}{
		{[]bpav1.NodeEntry{{"m2": nil}, {"m1": nil}}, "1 etcd members tolerate 0 failures: m2 (of 2 masters)"},
		{[]bpav1.NodeEntry{{"d": nil}, {"a": nil}, {"c": nil}, {"b": nil}}, "3 etcd members tolerate 1 failures: d, a, c (of 4 masters)"},
		{[]bpav1.NodeEntry{{"a": nil}, {"b": {Etcd: new(bool)}}, {"c": nil}}, "2 masters run etcd"},
	} {
		p := &bpav1.Provisioning{Spec: bpav1.ProvisioningSpec{Masters: tc.masters}}
		observeProvisioning(p, "c1", &wfv1.Workflow{}, Observation{})
		c := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionEtcdQuorum)
		require.NotNil(t, c)
		assert.Contains(t, c.Message, tc.want)
	}
}
