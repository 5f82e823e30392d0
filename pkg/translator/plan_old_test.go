package translator

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// oldPlanChange is PlanChange as it was before the planner (kept to compare): it plans the run that takes the cluster from p.Status.Applied to p.Spec. It is
// pure: it reads the spec, status.applied and the rerun and delete-nodes annotations. An
// empty plan means there is nothing kubespray needs to do.
func oldPlanChange(p *bpav1.Provisioning) (*ChangePlan, error) {
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	profile, patch, err := kubespray.ProfileForImage(params["kubespray-image"])
	if err != nil {
		return nil, fmt.Errorf("spec.kubespray.version: %w", err)
	}
	kube := profile.DefaultKube(patch) // kube_version's default: the newest of kubelet_checksums
	field, version := "spec.kubernetes.version", ""
	if p.Spec.Kubernetes != nil {
		version = p.Spec.Kubernetes.Version
	}
	if k := p.Spec.Kubespray; version == "" && k != nil && k.ExtraVars["kube_version"].Raw != nil {
		// Set as a kubespray variable instead: the planner must see it too, or a downgrade
		// would reach the nodes as a mere settings change.
		field = "spec.kubespray.extraVars.kube_version"
		if err := json.Unmarshal(k.ExtraVars["kube_version"].Raw, &version); err != nil {
			return nil, fmt.Errorf("%s: want a version string such as 1.32.5", field)
		}
	}
	if version != "" {
		if kube, err = kubespray.ParseKubeVersion(version); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}
	_, release, _ := strings.Cut(params["kubespray-image"], ":")
	settings, err := SettingsDigest(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	immutable, err := immutableValues(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	plan := &ChangePlan{KubesprayVersion: release, KubernetesVersion: kube.String(), Settings: settings, Immutable: immutable}

	desired, err := hostmatch.Desired(p)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	applied := p.Status.Applied
	if applied == nil || len(applied.Hosts) == 0 {
		const reason = "build the cluster on every host"
		plan.Steps = []Step{{Name: StepCreate, Reason: reason, Operations: []kubespray.Operation{kubespray.CreateCluster(reason)}, Adds: true}}
		return plan, nil
	}

	if err := refuseImmutable(&p.Spec, applied.Immutable, immutable); err != nil {
		return nil, err
	}
	d := diff(applied.Hosts, desired)
	if err := d.refuse(applied.Hosts); err != nil {
		return nil, err
	}
	upgrade, err := versionChange(applied, plan, kube, field)
	if err != nil {
		return nil, err
	}
	if upgrade != "" && len(d.added)+len(d.removed) > 0 {
		if applied.KubesprayVersion != plan.KubesprayVersion {
			field = "spec.kubespray.version"
		}
		return nil, &Refusal{field, ReasonUpgradeWithChanges, fmt.Sprintf("%s, and the nodes change too (%s): kubespray upgrades an unchanged node set (docs/operations/upgrades.md); make the node changes and the upgrade in separate edits",
			upgrade, d.describe())}
	}

	var gone []string
	// etcdLeft counts the applied etcd members an operation's inventory still holds.
	etcdLeft := func() int {
		n := 0
		for _, h := range applied.Hosts {
			if h.Etcd && !h.Removing && !slices.Contains(gone, h.Name) {
				n++
			}
		}
		return n
	}
	remove := func(name string, nodes []string) {
		op := kubespray.RemoveNodes(nodes, false, fmt.Sprintf("remove %s", strings.Join(nodes, ", ")))
		maps.Copy(op.Vars, drainVars(p.Spec.NodeRemoval))
		if etcdLeft()%2 == 0 {
			// Between two etcd removals the inventory holds an even number of members, which
			// v2.28's boilerplate.yml refuses ("Stop if even number of etcd hosts",
			// roles/validate_inventory) even in remove_node.yml: as kubespray's own procedure
			// for adding etcd members passes the even state in between (nodes.md).
			op.Vars["ignore_assert_errors"] = "yes"
		}
		op.Without = slices.Clone(gone)
		gone = append(gone, nodes...)
		allow := p.Spec.NodeRemoval != nil && p.Spec.NodeRemoval.AllowUngraceful
		plan.Steps = append(plan.Steps, Step{Name: name, Nodes: nodes, Reason: fmt.Sprintf("%s leave the cluster", strings.Join(nodes, ", ")),
			Operations: []kubespray.Operation{op}, AllowUngraceful: allow, Removes: true})
	}
	if len(d.removedWorkers) > 0 {
		remove(StepRemoveWorkers, d.removedWorkers)
	}
	// The apiserver proxy on each node outside the control plane (kubespray puts one on
	// every such host) must list the control plane as it ends up: one update-node-proxies
	// after the last control-plane change, unless a cluster.yml on every host already comes
	// after it (reconfigure-etcd, a master without etcd joining, reconfigure). proxiesWhy
	// says what changed.
	var proxiesWhy []string
	// Masters without etcd leave together; each etcd member in a run of its own, as
	// docs/operations/nodes.md ("Removing an etcd node") removes one: remove-etcd-node's
	// `kubectl get nodes {{ node }}` takes one name, not node=a,b. Each is a DAG task of its
	// own, so `argo retry` resumes after the members already gone.
	plainMasters, etcdMembers := d.removedMastersByEtcd(applied.Hosts)
	removals := 0
	removeMasters := func(nodes []string) {
		removals++
		remove(Numbered(StepRemoveControlPlane, removals), nodes)
	}
	if len(plainMasters) > 0 {
		removeMasters(plainMasters)
		if len(etcdMembers) == 0 { // reconfigure-etcd runs cluster.yml on every host anyway
			proxiesWhy = append(proxiesWhy, fmt.Sprintf("control-plane node %s left", strings.Join(plainMasters, ", ")))
		}
	}
	for _, m := range etcdMembers {
		removeMasters([]string{m})
	}
	if len(etcdMembers) > 0 {
		// nodes.md, step 3: cluster.yml regenerates the configuration files of the remaining
		// nodes with the etcd members left. Once, after the last removal: an inventory between
		// two removals holds an even number of members, which cluster.yml refuses. A task of
		// its own: `argo retry` after it failed does not remove the nodes again.
		reason := fmt.Sprintf("etcd member %s left: reconfigure the remaining nodes (docs/operations/nodes.md)", strings.Join(etcdMembers, ", "))
		plan.Steps = append(plan.Steps, Step{Name: StepReconfigureEtcd, Reason: reason,
			Operations: []kubespray.Operation{{Playbook: kubespray.Cluster, Without: slices.Clone(gone), Reason: reason}}})
	}
	if len(d.addedMasters) > 0 && !d.addedEtcd {
		// A control-plane node without etcd joins with cluster.yml on every host, so every
		// node's apiserver proxy learns of it (docs/operations/nodes.md).
		reason := fmt.Sprintf("add control-plane node %s", strings.Join(d.addedMasters, ", "))
		op := kubespray.CreateCluster(reason + " (cluster.yml on every host, so each node's apiserver proxy learns of it)")
		op.Without = slices.Clone(gone)
		plan.Steps = append(plan.Steps, Step{Name: StepAddControlPlane, Nodes: d.addedMasters, Reason: reason, Operations: []kubespray.Operation{op}, Adds: true})
		proxiesWhy = nil
	} else if len(d.addedMasters) > 0 {
		limit := []string{profile.Groups.Etcd, profile.Groups.ControlPlane}
		vars := map[string]any{"ignore_assert_errors": "yes"}
		if d.addedEtcdCount > 1 {
			// docs/operations/nodes.md ("Adding an etcd node"): several members joining in one
			// run may find etcd still busy with the first join at roles/etcd's default of 4.
			vars["etcd_retries"] = kubespray.ManyEtcdRetries
		}
		reason := fmt.Sprintf("add control-plane node %s", strings.Join(d.addedMasters, ", "))
		// upgrade-cluster.yml drains the control-plane nodes it reconfigures
		// (roles/upgrade/pre-upgrade): with the spec's drain settings, as an upgrade.
		upgradeVars := drainVars(p.Spec.NodeRemoval)
		maps.Copy(upgradeVars, vars)
		// Two tasks, so `argo retry` after upgrade-cluster.yml failed does not install again;
		// the nodes count as added once the second succeeded.
		plan.Steps = append(plan.Steps,
			Step{Name: StepAddControlPlane, Nodes: d.addedMasters, Reason: reason + ": install it", Operations: []kubespray.Operation{
				{Playbook: kubespray.Cluster, Limit: limit, Vars: vars, Without: slices.Clone(gone), Reason: reason + ": install it"}}},
			Step{Name: StepUpgradeControlPlane, Nodes: d.addedMasters, Reason: reason + ": reconfigure the control plane and etcd for it", Adds: true, Operations: []kubespray.Operation{
				{Playbook: kubespray.Upgrade, Limit: limit, Vars: upgradeVars, Without: slices.Clone(gone), Reason: reason + ": reconfigure the control plane and etcd for it"}}})
		proxiesWhy = append(proxiesWhy, fmt.Sprintf("control-plane node %s joined", strings.Join(d.addedMasters, ", ")))
	}
	// Nodes added later in the run are left out: scale.yml configures their proxies.
	// A set, not a scan per node: planning stays linear in nodes (20 pools of 5,000 once took
	// 17-22 s of a shared reconcile worker here).
	joining := make(map[string]bool, len(d.addedWorkers))
	for _, n := range d.addedWorkers {
		joining[n] = true
	}
	proxied := slices.ContainsFunc(desired, func(n hostmatch.Node) bool { return !n.Master && !joining[n.Name] })
	if len(proxiesWhy) > 0 && proxied {
		reason := strings.Join(proxiesWhy, "; ")
		op := kubespray.CreateCluster(reason + ": cluster.yml on every host, so the apiserver proxy of each other node lists the control plane as it is now (docs/operations/nodes.md)")
		op.Without = append(slices.Clone(gone), d.addedWorkers...)
		plan.Steps = append(plan.Steps, Step{Name: StepUpdateNodeProxies, Reason: reason, Operations: []kubespray.Operation{op}})
	}
	if len(d.addedWorkers) > 0 {
		reason := fmt.Sprintf("add worker %s", strings.Join(d.addedWorkers, ", "))
		facts := kubespray.GatherFacts("gather every host's facts for scale.yml's --limit")
		facts.Without = slices.Clone(gone)
		scale := kubespray.ScaleNodes(d.addedWorkers, reason)
		scale.Without = slices.Clone(gone)
		plan.Steps = append(plan.Steps, Step{Name: StepScaleWorkers, Nodes: d.addedWorkers, Reason: reason, Operations: []kubespray.Operation{facts, scale}, Adds: true})
	}
	if upgrade != "" {
		op := kubespray.UpgradeCluster(upgrade)
		op.Vars = drainVars(p.Spec.NodeRemoval) // roles/upgrade/pre-upgrade drains each node
		plan.Steps = append(plan.Steps, Step{Name: StepUpgrade, Reason: upgrade, Operations: []kubespray.Operation{op}})
		return plan, nil // upgrade-cluster.yml applies every other setting too
	}
	reconfigure := ""
	switch {
	case applied.Settings != plan.Settings:
		reconfigure = "settings changed (kubespray variables, plugins, subnets or inventory)"
	case len(d.roleChanged) > 0:
		reconfigure = fmt.Sprintf("%s no longer run workloads, or now do", strings.Join(d.roleChanged, ", "))
	case len(plan.Steps) == 0 && rerunRequested(p):
		reconfigure = fmt.Sprintf("rerun requested (%s=%s)", bpav1.RerunAnnotation, p.Annotations[bpav1.RerunAnnotation])
	}
	if reconfigure != "" {
		// cluster.yml on every host comes last anyway: no update-node-proxies before it.
		plan.Steps = slices.DeleteFunc(plan.Steps, func(s Step) bool { return s.Name == StepUpdateNodeProxies })
		op := kubespray.CreateCluster(reconfigure)
		op.Without = slices.Clone(gone)
		plan.Steps = append(plan.Steps, Step{Name: StepReconfigure, Reason: reconfigure, Operations: []kubespray.Operation{op}})
	}
	return plan, nil
}
