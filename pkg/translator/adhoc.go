package translator

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// An ad-hoc run (`argo submit --from workflowtemplate/bpa-provision -p provisioning=NAME`)
// runs the WorkflowTemplate's `main`, which this file generates (AdHocTemplates, written into
// workflowtemplates/provision.yaml by `make generate`): lookup finds the CR's cluster, then
// `provision` takes the cluster's mutex and runs the plan task (lookup again, under the
// mutex, so it plans against what the run before left) and the very tasks the controller's
// Workflow would run (provisionDAG). A WorkflowTemplate cannot grow tasks per run, so it
// holds a slot for every step a plan may have (AdHocSlots), in plan order, each run only
// when the plan task says so (`when`) and given the operations it planned; the others are
// Skipped, and the steps that run are the controller's DAG.

// AdHocPlanTask is the task of an ad-hoc run that plans it; its outputs are AdHocParameters.
const AdHocPlanTask = "plan"

// maxMasterRemovals is how many remove-control-plane steps a plan may have: spec.masters
// holds at most 15 nodes (its MaxItems), the first of which never leaves.
const maxMasterRemovals = 14

// AdHocSlots are the steps an ad-hoc run can run, in plan order: each of PlanSteps, with
// remove-control-plane numbered up to maxMasterRemovals (Numbered).
func AdHocSlots() []string {
	var out []string
	for _, s := range PlanSteps {
		out = append(out, s)
		if s == StepRemoveControlPlane {
			for n := 2; n <= maxMasterRemovals; n++ {
				out = append(out, Numbered(s, n))
			}
		}
	}
	return out
}

// The plan task's outputs beyond ProvisioningParameterNames: which lease step runs, the
// Kubernetes release verify expects, the plan (for the controller's status), and for each
// slot whether it runs, its operations and whether it may remove a dead host.
const (
	leasesFromFileOutput    = "leases-from-file"
	kubernetesVersionOutput = "kubernetes-version"
	// AdHocPlanOutput is the plan task's output holding the ChangePlan, as JSON.
	AdHocPlanOutput = "plan"
)

func slotRunOutput(slot string) string        { return "step-" + slot }
func slotOperationsOutput(slot string) string { return "operations-" + slot }
func slotAllowOutput(slot string) string      { return "allow-ungraceful-" + slot }

// AdHocParameterNames are the outputs of `bpa step lookup --provisioning`, in order.
func AdHocParameterNames() []string {
	out := append(ProvisioningParameterNames(), leasesFromFileOutput, kubernetesVersionOutput, AdHocPlanOutput)
	for _, s := range AdHocSlots() {
		out = append(out, slotRunOutput(s), slotOperationsOutput(s), slotAllowOutput(s))
	}
	return out
}

// AdHocReason is why an ad-hoc run with nothing else to do reconfigures every host.
const AdHocReason = "ad-hoc run (argo submit --from workflowtemplate/" + workflowtemplates.Provision + "): cluster.yml on every host"

// AdHocParameters are what `bpa step lookup --provisioning` writes for an ad-hoc run of p:
// the parameters the controller would give its Workflow (site: the site policy's CA for
// spec.offline's server, and its etcd backup server) and the plan of the run, as the controller would plan a
// rerun of p (PlanChange): the same steps, operations and releases. A refused change is an
// error, and so is a plan the template has no slot for.
func AdHocParameters(p *bpav1.Provisioning, site Options) (map[string]string, error) {
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	params["artifacts-ca"], params["backup-server"], params["backup-server-ca"] = site.ArtifactsCA, site.BackupServer, site.BackupServerCA
	pl, err := newPlanner(p)
	if err != nil {
		return nil, err
	}
	if pl.rerun == "" {
		pl.rerun = AdHocReason // the operator asked for a run: an unchanged cluster is reconfigured
	}
	plan, err := pl.run()
	if err == nil {
		err = needBackupServer(plan, site)
	}
	if err != nil {
		return nil, err
	}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	params[leasesFromFileOutput] = strconv.FormatBool(params["lease-source"] != string(bpav1.LeaseSourceBareMetalHost))
	params[kubernetesVersionOutput] = plan.KubernetesVersion
	params[AdHocPlanOutput] = string(planJSON)
	if err := slotParameters(params, plan); err != nil {
		return nil, err
	}
	return params, nil
}

