package translator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// ResetLabel marks the Workflow that resets a deleted Provisioning's hosts: the controller
// deletes the CR's other Workflows before it starts, and this one only once it is done.
const ResetLabel = "bpa.akraino.org/reset"

// ResetHosts are the hosts spec.deletionPolicy Reset runs reset.yml on: the applied nodes,
// and the hosts of the last run that had an address and so may have been touched by a
// kubespray run that did not finish (a node half added is not applied, but its host is
// claimed and would be released as it is). Nodes already removed are left out.
func ResetHosts(p *bpav1.Provisioning) []bpav1.HostStatus {
	var out []bpav1.HostStatus
	seen := map[string]bool{}
	add := func(hosts []bpav1.HostStatus, needIP bool) {
		for _, h := range hosts {
			if h.Removing || seen[h.Name] || (needIP && h.IP == "") {
				continue
			}
			seen[h.Name] = true
			out = append(out, h)
		}
	}
	if p.Status.Applied != nil {
		add(p.Status.Applied.Hosts, false)
	}
	add(p.Status.Hosts, true)
	return out
}

// Reset translates a Provisioning being deleted with deletionPolicy Reset into the Workflow
// that runs kubespray's reset.yml on its hosts (ResetHosts): render-inventory from those
// hosts (there is nothing to discover: they are the ones the CR holds), then the reset task,
// run-kubespray with kubespray.ResetCluster, under the cluster's mutex like every run. It
// returns nil when there is nothing to reset.
func Reset(p *bpav1.Provisioning, opts Options) (*wfv1.Workflow, error) {
	hosts := ResetHosts(p)
	if len(hosts) == 0 {
		return nil, nil
	}
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	reason := "deletionPolicy Reset: reset every node before its host is released"
	plan := &ChangePlan{Steps: []Step{{Name: StepReset, Nodes: names, Reason: reason,
		Operations: []kubespray.Operation{kubespray.ResetCluster(reason)}}}}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	ops, err := json.Marshal(plan.Steps[0].Operations)
	if err != nil {
		return nil, err
	}
	hostsJSON, err := json.Marshal(hosts)
	if err != nil {
		return nil, err
	}
	// A retry of the same deletion finds the Workflow by its label, not its name: the
	// name need not be stable (an edit during deletion bumps the generation).
	opts.Revision = ""
	wf := newWorkflow(p, "Provisioning", bpav1.ProvisioningNameLabel, workflowtemplates.Provision, "reset", params["cluster"], opts, provisionDeadline)
	wf.Labels[ResetLabel] = "true"
	wf.Annotations[PlanAnnotation] = string(planJSON)
	if slices.Contains(p.Finalizers, metav1.FinalizerDeleteDependents) {
		// The garbage collector deletes every dependent of an owner deleted in the
		// foreground, this one too as soon as it exists: the controller deletes it instead.
		wf.OwnerReferences = nil
	}
	wf.Spec.Entrypoint = "reset"
	wf.Spec.Arguments.Parameters = parameters(params, provisioningParameterOrder)

	const t = workflowtemplates.Provision
	wf.Spec.Templates = []wfv1.Template{{Name: "reset", DAG: &wfv1.DAGTemplate{Tasks: []wfv1.DAGTask{
		task("render-inventory", t, "render-inventory", "",
			"provisioning", wfParam("provisioning"), "generation", wfParam("generation"), "hosts", string(hostsJSON)),
		asFiles(task(StepReset, t, "run-kubespray", "render-inventory",
			"inventory", "{{tasks.render-inventory.outputs.parameters.inventory}}",
			"extra-vars", "{{tasks.render-inventory.outputs.parameters.extra-vars}}",
			"kubespray-image", wfParam("kubespray-image"),
			"operations", string(ops), "allow-ungraceful", "false",
			"ssh-secret", wfParam("ssh-secret"), "ssh-user", wfParam("ssh-user"),
			"ssh-port", wfParam("ssh-port"), "insecure-ignore-host-key", wfParam("insecure-ignore-host-key")), kubesprayFiles...),
	}}}}
	return wf, nil
}

// ResetSummary names the hosts a reset covers, for conditions and events.
func ResetSummary(hosts []bpav1.HostStatus) string {
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	if len(names) > 5 {
		return fmt.Sprintf("%d hosts (%s, ...)", len(names), strings.Join(names[:5], ", "))
	}
	return fmt.Sprintf("%d hosts (%s)", len(names), strings.Join(names, ", "))
}
