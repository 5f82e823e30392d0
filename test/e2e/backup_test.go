package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/etcdbackup"
	"github.com/akraino-edge-stack/bpa/pkg/steps/restoreetcd"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// ---- scenario p: verified etcd snapshots before day 2 and on a schedule ----
//
// The cluster "bk" (a master running etcd, a worker) is built; then:
//
//  1. with the etcd member's client key gone (its host no longer lets BPA in to etcd), a
//     worker is added: the backup-etcd step fails, the CR is Stalled EtcdBackupFailed,
//     and kubespray never ran: a day-2 operation does not start without its snapshot;
//  2. with the key back, a rerun: the snapshot is taken first, verified, stored by the site's
//     backup server (a `bpa serve` keeping them in S3: versitygw) under the cluster's path,
//     read back from the bucket with the recorded sha256, listed in status.backups, and holds a
//     ConfigMap written to the application cluster just before; then the worker joins;
//  3. with a schedule of every minute and keep 2, the scheduled Workflows take snapshots
//     (each once), and the server and status.backups keep the newest two;
//  4. restore (the bpa.akraino.org/restore annotation): a ConfigMap is written, a snapshot
//     taken, the ConfigMap deleted and another written; a restore of a snapshot the server
//     does not have fails, nothing changed; the restore of the real one brings the first
//     ConfigMap back and the second is gone, read through the application apiserver; the
//     control plane's manifests are back; after the application etcd and apiserver restart,
//     it is still so.

const bkBase = 250

