package translator

import (
	"fmt"
	"maps"
	"slices"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// PlannedStep is a step of a plan with its operations as run-kubespray executes them.
type PlannedStep struct {
	Step
	// Operations replace the Step's own in JSON (`bpa plan -o json`): the outer field wins.
	Operations []PlannedOperation `json:"operations"`
	// Image is the kubespray image the step runs in (StepImage).
	Image string `json:"image"`
}

// PlannedOperation is one operation as run-kubespray executes it: the ansible-playbook argv
// (paths as the step sees them in the kubespray image), and the inventory and vars file it
// reads.
type PlannedOperation struct {
	kubespray.Operation
	Argv      []string `json:"argv"`
	Inventory string   `json:"inventory"`
	Vars      string   `json:"vars"`
}

// PlanOperations is what `bpa plan` prints, as clusterctl's TopologyPlan: each operation of
// change (PlanChange of p) with the inventory render-inventory writes for hosts (inventory.
// Render with inv), the vars file (with the artifact server's CA path when artifactsCA), and
// the argv run-kubespray builds (kubespray.RunOptionsFor, kubespray.Build), each checked with
// the rules of the chosen kubespray release, the facts cache shared by the operations of one
// step. It reads no file and runs nothing.
func PlanOperations(p *bpav1.Provisioning, hosts []bpav1.HostStatus, change *ChangePlan, inv inventory.Options, artifactsCA bool) ([]PlannedStep, error) {
	ini, _, err := inventory.Render(hosts, inv)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	caPath := ""
	if artifactsCA {
		caPath = bpav1.ArtifactsCAPath
	}
	vars, err := inventory.ExtraVarsWithCA(&p.Spec, caPath)
	if err != nil {
		return nil, err
	}
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	decoded, err := inventory.ReadVars(vars)
	if err != nil {
		return nil, err
	}
	data, err := inventory.NewData(hosts, inv.Flavor)
	if err != nil {
		return nil, err
	}
	var out []PlannedStep
	n := 0
	for _, step := range change.Steps {
		// A hop of a chained upgrade runs in its own release's image, checked by its rules.
		stepParams := maps.Clone(params)
		stepParams["kubespray-image"] = StepImage(params["kubespray-image"], step)
		profile, patch, err := kubespray.ProfileForImage(stepParams["kubespray-image"])
		if err != nil {
			return nil, err
		}
		groups := data.Groups(profile.Groups)
		ps := PlannedStep{Step: step, Image: stepParams["kubespray-image"]}
		cached := map[string]bool{} // the facts each earlier operation of the step's container gathered
		for i, op := range step.Operations {
			n++
			planned, err := planOperation(stepParams, op, i, ini, vars)
			if err != nil {
				return nil, fmt.Errorf("operation %d (%s): %w", n, op.Playbook, err)
			}
			// The groups without the removed nodes, as run-kubespray's inventory.Without leaves
			// them: between two etcd removals they may hold an even number of etcd members,
			// which NewData refuses and kubespray's own check (the profile's) judges.
			opGroups := kubespray.Inventory{}
			for g, names := range groups {
				opGroups[g] = slices.DeleteFunc(slices.Clone(names), func(h string) bool { return slices.Contains(op.Without, h) })
			}
			if errs := profile.CheckPlaybook(op, opGroups, decoded, patch, func(h string) bool { return cached[h] }); len(errs) > 0 {
				return nil, fmt.Errorf("operation %d (%s): kubespray %s would refuse it: %w", n, op.Playbook, profile.Tag(patch), errs[0])
			}
			if op.Playbook != kubespray.Reset {
				for _, h := range opGroups.Hosts(op.Limit) {
					cached[h] = true
				}
			}
			ps.Operations = append(ps.Operations, planned)
		}
		out = append(out, ps)
	}
	return out, nil
}

// planOperation builds operation i (from 0) of a step as run-kubespray runs it with the
// Workflow's parameters: its argv, and the inventory without the nodes it leaves out.
func planOperation(params map[string]string, op kubespray.Operation, i int, ini, vars []byte) (PlannedOperation, error) {
	o, err := kubespray.RunOptionsFor(params, op, i)
	if err != nil {
		return PlannedOperation{}, err
	}
	inv, err := kubespray.Build(o, o.AnsiblePlaybook, nil)
	if err != nil {
		return PlannedOperation{}, err
	}
	if len(op.Without) > 0 {
		if ini, err = inventory.Without(ini, op.Without); err != nil {
			return PlannedOperation{}, err
		}
	}
	return PlannedOperation{Operation: op, Argv: inv.Args, Inventory: string(ini), Vars: string(vars)}, nil
}