// slotParameters sets each slot's outputs: its step's, or not run.
func slotParameters(params map[string]string, plan *ChangePlan) error {
	slots := AdHocSlots()
	next := 0 // steps come in slot order
	for _, s := range plan.Steps {
		if isHop(s, plan) {
			return fmt.Errorf("the plan chains upgrades (step %s runs kubespray %s to Kubernetes %s on the way to %s and %s), and the WorkflowTemplate's ad-hoc run gives every step the run's one image: let the controller run it", s.Name, s.Release, s.Kubernetes, plan.KubesprayVersion, plan.KubernetesVersion)
		}
		i := slices.Index(slots[next:], s.Name)
		if i < 0 {
			return fmt.Errorf("the plan's step %s has no slot in the WorkflowTemplate's ad-hoc run (at most %d control-plane removals, in plan order): let the controller run it", s.Name, maxMasterRemovals)
		}
		ops, err := json.Marshal(s.Operations)
		if err != nil {
			return err
		}
		next += i + 1
		params[slotRunOutput(s.Name)], params[slotOperationsOutput(s.Name)], params[slotAllowOutput(s.Name)] = "true", string(ops), strconv.FormatBool(s.AllowUngraceful)
	}
	for _, slot := range slots {
		if _, planned := params[slotRunOutput(slot)]; !planned {
			params[slotRunOutput(slot)], params[slotOperationsOutput(slot)], params[slotAllowOutput(slot)] = "false", "", "false"
		}
	}
	return nil
}

// isHop says whether s is a hop of a chained upgrade that stops short of c's releases.
func isHop(s Step, c *ChangePlan) bool {
	return s.Release != "" && (s.Release != c.KubesprayVersion || s.Kubernetes != c.KubernetesVersion)
}

// planOutput is the expression of an output of the plan task.
func planOutput(name string) string {
	return "{{tasks." + AdHocPlanTask + ".outputs.parameters." + name + "}}"
}

// AdHocTemplates are the WorkflowTemplate's `main` and `provision`: lookup, then, under the
// cluster's mutex, the plan task and the Provisioning DAG with a slot per step.
func AdHocTemplates() []wfv1.Template {
	d := provisionDAG{param: planOutput, kube: planOutput(kubernetesVersionOutput),
		// The hosts of whichever lease step ran.
		resolvedHosts: "{{=tasks['resolve-leases'].status == 'Succeeded' ? tasks['resolve-leases'].outputs.parameters.hosts : tasks['resolve-leases-from-file'].outputs.parameters.hosts}}"}
	fromFile := planOutput(leasesFromFileOutput)
	tasks := []wfv1.DAGTask{d.task(AdHocPlanTask, "lookup", "", "provisioning", "{{inputs.parameters.provisioning}}", "cluster", "{{inputs.parameters.cluster}}")}
	hosts := d.hostTasks(AdHocPlanTask, false)
	hosts[1].When = fromFile + " == false"
	fileLeases := d.leaseTask("resolve-leases-from-file", true)
	fileLeases.When = fromFile + " == true"
	hosts[2].Depends = "resolve-leases && resolve-leases-from-file" // each Succeeded or Skipped
	tasks = append(tasks, hosts[0], hosts[1], fileLeases, hosts[2])
	prev := "render-inventory"
	for _, slot := range AdHocSlots() {
		t := d.stepTask(slot, prev, planOutput(slotOperationsOutput(slot)), planOutput(slotAllowOutput(slot)))
		t.When = planOutput(slotRunOutput(slot)) + " == true"
		tasks = append(tasks, t) // a Skipped slot satisfies the next one's depends
		prev = slot
	}
	tasks = append(tasks, d.finalTasks(prev, planOutput(slotRunOutput(StepUpgrade)))...)
	main := wfv1.Template{Name: "main", DAG: &wfv1.DAGTemplate{Tasks: []wfv1.DAGTask{
		{Name: "lookup", Template: "lookup", Arguments: wfv1.Arguments{Parameters: []wfv1.Parameter{
			{Name: "provisioning", Value: wfv1.AnyStringPtr("{{workflow.parameters.provisioning}}")}}}},
		{Name: "provision", Template: "provision", Depends: "lookup", Arguments: wfv1.Arguments{Parameters: []wfv1.Parameter{
			{Name: "provisioning", Value: wfv1.AnyStringPtr("{{workflow.parameters.provisioning}}")},
			{Name: "cluster", Value: wfv1.AnyStringPtr("{{tasks.lookup.outputs.parameters.cluster}}")}}}},
	}}}
	provision := wfv1.Template{
		Name: "provision",
		// The mutex of every run of the cluster, the controller's Workflows' too.
		Synchronization: &wfv1.Synchronization{Mutexes: []*wfv1.Mutex{{Name: mutexPrefix + "{{inputs.parameters.cluster}}"}}},
		Inputs:          wfv1.Inputs{Parameters: []wfv1.Parameter{{Name: "provisioning"}, {Name: "cluster"}}},
		DAG:             &wfv1.DAGTemplate{Tasks: tasks},
	}
	return []wfv1.Template{main, provision}
}

