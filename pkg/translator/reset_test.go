package translator_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

func deletedProvisioning() *bpav1.Provisioning {
	return &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prov", UID: "uid", Generation: 4, Labels: map[string]string{"cluster": "c1"}},
		Spec:       bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, DeletionPolicy: bpav1.DeletionReset},
		Status: bpav1.ProvisioningStatus{
			Applied: &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
				{Name: "m1", Roles: []string{"master"}, Etcd: true, IP: "10.0.0.1"},
				{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.2"},
			}},
			// The last run: w1 again, w2 half added (an address, not applied), w3 never
			// reached (no address), w4 removed.
			RunStatus: bpav1.RunStatus{Hosts: []bpav1.HostStatus{
				{Name: "w1", Roles: []string{"worker"}, IP: "10.0.0.9"},
				{Name: "w2", Roles: []string{"worker"}, IP: "10.0.0.3"},
				{Name: "w3", Roles: []string{"worker"}},
				{Name: "w4", Roles: []string{"worker"}, IP: "10.0.0.4", Removing: true},
			}},
		},
	}
}

func TestResetWorkflow(t *testing.T) {
	p := deletedProvisioning()
	wf, err := translator.Reset(p, translator.Options{})
	require.NoError(t, err)
	require.NoError(t, validation.ValidateWorkflow(wf), "Argo's validator accepts it against the embedded templates")
	assert.Equal(t, "prov-reset-4", wf.Name)
	assert.Equal(t, "true", wf.Labels[translator.ResetLabel])
	assert.Equal(t, "prov", wf.Labels[bpav1.ProvisioningNameLabel])
	require.Len(t, wf.OwnerReferences, 1)
	assert.Equal(t, "Provisioning", wf.OwnerReferences[0].Kind)
	assert.Equal(t, "bpa-cluster-c1", wf.Spec.Synchronization.Mutexes[0].Name)

	tasks := wf.Spec.Templates[0].DAG.Tasks
	require.Len(t, tasks, 2)
	assert.Equal(t, "render-inventory", tasks[0].Name)
	assert.Equal(t, translator.StepReset, tasks[1].Name)
	assert.Equal(t, "run-kubespray", tasks[1].TemplateRef.Template)
	var hosts []bpav1.HostStatus
	require.NoError(t, json.Unmarshal([]byte(tasks[0].Arguments.GetParameterByName("hosts").Value.String()), &hosts))
	var names, ips []string
	for _, h := range hosts {
		names, ips = append(names, h.Name), append(ips, h.IP)
	}
	assert.Equal(t, []string{"m1", "w1", "w2"}, names, "applied nodes, then the last run's hosts with an address; removed ones left out")
	assert.Equal(t, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, ips, "an applied node keeps its applied address")
	var ops []kubespray.Operation
	require.NoError(t, json.Unmarshal([]byte(tasks[1].Arguments.GetArtifactByName("operations").Raw.Data), &ops))
	assert.Equal(t, []kubespray.Operation{kubespray.ResetCluster(ops[0].Reason)}, ops)
	assert.Equal(t, "false", tasks[1].Arguments.GetParameterByName("allow-ungraceful").Value.String())

	// Deleted in the foreground, the garbage collector would delete it at once.
	p.Finalizers = []string{metav1.FinalizerDeleteDependents}
	wf, err = translator.Reset(p, translator.Options{})
	require.NoError(t, err)
	assert.Empty(t, wf.OwnerReferences)

	p.Status = bpav1.ProvisioningStatus{}
	wf, err = translator.Reset(p, translator.Options{})
	require.NoError(t, err)
	assert.Nil(t, wf, "nothing to reset")
}