func (e *env) scenarioBackup(t *testing.T, store *sim.BackupServer) {
	d := e.newDay2(t)
	var bmhs []metal3v1.BareMetalHost
	for i, name := range []string{"bkm1", "bkw1", "bkw2"} {
		h, _ := d.dayTwoHost("bk-"+name, bkBase+i)
		d.hosts[name] = h
		bmhs = append(bmhs, h)
	}
	e.AddHosts(e.ctx, bmhs)
	mac := func(n string) *bpav1.NodeRequirements {
		return &bpav1.NodeRequirements{MACAddress: d.hosts[n].Spec.BootMACAddress}
	}
	d.p = &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "bk", Labels: map[string]string{"cluster": "bk"}},
		Spec: bpav1.ProvisioningSpec{
			Masters:    []bpav1.NodeEntry{{"bkm1": mac("bkm1")}},
			Workers:    []bpav1.NodeEntry{{"bkw1": mac("bkw1")}},
			Kubernetes: &bpav1.KubernetesConfig{Version: "1.30.4"},
			Kubespray:  &bpav1.KubesprayConfig{Version: "v2.28.0"},
			EtcdBackup: &bpav1.EtcdBackup{Keep: ptrInt32(2)},
		},
	}
	e.create(t, d.p)
	created := e.waitPhase(t, d.p.Name, bpav1.PhaseSucceeded)
	assert.Empty(t, created.Status.Backups, "a new cluster has nothing to back up")
	assert.NotContains(t, stepNames(created), translator.StepBackupEtcd)

	member := d.Machine(d.hosts["bkm1"].Status.HardwareDetails.NIC[0].IP)
	key := member.File("/etc/ssl/etcd/ssl/admin-bkm1-key.pem")
	saved, err := os.ReadFile(key)
	require.NoError(t, err, "kubespray's etcd role (SIMULATED) left the member's client key")

	t.Run("no snapshot, no operation", func(t *testing.T) {
		require.NoError(t, os.Remove(key))
		before := len(d.kubesprayRuns(t))
		p, _ := d.edit(t, func(p *bpav1.Provisioning) {
			p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{"bkw2": mac("bkw2")})
		})
		failed := d.waitGeneration(t, p.Generation, bpav1.PhaseFailed)
		stalled := findCondition(failed.Status.Conditions, bpav1.ConditionStalled)
		require.NotNil(t, stalled)
		assert.Equal(t, bpav1.ReasonEtcdBackupFailed, stalled.Reason, stalled.Message)
		assert.Contains(t, stalled.Message, "admin-bkm1-key.pem")
		assert.Empty(t, d.runsSince(t, before), "kubespray never ran")
		assert.Empty(t, failed.Status.Backups)
		assert.Equal(t, []string{"bkm1", "bkw1"}, appliedNames(failed))
	})

	t.Run("snapshot first, then the operation", func(t *testing.T) {
		require.NoError(t, os.WriteFile(key, saved, 0o600))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-before-the-snapshot", Namespace: "default"}, Data: map[string]string{"k": "v"}}
		_, err := d.app.CoreV1().ConfigMaps("default").Create(d.ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
		p := &bpav1.Provisioning{}
		require.NoError(t, d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, p))
		p.Annotations = map[string]string{bpav1.RerunAnnotation: "key-restored"}
		require.NoError(t, d.Client.Update(d.ctx, p))
		done := &bpav1.Provisioning{}
		e.waitFor(t, done, d.p.Name, func() bool {
			return done.Status.LastHandledRerun == "key-restored" && done.Status.Phase == bpav1.PhaseSucceeded
		}, "the rerun Succeeded")
		assert.Equal(t, []string{"bkm1", "bkw1", "bkw2"}, appliedNames(done))
		require.Equal(t, translator.StepBackupEtcd, done.Status.Plan[0].Name, "the snapshot comes first")
		require.Len(t, done.Status.Backups, 1)
		b := done.Status.Backups[0]
		assert.True(t, b.Verified)
		assert.Equal(t, "bkm1", b.Member)
		assert.Positive(t, b.Revision)
		cond := findCondition(done.Status.Conditions, bpav1.ConditionEtcdBackedUp)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionTrue, cond.Status)

		// On the server's store (the S3 bucket, read with S3's own client), under this
		// namespace and cluster, with the recorded sha256; and it is the application
		// cluster's etcd: it holds the ConfigMap written just before.
		file := store.Snapshot(t, d.Namespace, "bk", b.Name)
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		assert.Equal(t, b.SHA256, hex.EncodeToString(sum[:]))
		assert.Equal(t, b.Size, int64(len(data)))
		snap, closeSnap, err := etcdbackup.Open(d.ctx, file, t.TempDir(), nil)
		require.NoError(t, err)
		defer closeSnap()
		got, err := snap.Get(d.ctx, "/registry/configmaps/default/written-before-the-snapshot")
		require.NoError(t, err)
		assert.Len(t, got.Kvs, 1, "the snapshot holds what the application cluster stored before it")
		none, err := snap.Get(d.ctx, "/registry/bpa.akraino.org/provisionings/", clientv3.WithPrefix())
		require.NoError(t, err)
		assert.Empty(t, none.Kvs, "and nothing of the management cluster")
	})

	t.Run("on a schedule, keeping two", func(t *testing.T) {
		_, _ = d.edit(t, func(p *bpav1.Provisioning) { p.Spec.EtcdBackup.Schedule = "* * * * *" })
		got := &bpav1.Provisioning{}
		scheduledOnly := func() bool { // keep: 2, so two scheduled ones replace the day-2 run's
			return len(got.Status.Backups) == 2 && !slices.ContainsFunc(got.Status.Backups, func(b bpav1.BackupStatus) bool {
				return !strings.Contains(b.Workflow, "-etcd-backup-")
			})
		}
		d.waitWithin(t, 6*time.Minute, got, d.p.Name, scheduledOnly, "two scheduled snapshots")
		scheduled := e.workflowsOf(t, bpav1.EtcdBackupOfLabel, d.p.Name)
		assert.GreaterOrEqual(t, len(scheduled), 2)
		names := map[string]bool{}
		for _, wf := range scheduled {
			assert.False(t, names[wf.Name], "one Workflow per time")
			names[wf.Name] = true
			assert.Empty(t, wf.Labels[bpav1.ProvisioningNameLabel], "not a run of the spec")
		}
		assert.Equal(t, bpav1.PhaseSucceeded, got.Status.Phase, "the run's status is untouched")
		_, _ = d.edit(t, func(p *bpav1.Provisioning) { p.Spec.EtcdBackup.Schedule = "" })
		// keep: 2, after the third snapshot.
		stored := store.Stored(t, d.Namespace, "bk")
		assert.Len(t, stored, 2, "spec.etcdBackup.keep")
		var listed []string
		for _, b := range got.Status.Backups {
			listed = append(listed, b.Name)
		}
		assert.ElementsMatch(t, listed, stored, "status.backups lists what the server keeps")
	})

	t.Run("restore", func(t *testing.T) { d.restore(t, member) })
}

