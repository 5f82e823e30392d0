package controller

import (
	"context"
	"encoding/json"
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
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// restoreRig is a Provisioning built on appliedHosts, a site policy with a backup server
// (unless noServer), and the restorer.
func restoreRig(t *testing.T, noServer bool) (client.Client, func(annotation string) (*bpav1.Provisioning, []wfv1.Workflow)) {
	p := newProvisioning()
	p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts}
	objs := []client.Object{p}
	if !noServer {
		const server = "https://backups.site:8443"
		objs = append(objs, &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}, Spec: bpav1.BPAPolicySpec{
			EtcdBackupServer: server, ArtifactServers: []bpav1.ArtifactServer{{URL: server, CABundle: string(nodetrusttest.NewCA(t, []string{"backups.site"}).PEM)}}}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&bpav1.Provisioning{}).Build()
	r := &requestReconciler{Client: c, Recorder: record.NewFakeRecorder(20), kind: restoreKind}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns", Name: "p"}
	return c, func(annotation string) (*bpav1.Provisioning, []wfv1.Workflow) {
		t.Helper()
		if annotation != "-" {
			cur := &bpav1.Provisioning{}
			require.NoError(t, c.Get(ctx, key, cur))
			if annotation == "" {
				delete(cur.Annotations, bpav1.RestoreAnnotation)
			} else {
				cur.Annotations = map[string]string{bpav1.RestoreAnnotation: annotation}
			}
			require.NoError(t, c.Update(ctx, cur))
		}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName(key)})
		require.NoError(t, err)
		got := &bpav1.Provisioning{}
		require.NoError(t, c.Get(ctx, key, got))
		return got, workflows(t, c)
	}
}

func restoreCondition(t *testing.T, p *bpav1.Provisioning) *metav1.Condition {
	t.Helper()
	cond := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionEtcdRestored)
	require.NotNil(t, cond)
	return cond
}

