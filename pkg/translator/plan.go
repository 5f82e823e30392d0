package translator

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// The day-2 planner: (spec, applied) → the operations that take the cluster from what
// status.applied says it is to what the spec asks, each a DAG task of its own.
//
// A run's steps come in this order, and each runs only when needed:
//
//  0. run-kubespray (first creation only): cluster.yml on every host;
//  1. remove-workers: remove-node.yml for the workers that leave;
//  2. remove-control-plane: remove-node.yml for the masters without etcd that leave, all at
//     once, then for each etcd member that leaves, one per run (remove-control-plane-2, ...),
//     then, when an etcd member left, reconfigure-etcd: cluster.yml without them
//     (docs/operations/nodes.md, "Removing an etcd node");
//  3. add-control-plane: with etcd members, cluster.yml, then upgrade-control-plane:
//     upgrade-cluster.yml, both limited to etcd,kube_control_plane with
//     ignore_assert_errors=yes (nodes.md, "Adding an etcd node"), then update-node-proxies:
//     cluster.yml on every host (nodes.md, "Adding/replacing a control plane node"), so the
//     apiserver proxy of each node outside the control plane learns of it; without etcd,
//     that cluster.yml on every host alone. A control-plane node that left without etcd is
//     forgotten the same way (update-node-proxies; with etcd, reconfigure-etcd does it).
//     nodes.md then restarts nginx-proxy by hand; kubespray's static pod carries its
//     config's checksum (nginx-cfg-checksum, since kubespray #4862), so the kubelet
//     restarts it when cluster.yml changes the upstreams, and BPA runs nothing more;
//  4. scale-workers: facts.yml on every host, then scale.yml limited to the new workers, in
//     one container so scale.yml finds the facts cache (nodes.md);
//  5. preflight, then upgrade: the preflight step's checks (etcd, Nodes, disks, the offline
//     site's artifacts, kubeadm's config), then upgrade-cluster.yml, for a new Kubernetes or
//     kubespray release; a jump of several minors is a chain of hops (kubespray.Chain),
//     upgrade, upgrade-2, ..., each run by its hop's release;
//  6. reconfigure: cluster.yml on every host, for other settings (variables, plugins,
//     subnets, inventory) or a rerun request.
//
// Removals come first: a dead host that leaves never blocks the facts gathering of the
// additions, and every addition runs against the final inventory. A removed node leaves the
// inventory of every later operation (Operation.Without), as nodes.md says to.
//
// Some changes are refused, leaving the cluster untouched (a Refusal names the field and
// the rule): a downgrade of Kubernetes or kubespray, or a jump of minors that no chain of
// the releases pkg/kubespray records bridges (upgrades.md: one minor at a time); an upgrade combined with node changes (upgrade an unchanged node set,
// then change the nodes); adding and removing etcd members at once (every inventory in
// between would hold an even number, which kubespray refuses); removing the first
// control-plane node, or adding a master that would become it (remove-node.yml cannot
// remove it, and kubespray's plays treat the first kube_control_plane host as the one that
// already runs the cluster); and changing whether a node is a master or runs etcd.

// Step names: the DAG tasks of the operations.
const (
	// StepCreate keeps the seed's name for the first creation's task, which the ad-hoc
	// template, `bpa describe` and dashboards already know.
	StepCreate             = "run-kubespray"
	StepRemoveWorkers      = "remove-workers"
	StepRemoveControlPlane = "remove-control-plane"
	StepAddControlPlane    = "add-control-plane"
	// StepUpgradeControlPlane finishes adding etcd members (upgrade-cluster.yml, limited).
	StepUpgradeControlPlane = "upgrade-control-plane"
	// StepReconfigureEtcd runs cluster.yml on the remaining nodes after an etcd member left.
	StepReconfigureEtcd = "reconfigure-etcd"
	// StepUpdateNodeProxies runs cluster.yml on every host after the control plane changed,
	// so the apiserver proxies of the other nodes list exactly the control-plane hosts.
	StepUpdateNodeProxies = "update-node-proxies"
	StepScaleWorkers      = "scale-workers"
	// StepPreflight checks the cluster before an upgrade (`bpa step preflight`); it runs no
	// playbook.
	StepPreflight   = "preflight"
	StepUpgrade     = "upgrade"
	StepReconfigure = "reconfigure"
	StepReset       = "reset"
	// StepBackupEtcd takes a verified etcd snapshot (`bpa step backup-etcd`) before a day-2
	// run's first operation, and before each later hop of a chained upgrade
	// (backup-etcd-2, ...); it runs no playbook.
	StepBackupEtcd = "backup-etcd"
)

// Numbered names the n-th step of a kind in one plan: base, then base-2, base-3, ... (one
// removal per etcd member). StepBase maps such a name back.
func Numbered(base string, n int) string {
	if n <= 1 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, n)
}

// StepBase is the kind of a step name made by Numbered: remove-control-plane-2 is a
// remove-control-plane.
func StepBase(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 1 && slices.Contains(PlanSteps, name[:i]) {
			return name[:i]
		}
	}
	return name
}

