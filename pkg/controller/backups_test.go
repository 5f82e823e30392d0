package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// A day-2 run takes a verified etcd snapshot first, stored on the site policy's backup
// server; without one it is refused (Stalled NoEtcdBackupServer, naming the field), and the
// snapshot a run of the CR's stored lands in status.backups once, while one a Workflow
// the CR does not control claims is ignored.
func TestDay2RunTakesABackupFirst(t *testing.T) {
	day2 := func() *bpav1.Provisioning {
		p := newProvisioning()
		p.Spec.Workers = []bpav1.NodeEntry{{"w1": nil}}
		p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts, Generation: 1}
		c, err := translator.PlanChange(p)
		require.NoError(t, err)
		p.Status.Applied.KubesprayVersion, p.Status.Applied.KubernetesVersion, p.Status.Applied.Settings, p.Status.Applied.Immutable = c.KubesprayVersion, c.KubernetesVersion, c.Settings, c.Immutable
		p.Generation = 2
		return p
	}
	t.Run("refused without a backup server", func(t *testing.T) {
		r, c, _ := newTestReconciler(day2())
		p := reconcile(t, r)
		assert.Empty(t, workflows(t, c))
		stalled := condition(p, bpav1.ConditionStalled)
		assert.Equal(t, metav1.ConditionTrue, stalled.Status)
		assert.Equal(t, bpav1.ReasonNoBackupServer, stalled.Reason)
		assert.Contains(t, stalled.Message, "spec.etcdBackup.beforeDay2")
	})
	t.Run("with one, the snapshot comes first and lands in status.backups", func(t *testing.T) {
		const server = "https://backups.site:8443"
		ca := string(nodetrusttest.NewCA(t, []string{"backups.site"}).PEM)
		pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}, Spec: bpav1.BPAPolicySpec{
			EtcdBackupServer: server, ArtifactServers: []bpav1.ArtifactServer{{URL: server, CABundle: ca}}}}
		r, c, _ := newTestReconciler(day2(), pol)
		reconcile(t, r)
		wfs := workflows(t, c)
		require.Len(t, wfs, 1)
		wf := wfs[0]
		plan := planSteps(wf)
		require.Equal(t, translator.StepBackupEtcd, plan[0])
		params := map[string]string{}
		for _, a := range wf.Spec.Arguments.Parameters {
			params[a.Name] = a.Value.String()
		}
		assert.Equal(t, server, params["backup-server"])
		assert.Equal(t, ca, params["backup-server-ca"])

		rec := bpav1.BackupStatus{Name: "etcd-20261128T010203Z.db", Size: 4096, SHA256: strings.Repeat("ab", 32),
			Revision: 42, Member: "m1", TakenAt: metav1.NewTime(time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC)), Verified: true, Workflow: wf.Name}
		raw, err := json.Marshal(rec)
		require.NoError(t, err)
		wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, StartedAt: observetest.At(0), Nodes: wfv1.Nodes{
			"b": observetest.WithOutput(observetest.Node("b", translator.StepBackupEtcd, wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0), "backup", string(raw))}}
		require.NoError(t, c.Update(context.Background(), &wf))
		p := reconcile(t, r)
		require.Len(t, p.Status.Backups, 1)
		got := p.Status.Backups[0]
		assert.True(t, rec.TakenAt.Equal(&got.TakenAt))
		got.TakenAt = rec.TakenAt
		assert.Equal(t, rec, got)
		p = reconcile(t, r)
		assert.Len(t, p.Status.Backups, 1, "once")

		// A Workflow anyone may write, naming the CR but not controlled by it, adds nothing.
		forged := rec
		forged.Name = "etcd-forged.db"
		mergeBackups(p, &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, []bpav1.BackupStatus{forged})
		assert.Len(t, p.Status.Backups, 1)
		unverified := rec
		unverified.Name, unverified.Verified = "etcd-unverified.db", false
		mergeBackups(p, &wf, []bpav1.BackupStatus{unverified})
		assert.Len(t, p.Status.Backups, 1, "never an unverified snapshot")
	})
}

// planSteps lists the planned steps of a Workflow the controller made.
func planSteps(wf wfv1.Workflow) []string {
	var c translator.ChangePlan
	_ = json.Unmarshal([]byte(wf.Annotations[translator.PlanAnnotation]), &c)
	var out []string
	for _, s := range c.Steps {
		out = append(out, s.Name)
	}
	return out
}