// One Workflow per value of the annotation, after a crash too; its outcome lands in
// status.restore and EtcdRestored; a new value restores again.
func TestRestoreByAnnotation(t *testing.T) {
	c, reconcile := restoreRig(t, false)
	ctx := context.Background()

	got, wfs := reconcile("")
	assert.Empty(t, wfs, "nothing asked")
	assert.Nil(t, got.Status.Restore)

	const snap = "etcd-20260101T120000Z.db"
	got, wfs = reconcile(snap)
	require.Len(t, wfs, 1)
	wf := wfs[0]
	assert.Equal(t, translator.RestoreWorkflowName("p", snap), wf.Name)
	assert.Equal(t, "p", wf.Labels[bpav1.RestoreOfLabel])
	assert.Empty(t, wf.Labels[bpav1.ProvisioningNameLabel], "not a run of the spec")
	assert.Equal(t, "bpa-cluster-c1", wf.Spec.Synchronization.Mutexes[0].Name, "queued behind the cluster's runs and backups")
	require.NotNil(t, got.Status.Restore)
	assert.Equal(t, bpav1.RequestRunning, got.Status.Restore.Phase)
	assert.Equal(t, snap, got.Status.Restore.Snapshot)
	assert.Equal(t, bpav1.ReasonRestoring, restoreCondition(t, got).Reason)

	// Again, and after a crash lost the status write: still one Workflow.
	reconcile("-")
	got.Status.Restore = nil
	require.NoError(t, c.Status().Update(ctx, got))
	got, wfs = reconcile("-")
	require.Len(t, wfs, 1, "no second restore for one request")
	assert.Equal(t, bpav1.RequestRunning, got.Status.Restore.Phase)

	// It succeeds: the record says where the data from before is.
	rec, _ := json.Marshal(stepio.Restore{Snapshot: snap, Revision: 42, Member: "m1", SetAside: map[string]string{"m1": "/var/lib/etcd/member.before-restore-x"}})
	wf = wfs[0]
	wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowSucceeded, StartedAt: observetest.At(0), FinishedAt: observetest.At(1), Nodes: wfv1.Nodes{
		"r": observetest.WithOutput(observetest.Node("r", translator.StepRestoreEtcd, wfv1.NodeTypePod, wfv1.NodeSucceeded, 0), "restore", string(rec))}}
	require.NoError(t, c.Update(ctx, &wf))
	got, _ = reconcile("-")
	assert.Equal(t, bpav1.RequestSucceeded, got.Status.Restore.Phase)
	cond := restoreCondition(t, got)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Contains(t, cond.Message, "revision 42")
	assert.Contains(t, cond.Message, "member.before-restore-x")
	_, wfs = reconcile("-")
	assert.Len(t, wfs, 1, "answered: nothing more")

	// The same snapshot again, with a token: a second restore.
	got, wfs = reconcile(snap + "@2")
	require.Len(t, wfs, 2)
	assert.Equal(t, bpav1.RequestRunning, got.Status.Restore.Phase)
	assert.Equal(t, snap, got.Status.Restore.Snapshot)

	// It fails: Failed, with the step's message and what to do.
	wf = workflowNamed(t, wfs, translator.RestoreWorkflowName("p", snap+"@2"))
	wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowFailed, StartedAt: observetest.At(0), FinishedAt: observetest.At(1), Nodes: wfv1.Nodes{
		"r": withMessage(observetest.Node("r", translator.StepRestoreEtcd, wfv1.NodeTypePod, wfv1.NodeFailed, 0), "EtcdRestoreFailed: m1: no /usr/local/bin/etcdutl; nothing was changed")}}
	trimmed, _ := trimWorkflow(wf.DeepCopy())
	require.Contains(t, trimmed.(*wfv1.Workflow).Status.Nodes, "r", "the informer's trim keeps the step, or its message is lost")
	require.NoError(t, c.Update(ctx, &wf))
	got, _ = reconcile("-")
	assert.Equal(t, bpav1.RequestFailed, got.Status.Restore.Phase)
	cond = restoreCondition(t, got)
	assert.Equal(t, bpav1.ReasonEtcdRestoreFailed, cond.Reason)
	assert.Contains(t, cond.Message, "no /usr/local/bin/etcdutl")
	assert.Contains(t, cond.Message, "argo retry")

	// `argo retry`: Running again.
	wf = workflowNamed(t, workflows(t, c), wf.Name)
	wf.Status.Phase, wf.Status.FinishedAt = wfv1.WorkflowRunning, metav1.Time{}
	require.NoError(t, c.Update(ctx, &wf))
	got, _ = reconcile("-")
	assert.Equal(t, bpav1.RequestRunning, got.Status.Restore.Phase)
}

// Requests BPA cannot run are refused with the field and nothing created; a cluster never
// built has nothing to restore; another release in the spec than the cluster runs waits.
func TestRestoreRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		noServer   bool
		annotation string
		mutate     func(p *bpav1.Provisioning)
		reason     string
		message    string
	}{
		"not a name":       {annotation: "../../etc/passwd", reason: bpav1.ReasonInvalidSpec, message: "is not a snapshot name"},
		"a record":         {annotation: "etcd.json", reason: bpav1.ReasonInvalidSpec, message: "is not a snapshot name"},
		"no backup server": {noServer: true, annotation: "etcd-1.db", reason: bpav1.ReasonNoBackupServer, message: "spec.etcdBackupServer"},
		"never built":      {annotation: "etcd-1.db", mutate: func(p *bpav1.Provisioning) { p.Status.Applied = nil }, reason: bpav1.ReasonInvalidSpec, message: "never built"},
		"other release": {annotation: "etcd-1.db", mutate: func(p *bpav1.Provisioning) {
			p.Status.Applied.KubesprayVersion = "v2.27.0"
		}, reason: bpav1.ReasonInvalidSpec, message: "set the spec back"},
	} {
		t.Run(name, func(t *testing.T) {
			c, reconcile := restoreRig(t, tc.noServer)
			if tc.mutate != nil {
				p := &bpav1.Provisioning{}
				require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
				tc.mutate(p)
				require.NoError(t, c.Status().Update(context.Background(), p))
			}
			got, wfs := reconcile(tc.annotation)
			assert.Empty(t, wfs)
			require.NotNil(t, got.Status.Restore)
			assert.Equal(t, bpav1.RequestFailed, got.Status.Restore.Phase)
			cond := restoreCondition(t, got)
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, tc.reason, cond.Reason)
			assert.Contains(t, cond.Message, tc.message)
			assert.Contains(t, cond.Message, "nothing was changed")
			_, wfs = reconcile("-")
			assert.Empty(t, wfs, "refused once, not retried")
		})
	}
}

