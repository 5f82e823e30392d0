package translator

import (
	"encoding/json"
	"strconv"

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
	"ssh-secret", "ssh-user", "ssh-port", "insecure-ignore-host-key", "artifacts-ca",
}

// ProvisioningParameters derives the Workflow parameters of a Provisioning, defaults
// applied. None is secret. artifacts-ca, the CA render-inventory and run-kubespray get, is
// the site policy's and empty here; the caller sets it (Options.ArtifactsCA, or lookup).
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
	params["artifacts-ca"] = ""
	return params, nil
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
// *Refusal when the change is one BPA will not make.
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
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	wf := newWorkflow(p, "Provisioning", bpav1.ProvisioningNameLabel, workflowtemplates.Provision, "provision", params["cluster"], opts, provisionDeadline)
	wf.Annotations[PlanAnnotation] = string(planJSON)
	wf.Spec.Entrypoint = "provision"
	params["artifacts-ca"] = opts.ArtifactsCA
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	const t = workflowtemplates.Provision
	cr, gen := wfParam("provisioning"), wfParam("generation")
	ssh := []string{
		"ssh-secret", wfParam("ssh-secret"), "ssh-user", wfParam("ssh-user"),
		"ssh-port", wfParam("ssh-port"), "insecure-ignore-host-key", wfParam("insecure-ignore-host-key"),
	}
	resolve := task("resolve-leases", t, "resolve-leases", "discover-hosts",
		"provisioning", cr, "generation", gen, "hosts", "{{tasks.discover-hosts.outputs.parameters.hosts}}")
	if params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost) {
		resolve = task("resolve-leases", t, "resolve-leases-from-file", "discover-hosts",
			"provisioning", cr, "generation", gen, "hosts", "{{tasks.discover-hosts.outputs.parameters.hosts}}",
			"lease-source", wfParam("lease-source"), "lease-host-path", wfParam("lease-host-path"),
			"lease-pod-spec-patch", wfParam("lease-pod-spec-patch"))
	}
	// verify and publish-kubeconfig read resolve-leases' hosts: render-inventory passing them
	// through too would store the 1,000-host list twice more in a finished Workflow.
	hosts := "{{tasks.resolve-leases.outputs.parameters.hosts}}"
	tasks := []wfv1.DAGTask{
		task("discover-hosts", t, "discover-hosts", "", "provisioning", cr, "generation", gen),
		resolve,
		task("render-inventory", t, "render-inventory", "resolve-leases",
			"provisioning", cr, "generation", gen, "hosts", "{{tasks.resolve-leases.outputs.parameters.hosts}}",
			"artifacts-ca", wfParam("artifacts-ca")),
	}
	// Each step after the last: `argo retry` resumes at the one that failed, and the ones
	// before it, done, are not run again.
	prev := "render-inventory"
	for _, s := range plan.Steps {
		ops, err := json.Marshal(s.Operations)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, task(s.Name, t, "run-kubespray", prev, append([]string{
			"inventory", "{{tasks.render-inventory.outputs.parameters.inventory}}",
			"extra-vars", "{{tasks.render-inventory.outputs.parameters.extra-vars}}",
			"kubespray-image", wfParam("kubespray-image"), "artifacts-ca", wfParam("artifacts-ca"),
			"operations", string(ops), "allow-ungraceful", strconv.FormatBool(s.AllowUngraceful)}, ssh...)...))
		prev = s.Name
	}
	tasks = append(tasks,
		// verify checks every Node reports the Kubernetes release the plan leads to.
		task(StepVerify, t, "verify", prev, append([]string{"provisioning", cr, "hosts", hosts, "kubernetes-version", plan.KubernetesVersion}, ssh...)...),
		task("publish-kubeconfig", t, "publish-kubeconfig", StepVerify, "provisioning", cr, "hosts", hosts),
	)
	wf.Spec.Templates = []wfv1.Template{{Name: "provision", DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}