// PlanSteps are the names every planned step may have, in plan order (with Numbered's
// suffixes).
var PlanSteps = []string{StepBackupEtcd, StepCreate, StepRemoveWorkers, StepRemoveControlPlane, StepReconfigureEtcd, StepAddControlPlane, StepUpgradeControlPlane, StepUpdateNodeProxies, StepScaleWorkers, StepPreflight, StepUpgrade, StepReconfigure}

// Step is one DAG task: kubespray operations run in order in one container.
type Step struct {
	Name string `json:"name"`
	// Nodes are the nodes it adds or removes; empty when it concerns all.
	Nodes      []string              `json:"nodes,omitempty"`
	Reason     string                `json:"reason"`
	Operations []kubespray.Operation `json:"operations"`
	// AllowUngraceful lets the step remove a node it cannot reach without draining or
	// resetting it (spec.nodeRemoval.allowUngraceful); only removal steps use it.
	AllowUngraceful bool `json:"allowUngraceful,omitempty"`
	// Adds: once this step succeeded its nodes are in the cluster (the last step of an
	// addition); Removes: once it succeeded and verify found their Nodes gone, they are
	// out (kubespray exits 0 on a name that matches no host, so its success alone does
	// not prove a removal).
	Adds    bool `json:"adds,omitempty"`
	Removes bool `json:"removes,omitempty"`
	// Release and Kubernetes are, for a hop of an upgrade (upgrade, upgrade-2, ...), the
	// kubespray release (image tag) that runs it and the Kubernetes version it leaves the
	// cluster at, which status.applied records once it succeeded; "" elsewhere.
	Release    string `json:"release,omitempty"`
	Kubernetes string `json:"kubernetes,omitempty"`
}

// Playbooks lists the playbooks the step runs.
func (s Step) Playbooks() []string {
	out := make([]string, len(s.Operations))
	for i, op := range s.Operations {
		out[i] = string(op.Playbook)
	}
	return out
}