func workflowNamed(t *testing.T, wfs []wfv1.Workflow, name string) wfv1.Workflow {
	t.Helper()
	for _, wf := range wfs {
		if wf.Name == name {
			return wf
		}
	}
	t.Fatalf("no Workflow %s", name)
	return wfv1.Workflow{}
}

func withMessage(n wfv1.NodeStatus, msg string) wfv1.NodeStatus {
	n.Message = msg
	n.FinishedAt = metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
	return n
}

// A renewal runs like a restore, with its own annotation, label, status and condition: the
// message of a success names the earliest certificate verify read afterwards.
func TestRenewalByAnnotation(t *testing.T) {
	p := newProvisioning()
	p.Status.Applied = &bpav1.AppliedState{Hosts: appliedHosts}
	p.Annotations = map[string]string{bpav1.RenewCertificatesAnnotation: "now"}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(&bpav1.Provisioning{}).Build()
	r := &requestReconciler{Client: c, Recorder: record.NewFakeRecorder(20), kind: renewalKind}
	ctx := context.Background()
	reconcile := func() *bpav1.Provisioning {
		t.Helper()
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
		require.NoError(t, err)
		got := &bpav1.Provisioning{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "p"}, got))
		return got
	}
	got := reconcile()
	wfs := workflows(t, c)
	require.Len(t, wfs, 1, "no backup server needed")
	assert.Equal(t, translator.RenewalWorkflowName("p", "now"), wfs[0].Name)
	assert.Equal(t, "p", wfs[0].Labels[bpav1.RenewalOfLabel])
	require.NotNil(t, got.Status.CertificateRenewal)
	assert.Nil(t, got.Status.Restore)
	assert.Equal(t, bpav1.RequestRunning, got.Status.CertificateRenewal.Phase)
	cond := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionCertificatesRenewed)
	require.NotNil(t, cond)
	assert.Equal(t, bpav1.ReasonRenewing, cond.Reason)

	certs, _ := json.Marshal(stepio.Certificates{CheckedAt: metav1.NewTime(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)), Certificates: []bpav1.CertificateStatus{{Node: "m1", Component: "apiserver", NotAfter: metav1.NewTime(time.Date(2027, 11, 28, 0, 0, 0, 0, time.UTC))}}})
	wf := wfs[0]
	wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowSucceeded, StartedAt: observetest.At(0), FinishedAt: observetest.At(1), Nodes: wfv1.Nodes{
		"v": observetest.WithOutput(observetest.Node("v", translator.StepVerify, wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 0), "certificates", string(certs)),
		"r": observetest.WithOutput(observetest.Node("r", translator.StepRenewCertificates, wfv1.NodeTypePod, wfv1.NodeSucceeded, 0), "renewal", `{"masters":[{"name":"m1","awaySeconds":2}]}`)}}
	require.NoError(t, c.Update(ctx, &wf))
	got = reconcile()
	assert.Equal(t, bpav1.RequestSucceeded, got.Status.CertificateRenewal.Phase)
	cond = meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionCertificatesRenewed)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Contains(t, cond.Message, "2027-11-28 (apiserver on m1)")
	assert.Contains(t, cond.Message, "m1 (its API server away 2s)")
	require.Len(t, got.Status.Certificates, 1, "status.certificates follows at once")
	assert.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionCertificatesExpiring))
	reconcile()
	assert.Len(t, workflows(t, c), 1, "answered: nothing more")
}
