package translator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// A restore reads the hosts, restores etcd, and with several members runs kubespray's
// rejoin (cluster.yml on the control plane, as recover-control-plane.md says), then verify
// and publish-kubeconfig; one name per request; the verify checks the release the cluster
// runs.
func TestRestoreWorkflow(t *testing.T) {
	opts := translator.Options{BackupServer: "https://b.site", BackupServerCA: "CA"}
	tasks := func(t *testing.T, p *bpav1.Provisioning, request string) map[string][]string {
		t.Helper()
		wf, err := translator.RestoreWorkflow(p, opts, request)
		require.NoError(t, err)
		assert.Equal(t, translator.RestoreWorkflowName(p.Name, request), wf.Name)
		assert.Equal(t, request, wf.Annotations[bpav1.RestoreAnnotation])
		out := map[string][]string{}
		var order []string
		for _, task := range wf.Spec.Templates[0].DAG.Tasks {
			order = append(order, task.Name)
			for _, a := range task.Arguments.Parameters {
				out[task.Name] = append(out[task.Name], a.Name+"="+a.Value.String())
			}
			for _, a := range task.Arguments.Artifacts {
				out[task.Name] = append(out[task.Name], a.Name+"="+a.Raw.Data)
			}
		}
		out["order"] = order
		return out
	}
	t.Run("one member", func(t *testing.T) {
		p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}", appliedAs(t, base, host("m1", true, true), host("w1", false, false)))
		got := tasks(t, p, "etcd-1.db@again")
		assert.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", "restore-etcd", "verify", "publish-kubeconfig"}, got["order"])
		assert.Contains(t, got["restore-etcd"], "snapshot=etcd-1.db", "the name, without the token")
		assert.Contains(t, got["verify"], "kubernetes-version="+p.Status.Applied.KubernetesVersion)
	})
	t.Run("three members rejoin through kubespray", func(t *testing.T) {
		p := day2Change(t, "masters: [{m1: {etcd: true}}, {m2: {etcd: true}}, {m3: {etcd: true}}]\nworkers: [{w1: null}, {w2: null}]\nworkerPools: [{name: edge, replicas: 2}]\nkubernetes: {version: 1.31.4}")
		got := tasks(t, p, "etcd-1.db")
		assert.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", "restore-etcd", "rejoin-etcd", "verify", "publish-kubeconfig"}, got["order"])
		var ops []kubespray.Operation
		for _, a := range got["rejoin-etcd"] {
			if v, ok := strings.CutPrefix(a, "operations="); ok {
				require.NoError(t, json.Unmarshal([]byte(v), &ops))
			}
		}
		require.Len(t, ops, 1)
		assert.Equal(t, kubespray.Cluster, ops[0].Playbook)
		assert.Equal(t, []string{"etcd", "kube_control_plane"}, ops[0].Limit)
		assert.EqualValues(t, kubespray.ManyEtcdRetries, ops[0].Vars["etcd_retries"])
		profile, _, err := kubespray.ProfileFor(p.Status.Applied.KubesprayVersion)
		require.NoError(t, err)
		assert.NoError(t, profile.Validate(ops[0]), "run-kubespray accepts it")
	})
	t.Run("one name per request", func(t *testing.T) {
		assert.Equal(t, translator.RestoreWorkflowName("p", "a.db"), translator.RestoreWorkflowName("p", "a.db"))
		assert.NotEqual(t, translator.RestoreWorkflowName("p", "a.db"), translator.RestoreWorkflowName("p", "a.db@2"))
	})
}

// A renewal reads the hosts, runs renew-certificates (one master at a time, in the step),
// then verify (which reads the new dates) and publish-kubeconfig (admin.conf's client
// certificate is renewed too); one name per request, not the restore's.
func TestRenewalWorkflow(t *testing.T) {
	p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}", appliedAs(t, base, host("m1", true, true), host("w1", false, false)))
	wf, err := translator.RenewalWorkflow(p, translator.Options{}, "2026-11-28")
	require.NoError(t, err, "no backup server needed")
	assert.Equal(t, translator.RenewalWorkflowName("p", "2026-11-28"), wf.Name)
	assert.NotEqual(t, translator.RestoreWorkflowName("p", "2026-11-28"), wf.Name)
	assert.Equal(t, "p", wf.Labels[bpav1.RenewalOfLabel])
	var order []string
	for _, task := range wf.Spec.Templates[0].DAG.Tasks {
		order = append(order, task.Name)
	}
	assert.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", "renew-certificates", "verify", "publish-kubeconfig"}, order)

	p.Status.Applied = nil
	_, err = translator.RenewalWorkflow(p, translator.Options{}, "2026-11-28")
	var refused *translator.Refusal
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, refused.Error(), "never built")
}
