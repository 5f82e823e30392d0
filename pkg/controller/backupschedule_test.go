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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// The schedule takes each of its times once, the newest of those missed standing for the
// others, one at a time, and what the backup Workflow stored lands in status.backups.
func TestScheduledBackups(t *testing.T) {
	const server = "https://backups.site:8443"
	pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}, Spec: bpav1.BPAPolicySpec{
		EtcdBackupServer: server, ArtifactServers: []bpav1.ArtifactServer{{URL: server, CABundle: string(nodetrusttest.NewCA(t, []string{"backups.site"}).PEM)}}}}
	p := newProvisioning() // created 2026-01-01T00:00Z
	p.Spec.EtcdBackup = &bpav1.EtcdBackup{Schedule: "0 */6 * * *"}
	p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, pol).WithStatusSubresource(&bpav1.Provisioning{}).Build()
	now := time.Date(2026, 1, 1, 13, 30, 0, 0, time.UTC)
	r := &backupScheduler{Client: c, Recorder: record.NewFakeRecorder(10), now: func() time.Time { return now }}
	ctx := context.Background()
	run := func() (*bpav1.Provisioning, []wfv1.Workflow, ctrl.Result) {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
		require.NoError(t, err)
		got := &bpav1.Provisioning{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "p"}, got))
		return got, workflows(t, c), res
	}

	got, wfs, res := run()
	require.Len(t, wfs, 1, "06:00 and 12:00 were missed: one snapshot, for 12:00")
	slot := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, translator.EtcdBackupWorkflowName("p", slot), wfs[0].Name)
	assert.Equal(t, "p", wfs[0].Labels[bpav1.EtcdBackupOfLabel])
	assert.Empty(t, wfs[0].Labels[bpav1.ProvisioningNameLabel], "not a run of the spec")
	assert.Equal(t, "bpa-cluster-c1", wfs[0].Spec.Synchronization.Mutexes[0].Name, "queued behind the cluster's runs")
	assert.True(t, got.Status.LastScheduledBackup.Equal(&metav1.Time{Time: slot}))
	assert.Equal(t, 4*time.Hour+30*time.Minute+time.Second, res.RequeueAfter.Round(time.Second))

	// Again, and after a crash lost the status write: still one Workflow.
	run()
	got.Status.LastScheduledBackup = nil
	require.NoError(t, c.Status().Update(ctx, got))
	_, wfs, _ = run()
	require.Len(t, wfs, 1, "no second Workflow for one time")

	// 18:00 comes while 12:00's still runs: it waits.
	now = time.Date(2026, 1, 1, 18, 0, 5, 0, time.UTC)
	_, wfs, _ = run()
	require.Len(t, wfs, 1, "one backup at a time")

	// 12:00's ends, having stored a verified snapshot: it is in status.backups, and 18:00 starts.
	rec := bpav1.BackupStatus{Name: "etcd-20260101T181000Z.db", Size: 10, SHA256: strings.Repeat("cd", 32), Revision: 7, Member: "m1",
		TakenAt: metav1.NewTime(time.Date(2026, 1, 1, 18, 10, 0, 0, time.UTC)), Verified: true, Workflow: wfs[0].Name}
	raw, _ := json.Marshal(rec)
	wf := wfs[0]
	wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowSucceeded, StartedAt: observetest.At(0), FinishedAt: observetest.At(1), Nodes: wfv1.Nodes{
		"b": observetest.WithOutput(observetest.Node("b", translator.StepBackupEtcd, wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0), "backup", string(raw))}}
	require.NoError(t, c.Update(ctx, &wf))
	got, wfs, _ = run()
	require.Len(t, got.Status.Backups, 1)
	assert.Equal(t, rec.Name, got.Status.Backups[0].Name)
	cond := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionEtcdBackedUp)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Contains(t, cond.Message, rec.Name)
	assert.Len(t, wfs, 2, "18:00's")
}

func TestScheduledBackupFailureIsReported(t *testing.T) {
	p := newProvisioning()
	p.Spec.EtcdBackup = &bpav1.EtcdBackup{Schedule: "@hourly"}
	p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts}
	// No policy: no backup server.
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(&bpav1.Provisioning{}).Build()
	r := &backupScheduler{Client: c, Recorder: record.NewFakeRecorder(10), now: func() time.Time { return time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC) }}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
	require.NoError(t, err)
	got := &bpav1.Provisioning{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, got))
	assert.Empty(t, workflows(t, c))
	cond := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionEtcdBackedUp)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, bpav1.ReasonNoBackupServer, cond.Reason)
	assert.Contains(t, cond.Message, "spec.etcdBackup.schedule")
}

// A per-minute schedule set on a CR made a year ago takes one snapshot, for the newest
// minute (the walk from creation would stop after 100,000 and take a stale one); a schedule
// that never fires is refused naming the field, without a Workflow.
func TestScheduleEdges(t *testing.T) {
	now := time.Date(2027, 1, 1, 12, 0, 30, 0, time.UTC)
	for schedule, want := range map[string]string{"* * * * *": "2027-01-01T12:00:00Z", "0 0 30 2 *": ""} {
		p := newProvisioning() // created 2026-01-01
		p.Spec.EtcdBackup = &bpav1.EtcdBackup{Schedule: schedule}
		p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts}
		pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}, Spec: bpav1.BPAPolicySpec{
			EtcdBackupServer: "https://b.site", ArtifactServers: []bpav1.ArtifactServer{{URL: "https://b.site", CABundle: string(nodetrusttest.NewCA(t, []string{"b.site"}).PEM)}}}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, pol).WithStatusSubresource(&bpav1.Provisioning{}).Build()
		r := &backupScheduler{Client: c, Recorder: record.NewFakeRecorder(10), now: func() time.Time { return now }}
		start := time.Now()
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
		require.NoError(t, err)
		assert.Less(t, time.Since(start), time.Second, schedule)
		got := &bpav1.Provisioning{}
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, got))
		wfs := workflows(t, c)
		if want == "" {
			assert.Empty(t, wfs, schedule)
			cond := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionEtcdBackedUp)
			require.NotNil(t, cond, schedule)
			assert.Equal(t, bpav1.ReasonInvalidSpec, cond.Reason)
			assert.Contains(t, cond.Message, "spec.etcdBackup.schedule")
			assert.Contains(t, cond.Message, "never fires")
			continue
		}
		require.Len(t, wfs, 1, schedule)
		assert.Equal(t, want, got.Status.LastScheduledBackup.UTC().Format(time.RFC3339))
	}
}
