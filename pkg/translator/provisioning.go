package translator

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// ProvisioningSteps are the DAG's tasks, in order. Status mirroring and the docs use it.
var ProvisioningSteps = []string{"discover-hosts", "resolve-leases", "render-inventory", StepCreate, StepVerify, "publish-kubeconfig"}

// StepVerify is the task that checks the cluster a run leaves: each kept host a Ready Node,
// each removed host's Node gone.
const StepVerify = "verify"

// provisioningParameterOrder is the order of the Workflow's parameters, which is also what
// `bpa step lookup` writes for ad-hoc runs.
var provisioningParameterOrder = []string{
	"provisioning", "cluster", "generation", "lease-source", "lease-host-path", "lease-pod-spec-patch", "kubespray-image",
	"ssh-secret", "ssh-user", "ssh-port", "insecure-ignore-host-key", "artifacts-ca", "backup-server", "backup-server-ca",
}

// ProvisioningParameters derives the Workflow parameters of a Provisioning, defaults
// applied. None is secret. artifacts-ca, the CA render-inventory and run-kubespray get, and
// backup-server and backup-server-ca, where backup-etcd stores snapshots, are the site
// policy's and empty here; the caller sets them (Options, or lookup).
func ProvisioningParameters(p *bpav1.Provisioning) (map[string]string, error) {
	cluster, err := ClusterOf(p)
	if err != nil {
		return nil, err
	}
	params := sshParameters(p.Spec.SSH, cluster)
	params["provisioning"] = p.Name
	params["cluster"] = cluster
	params["generation"] = strconv.FormatInt(p.Generation, 10)
	params["lease-source"] = string(bpav1.LeaseSourceBareMetalHost)
	params["lease-host-path"] = ""
	params["lease-pod-spec-patch"] = "{}"
	if l := p.Spec.Leases; l != nil && l.Type != "" {
		params["lease-source"] = string(l.Type)
		params["lease-host-path"] = l.HostPath
		if len(l.NodeSelector) > 0 {
			// The pod that mounts the lease file runs where the file is. JSON-encoded here
			// from validated label keys and values, it can hold nothing but a nodeSelector.
			patch, err := json.Marshal(map[string]any{"nodeSelector": l.NodeSelector})
			if err != nil {
				return nil, err
			}
			params["lease-pod-spec-patch"] = string(patch)
		}
	}
	image, version := DefaultKubesprayImage, DefaultKubesprayVer
	if k := p.Spec.Kubespray; k != nil {
		if k.Image != "" {
			image = k.Image
		}
		if k.Version != "" {
			version = k.Version
		}
	}
	params["kubespray-image"] = image + ":" + version
	params["artifacts-ca"], params["backup-server"], params["backup-server-ca"] = "", "", ""
	return params, nil
}

// StepImage is the kubespray image a step runs in: for a hop of a chained upgrade, the
// spec's image repository at the hop's release tag; else the run's image. The repository
// is the one the site policy admitted (spec.kubespray.image, BPAPolicy's kubesprayImages),
// so a hop's image is held to the same rule, and its tag is a release pkg/kubespray
// records, never one the CR names.
func StepImage(runImage string, s Step) string {
	if s.Release == "" {
		return runImage
	}
	repo, _ := splitImage(runImage)
	return repo + ":" + s.Release
}

// splitImage splits repository:tag; a registry's port is part of the repository.
func splitImage(image string) (repo, tag string) {
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		return image[:i], image[i+1:]
	}
	return image, ""
}

// needBackupServer refuses a plan that snapshots etcd when the site policy names no backup
// server for the CR's namespace: the day-2 operation must not run without its snapshot.
func needBackupServer(plan *ChangePlan, opts Options) error {
	if opts.BackupServer != "" || !slices.ContainsFunc(plan.Steps, func(s Step) bool { return StepBase(s.Name) == StepBackupEtcd }) {
		return nil
	}
	return &Refusal{Field: "spec.etcdBackup.beforeDay2", Reason: bpav1.ReasonNoBackupServer,
		Message: "a day-2 operation takes a verified etcd snapshot first (Required, the default), and the site policy names no etcd backup server for this namespace (BPAPolicy spec.etcdBackupServer, one of its artifactServers): ask the admin for one, or set spec.etcdBackup.beforeDay2: Skip to run without a snapshot"}
}

// setArgument sets a task's argument name to value.
func setArgument(t *wfv1.DAGTask, name, value string) {
	for i, a := range t.Arguments.Parameters {
		if a.Name == name {
			t.Arguments.Parameters[i].Value = wfv1.AnyStringPtr(value)
		}
	}
}

// ProvisioningParameterNames lists the parameters in Workflow order.
func ProvisioningParameterNames() []string {
	return append([]string(nil), provisioningParameterOrder...)
}

// PlanAnnotation carries a run's ChangePlan (JSON) on its Workflow: the controller reads
// from it what each task adds or removes, and what the cluster is once all succeeded.
const PlanAnnotation = "bpa.akraino.org/plan"

