package translator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// StepRestoreEtcd restores the cluster's etcd from a snapshot (`bpa step restore-etcd`);
// StepRejoinEtcd then adds its other members back (kubespray.RejoinEtcd).
const (
	StepRestoreEtcd = "restore-etcd"
	StepRejoinEtcd  = "rejoin-etcd"
)

// restoreDeadline bounds a restore: a download, a verification, a restore and, with several
// members, a cluster.yml on the control plane.
const restoreDeadline = 3 * 60 * 60

var restoreRequest = regexp.MustCompile(bpav1.RestoreRequestPattern)

// ParseRestoreRequest splits the bpa.akraino.org/restore annotation's value into the
// snapshot's name and the token after "@" that lets the same snapshot be restored again.
func ParseRestoreRequest(value string) (snapshot string, err error) {
	snapshot, _, _ = strings.Cut(value, "@")
	if !restoreRequest.MatchString(value) || strings.HasSuffix(snapshot, ".json") {
		return "", fmt.Errorf("%q is not a snapshot name (one of status.backups[].name, optionally followed by @ and any token)", value)
	}
	return snapshot, nil
}

// RestoreWorkflowName is the name of the Workflow that answers the restore request value:
// the same request always makes the same name, so a reconcile after a crash makes no second
// restore.
func RestoreWorkflowName(provisioning, request string) string {
	return WorkflowName(provisioning, "restore", 0, request, "")
}

// RestoreWorkflow restores p's etcd from the snapshot the request names, as
// docs/protecting.md#restore says: the hosts as the last run applied them (discover-hosts,
// resolve-leases, render-inventory), restore-etcd (the control plane stopped, etcd's first
// member restored as a cluster of one, kubespray's recover_lost_quorum.yml, the control
// plane started), with several members rejoin-etcd (cluster.yml on the control plane), then
// verify and publish-kubeconfig. It runs under the cluster's mutex, never beside a run.
func RestoreWorkflow(p *bpav1.Provisioning, opts Options, request string) (*wfv1.Workflow, error) {
	snapshot, err := ParseRestoreRequest(request)
	if err != nil {
		return nil, &Refusal{Field: "metadata.annotations[" + bpav1.RestoreAnnotation + "]", Reason: bpav1.ReasonInvalidSpec, Message: err.Error()}
	}
	if opts.BackupServer == "" {
		return nil, &Refusal{Field: "metadata.annotations[" + bpav1.RestoreAnnotation + "]", Reason: bpav1.ReasonNoBackupServer,
			Message: "the site policy names no etcd backup server for this namespace (BPAPolicy spec.etcdBackupServer), where the snapshot would be: ask the admin for one"}
	}
	applied := p.Status.Applied
	if applied == nil || len(applied.Hosts) == 0 {
		return nil, &Refusal{Field: "status.applied", Reason: bpav1.ReasonInvalidSpec, Message: "it lists no host: the cluster was never built, so there is no etcd to restore"}
	}
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	if err := sameRelease(p, params); err != nil {
		return nil, err
	}
	params["artifacts-ca"], params["backup-server"], params["backup-server-ca"] = opts.ArtifactsCA, opts.BackupServer, opts.BackupServerCA
	wf := newWorkflow(p, "Provisioning", bpav1.RestoreOfLabel, workflowtemplates.Provision, "restore", params["cluster"], opts, restoreDeadline)
	wf.Name = RestoreWorkflowName(p.Name, request)
	delete(wf.Annotations, RerunAnnotation)
	wf.Annotations[bpav1.RestoreAnnotation] = request
	wf.Spec.Entrypoint = "restore"
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	d := provisionDAG{ref: workflowtemplates.Provision, param: wfParam, kube: applied.KubernetesVersion}
	tasks := d.hostTasks("", params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost))
	tasks = append(tasks, d.restoreTask(snapshot, "render-inventory"))
	last := StepRestoreEtcd
	if etcdMembers(applied.Hosts) > 1 {
		profile, _, err := kubespray.ProfileForImage(params["kubespray-image"])
		if err != nil {
			return nil, err
		}
		ops, err := json.Marshal([]kubespray.Operation{profile.RejoinEtcd(RejoinReason)})
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, d.kubesprayTask(StepRejoinEtcd, last, string(ops), "false"))
		last = StepRejoinEtcd
	}
	tasks = append(tasks, d.finalTasks(last, "false")...)
	wf.Spec.Templates = []wfv1.Template{{Name: "restore", DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}

// sameRelease refuses a restore while the spec asks for another kubespray or Kubernetes
// release than the cluster runs (an upgrade that failed, say): rejoin-etcd runs the spec's
// kubespray, whose cluster.yml would then change the release midway through a restore.
func sameRelease(p *bpav1.Provisioning, params map[string]string) error {
	applied := p.Status.Applied
	_, release := splitImage(params["kubespray-image"])
	kube := ""
	if p.Spec.Kubernetes != nil {
		kube = strings.TrimPrefix(p.Spec.Kubernetes.Version, "v")
	}
	if (applied.KubesprayVersion != "" && release != applied.KubesprayVersion) || (kube != "" && applied.KubernetesVersion != "" && kube != strings.TrimPrefix(applied.KubernetesVersion, "v")) {
		return &Refusal{Field: "metadata.annotations[" + bpav1.RestoreAnnotation + "]", Reason: bpav1.ReasonInvalidSpec,
			Message: fmt.Sprintf("the spec asks for kubespray %s and Kubernetes %q, the cluster runs kubespray %s and Kubernetes %s: set the spec back to what the cluster runs before restoring its etcd",
				release, kube, applied.KubesprayVersion, applied.KubernetesVersion)}
	}
	return nil
}

// RejoinReason is why a restore of several etcd members runs cluster.yml.
const RejoinReason = "restore: the other etcd members, their data set aside, join the restored first member again (kubespray's recover-control-plane.yml, cluster.yml limited to etcd,kube_control_plane)"

// restoreTask restores the snapshot on the cluster's etcd members.
func (d provisionDAG) restoreTask(snapshot, depends string) wfv1.DAGTask {
	return d.task(StepRestoreEtcd, "restore-etcd", depends, append([]string{
		"provisioning", d.param("provisioning"), "snapshot", snapshot, "backup-server", d.param("backup-server"),
		"backup-server-ca", d.param("backup-server-ca")}, d.ssh()...)...)
}

func etcdMembers(hosts []bpav1.HostStatus) int {
	n := 0
	for _, h := range hosts {
		if h.Etcd && !h.Removing {
			n++
		}
	}
	return n
}