// CheckAdHocPlan says whether the plan an ad-hoc run of p reports (its plan task's output)
// is one p could have, before the controller records what it did in status.applied: the
// releases, settings and immutable values p's spec gives, steps the template has, nodes
// added that p asks for and nodes removed that it does not. A Workflow's status is written
// by whoever may write Workflows; so checked, a forged plan can at most record the cluster
// as p asks for it, which the CR's author could bring about anyway.
func CheckAdHocPlan(p *bpav1.Provisioning, c *ChangePlan) error {
	pl, err := newPlanner(p)
	if err != nil {
		return err
	}
	t := pl.plan
	if c.KubesprayVersion != t.KubesprayVersion || c.KubernetesVersion != t.KubernetesVersion || c.Settings != t.Settings || !maps.Equal(c.Immutable, t.Immutable) {
		return fmt.Errorf("the plan leads to kubespray %s, Kubernetes %s and settings %s; the spec to kubespray %s, Kubernetes %s and settings %s",
			c.KubesprayVersion, c.KubernetesVersion, c.Settings, t.KubesprayVersion, t.KubernetesVersion, t.Settings)
	}
	desired := map[string]bool{}
	for _, n := range pl.desired {
		desired[n.Name] = true
	}
	slots := AdHocSlots()
	for _, s := range c.Steps {
		if !slices.Contains(slots, s.Name) || isHop(s, c) {
			return fmt.Errorf("step %s: not a step of an ad-hoc run", s.Name)
		}
		for _, n := range s.Nodes {
			if s.Adds && !desired[n] || s.Removes && desired[n] {
				return fmt.Errorf("step %s: node %s is %s the spec", s.Name, n, map[bool]string{true: "not in", false: "in"}[s.Adds])
			}
		}
	}
	return nil
}

// Regions of workflowtemplates/provision.yaml that GenerateAdHocRun writes.
const (
	adHocRegion   = "ad-hoc-run"
	lookupOutputs = "lookup-outputs"
)

// GenerateAdHocRun returns bpa-provision's template file (provision.yaml) with its
// generated regions written from Go: the templates main and provision (AdHocTemplates), and
// the outputs of lookup (AdHocParameterNames). `make generate` writes it; a test fails when
// the committed file differs.
func GenerateAdHocRun(file []byte) ([]byte, error) {
	dag, err := workflowtemplates.RenderDAGTemplates(AdHocTemplates(), 4)
	if err != nil {
		return nil, err
	}
	if file, err = workflowtemplates.Splice(file, adHocRegion, dag); err != nil {
		return nil, err
	}
	outputs, err := workflowtemplates.RenderOutputs(AdHocParameterNames(), stepio.OutDir, 10)
	if err != nil {
		return nil, err
	}
	return workflowtemplates.Splice(file, lookupOutputs, outputs)
}