// ChangePlan is what a run does, and what the cluster is once all of it has succeeded.
type ChangePlan struct {
	Steps             []Step `json:"steps"`
	KubesprayVersion  string `json:"kubesprayVersion"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Settings          string `json:"settings"`
	// Immutable are the values of kubespray's immutable settings the spec asks for
	// (kubespray.ImmutableValues), recorded in status.applied once the cluster has them.
	Immutable map[string]string `json:"immutable,omitempty"`
}

// Operations lists every operation of the plan in order.
func (c *ChangePlan) Operations() []kubespray.Operation {
	var out []kubespray.Operation
	for _, s := range c.Steps {
		out = append(out, s.Operations...)
	}
	return out
}

// Refusal is a change the planner will not make. The CR is Stalled with Reason and a
// message that names Field.
type Refusal struct {
	Field, Reason, Message string
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Message }

// PlanChange plans the run that takes the cluster from p.Status.Applied to p.Spec. It is
// pure: it reads the spec, status.applied and the rerun and delete-nodes annotations. An
// empty plan means there is nothing kubespray needs to do.
func PlanChange(p *bpav1.Provisioning) (*ChangePlan, error) {
	pl, err := newPlanner(p)
	if err != nil {
		return nil, err
	}
	return pl.run()
}

// planner plans one run, a phase at a time, in the order the run's steps come: removals,
// control plane, proxies, workers, then an upgrade or a reconfiguration.
type planner struct {
	p       *bpav1.Provisioning
	profile *kubespray.Profile
	// kube is the Kubernetes release the spec asks for, and kubeField the field that says so.
	kube      kubespray.KubeVersion
	kubeField string
	desired   []hostmatch.Node
	applied   *bpav1.AppliedState
	d         nodeDiff
	// upgrade says what the upgrade is, "" for none; hops are its chain (kubespray.Chain).
	upgrade string
	hops    []kubespray.Hop
	// rerun is why the cluster is reconfigured when nothing else is to be done, "" for not.
	rerun string
	plan  *ChangePlan
	// gone are the nodes the steps planned so far remove: later operations leave them out.
	gone []string
	// proxiesWhy says what changed in the control plane since the last cluster.yml on every
	// host: the apiserver proxies of the other nodes must learn of it (update-node-proxies).
	proxiesWhy []string
}

// newPlanner reads what the spec asks for: the releases, the settings and the nodes.
func newPlanner(p *bpav1.Provisioning) (*planner, error) {
	params, err := ProvisioningParameters(p)
	if err != nil {
		return nil, err
	}
	profile, patch, err := kubespray.ProfileForImage(params["kubespray-image"])
	if err != nil {
		return nil, fmt.Errorf("spec.kubespray.version: %w", err)
	}
	pl := &planner{p: p, profile: profile, applied: p.Status.Applied}
	if pl.kube, pl.kubeField, err = kubeOf(p, profile.DefaultKube(patch)); err != nil {
		return nil, err
	}
	// The tag, after the registry's port if any.
	_, release := splitImage(params["kubespray-image"])
	settings, err := SettingsDigest(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	immutable, err := immutableValues(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	pl.plan = &ChangePlan{KubesprayVersion: release, KubernetesVersion: pl.kube.String(), Settings: settings, Immutable: immutable}
	if pl.desired, err = hostmatch.Desired(p); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if rerunRequested(p) {
		pl.rerun = fmt.Sprintf("rerun requested (%s=%s)", bpav1.RerunAnnotation, p.Annotations[bpav1.RerunAnnotation])
	}
	return pl, nil
}

// kubeOf is the Kubernetes release the spec asks for (def when it names none) and the field
// that names it.
func kubeOf(p *bpav1.Provisioning, def kubespray.KubeVersion) (kubespray.KubeVersion, string, error) {
	field, version := "spec.kubernetes.version", ""
	if p.Spec.Kubernetes != nil {
		version = p.Spec.Kubernetes.Version
	}
	if k := p.Spec.Kubespray; version == "" && k != nil && k.ExtraVars["kube_version"].Raw != nil {
		// Set as a kubespray variable instead: the planner must see it too, or a downgrade
		// would reach the nodes as a mere settings change.
		field = "spec.kubespray.extraVars.kube_version"
		if err := json.Unmarshal(k.ExtraVars["kube_version"].Raw, &version); err != nil {
			return def, field, fmt.Errorf("%s: want a version string such as 1.32.5", field)
		}
	}
	if version == "" {
		return def, field, nil
	}
	kube, err := kubespray.ParseKubeVersion(version)
	if err != nil {
		return def, field, fmt.Errorf("%s: %w", field, err)
	}
	return kube, field, nil
}

// run plans every phase, or refuses the change.
func (pl *planner) run() (*ChangePlan, error) {
	if pl.applied == nil || len(pl.applied.Hosts) == 0 {
		const reason = "build the cluster on every host"
		pl.plan.Steps = []Step{{Name: StepCreate, Reason: reason, Operations: []kubespray.Operation{kubespray.CreateCluster(reason)}, Adds: true}}
		return pl.plan, nil
	}
	if err := pl.refuse(); err != nil {
		return nil, err
	}
	pl.removals()
	pl.controlPlane()
	pl.proxies()
	pl.workers()
	pl.upgradeOrReconfigure()
	pl.backups()
	return pl.plan, nil
}

// backups puts a verified etcd snapshot before the run's first step, and before each later
// hop of a chained upgrade (the hop before it changed etcd's contents), unless the spec
// says spec.etcdBackup.beforeDay2: Skip. A failed snapshot stops the run there: nothing
// after it starts. Only day-2 runs: a cluster being created has nothing to lose.
func (pl *planner) backups() {
	if len(pl.plan.Steps) == 0 || !BackupsBeforeDay2(pl.p) {
		return
	}
	out := []Step{{Name: StepBackupEtcd, Reason: BackupReason}}
	n := 1
	for _, s := range pl.plan.Steps {
		if StepBase(s.Name) == StepUpgrade && s.Name != StepUpgrade { // upgrade-2, ...: a later hop
			n++
			out = append(out, Step{Name: Numbered(StepBackupEtcd, n), Reason: BackupReason})
		}
		out = append(out, s)
	}
	pl.plan.Steps = out
}

// BackupsBeforeDay2 says whether p's day-2 runs take a verified etcd snapshot first.
func BackupsBeforeDay2(p *bpav1.Provisioning) bool {
	return p.Spec.EtcdBackup == nil || p.Spec.EtcdBackup.BeforeDay2 != bpav1.BackupSkip
}

// BackupReason is why a day-2 run snapshots etcd first (`bpa plan`, status.plan).
const BackupReason = "take a verified etcd snapshot before changing the cluster and store it on the site's backup server; a failed snapshot stops the run (EtcdBackupFailed); spec.etcdBackup.beforeDay2: Skip opts out"

// refuse diffs the nodes and returns the first rule the change breaks; it finds the
// upgrade too.
func (pl *planner) refuse() error {
	if err := refuseImmutable(&pl.p.Spec, pl.applied.Immutable, pl.plan.Immutable); err != nil {
		return err
	}
	if err := refuseReplacement(pl.applied); err != nil {
		return err
	}
	pl.d = diff(pl.applied.Hosts, pl.desired)
	if err := pl.d.refuse(pl.applied.Hosts); err != nil {
		return err
	}
	var err error
	if pl.upgrade, pl.hops, err = versionChange(pl.applied, pl.plan, pl.kube, pl.kubeField); err != nil {
		return err
	}
	if pl.upgrade != "" && len(pl.d.added)+len(pl.d.removed) > 0 {
		field := pl.kubeField
		if pl.applied.KubesprayVersion != pl.plan.KubesprayVersion {
			field = "spec.kubespray.version"
		}
		return &Refusal{field, bpav1.ReasonUpgradeWithChanges, fmt.Sprintf("%s, and the nodes change too (%s): kubespray upgrades an unchanged node set (docs/operations/upgrades.md); make the node changes and the upgrade in separate edits",
			pl.upgrade, pl.d.describe())}
	}
	return nil
}

// add appends a step.
func (pl *planner) add(s Step) { pl.plan.Steps = append(pl.plan.Steps, s) }

// without is the inventory's hosts to leave out for the next operation: those removed so far.
func (pl *planner) without() []string { return slices.Clone(pl.gone) }

// etcdLeft counts the applied etcd members the next operation's inventory still holds.
func (pl *planner) etcdLeft() int {
	n := 0
	for _, h := range pl.applied.Hosts {
		if h.Etcd && !h.Removing && !slices.Contains(pl.gone, h.Name) {
			n++
		}
	}
	return n
}

// remove plans the step name: remove-node.yml for nodes, which then leave every later
// operation's inventory.
func (pl *planner) remove(name string, nodes []string) {
	op := kubespray.RemoveNodes(nodes, false, fmt.Sprintf("remove %s", strings.Join(nodes, ", ")))
	maps.Copy(op.Vars, drainVars(pl.p.Spec.NodeRemoval))
	if pl.etcdLeft()%2 == 0 {
		// Between two etcd removals the inventory holds an even number of members, which
		// v2.28's boilerplate.yml refuses ("Stop if even number of etcd hosts",
		// roles/validate_inventory) even in remove_node.yml: as kubespray's own procedure
		// for adding etcd members passes the even state in between (nodes.md).
		op.Vars["ignore_assert_errors"] = "yes"
	}
	op.Without = pl.without()
	pl.gone = append(pl.gone, nodes...)
	allow := pl.p.Spec.NodeRemoval != nil && pl.p.Spec.NodeRemoval.AllowUngraceful
	reason := fmt.Sprintf("%s leave the cluster", strings.Join(nodes, ", "))
	if dead := pl.replaced(nodes, true); len(dead) > 0 {
		// The remediator decided these hosts are dead: a drain or a reset on them cannot
		// succeed, whatever spec.nodeRemoval says. run-kubespray still removes the nodes it
		// reaches gracefully.
		allow = true
		reason += fmt.Sprintf(" (graded remediation replaces %s: removed from %s without drain; the next run adds it back on a spare host)",
			strings.Join(dead, ", "), map[bool]string{true: "its dead host", false: "their dead hosts"}[len(dead) == 1])
		op.Reason = reason
	}
	pl.add(Step{Name: name, Nodes: nodes, Reason: reason,
		Operations: []kubespray.Operation{op}, AllowUngraceful: allow, Removes: true})
}

// replaced lists the nodes among nodes that graded remediation replaces and that are, when
// leaving is true, still on their dead host (else: back to be added on a spare).
func (pl *planner) replaced(nodes []string, leaving bool) []string {
	var out []string
	for _, r := range pl.applied.Replacements {
		if slices.Contains(nodes, r.Node) && r.Leaving(pl.applied) == leaving {
			out = append(out, r.Node)
		}
	}
	return out
}

// refuseReplacement refuses a replacement of a node that is not an applied worker outside
// the control plane: pkg/remediation never decides one, and the planner does not trust
// status alone for a removal kubespray cannot undo.
func refuseReplacement(a *bpav1.AppliedState) error {
	for _, r := range a.Replacements {
		i := slices.IndexFunc(a.Hosts, func(h bpav1.HostStatus) bool { return h.Name == r.Node })
		if i >= 0 && (isRole(a.Hosts[i], hostmatch.RoleMaster) || a.Hosts[i].Etcd) {
			return &Refusal{"status.applied.replacements", bpav1.ReasonReplaceRefused, fmt.Sprintf("node %s is %s: graded remediation replaces workers only; remove the entry, and replace a control-plane host by editing the spec",
				r.Node, roleWords(isRole(a.Hosts[i], hostmatch.RoleMaster), a.Hosts[i].Etcd))}
		}
	}
	return nil
}

// removals plans the nodes that leave: the workers together, then the masters without etcd
// together, then each etcd member in a run of its own, as docs/operations/nodes.md
// ("Removing an etcd node") removes one: remove-etcd-node's `kubectl get nodes {{ node }}`
// takes one name, not node=a,b. Each is a DAG task of its own, so `argo retry` resumes after
// the members already gone.
func (pl *planner) removals() {
	if len(pl.d.removedWorkers) > 0 {
		pl.remove(StepRemoveWorkers, pl.d.removedWorkers)
	}
	plainMasters, etcdMembers := pl.d.removedMastersByEtcd(pl.applied.Hosts)
	n := 0
	removeMasters := func(nodes []string) {
		n++
		pl.remove(Numbered(StepRemoveControlPlane, n), nodes)
	}
	if len(plainMasters) > 0 {
		removeMasters(plainMasters)
		if len(etcdMembers) == 0 { // reconfigure-etcd runs cluster.yml on every host anyway
			pl.proxiesWhy = append(pl.proxiesWhy, fmt.Sprintf("control-plane node %s left", strings.Join(plainMasters, ", ")))
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
		pl.add(Step{Name: StepReconfigureEtcd, Reason: reason,
			Operations: []kubespray.Operation{{Playbook: kubespray.Cluster, Without: pl.without(), Reason: reason}}})
	}
}

// controlPlane plans the masters that join.
func (pl *planner) controlPlane() {
	added := pl.d.addedMasters
	if len(added) == 0 {
		return
	}
	reason := fmt.Sprintf("add control-plane node %s", strings.Join(added, ", "))
	if !pl.d.addedEtcd {
		// A control-plane node without etcd joins with cluster.yml on every host, so every
		// node's apiserver proxy learns of it (docs/operations/nodes.md).
		op := kubespray.CreateCluster(reason + " (cluster.yml on every host, so each node's apiserver proxy learns of it)")
		op.Without = pl.without()
		pl.add(Step{Name: StepAddControlPlane, Nodes: added, Reason: reason, Operations: []kubespray.Operation{op}, Adds: true})
		pl.proxiesWhy = nil
		return
	}
	limit := []string{pl.profile.Groups.Etcd, pl.profile.Groups.ControlPlane}
	vars := map[string]any{"ignore_assert_errors": "yes"}
	if pl.d.addedEtcdCount > 1 {
		// docs/operations/nodes.md ("Adding an etcd node"): several members joining in one
		// run may find etcd still busy with the first join at roles/etcd's default of 4.
		vars["etcd_retries"] = kubespray.ManyEtcdRetries
	}
	// upgrade-cluster.yml drains the control-plane nodes it reconfigures
	// (roles/upgrade/pre-upgrade): with the spec's drain settings, as an upgrade.
	upgradeVars := drainVars(pl.p.Spec.NodeRemoval)
	maps.Copy(upgradeVars, vars)
	// Two tasks, so `argo retry` after upgrade-cluster.yml failed does not install again;
	// the nodes count as added once the second succeeded.
	install, reconfigure := reason+": install it", reason+": reconfigure the control plane and etcd for it"
	pl.add(Step{Name: StepAddControlPlane, Nodes: added, Reason: install, Operations: []kubespray.Operation{
		{Playbook: kubespray.Cluster, Limit: limit, Vars: vars, Without: pl.without(), Reason: install}}})
	pl.add(Step{Name: StepUpgradeControlPlane, Nodes: added, Reason: reconfigure, Adds: true, Operations: []kubespray.Operation{
		{Playbook: kubespray.Upgrade, Limit: limit, Vars: upgradeVars, Without: pl.without(), Reason: reconfigure}}})
	pl.proxiesWhy = append(pl.proxiesWhy, fmt.Sprintf("control-plane node %s joined", strings.Join(added, ", ")))
}

// proxies plans update-node-proxies: the apiserver proxy on each node outside the control
// plane (kubespray puts one on every such host) must list the control plane as it ends up.
// One cluster.yml on every host after the last control-plane change, unless one already
// comes after it (reconfigure-etcd, a master without etcd joining; reconfigure drops this
// step). nodes.md then restarts nginx-proxy by hand; kubespray's static pod carries its
// config's checksum (nginx-cfg-checksum, since kubespray #4862), so the kubelet restarts it
// when cluster.yml changes the upstreams, and BPA runs nothing more.
func (pl *planner) proxies() {
	if len(pl.proxiesWhy) == 0 {
		return
	}
	// Nodes added later in the run are left out: scale.yml configures their proxies.
	// A set, not a scan per node: planning stays linear in nodes (20 pools of 5,000 once took
	// 17-22 s of a shared reconcile worker here).
	joining := make(map[string]bool, len(pl.d.addedWorkers))
	for _, n := range pl.d.addedWorkers {
		joining[n] = true
	}
	if !slices.ContainsFunc(pl.desired, func(n hostmatch.Node) bool { return !n.Master && !joining[n.Name] }) {
		return
	}
	reason := strings.Join(pl.proxiesWhy, "; ")
	op := kubespray.CreateCluster(reason + ": cluster.yml on every host, so the apiserver proxy of each other node lists the control plane as it is now (docs/operations/nodes.md)")
	op.Without = append(pl.without(), pl.d.addedWorkers...)
	pl.add(Step{Name: StepUpdateNodeProxies, Reason: reason, Operations: []kubespray.Operation{op}})
}

// workers plans the workers that join: facts.yml on every host, then scale.yml limited to
// them, in one container so scale.yml finds the facts cache (nodes.md).
func (pl *planner) workers() {
	added := pl.d.addedWorkers
	if len(added) == 0 {
		return
	}
	reason := fmt.Sprintf("add worker %s", strings.Join(added, ", "))
	if back := pl.replaced(added, false); len(back) > 0 {
		reason += fmt.Sprintf(" (%s: graded remediation's replacement, on a spare host)", strings.Join(back, ", "))
	}
	facts := kubespray.GatherFacts("gather every host's facts for scale.yml's --limit")
	facts.Without = pl.without()
	scale := kubespray.ScaleNodes(added, reason)
	scale.Without = pl.without()
	pl.add(Step{Name: StepScaleWorkers, Nodes: added, Reason: reason, Operations: []kubespray.Operation{facts, scale}, Adds: true})
}

// upgradeOrReconfigure plans upgrade-cluster.yml for a new release, which applies every
// other setting too; else cluster.yml on every host when settings or workload roles
// changed, or a rerun asks for it with nothing else to do.
func (pl *planner) upgradeOrReconfigure() {
	if pl.upgrade != "" {
		pl.add(Step{Name: StepPreflight, Reason: PreflightReason})
		pl.upgradeHops()
		return
	}
	reconfigure := ""
	switch {
	case pl.applied.Settings != pl.plan.Settings:
		reconfigure = "settings changed (kubespray variables, plugins, subnets or inventory)"
	case len(pl.d.roleChanged) > 0:
		reconfigure = fmt.Sprintf("%s no longer run workloads, or now do", strings.Join(pl.d.roleChanged, ", "))
	case len(pl.plan.Steps) == 0:
		reconfigure = pl.rerun
	}
	if reconfigure == "" {
		return
	}
	// cluster.yml on every host comes last anyway: no update-node-proxies before it.
	pl.plan.Steps = slices.DeleteFunc(pl.plan.Steps, func(s Step) bool { return s.Name == StepUpdateNodeProxies })
	op := kubespray.CreateCluster(reconfigure)
	op.Without = pl.without()
	pl.add(Step{Name: StepReconfigure, Reason: reconfigure, Operations: []kubespray.Operation{op}})
}

// upgradeHops plans upgrade-cluster.yml once per hop of the chain, each a task of its own
// (upgrade, upgrade-2, ...) run by its hop's kubespray release: status.applied records each
// hop once it succeeded, so `argo retry`, or the next run, resumes at the hop that failed.
// The last hop takes kube_version from the vars file, as a one-hop upgrade; an earlier one
// is given its own as -e, which wins over the file, in its release's format.
func (pl *planner) upgradeHops() {
	release := cmp.Or(pl.applied.KubesprayVersion, pl.plan.KubesprayVersion)
	kube := cmp.Or(pl.applied.KubernetesVersion, pl.plan.KubernetesVersion)
	for i, h := range pl.hops {
		reason := pl.upgrade
		if len(pl.hops) > 1 {
			reason = fmt.Sprintf("%s, hop %d of %d: %s", pl.upgrade, i+1, len(pl.hops), hopChange(release, kube, h))
		}
		op := kubespray.UpgradeCluster(reason)
		op.Vars = drainVars(pl.p.Spec.NodeRemoval) // roles/upgrade/pre-upgrade drains each node
		if i < len(pl.hops)-1 {
			p, _, _ := kubespray.ProfileFor(h.Release) // a recorded release: Chain chose it
			op.Vars["kube_version"] = p.FormatVersion(h.Kube)
		}
		pl.add(Step{Name: Numbered(StepUpgrade, i+1), Reason: reason, Operations: []kubespray.Operation{op},
			Release: h.Release, Kubernetes: h.Kube.String()})
		release, kube = h.Release, h.Kube.String()
	}
}

// hopChange says what one hop changes.
func hopChange(release, kube string, h kubespray.Hop) string {
	if release == h.Release {
		return fmt.Sprintf("Kubernetes %s → %s with kubespray %s", kube, h.Kube, h.Release)
	}
	what := fmt.Sprintf("kubespray %s → %s", release, h.Release)
	if kube != h.Kube.String() {
		what += fmt.Sprintf(" and Kubernetes %s → %s", kube, h.Kube)
	}
	return what
}

// PreflightReason is what the preflight step before an upgrade checks (`bpa plan`,
// status.plan).
const PreflightReason = "check before the upgrade touches anything: etcd healthy and able to lose a member (a single member is allowed, with a warning), every Node Ready, free disk on every host, the release's artifacts on the offline site, kubeadm-config as BPA applied it; a failed check stops the run (PreflightFailed)"

func rerunRequested(p *bpav1.Provisioning) bool {
	r := p.Annotations[bpav1.RerunAnnotation]
	return r != "" && r != p.Status.LastHandledRerun
}

// drainVars are the drain settings from spec.nodeRemoval, for remove-node.yml
// (roles/remove-node/pre-remove, remove_node/pre_remove at v2.28) and upgrade-cluster.yml
// (roles/upgrade/pre-upgrade): both read drain_grace_period, drain_timeout and
// drain_retries, with the same defaults (300, 360s, 3) at every supported tag, used when
// unset. One set of fields serves both rather than a new spec.drain: the variables are
// kubespray's same three, no existing CR changes meaning, and nothing needs migrating.
func drainVars(r *bpav1.NodeRemoval) map[string]any {
	grace, timeout, retries := int32(300), int32(360), int32(3)
	if r != nil {
		if r.DrainGracePeriodSeconds != nil {
			grace = *r.DrainGracePeriodSeconds
		}
		if r.DrainTimeoutSeconds != nil {
			timeout = *r.DrainTimeoutSeconds
		}
		if r.DrainRetries != nil {
			retries = *r.DrainRetries
		}
	}
	return map[string]any{"drain_grace_period": int(grace), "drain_timeout": strconv.Itoa(int(timeout)) + "s", "drain_retries": int(retries)}
}

// SettingsDigest is a digest of what a change of runs cluster.yml on every node: the vars
// file render-inventory writes (kubespray variables, plugins, subnet, offline settings,
// kube_version) and the inventory settings. Digesting the rendered file rather than a list
// of fields means a new setting cannot be forgotten here.
func SettingsDigest(spec *bpav1.ProvisioningSpec) (string, error) {
	vars, err := inventory.ExtraVars(spec)
	if err != nil {
		return "", err
	}
	inv, _ := json.Marshal(spec.Inventory)
	sum := sha256.Sum256(append(append(vars, 0), inv...))
	return hex.EncodeToString(sum[:8]), nil
}

// immutableValues are the values of kubespray's immutable settings in the vars file the
// spec renders.
func immutableValues(spec *bpav1.ProvisioningSpec) (map[string]string, error) {
	vars, err := inventory.DecodedExtraVars(spec)
	if err != nil {
		return nil, err
	}
	return kubespray.ImmutableValues(vars), nil
}

// refuseImmutable refuses a change of a setting the live cluster keeps, naming the spec
// field that sets it.
func refuseImmutable(spec *bpav1.ProvisioningSpec, applied, desired map[string]string) error {
	s := kubespray.ImmutableChange(applied, desired)
	if s == nil {
		return nil
	}
	field := "spec.kubespray.extraVars." + s.Var
	if s.Var == inventory.PodSubnetVar && spec.PodSubnet != "" {
		field = "spec.PodSubnet"
	}
	return &Refusal{field, bpav1.ReasonImmutableSetting, fmt.Sprintf("%s is %s in the running cluster and would become %s: %s (%s). Keep %s, or build a new cluster",
		s.Var, applied[s.Var], desired[s.Var], s.Why, s.Source(), applied[s.Var])}
}

// nodeDiff is how the desired nodes differ from the applied ones.
type nodeDiff struct {
	added, removed                 []string
	addedMasters, addedWorkers     []string
	removedMasters, removedWorkers []string
	addedEtcd, removedEtcd         bool
	addedEtcdCount                 int
	roleChanged                    []string // masters that gained or lost the worker role
	refusal                        *Refusal
}

func isRole(h bpav1.HostStatus, role string) bool { return slices.Contains(h.Roles, role) }

func diff(applied []bpav1.HostStatus, desired []hostmatch.Node) nodeDiff {
	var d nodeDiff
	have := map[string]bpav1.HostStatus{}
	for _, h := range applied {
		if !h.Removing {
			have[h.Name] = h
		}
	}
	want := map[string]bool{}
	for _, n := range desired {
		want[n.Name] = true
		h, ok := have[n.Name]
		switch {
		case !ok:
			d.added = append(d.added, n.Name)
			if n.Master {
				d.addedMasters = append(d.addedMasters, n.Name)
				d.addedEtcd = d.addedEtcd || n.Etcd
				if n.Etcd {
					d.addedEtcdCount++
				}
			} else {
				d.addedWorkers = append(d.addedWorkers, n.Name)
			}
		case n.MAC != "" && h.MAC != "" && n.MAC != h.MAC:
			if d.refusal == nil {
				d.refusal = &Refusal{"spec", bpav1.ReasonHostChange, fmt.Sprintf("node %s runs on the host with MAC %s; the spec now names %s: a node cannot move to another host in place; remove it, then add the new host under a new name",
					n.Name, h.MAC, n.MAC)}
			}
		case isRole(h, hostmatch.RoleMaster) && n.Master && h.Etcd != n.Etcd:
			if d.refusal == nil {
				d.refusal = &Refusal{"spec.masters", bpav1.ReasonRoleChange, fmt.Sprintf("master %s %s an etcd member and would %s: kubespray cannot change etcd membership in place. The masters that run etcd must stay an odd number; with no etcd: on any master they are the largest odd number of masters in list order, so adding or removing one master can move another in or out. Mark the masters with etcd: true or false to keep %s as it is",
					n.Name, map[bool]string{true: "is", false: "is not"}[h.Etcd], map[bool]string{true: "become one", false: "stop being one"}[n.Etcd], n.Name)}
			}
		case isRole(h, hostmatch.RoleMaster) != n.Master:
			if d.refusal == nil {
				d.refusal = &Refusal{"spec.masters", bpav1.ReasonRoleChange, fmt.Sprintf("node %s is %s in the cluster and would become %s: kubespray cannot change a node's control-plane or etcd role in place; remove the node, then add it back under a new name",
					n.Name, roleWords(isRole(h, hostmatch.RoleMaster), h.Etcd), roleWords(n.Master, n.Etcd))}
			}
		case isRole(h, hostmatch.RoleWorker) != n.Worker:
			d.roleChanged = append(d.roleChanged, n.Name)
		}
	}
	for _, h := range applied {
		if h.Removing || want[h.Name] {
			continue
		}
		d.removed = append(d.removed, h.Name)
		if isRole(h, hostmatch.RoleMaster) {
			d.removedMasters = append(d.removedMasters, h.Name)
			d.removedEtcd = d.removedEtcd || h.Etcd
		} else {
			d.removedWorkers = append(d.removedWorkers, h.Name)
		}
	}
	for _, l := range [][]string{d.added, d.removed, d.addedMasters, d.addedWorkers, d.removedMasters, d.removedWorkers, d.roleChanged} {
		sort.Strings(l)
	}
	return d
}

// removedMastersByEtcd splits the leaving masters into those without etcd and the etcd
// members, each sorted.
func (d nodeDiff) removedMastersByEtcd(applied []bpav1.HostStatus) (plain, etcd []string) {
	for _, m := range d.removedMasters {
		i := slices.IndexFunc(applied, func(h bpav1.HostStatus) bool { return h.Name == m && !h.Removing })
		if i >= 0 && applied[i].Etcd {
			etcd = append(etcd, m)
		} else {
			plain = append(plain, m)
		}
	}
	return plain, etcd
}

func roleWords(master, etcd bool) string {
	switch {
	case master && etcd:
		return "a control-plane node with an etcd member"
	case master:
		return "a control-plane node without etcd"
	}
	return "a worker"
}

// refuse returns the first rule the change breaks.
func (d nodeDiff) refuse(applied []bpav1.HostStatus) error {
	if d.refusal != nil {
		return d.refusal
	}
	if d.addedEtcd && d.removedEtcd {
		return &Refusal{"spec.masters", bpav1.ReasonEtcdReplacement, "etcd members are added and removed in one edit: every inventory in between would hold an even number of etcd members, which kubespray refuses; add the new members first, then remove the old ones"}
	}
	// The inventory lists masters by name: the first is kubespray's first control-plane node.
	var masters []string
	for _, h := range applied {
		if isRole(h, hostmatch.RoleMaster) && !h.Removing {
			masters = append(masters, h.Name)
		}
	}
	sort.Strings(masters)
	if len(masters) == 0 {
		return nil
	}
	first := masters[0]
	if slices.Contains(d.removed, first) {
		return &Refusal{"spec.masters", bpav1.ReasonFirstControlPlane, fmt.Sprintf("BPA policy: %s is the first control-plane node, and kubespray's remove_node.yml says (in a comment, not a check) that it cannot remove the first control plane node or first etcd node; keep it", first)}
	}
	for _, m := range d.addedMasters {
		if m < first {
			return &Refusal{"spec.masters", bpav1.ReasonFirstControlPlane, fmt.Sprintf("new master %s would sort before %s and become kubespray's first control-plane node, which must be a node that already runs the cluster; choose a name that sorts after %s", m, first, first)}
		}
	}
	return nil
}

func (d nodeDiff) describe() string {
	var parts []string
	if len(d.added) > 0 {
		parts = append(parts, "add "+strings.Join(d.added, ", "))
	}
	if len(d.removed) > 0 {
		parts = append(parts, "remove "+strings.Join(d.removed, ", "))
	}
	return strings.Join(parts, "; ")
}

// versionChange compares the applied releases with the plan's, and says what the upgrade
// is ("" for none) and its chain of hops, or refuses it: a downgrade, or a jump of several
// minors that the releases pkg/kubespray records cannot bridge (kubespray.Chain).
func versionChange(applied *bpav1.AppliedState, plan *ChangePlan, kube kubespray.KubeVersion, kubeField string) (string, []kubespray.Hop, error) {
	var what []string
	fromRelease, fromKube := plan.KubesprayVersion, kube
	if from := applied.KubesprayVersion; from != "" && from != plan.KubesprayVersion {
		a, aok := releaseMinorPatch(from)
		b, bok := releaseMinorPatch(plan.KubesprayVersion)
		if aok && bok && (b[0] < a[0] || b[0] == a[0] && b[1] < a[1]) {
			return "", nil, &Refusal{"spec.kubespray.version", bpav1.ReasonDowngrade, fmt.Sprintf("the cluster was built with kubespray %s; %s is older, and kubespray does not downgrade", from, plan.KubesprayVersion)}
		}
		if aok {
			fromRelease = from
		}
		what = append(what, fmt.Sprintf("kubespray %s → %s", from, plan.KubesprayVersion))
	}
	if from := applied.KubernetesVersion; from != "" && from != plan.KubernetesVersion {
		if a, err := kubespray.ParseKubeVersion(from); err == nil {
			if kube.Minor < a.Minor || kube.Minor == a.Minor && kube.Patch < a.Patch {
				return "", nil, &Refusal{kubeField, bpav1.ReasonDowngrade, fmt.Sprintf("the cluster runs Kubernetes %s; %s is older, and Kubernetes does not downgrade", from, kube)}
			}
			fromKube = a
		}
		what = append(what, fmt.Sprintf("Kubernetes %s → %s", from, kube))
	}
	if len(what) == 0 {
		return "", nil, nil
	}
	hops, err := kubespray.Chain(fromRelease, fromKube, plan.KubesprayVersion, kube)
	if gap := (*kubespray.ChainGap)(nil); errors.As(err, &gap) {
		field := kubeField
		if gap.Kubespray {
			field = "spec.kubespray.version"
		}
		return "", nil, &Refusal{field, bpav1.ReasonSkippedMinor, gap.Msg}
	}
	if err != nil || len(hops) == 0 {
		// The applied release is no tag BPA can read: one upgrade, as before chains.
		hops = []kubespray.Hop{{Release: plan.KubesprayVersion, Kube: kube}}
	}
	return "upgrade " + strings.Join(what, " and "), hops, nil
}

// releaseMinorPatch reads v2.<minor>.<patch>.
func releaseMinorPatch(v string) ([2]int, bool) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 || parts[0] != "2" {
		return [2]int{}, false
	}
	minor, err1 := strconv.Atoi(parts[1])
	patch, err2 := strconv.Atoi(parts[2])
	return [2]int{minor, patch}, err1 == nil && err2 == nil
}
