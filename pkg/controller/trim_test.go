package controller

import (
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// The cache keeps only the nodes observe.Workflow reads: it must observe the same from them.
func TestObserveSameOnTrimmedNodes(t *testing.T) {
	compressed := observetest.FailedLeases()
	restore := packer.SetMaxWorkflowSize(1000)
	require.NoError(t, packer.CompressWorkflowIfNeeded(compressed))
	restore()
	require.NotEmpty(t, compressed.Status.CompressedNodes)
	for name, c := range map[string]struct {
		wf    *wfv1.Workflow
		steps []string
	}{
		"failed provisioning": {observetest.FailedProvisioning(), translator.ProvisioningSteps},
		"retries ran out":     {observetest.FailedLeases(), translator.ProvisioningSteps},
		"compressed nodes":    {compressed, translator.ProvisioningSteps},
		"ad-hoc run":          {observetest.AdHocRun(), translator.ProvisioningSteps},
		"software fan-out":    {observetest.FailedSoftware(), translator.SoftwareSteps},
	} {
		want := observe.Workflow(c.wf, c.steps)
		trimmed, err := trimWorkflow(c.wf.DeepCopy())
		require.NoError(t, err)
		assert.Equal(t, want, observe.Workflow(trimmed.(*wfv1.Workflow), c.steps), name)
	}
}

func TestTrimDropsWhatObserveDoesNotRead(t *testing.T) {
	wf := observetest.FailedProvisioning()
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
	assert.Empty(t, got.Status.Nodes["d"].Name, "fields observe.Workflow does not read are dropped")
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
		observeProvisioning(p, "c1", &wfv1.Workflow{}, observe.Observation{})
		c := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionEtcdQuorum)
		require.NotNil(t, c)
		assert.Contains(t, c.Message, tc.want)
	}
}
