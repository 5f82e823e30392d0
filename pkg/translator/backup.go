package translator

import (
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// backupDeadline bounds a scheduled backup: a snapshot of a few GiB, verified and stored,
// takes minutes; waiting for the cluster's mutex behind a long run does not count (Argo's
// deadline starts when the Workflow does).
const backupDeadline = 60 * 60

// EtcdBackupWorkflow is the scheduled backup of p's etcd for the schedule's time slot: one
// backup-etcd task, under the cluster's mutex so it never runs beside a change, named after
// the slot so that creating it twice (a reconcile after a crash) makes one Workflow. It is
// refused, naming the field, when the site policy names no backup server.
func EtcdBackupWorkflow(p *bpav1.Provisioning, opts Options, slot time.Time) (*wfv1.Workflow, error) {
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	if opts.BackupServer == "" {
		return nil, &Refusal{Field: "spec.etcdBackup.schedule", Reason: bpav1.ReasonNoBackupServer,
			Message: "the site policy names no etcd backup server for this namespace (BPAPolicy spec.etcdBackupServer): ask the admin for one"}
	}
	params["backup-server"], params["backup-server-ca"] = opts.BackupServer, opts.BackupServerCA
	wf := newWorkflow(p, "Provisioning", bpav1.EtcdBackupOfLabel, workflowtemplates.Provision, "etcd-backup", params["cluster"], opts, backupDeadline)
	wf.Name = EtcdBackupWorkflowName(p.Name, slot)
	wf.Annotations[BackupSlotAnnotation] = slot.UTC().Format(time.RFC3339)
	wf.Spec.Entrypoint = "etcd-backup"
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)
	d := provisionDAG{ref: workflowtemplates.Provision, param: wfParam}
	wf.Spec.Templates = []wfv1.Template{{Name: "etcd-backup", DAG: &wfv1.DAGTemplate{Tasks: []wfv1.DAGTask{d.backupTask(StepBackupEtcd, "")}}}}
	return wf, nil
}

// BackupSlotAnnotation records on a scheduled backup Workflow the schedule's time it is for.
const BackupSlotAnnotation = "bpa.akraino.org/backup-slot"

// EtcdBackupWorkflowName is the name of p's scheduled backup for slot (within Argo's
// limit, as WorkflowName keeps every run's).
func EtcdBackupWorkflowName(provisioning string, slot time.Time) string {
	return WorkflowName(provisioning, "etcd-backup", slot.Unix(), "", "")
}
