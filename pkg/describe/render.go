// Package describe shows one BPA CR as a tree, in the spirit of `clusterctl describe
// cluster`: its conditions, its Workflows and their steps, its hosts and the objects it
// published. Fetch reads them through a client; Render, a pure function, prints them.
package describe

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Kinds BPA describes.
const (
	KindProvisioning = "Provisioning"
	KindSoftware     = "Software"
	KindCluster      = "Cluster"
)

// Tree is what describe shows about one CR.
type Tree struct {
	Kind, Namespace, Name string
	// Object is the *bpav1.Provisioning, *bpav1.Software or *bpav1.Cluster; nil when
	// the CR does not exist (a Cluster naming a missing Provisioning).
	Object client.Object
	// Workflows are the CR's runs (by its name label), newest first.
	Workflows []wfv1.Workflow
	// WorkflowsErr says why the Workflows could not be listed.
	WorkflowsErr error
	// Published are the objects the CR's cluster publishes (Provisioning) or reads
	// (Software).
	Published []Ref
	// Children are a Cluster's Provisioning and Software.
	Children []*Tree
}

// Ref is a published object: only its metadata is ever read, so a Secret's data never
// reaches describe.
type Ref struct {
	Kind, Name string
	Object     *metav1.PartialObjectMetadata // nil when it does not exist
	Err        error                         // set when it could not be read
}

// Options tune Render.
type Options struct {
	// Now is the time ages and running durations are measured against.
	Now time.Time
	// Color paints phases and statuses with ANSI colours.
	Color bool
	// History is how many earlier Workflows are listed besides the current one.
	History int
}

// Render prints t.
func Render(w io.Writer, t *Tree, opts Options) error {
	root := &node{}
	renderTree(root, t, opts)
	header := root.children[0]
	_, err := fmt.Fprintln(w, strings.TrimRight(joinCells(header.cols, opts.Color), " "))
	if err != nil {
		return err
	}
	header.write(w, "", opts.Color)
	return nil
}

func joinCells(cols []cell, color bool) string {
	var parts []string
	for _, c := range cols {
		if c.text != "" {
			parts = append(parts, paint(c, color))
		}
	}
	return strings.Join(parts, "  ")
}

func renderTree(parent *node, t *Tree, opts Options) {
	title := cell{t.Kind + " " + clean(t.Namespace+"/"+t.Name), bold}
	if t.Object == nil {
		parent.add(title, cell{"not found", red})
		return
	}
	var (
		phase      bpav1.RunPhase
		progress   string
		conditions []metav1.Condition
		run        *bpav1.RunStatus
	)
	switch o := t.Object.(type) {
	case *bpav1.Provisioning:
		run = &o.Status.RunStatus
	case *bpav1.Software:
		run = &o.Status.RunStatus
	case *bpav1.Cluster:
		phase, conditions = o.Status.Phase, o.Status.Conditions
	}
	if run != nil {
		phase, progress, conditions = run.Phase, run.Progress, run.Conditions
	}
	n := parent.add(title, phaseCell(string(phase)), cell{progress, plain},
		cell{"cluster " + clean(t.Object.GetLabels()[bpav1.ClusterLabel]), dim})
	renderConditions(n, conditions, opts.Now)
	if sw, ok := t.Object.(*bpav1.Software); ok {
		renderLatest(n, sw)
	}
	if run != nil {
		renderRuns(n, t, run, opts)
		renderHosts(n, run.Hosts)
	}
	if p, ok := t.Object.(*bpav1.Provisioning); ok {
		renderApplied(n, p.Status.Applied, p.Status.Operations)
		renderBackups(n, p.Status.Backups, opts.Now)
		if r := p.Status.Restore; r != nil {
			renderRequest(n, "Restore", r.Snapshot, &r.RequestStatus, opts.Now)
		}
		renderRequest(n, "Renewal", "certificates", p.Status.CertificateRenewal, opts.Now)
		renderCertificates(n, &p.Status, opts.Now)
		renderDrift(n, &p.Status, opts.Now)
		renderRemediation(n, &p.Status, opts.Now)
	}
	renderPublished(n, t.Published)
	for _, c := range t.Children {
		renderTree(n, c, opts)
	}
}