// StepsOf lists a run's DAG tasks in order: the three host steps, the plan's, then verify
// and publish-kubeconfig.
func StepsOf(c *ChangePlan) []string {
	out := append([]string(nil), ProvisioningSteps[:3]...)
	for _, s := range c.Steps {
		out = append(out, s.Name)
	}
	return append(out, ProvisioningSteps[4:]...)
}

// Provisioning translates a Provisioning into the Workflow that carries out its plan
// (PlanChange): discover-hosts → resolve-leases → render-inventory → one task per planned
// step (run-kubespray for a new cluster; remove-workers, add-control-plane, scale-workers,
// upgrade, ... on day 2) → verify → publish-kubeconfig, each a templateRef into the
// bpa-provision WorkflowTemplate. It returns a nil Workflow when the plan is empty, and a
// *Refusal when the change is one BPA will not make. The template's ad-hoc `main` runs the
// same tasks, built by the same functions (AdHocTemplates).
//
// KUD plugins need no task of their own: render-inventory hands them to the kubespray run
// as the kud_plugins variable, which KUD's kubespray image acts on.
func Provisioning(p *bpav1.Provisioning, opts Options) (*wfv1.Workflow, error) {
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	plan, err := PlanChange(p)
	if err != nil || len(plan.Steps) == 0 {
		return nil, err
	}
	if err := needBackupServer(plan, opts); err != nil {
		return nil, err
	}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	wf := newWorkflow(p, "Provisioning", bpav1.ProvisioningNameLabel, workflowtemplates.Provision, "provision", params["cluster"], opts, provisionDeadline)
	wf.Annotations[PlanAnnotation] = string(planJSON)
	wf.Spec.Entrypoint = "provision"
	params["artifacts-ca"], params["backup-server"], params["backup-server-ca"] = opts.ArtifactsCA, opts.BackupServer, opts.BackupServerCA
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	// The lease step is chosen here, from the CR; an ad-hoc run chooses it with `when`.
	d := provisionDAG{ref: workflowtemplates.Provision, param: wfParam, kube: plan.KubernetesVersion}
	tasks := d.hostTasks("", params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost))
	// Each step after the last: `argo retry` resumes at the one that failed, and the ones
	// before it, done, are not run again.
	prev := "render-inventory"
	for _, s := range plan.Steps {
		ops, err := json.Marshal(s.Operations)
		if err != nil {
			return nil, err
		}
		t := d.stepTask(s.Name, prev, string(ops), strconv.FormatBool(s.AllowUngraceful))
		if image := StepImage(params["kubespray-image"], s); image != params["kubespray-image"] {
			setArgument(&t, "kubespray-image", image)
		}
		tasks = append(tasks, t)
		prev = s.Name
	}
	upgrades := slices.ContainsFunc(plan.Steps, func(s Step) bool { return StepBase(s.Name) == StepUpgrade })
	tasks = append(tasks, d.finalTasks(prev, strconv.FormatBool(upgrades))...)
	wf.Spec.Templates = []wfv1.Template{{Name: "provision", DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}

// provisionDAG builds the tasks of a Provisioning's DAG, for the controller's Workflows and
// for the WorkflowTemplate's ad-hoc run alike: only where the values come from differs.
type provisionDAG struct {
	// ref is the WorkflowTemplate the tasks call by templateRef; "" calls the templates of
	// the same WorkflowTemplate.
	ref string
	// param is the expression of a run parameter (ProvisioningParameterNames).
	param func(name string) string
	// resolvedHosts is the expression of the hosts resolve-leases found; "" for the task's
	// output.
	resolvedHosts string
	// kube is the Kubernetes release the run leads to (or the expression of it).
	kube string
	// appliedHosts makes the first host task applied-hosts, which lists status.applied's
	// hosts and claims none, for a check that must only read (the drift check).
	appliedHosts bool
}

// hostsTask is the first host task's name and template: discover-hosts, which matches and
// claims, or applied-hosts.
func (d provisionDAG) hostsTask() string {
	if d.appliedHosts {
		return StepAppliedHosts
	}
	return "discover-hosts"
}

func (d provisionDAG) task(name, tmpl, depends string, args ...string) wfv1.DAGTask {
	t := task(name, d.ref, tmpl, depends, args...)
	if d.ref == "" {
		t.TemplateRef, t.Template = nil, tmpl
	}
	return t
}

func (d provisionDAG) hosts() string {
	if d.resolvedHosts != "" {
		return d.resolvedHosts
	}
	return "{{tasks.resolve-leases.outputs.parameters.hosts}}"
}

func (d provisionDAG) ssh() []string {
	return []string{"ssh-secret", d.param("ssh-secret"), "ssh-user", d.param("ssh-user"),
		"ssh-port", d.param("ssh-port"), "insecure-ignore-host-key", d.param("insecure-ignore-host-key")}
}

// leaseTask is resolve-leases: from the BareMetalHosts, or from a leases file.
func (d provisionDAG) leaseTask(name string, fromFile bool) wfv1.DAGTask {
	args := []string{"provisioning", d.param("provisioning"), "generation", d.param("generation"), "hosts", "{{tasks." + d.hostsTask() + ".outputs.parameters.hosts}}"}
	if !fromFile {
		return d.task(name, "resolve-leases", d.hostsTask(), args...)
	}
	return d.task(name, "resolve-leases-from-file", d.hostsTask(), append(args,
		"lease-source", d.param("lease-source"), "lease-host-path", d.param("lease-host-path"),
		"lease-pod-spec-patch", d.param("lease-pod-spec-patch"))...)
}

// hostTasks are discover-hosts or applied-hosts (after first, unless ""), resolve-leases and
// render-inventory.
func (d provisionDAG) hostTasks(first string, leasesFromFile bool) []wfv1.DAGTask {
	cr, gen := d.param("provisioning"), d.param("generation")
	hosts := d.task("discover-hosts", "discover-hosts", first, "provisioning", cr, "generation", gen)
	if d.appliedHosts {
		hosts = d.task(StepAppliedHosts, StepAppliedHosts, first, "provisioning", cr)
	}
	return []wfv1.DAGTask{
		hosts,
		d.leaseTask("resolve-leases", leasesFromFile),
		d.task("render-inventory", "render-inventory", "resolve-leases",
			"provisioning", cr, "generation", gen, "hosts", d.hosts(), "artifacts-ca", d.param("artifacts-ca")),
	}
}

// kubesprayFiles are the inputs run-kubespray takes as files only (raw artifacts), not
// parameters: the inventory, the vars file, the operations and the artifact server's CA.
// Argo keeps a task's inputs in its Retry node and again in each attempt's pod node; as a
// parameter and a file both, the inventory and operations of a 1,000-node run would take
// its Workflow past its size bound (test/bench TestThousandNodeRunWorkflowSize).
var kubesprayFiles = []string{"inventory", "extra-vars", "operations", "artifacts-ca"}

// kubesprayTask is one planned step: run-kubespray with the step's operations.
func (d provisionDAG) kubesprayTask(name, depends, operations, allowUngraceful string) wfv1.DAGTask {
	return asFiles(d.task(name, "run-kubespray", depends, append([]string{
		"inventory", "{{tasks.render-inventory.outputs.parameters.inventory}}",
		"extra-vars", "{{tasks.render-inventory.outputs.parameters.extra-vars}}",
		"kubespray-image", d.param("kubespray-image"), "artifacts-ca", d.param("artifacts-ca"),
		"operations", operations, "allow-ungraceful", allowUngraceful}, d.ssh()...)...), kubesprayFiles...)
}

// stepTask is one planned step: the preflight checks, an etcd backup, or run-kubespray
// with the step's operations.
func (d provisionDAG) stepTask(name, depends, operations, allowUngraceful string) wfv1.DAGTask {
	switch StepBase(name) {
	case StepPreflight:
		return d.preflightTask(depends)
	case StepBackupEtcd:
		return d.backupTask(name, depends)
	}
	return d.kubesprayTask(name, depends, operations, allowUngraceful)
}

// backupTask takes a verified etcd snapshot of the live cluster (status.applied) and
// stores it on the site policy's backup server.
func (d provisionDAG) backupTask(name, depends string) wfv1.DAGTask {
	return d.task(name, "backup-etcd", depends, append([]string{
		"provisioning", d.param("provisioning"), "backup-server", d.param("backup-server"),
		"backup-server-ca", d.param("backup-server-ca")}, d.ssh()...)...)
}

// preflightTask checks the cluster before the upgrade after it: it reads the hosts, the vars
// file (spec.offline's server), the target release's image and Kubernetes version.
func (d provisionDAG) preflightTask(depends string) wfv1.DAGTask {
	return d.task(StepPreflight, "preflight", depends, append([]string{
		"provisioning", d.param("provisioning"), "hosts", d.hosts(), "kubernetes-version", d.kube,
		"extra-vars", "{{tasks.render-inventory.outputs.parameters.extra-vars}}",
		"kubespray-image", d.param("kubespray-image"), "artifacts-ca", d.param("artifacts-ca")}, d.ssh()...)...)
}

// finalTasks are verify and publish-kubeconfig, after the last step. verify checks every
// Node reports the Kubernetes release the plan leads to. Both read resolve-leases' hosts:
// render-inventory passing them through too would store the 1,000-host list twice more in
// a finished Workflow.
//
// afterUpgrade says whether the run upgrades the cluster: verify then stops at once at a
// node left behind (NodeNotUpgraded), and is not retried for it.
func (d provisionDAG) finalTasks(depends, afterUpgrade string) []wfv1.DAGTask {
	cr := d.param("provisioning")
	return []wfv1.DAGTask{
		d.task(StepVerify, "verify", depends, append([]string{"provisioning", cr, "hosts", d.hosts(), "kubernetes-version", d.kube, "after-upgrade", afterUpgrade}, d.ssh()...)...),
		d.task("publish-kubeconfig", "publish-kubeconfig", StepVerify, "provisioning", cr, "hosts", d.hosts()),
	}
}
