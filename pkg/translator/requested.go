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

// Operations a person asks for with an annotation, outside the runs of the spec: each has a
// Workflow of its own, named after the annotation's value (so a reconcile after a crash makes
// no second one), labelled with the Provisioning it acts on, under the cluster's mutex (never
// beside a run or a backup). It reads the hosts as any run does, runs its own steps, then
// verify and publish-kubeconfig.

// StepRestoreEtcd restores the cluster's etcd from a snapshot (`bpa step restore-etcd`);
// StepRejoinEtcd then adds its other members back (Profile.RejoinEtcd);
// StepRenewCertificates renews kubeadm's certificates, one control-plane node at a time
// (`bpa step renew-certificates`).
const (
	StepRestoreEtcd       = "restore-etcd"
	StepRejoinEtcd        = "rejoin-etcd"
	StepRenewCertificates = "renew-certificates"
)

// RequestSteps are the steps of requested operations (besides the hosts' and verify's).
var RequestSteps = []string{StepRestoreEtcd, StepRejoinEtcd, StepRenewCertificates}

// requestDeadline bounds a requested operation: a restore's download, verification and
// restore and, with several members, a cluster.yml on the control plane; a renewal of up to
// fifteen masters, one at a time.
const requestDeadline = 3 * 60 * 60

// request is one kind of requested operation.
type request struct {
	kind, label, annotation string
	// tasks are its steps, after render-inventory; the last one's name comes second.
	tasks func(d provisionDAG, params map[string]string) ([]wfv1.DAGTask, string, error)
}

func (r request) field() string { return "metadata.annotations[" + r.annotation + "]" }

// workflow builds the Workflow that answers value for p.
func (r request) workflow(p *bpav1.Provisioning, opts Options, value, what string) (*wfv1.Workflow, error) {
	applied := p.Status.Applied
	if applied == nil || len(applied.Hosts) == 0 {
		return nil, &Refusal{Field: "status.applied", Reason: bpav1.ReasonInvalidSpec, Message: "it lists no host: the cluster was never built, so there is nothing to " + what}
	}
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	params["artifacts-ca"], params["backup-server"], params["backup-server-ca"] = opts.ArtifactsCA, opts.BackupServer, opts.BackupServerCA
	wf := newWorkflow(p, "Provisioning", r.label, workflowtemplates.Provision, r.kind, params["cluster"], opts, requestDeadline)
	wf.Name = WorkflowName(p.Name, r.kind, 0, value, "")
	delete(wf.Annotations, RerunAnnotation)
	wf.Annotations[r.annotation] = value
	wf.Spec.Entrypoint = r.kind
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	d := provisionDAG{ref: workflowtemplates.Provision, param: wfParam, kube: applied.KubernetesVersion}
	tasks := d.hostTasks("", params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost))
	own, last, err := r.tasks(d, params)
	if err != nil {
		return nil, err
	}
	tasks = append(append(tasks, own...), d.finalTasks(last, "false")...)
	wf.Spec.Templates = []wfv1.Template{{Name: r.kind, DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}

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

// restore is the etcd restore's kind.
var restore = request{kind: "restore", label: bpav1.RestoreOfLabel, annotation: bpav1.RestoreAnnotation}

// RestoreWorkflowName is the name of the Workflow that answers the restore request value.
func RestoreWorkflowName(provisioning, value string) string {
	return WorkflowName(provisioning, restore.kind, 0, value, "")
}

// RestoreWorkflow restores p's etcd from the snapshot the request names, as
// docs/protecting.md#restore says: restore-etcd (the control plane stopped, etcd's first
// member restored as a cluster of one, kubespray's recover_lost_quorum.yml, the control
// plane started), then with several members rejoin-etcd (cluster.yml on the control plane).
func RestoreWorkflow(p *bpav1.Provisioning, opts Options, value string) (*wfv1.Workflow, error) {
	snapshot, err := ParseRestoreRequest(value)
	if err != nil {
		return nil, &Refusal{Field: restore.field(), Reason: bpav1.ReasonInvalidSpec, Message: err.Error()}
	}
	if opts.BackupServer == "" {
		return nil, &Refusal{Field: restore.field(), Reason: bpav1.ReasonNoBackupServer,
			Message: "the site policy names no etcd backup server for this namespace (BPAPolicy spec.etcdBackupServer), where the snapshot would be: ask the admin for one"}
	}
	r := restore
	r.tasks = func(d provisionDAG, params map[string]string) ([]wfv1.DAGTask, string, error) {
		if err := sameRelease(p, params); err != nil {
			return nil, "", err
		}
		tasks := []wfv1.DAGTask{d.task(StepRestoreEtcd, "restore-etcd", "render-inventory", append([]string{
			"provisioning", d.param("provisioning"), "snapshot", snapshot, "backup-server", d.param("backup-server"),
			"backup-server-ca", d.param("backup-server-ca")}, d.ssh()...)...)}
		if etcdMembers(p.Status.Applied.Hosts) <= 1 {
			return tasks, StepRestoreEtcd, nil
		}
		profile, _, err := kubespray.ProfileForImage(params["kubespray-image"])
		if err != nil {
			return nil, "", err
		}
		ops, err := json.Marshal([]kubespray.Operation{profile.RejoinEtcd(RejoinReason)})
		if err != nil {
			return nil, "", err
		}
		return append(tasks, d.kubesprayTask(StepRejoinEtcd, StepRestoreEtcd, string(ops), "false")), StepRejoinEtcd, nil
	}
	return r.workflow(p, opts, value, "restore")
}

// RejoinReason is why a restore of several etcd members runs cluster.yml.
const RejoinReason = "restore: the other etcd members, their data set aside, join the restored first member again (kubespray's recover-control-plane.yml, cluster.yml limited to etcd,kube_control_plane)"

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
		return &Refusal{Field: restore.field(), Reason: bpav1.ReasonInvalidSpec,
			Message: fmt.Sprintf("the spec asks for kubespray %s and Kubernetes %q, the cluster runs kubespray %s and Kubernetes %s: set the spec back to what the cluster runs before restoring its etcd",
				release, kube, applied.KubesprayVersion, applied.KubernetesVersion)}
	}
	return nil
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

// renewal is the certificate renewal's kind.
var renewal = request{kind: "renew-certificates", label: bpav1.RenewalOfLabel, annotation: bpav1.RenewCertificatesAnnotation,
	tasks: func(d provisionDAG, _ map[string]string) ([]wfv1.DAGTask, string, error) {
		return []wfv1.DAGTask{d.task(StepRenewCertificates, "renew-certificates", "render-inventory",
			append([]string{"provisioning", d.param("provisioning")}, d.ssh()...)...)}, StepRenewCertificates, nil
	}}

// RenewalWorkflowName is the name of the Workflow that answers the renewal request value.
func RenewalWorkflowName(provisioning, value string) string {
	return WorkflowName(provisioning, renewal.kind, 0, value, "")
}

// RenewalWorkflow renews p's kubeadm certificates (docs/protecting.md#renewing-certificates):
// renew-certificates runs kubespray's k8s-certs-renew.sh on one control-plane node at a
// time, the cluster's health checked before and after each; verify then reads the new
// expiry dates into status.certificates.
func RenewalWorkflow(p *bpav1.Provisioning, opts Options, value string) (*wfv1.Workflow, error) {
	return renewal.workflow(p, opts, value, "renew")
}