func renderConditions(parent *node, conds []metav1.Condition, now time.Time) {
	if len(conds) == 0 {
		return
	}
	n := parent.add(cell{"Conditions", bold})
	// Ready first, as kstatus and clusterctl read it; the others as the controller keeps them.
	conds = slices.Clone(conds)
	rank := func(c metav1.Condition) int {
		if c.Type == bpav1.ConditionReady {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int { return rank(a) - rank(b) })
	for _, c := range conds {
		n.add(cell{clean(c.Type), plain}, statusCell(c.Type, c.Status), cell{clean(c.Reason), plain},
			cell{since(c.LastTransitionTime, now), dim}, cell{clean(c.Message), plain})
	}
}

// negativeConditions are the kstatus conditions for which True is bad news.
var negativeConditions = map[string]style{bpav1.ConditionStalled: red, bpav1.ConditionReconciling: yellow}

func statusCell(typ string, s metav1.ConditionStatus) cell {
	st := plain
	switch {
	case s == metav1.ConditionUnknown:
		st = yellow
	case negativeConditions[typ] != "":
		if s == metav1.ConditionTrue {
			st = negativeConditions[typ]
		}
	case s == metav1.ConditionTrue:
		st = green
	case typ == bpav1.ConditionReady:
		st = red
	default:
		st = yellow
	}
	return cell{string(s), st}
}

func phaseCell(phase string) cell {
	switch phase {
	case "Succeeded":
		return cell{phase, green}
	case "Failed", "Error":
		return cell{phase, red}
	case "Running":
		return cell{phase, cyan}
	case "":
		return cell{"-", dim}
	}
	return cell{phase, yellow}
}

// steps are a run's steps: a day-2 run's are its plan's.
func (t *Tree) steps(wf *wfv1.Workflow) []string {
	if t.Kind == KindSoftware {
		return translator.SoftwareSteps
	}
	return observe.ProvisioningSteps(wf)
}

// renderRuns shows the current run in full, from its Workflow when it still exists and
// from the CR's mirrored status when Argo's TTL has deleted it, then the earlier runs one
// line each.
func renderRuns(parent *node, t *Tree, run *bpav1.RunStatus, opts Options) {
	if t.WorkflowsErr != nil {
		parent.add(cell{"Workflows", bold}, cell{"cannot list: " + clean(t.WorkflowsErr.Error()), red})
	}
	current := ""
	if run.Workflow != nil {
		current = run.Workflow.Name
	}
	var earlier []wfv1.Workflow
	shown := false
	for i := range t.Workflows {
		wf := &t.Workflows[i]
		if wf.Name != current {
			earlier = append(earlier, *wf)
			continue
		}
		o := observe.Workflow(wf, t.steps(wf))
		n := parent.add(append([]cell{{"Workflow " + clean(wf.Name), bold}}, runCells(o, opts.Now)...)...)
		renderSteps(n, o, hostTimes(wf), opts.Now)
		shown = true
	}
	if !shown && current != "" {
		o := observe.Observation{
			Phase: run.Phase, Progress: run.Progress, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt,
			Steps: run.Steps,
		}
		if sw, ok := t.Object.(*bpav1.Software); ok {
			o.HostSoftware = sw.Status.HostSoftware
		}
		n := parent.add(append([]cell{{"Workflow " + clean(current), bold}}, runCells(o, opts.Now)...)...)
		n.add(cell{"(the Workflow is gone, deleted by its TTL or by hand; steps as the CR last saw them)", dim})
		renderSteps(n, o, nil, opts.Now)
	}
	if !shown && current == "" && t.WorkflowsErr == nil {
		parent.add(cell{"Workflow", bold}, cell{"none yet", dim})
	}
	if len(earlier) == 0 || opts.History <= 0 {
		return
	}
	n := parent.add(cell{"Earlier Workflows", bold})
	for i, wf := range earlier {
		if i == opts.History {
			n.add(cell{fmt.Sprintf("(%d more)", len(earlier)-i), dim})
			break
		}
		o := observe.Workflow(&wf, t.steps(&wf))
		n.add(append([]cell{{clean(wf.Name), plain}}, runCells(o, opts.Now)...)...)
	}
}

// runCells are a run's phase, progress, age, duration and message.
func runCells(o observe.Observation, now time.Time) []cell {
	started := ""
	if o.StartedAt != nil {
		started = "started " + since(*o.StartedAt, now)
	}
	d := took(o.StartedAt, o.FinishedAt, now)
	if o.FinishedAt != nil && d != "" {
		d = "took " + d
	}
	return []cell{phaseCell(string(o.Phase)), {o.Progress, plain}, {started, dim}, {d, plain}, {clean(o.Message), plain}}
}

func renderSteps(parent *node, o observe.Observation, times map[string]span, now time.Time) {
	for _, s := range o.Steps {
		n := parent.add(cell{clean(s.Name), plain}, phaseCell(s.Phase), cell{took(s.StartedAt, s.FinishedAt, now), plain},
			cell{clean(s.Message), plain})
		if s.Name != "install-software" {
			continue
		}
		for _, h := range o.HostSoftware {
			var what []string
			if h.Changed {
				what = append(what, "changed")
			}
			if t := tracked(h); t != "" {
				what = append(what, t)
			}
			tm := times[h.Name]
			n.add(cell{clean(h.Name), plain}, cell{clean(h.IP), plain}, phaseCell(h.Phase),
				cell{took(tm.start, tm.end, now), plain}, cell{strings.Join(what, ", "), plain}, cell{clean(h.Message), plain})
		}
	}
}

// renderLatest shows what a Software's `version: latest` items resolve to, from which
// revision of the artifact server's index, and why the current run started when nobody
// edited the Software ("htop 3.2.2-3 uploaded").
func renderLatest(parent *node, sw *bpav1.Software) {
	if len(sw.Status.Latest) == 0 && sw.Status.Trigger == "" {
		return
	}
	n := parent.add(cell{"Latest", bold}, cell{fmt.Sprintf("index revision %d", sw.Status.IndexRevision), dim})
	if sw.Status.Trigger != "" {
		n.add(cell{"Trigger", plain}, cell{clean(sw.Status.Trigger), plain})
	}
	for _, v := range sw.Status.Latest {
		n.add(cell{clean(v.Name), plain}, cell{clean(v.Version), plain})
	}
}

// tracked is a host's tracked packages as its last run left them: "htop 3.2.2-3", with the
// version it was brought to when that is not what it has ("htop 3.2.2-2, newest 3.2.2-3").
func tracked(h bpav1.HostSoftwareStatus) string {
	var out []string
	for _, p := range h.Packages {
		if p.Wanted != bpav1.VersionLatest {
			continue
		}
		installed := p.Installed
		if installed == "" {
			installed = "not installed"
		}
		s := p.Name + " " + installed
		if p.Target != "" && p.Target != p.Installed {
			s += ", newest " + p.Target
		}
		out = append(out, clean(s))
	}
	return strings.Join(out, "; ")
}

type span struct{ start, end *metav1.Time }

// hostTimes are the start and end of each host's node of the install-software fan-out
// (which observe.Workflow does not report), by host name.
func hostTimes(wf *wfv1.Workflow) map[string]span {
	if wf.Status.CompressedNodes != "" {
		wf = wf.DeepCopy()
		if packer.DecompressWorkflow(wf) != nil {
			return nil // observe.Workflow has said why
		}
	}
	out := map[string]span{}
	for _, group := range wf.Status.Nodes {
		if group.Type != wfv1.NodeTypeTaskGroup || group.DisplayName != "install-software" {
			continue
		}
		for _, id := range group.Children {
			n := wf.Status.Nodes[id]
			if n.Inputs == nil {
				continue
			}
			for _, p := range n.Inputs.Parameters {
				var in struct{ Name string }
				if p.Name == "host" && p.Value != nil && json.Unmarshal([]byte(p.Value.String()), &in) == nil {
					out[in.Name] = span{n.StartedAt.DeepCopy(), n.FinishedAt.DeepCopy()}
				}
			}
		}
	}
	return out
}

func renderHosts(parent *node, hosts []bpav1.HostStatus) {
	if len(hosts) == 0 {
		return
	}
	n := parent.add(cell{"Hosts", bold})
	for _, h := range hosts {
		bmh := ""
		if h.BareMetalHost != "" {
			bmh = "BareMetalHost " + clean(h.BareMetalHost)
		}
		roles := clean(strings.Join(h.Roles, ","))
		if h.Removing {
			roles += " (removing)"
		}
		n.add(cell{clean(h.Name), plain}, cell{roles, plain}, cell{clean(h.IP), plain},
			cell{clean(h.MAC), dim}, cell{bmh, dim})
	}
}

// renderApplied shows what the cluster is (status.applied) and the last operations.
func renderApplied(parent *node, a *bpav1.AppliedState, ops []bpav1.OperationRecord) {
	if a != nil {
		n := parent.add(cell{"Applied", bold}, cell{fmt.Sprintf("%d nodes", len(a.Hosts)), plain},
			cell{clean("Kubernetes " + a.KubernetesVersion), plain}, cell{clean("kubespray " + a.KubesprayVersion), dim},
			cell{fmt.Sprintf("generation %d", a.Generation), dim})
		// A replacement (graded remediation) is two runs of the unchanged spec: say which is next.
		for _, r := range a.Replacements {
			next := "next: added back on a spare host"
			if r.Leaving(a) {
				next = "next: removed from it without drain"
			}
			n.add(cell{clean("replacing " + r.Node), yellow}, cell{clean("dead BareMetalHost " + r.BareMetalHost), plain}, cell{next, dim})
		}
	}
	if len(ops) == 0 {
		return
	}
	n := parent.add(cell{"Operations", bold})
	for i := len(ops) - 1; i >= 0; i-- { // newest first
		o := ops[i]
		n.add(cell{clean(o.Name), plain}, phaseCell(o.Result), cell{clean(strings.Join(o.Nodes, ",")), plain},
			cell{fmt.Sprintf("generation %d", o.Generation), dim}, cell{clean("Workflow " + o.Workflow), dim})
	}
}

// renderBackups shows the cluster's verified etcd snapshots, newest first.
func renderBackups(parent *node, backups []bpav1.BackupStatus, now time.Time) {
	if len(backups) == 0 {
		return
	}
	n := parent.add(cell{"Backups", bold}, cell{fmt.Sprintf("%d verified etcd snapshots", len(backups)), plain})
	for i := len(backups) - 1; i >= 0; i-- {
		b := backups[i]
		n.add(cell{clean(b.Name), plain}, cell{since(b.TakenAt, now), plain}, cell{fmt.Sprintf("revision %d", b.Revision), dim},
			cell{artifacts.HumanBytes(b.Size), dim}, cell{clean("from " + b.Member), dim}, cell{clean("Workflow " + b.Workflow), dim})
	}
}

// renderRequest shows the last operation of a kind asked for by annotation (a restore, a
// certificate renewal): what, how it went, when.
func renderRequest(parent *node, title, what string, r *bpav1.RequestStatus, now time.Time) {
	if r == nil {
		return
	}
	style := yellow
	switch r.Phase {
	case bpav1.RequestSucceeded:
		style = green
	case bpav1.RequestFailed:
		style = red
	}
	when := ""
	if r.FinishedAt != nil {
		when = "finished " + since(*r.FinishedAt, now)
	} else if r.StartedAt != nil {
		when = "started " + since(*r.StartedAt, now)
	}
	parent.add(cell{title, bold}).add(cell{clean(what), plain}, cell{string(r.Phase), style}, cell{when, dim},
		cell{clean("Workflow " + r.Workflow), dim}, cell{clean(r.Message), dim})
}

// renderCertificates shows the certificate that expires first (status.certificates is
// sorted so), in how long, and how many verify read; yellow while CertificatesExpiring is
// True.
func renderCertificates(parent *node, st *bpav1.ProvisioningStatus, now time.Time) {
	if len(st.Certificates) == 0 {
		return
	}
	c := st.Certificates[0]
	when := "expires in " + duration.HumanDuration(c.NotAfter.Sub(now))
	if !now.Before(c.NotAfter.Time) {
		when = "expired " + duration.HumanDuration(now.Sub(c.NotAfter.Time)) + " ago"
	}
	style := green
	if meta.IsStatusConditionTrue(st.Conditions, bpav1.ConditionCertificatesExpiring) {
		style = yellow
	}
	unread := ""
	if n := len(st.CertificatesUnread); n > 0 {
		unread = fmt.Sprintf("%d not read", n)
	}
	checked := ""
	if st.CertificatesCheckedAt != nil {
		checked = "checked " + since(*st.CertificatesCheckedAt, now)
	}
	// One cell on the header: a row's cells align with its siblings' (the Workflow's).
	parent.add(cell{"Certificates", bold}).add(cell{clean(c.Component + " on " + c.Node), plain}, cell{when, style},
		cell{fmt.Sprintf("earliest of %d", len(st.Certificates)), plain}, cell{unread, yellow}, cell{checked, dim})
}

// renderDrift shows what the last drift check found: each differing field (status.drift
// keeps at most bpav1.MaxDriftFields), red while Drifted is True; or why it could not look.
func renderDrift(parent *node, st *bpav1.ProvisioningStatus, now time.Time) {
	c := meta.FindStatusCondition(st.Conditions, bpav1.ConditionDrifted)
	if c == nil || st.Drift == nil {
		return
	}
	checked := ""
	if st.Drift.CheckedAt != nil {
		checked = "checked " + since(*st.Drift.CheckedAt, now)
	}
	style, what := green, "none"
	switch c.Status {
	case metav1.ConditionUnknown:
		style, what = yellow, "not checked: "+c.Message
	case metav1.ConditionTrue:
		style, what = red, fmt.Sprintf("%d fields differ from what BPA applied", len(st.Drift.Fields))
	}
	n := parent.add(cell{"Drift", bold}).add(cell{clean(what), style}, cell{checked, dim}, cell{clean("Workflow " + st.Drift.Workflow), dim})
	if c.Status == metav1.ConditionTrue {
		for _, f := range st.Drift.Fields {
			n.add(cell{clean(f), plain})
		}
	}
	if rec := st.Drift.Reconcile; rec != nil {
		style, what := yellow, fmt.Sprintf("put back by rerun %s (%d fields)", rec.Request, len(rec.Fields))
		if rec.NotPutBack {
			style, what = red, fmt.Sprintf("rerun %s did not put back %d fields: look at the nodes", rec.Request, len(rec.Fields))
		}
		n.add(cell{clean(what), style}, cell{"asked " + since(rec.RequestedAt, now), dim})
	}
}

// renderRemediation shows what graded remediation does (the Remediating condition) and
// each worker's record: its episode, the last rung and its Workflow.
func renderRemediation(parent *node, st *bpav1.ProvisioningStatus, now time.Time) {
	c := meta.FindStatusCondition(st.Conditions, bpav1.ConditionRemediating)
	if c == nil {
		return
	}
	style := yellow
	switch c.Reason {
	case bpav1.ReasonWorkersHealthy:
		style = green
	case bpav1.ReasonRemediationHeld, bpav1.ReasonRemediationExhausted, bpav1.ReasonNodesUnread, bpav1.ReasonRemediationNoSpare:
		style = red
	}
	n := parent.add(cell{"Remediation", bold}).add(cell{c.Reason, style}, cell{clean(c.Message), plain})
	if st.Remediation == nil {
		return
	}
	for _, r := range st.Remediation.Nodes {
		episode, rung, state := "", "", cell{"", plain}
		if r.Since != nil {
			episode = "unhealthy since " + since(*r.Since, now)
		}
		if r.Rung != "" {
			rung = fmt.Sprintf("%s (attempt %d) Workflow %s", r.Rung, r.Attempts, r.Workflow)
		}
		if r.Exhausted {
			state = cell{"exhausted", red}
		}
		n.add(cell{clean(r.Node), plain}, cell{episode, dim}, cell{clean(rung), plain}, state)
	}
}

func renderPublished(parent *node, refs []Ref) {
	if len(refs) == 0 {
		return
	}
	n := parent.add(cell{"Published", bold})
	for _, r := range refs {
		state, note := cell{"exists", green}, ""
		switch {
		case r.Err != nil:
			state = cell{"cannot read: " + clean(r.Err.Error()), red}
		case r.Object == nil:
			state = cell{"missing", yellow}
		case r.Object.Annotations[kubeconfig.WorkflowAnnotation] != "":
			note = "by Workflow " + clean(r.Object.Annotations[kubeconfig.WorkflowAnnotation])
		}
		n.add(cell{r.Kind, plain}, cell{clean(r.Name), plain}, state, cell{note, dim})
	}
}

func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}

// took is how long something ran, or has been running.
func took(start, end *metav1.Time, now time.Time) string {
	switch {
	case start == nil || start.IsZero():
		return ""
	case end == nil || end.IsZero():
		return "running " + duration.HumanDuration(now.Sub(start.Time))
	}
	return duration.HumanDuration(end.Sub(start.Time))
}
