package controller

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// sha256Hex is a snapshot's recorded digest.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// mergeBackups adds the verified snapshots a run of p's stored (observe.Observation's
// Backups) to status.backups: once each (by name), oldest first, the newest of them kept, as
// many as the backup server keeps (spec.etcdBackup.keep), at most MaxBackupsInStatus; and
// sets EtcdBackedUp from the newest when one was added. Only a Workflow p controls counts:
// anyone who may write Workflows could otherwise list a snapshot that was never taken.
func mergeBackups(p *bpav1.Provisioning, wf *wfv1.Workflow, taken []bpav1.BackupStatus) {
	if len(taken) == 0 || !metav1.IsControlledBy(wf, p) {
		return
	}
	added := false
	for _, b := range taken {
		if !b.Verified || !sha256Hex.MatchString(b.SHA256) || slices.ContainsFunc(p.Status.Backups, func(x bpav1.BackupStatus) bool { return x.Name == b.Name }) {
			continue
		}
		p.Status.Backups = append(p.Status.Backups, b)
		added = true
	}
	if !added {
		return
	}
	slices.SortStableFunc(p.Status.Backups, func(a, b bpav1.BackupStatus) int { return a.TakenAt.Compare(b.TakenAt.Time) })
	keep := min(bpav1.DefaultBackupKeep, bpav1.MaxBackupsInStatus)
	if e := p.Spec.EtcdBackup; e != nil && e.Keep != nil {
		keep = min(int(*e.Keep), bpav1.MaxBackupsInStatus)
	}
	if n := len(p.Status.Backups); n > keep {
		p.Status.Backups = slices.Delete(p.Status.Backups, 0, n-keep)
	}
	b := p.Status.Backups[len(p.Status.Backups)-1]
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionEtcdBackedUp, metav1.ConditionTrue, bpav1.ReasonBackupVerified,
		fmt.Sprintf("snapshot %s (revision %d, %d bytes) of %s verified and stored, taken %s by %s", b.Name, b.Revision, b.Size, b.Member, b.TakenAt.UTC().Format(time.RFC3339), b.Workflow))
}
