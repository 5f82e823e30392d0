package observe_test

import (
	"encoding/json"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func TestObserveFailedRunNamesTheFailingStep(t *testing.T) {
	o := observe.Workflow(observetest.FailedProvisioning(), translator.ProvisioningSteps)
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

func TestObserveRetryNodeReportsTheLastAttempt(t *testing.T) {
	o := observe.Workflow(observetest.FailedLeases(), translator.ProvisioningSteps)
	assert.Equal(t, "no lease for 00:c6:14:04:61:b2 (after 2 attempts)", o.Steps[1].Message)
	assert.Equal(t, "step resolve-leases failed: no lease for 00:c6:14:04:61:b2 (after 2 attempts)", o.Message)
}

func TestObserveCompressedNodes(t *testing.T) {
	wf := observetest.FailedProvisioning()
	plain := observe.Workflow(wf, translator.ProvisioningSteps)
	defer packer.SetMaxWorkflowSize(1500)()
	require.NoError(t, packer.CompressWorkflowIfNeeded(wf))
	require.NotEmpty(t, wf.Status.CompressedNodes)
	require.Empty(t, wf.Status.Nodes)
	want, _ := json.Marshal(plain)
	got, _ := json.Marshal(observe.Workflow(wf, translator.ProvisioningSteps))
	assert.JSONEq(t, string(want), string(got))
}

func TestObserveOffloadedNodesDoesNotCrash(t *testing.T) {
	wf := observetest.FailedProvisioning()
	wf.Status.Nodes = nil
	wf.Status.OffloadNodeStatusVersion = "fnv:123"
	wf.Status.Phase = wfv1.WorkflowRunning
	o := observe.Workflow(wf, translator.ProvisioningSteps)
	assert.Equal(t, bpav1.PhaseRunning, o.Phase)
	assert.Contains(t, o.Message, "offloaded")
	assert.Empty(t, o.Steps)
}

func TestObserveAdHocRunAliasesAndSkips(t *testing.T) {
	o := observe.Workflow(observetest.AdHocRun(), translator.ProvisioningSteps)
	assert.Equal(t, "resolve-leases", o.Steps[1].Name)
	assert.Equal(t, "Running", o.Steps[1].Phase)
}

func TestObserveSoftwareFanOut(t *testing.T) {
	o := observe.Workflow(observetest.FailedSoftware(), translator.SoftwareSteps)
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

// TestObserveCertificates reads verify's certificates output when verify succeeded, and
// nothing from a failed verify or one without the output (the template's default, {}).
func TestObserveCertificates(t *testing.T) {
	out := `{"checkedAt":"2026-11-01T10:08:00Z","certificates":[{"node":"master-1","component":"apiserver","notAfter":"2027-11-01T10:05:00Z","subject":"kube-apiserver"}],"problems":["w1 (127.0.1.9): unreachable"]}`
	for name, tc := range map[string]struct {
		phase wfv1.NodePhase
		value string
		want  bool
	}{
		"succeeded": {wfv1.NodeSucceeded, out, true},
		"failed":    {wfv1.NodeFailed, out, false},
		"no output": {wfv1.NodeSucceeded, "{}", false},
		"not json":  {wfv1.NodeSucceeded, "garbage", false},
	} {
		t.Run(name, func(t *testing.T) {
			wf := observetest.FailedProvisioning()
			wf.Status.Nodes["v"] = observetest.WithOutput(observetest.Node("v", "verify", wfv1.NodeTypeRetry, tc.phase, 8), "certificates", tc.value)
			o := observe.Workflow(wf, translator.ProvisioningSteps)
			if !tc.want {
				assert.Nil(t, o.Certificates)
				return
			}
			require.NotNil(t, o.Certificates)
			require.Len(t, o.Certificates.Certificates, 1)
			assert.Equal(t, "apiserver", o.Certificates.Certificates[0].Component)
			assert.Equal(t, []string{"w1 (127.0.1.9): unreachable"}, o.Certificates.Problems)
			assert.True(t, observetest.At(8).Time.Equal(o.Certificates.CheckedAt.Time), "%v", o.Certificates.CheckedAt)
		})
	}
}