// restore is scenario p's step 4, on the cluster bk whose only etcd member is on member.
func (d *day2) restore(t *testing.T, member *simhost.Host) {
	cms := d.app.CoreV1().ConfigMaps("default")
	const kept, gone = "written-before-the-restored-snapshot", "written-after-the-restored-snapshot"
	_, err := cms.Create(d.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: kept}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	snap := d.freshSnapshot(t)
	require.NoError(t, cms.Delete(d.ctx, kept, metav1.DeleteOptions{}))
	_, err = cms.Create(d.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gone}}, metav1.CreateOptions{})
	require.NoError(t, err)
	restore := func(t *testing.T, request string, phase bpav1.RequestPhase) *bpav1.Provisioning {
		t.Helper()
		return d.ask(t, bpav1.RestoreAnnotation, request, phase, func(p *bpav1.Provisioning) *bpav1.RequestStatus {
			if p.Status.Restore == nil {
				return nil
			}
			return &p.Status.Restore.RequestStatus
		})
	}

	t.Run("a snapshot the server does not have: nothing changed", func(t *testing.T) {
		done := restore(t, "etcd-19700101T000000Z.db", bpav1.RequestFailed)
		cond := findCondition(done.Status.Conditions, bpav1.ConditionEtcdRestored)
		require.NotNil(t, cond)
		assert.Equal(t, bpav1.ReasonEtcdRestoreFailed, cond.Reason)
		assert.Contains(t, cond.Message, "no snapshot etcd-19700101T000000Z.db")
		assert.Contains(t, cond.Message, "nothing was changed")
		_, err := cms.Get(d.ctx, gone, metav1.GetOptions{})
		assert.NoError(t, err, "the cluster is as it was")
	})

	t.Run("the snapshot: the deleted ConfigMap is back", func(t *testing.T) {
		done := restore(t, snap, bpav1.RequestSucceeded)
		cond := findCondition(done.Status.Conditions, bpav1.ConditionEtcdRestored)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionTrue, cond.Status)
		assert.Contains(t, cond.Message, snap)
		wfs := d.workflowsOf(t, bpav1.RestoreOfLabel, d.p.Name)
		require.Len(t, wfs, 2, "one Workflow per request")
		names := stepPhases(t, &wfs[len(wfs)-1])
		assert.Equal(t, "Succeeded", names[translator.StepRestoreEtcd])
		assert.Equal(t, "Succeeded", names[translator.StepVerify])
		assert.NotContains(t, names, translator.StepRejoinEtcd, "one member: nothing to rejoin")
		for _, f := range restoreetcd.ControlPlaneManifests {
			assert.FileExists(t, member.File(restoreetcd.ManifestsDir+"/"+f), "the control plane runs again")
		}
		d.assertRestored(t, kept, gone)

		// Every process of the application cluster restarts: still so.
		d.App.Stop()
		d.App.Etcd.Stop()
		require.NoError(t, d.App.Etcd.Start(d.ctx))
		require.NoError(t, d.App.Start(d.ctx))
		d.assertRestored(t, kept, gone)
	})
}

// freshSnapshot turns the schedule on until a snapshot taken from now on is listed, turns it
// off, and returns its name.
func (d *day2) freshSnapshot(t *testing.T) string {
	t.Helper()
	from := time.Now().Truncate(time.Second)
	got := &bpav1.Provisioning{}
	require.NoError(t, d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, got))
	before := map[string]bool{}
	for _, b := range got.Status.Backups {
		before[b.Name] = true
	}
	schedule := func(s string) {
		_, _ = d.edit(t, func(p *bpav1.Provisioning) {
			if p.Spec.EtcdBackup == nil {
				p.Spec.EtcdBackup = &bpav1.EtcdBackup{}
			}
			p.Spec.EtcdBackup.Schedule = s
		})
	}
	schedule("* * * * *")
	var snap string
	d.waitWithin(t, 6*time.Minute, got, d.p.Name, func() bool {
		for _, b := range got.Status.Backups {
			if !before[b.Name] && !b.TakenAt.Time.Before(from) {
				snap = b.Name
				return true
			}
		}
		return false
	}, "a snapshot taken from "+from.Format(time.RFC3339))
	schedule("")
	return snap
}

// ask sets annotation to value on the CR and waits for the operation it asks for (status
// reads its record) to end in phase.
func (d *day2) ask(t *testing.T, annotation, value string, phase bpav1.RequestPhase, status func(*bpav1.Provisioning) *bpav1.RequestStatus) *bpav1.Provisioning {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &bpav1.Provisioning{}
		if err := d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, p); err != nil {
			return err
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[annotation] = value
		return d.Client.Update(d.ctx, p)
	}))
	done := &bpav1.Provisioning{}
	d.waitWithin(t, 8*time.Minute, done, d.p.Name, func() bool {
		r := status(done)
		return r != nil && r.Request == value && r.Phase != bpav1.RequestRunning
	}, annotation+"="+value+" done")
	r := status(done)
	require.Equal(t, phase, r.Phase, r.Message)
	return done
}

// assertRestored: the application apiserver serves kept and not gone.
func (d *day2) assertRestored(t *testing.T, kept, gone string) {
	t.Helper()
	cms := d.app.CoreV1().ConfigMaps("default")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := cms.Get(d.ctx, kept, metav1.GetOptions{})
		assert.NoError(c, err, "the ConfigMap the snapshot holds is back")
		_, err = cms.Get(d.ctx, gone, metav1.GetOptions{})
		assert.True(c, apierrors.IsNotFound(err), "the one written after the snapshot is gone: %v", err)
	}, time.Minute, time.Second)
}

// stepPhases maps each task of a finished Workflow to its phase.
func stepPhases(t *testing.T, wf *wfv1.Workflow) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePod || n.Type == wfv1.NodeTypeRetry || n.Type == wfv1.NodeTypeSkipped {
			out[n.DisplayName] = string(n.Phase)
		}
	}
	return out
}
