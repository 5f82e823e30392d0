package translator

import (
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/utils/ptr"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// StepCheckDrift compares the live cluster with status.applied (`bpa step check-drift`).
const StepCheckDrift = "check-drift"

// StepAppliedHosts lists status.applied's hosts and claims none (`bpa step discover-hosts
// --applied`, as an account that may not patch a host): a drift check's first step.
const StepAppliedHosts = "applied-hosts"

// DriftSteps are a drift check's steps, as status and the controller's trimmed cache see them.
var DriftSteps = []string{StepAppliedHosts, "resolve-leases", "render-inventory", StepCheckDrift}

// driftDeadline bounds a drift check: the hosts' steps and one SSH read and two API reads.
// Waiting for the cluster's mutex does not count (Argo's deadline starts when it runs).
const driftDeadline = 30 * 60

// How long finished drift checks are kept: one that succeeded for an interval, at least
// minDriftKeep (its result is in status.drift), one that failed for an interval, at least
// minDriftKeepFailed (time to read its log; Drifted says why). With newWorkflow's day and
// week, a check a minute would leave 1,440 Workflows a day, or 10,080 of a cluster down for a
// week.
const (
	minDriftKeep       = 10 * time.Minute
	minDriftKeepFailed = time.Hour
)

// DriftCheckWorkflow is p's drift check for the interval's slot (spec.driftCheck): the
// hosts' steps, status.applied's hosts claiming none (applied-hosts), then check-drift, which
// only reads. It runs
// under the cluster's mutex, never beside a run, and is named after the slot, so that
// creating it twice (a reconcile after a crash) makes one Workflow.
func DriftCheckWorkflow(p *bpav1.Provisioning, opts Options, slot time.Time) (*wfv1.Workflow, error) {
	wf, params, err := builtClusterWorkflow(p, opts, bpav1.DriftCheckOfLabel, "drift-check", "compare", driftDeadline)
	if err != nil {
		return nil, err
	}
	wf.Name = DriftCheckWorkflowName(p.Name, slot)
	delete(wf.Annotations, RerunAnnotation)
	wf.Annotations[DriftSlotAnnotation] = slot.UTC().Format(time.RFC3339)
	interval := p.Spec.DriftCheck.Interval.Duration
	wf.Spec.TTLStrategy.SecondsAfterSuccess = ptr.To(int32(max(minDriftKeep, interval).Seconds()))
	wf.Spec.TTLStrategy.SecondsAfterFailure = ptr.To(int32(max(minDriftKeepFailed, interval).Seconds()))
	wf.Spec.TTLStrategy.SecondsAfterCompletion = wf.Spec.TTLStrategy.SecondsAfterFailure // Error, as Failed
	wf.Spec.Entrypoint = "drift-check"
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	d := provisionDAG{ref: workflowtemplates.Provision, param: wfParam, appliedHosts: true}
	tasks := d.hostTasks("", params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost))
	tasks = append(tasks, d.task(StepCheckDrift, "check-drift", "render-inventory", append([]string{
		"provisioning", d.param("provisioning"), "hosts", d.hosts(),
		"extra-vars", "{{tasks.render-inventory.outputs.parameters.extra-vars}}"}, d.ssh()...)...))
	wf.Spec.Templates = []wfv1.Template{{Name: "drift-check", DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}

// builtClusterWorkflow is the Workflow of kind on p's built cluster (a check, a rung),
// labelled with nameLabel and not as a run of the spec, and its parameters; refused, for
// nothing to do (what), when status.applied lists no host.
func builtClusterWorkflow(p *bpav1.Provisioning, opts Options, nameLabel, kind, what string, deadline int64) (*wfv1.Workflow, map[string]string, error) {
	applied := p.Status.Applied
	if applied == nil || len(applied.Hosts) == 0 {
		return nil, nil, &Refusal{Field: "status.applied", Reason: bpav1.ReasonInvalidSpec, Message: "it lists no host: the cluster was never built, so there is nothing to " + what}
	}
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, nil, err
	}
	params["artifacts-ca"] = opts.ArtifactsCA
	return newWorkflow(p, "Provisioning", nameLabel, workflowtemplates.Provision, kind, params["cluster"], opts, deadline), params, nil
}

// DriftSlotAnnotation records on a drift check Workflow the slot it is for.
const DriftSlotAnnotation = "bpa.akraino.org/drift-slot"

// DriftSlot is the start of the interval now falls in (time.Truncate: multiples of the
// interval since Go's zero time, so 10m slots start at :00, :10, ...): every reconcile
// within one slot names the same Workflow.
func DriftSlot(now time.Time, interval time.Duration) time.Time {
	return now.Truncate(interval)
}

// DriftCheckWorkflowName is the name of p's drift check for slot.
func DriftCheckWorkflowName(provisioning string, slot time.Time) string {
	return WorkflowName(provisioning, "drift-check", slot.Unix(), "", "")
}
