package translator

import (
	"slices"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/utils/ptr"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// The rungs' steps: graded remediation's first (`bpa step restart-node`) and second
// (`bpa step reboot-node`).
const (
	StepRestartNode = "restart-node"
	StepRebootNode  = "reboot-node"
)

// RestartSteps and RebootSteps are a Restart and a Reboot rung's steps, as status and the
// controller's trimmed cache see them: the hosts' steps, then the rung's own.
var (
	RestartSteps = append(slices.Clone(remediationHostSteps), StepRestartNode)
	RebootSteps  = append(slices.Clone(remediationHostSteps), StepRebootNode)
)

// remediationHostSteps are the hosts' steps every rung starts with: status.applied's hosts at
// their current addresses, for the inventory the rung's step reads.
var remediationHostSteps = []string{StepAppliedHosts, "resolve-leases", "render-inventory"}

// remediationDeadline bounds a rung: the hosts' steps, then the rung's step and its wait (a
// restart's 2 minutes, a reboot's 10).
const remediationDeadline = 30 * 60

// Annotations of a remediation Workflow: the rung and the episode (the Ready condition's
// lastTransitionTime) it is for, so the controller folds it into the right record.
const (
	RemediationRungAnnotation    = "bpa.akraino.org/remediation-rung"
	RemediationEpisodeAnnotation = "bpa.akraino.org/remediation-episode"
)

// remediationKeep is how long a finished rung's Workflow is kept: a day, so the next
// decisions (the cooldown, RemediationExhausted) and a person can read it.
const remediationKeep = 24 * time.Hour

// RemediationWorkflowName is the Workflow of one rung of one node's unhealthy episode (which
// began at since, the Ready condition's lastTransitionTime): named after them, so a
// controller that restarts mid-remediation finds the Workflow it made rather than making a
// second, and a rung is never taken twice in one episode.
func RemediationWorkflowName(provisioning, node string, rung bpav1.RemediationRung, since time.Time) string {
	return WorkflowName(provisioning, "remediate-"+strings.ToLower(string(rung)), since.Unix(), node, "")
}

// RestartWorkflow is the Restart rung on node for the episode that began at since: the
// hosts' steps (for the node's current address), then restart-node.
func RestartWorkflow(p *bpav1.Provisioning, opts Options, node string, since time.Time) (*wfv1.Workflow, error) {
	return remediationWorkflow(p, opts, node, since, bpav1.RungRestart, StepRestartNode)
}

// RebootWorkflow is the Reboot rung on node for the episode that began at since: the hosts'
// steps (for the node's current address and the first master's, whose admin.conf reads the
// Node), then reboot-node, which asks metal3 to power cycle the node's BareMetalHost. The
// controller builds it only for a namespace the BPAPolicy grants allowReboot.
func RebootWorkflow(p *bpav1.Provisioning, opts Options, node string, since time.Time) (*wfv1.Workflow, error) {
	return remediationWorkflow(p, opts, node, since, bpav1.RungReboot, StepRebootNode)
}

// remediationWorkflow is rung on node for the episode that began at since: the hosts' steps,
// then step (a template of the same name) on the node. It runs under the cluster's mutex,
// never beside a run, a check or another rung.
func remediationWorkflow(p *bpav1.Provisioning, opts Options, node string, since time.Time, rung bpav1.RemediationRung, step string) (*wfv1.Workflow, error) {
	wf, params, err := builtClusterWorkflow(p, opts, bpav1.RemediationOfLabel, "remediate", "remediate", remediationDeadline)
	if err != nil {
		return nil, err
	}
	wf.Name = RemediationWorkflowName(p.Name, node, rung, since)
	wf.Labels[bpav1.RemediationNodeLabel] = node
	delete(wf.Annotations, RerunAnnotation)
	wf.Annotations[RemediationRungAnnotation] = string(rung)
	wf.Annotations[RemediationEpisodeAnnotation] = since.UTC().Format(time.RFC3339)
	keep := ptr.To(int32(remediationKeep.Seconds()))
	wf.Spec.TTLStrategy.SecondsAfterSuccess, wf.Spec.TTLStrategy.SecondsAfterFailure, wf.Spec.TTLStrategy.SecondsAfterCompletion = keep, keep, keep
	wf.Spec.Entrypoint = "remediate"
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	// The built cluster's hosts, claiming none: a rung acts on status.applied.
	d := provisionDAG{ref: workflowtemplates.Provision, param: wfParam, appliedHosts: true}
	tasks := d.hostTasks("", params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost))
	tasks = append(tasks, d.task(step, step, "render-inventory", append([]string{
		"provisioning", d.param("provisioning"), "node", node, "hosts", d.hosts()}, d.ssh()...)...))
	wf.Spec.Templates = []wfv1.Template{{Name: "remediate", DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}
