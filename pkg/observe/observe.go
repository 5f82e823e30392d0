// Package observe reads a Workflow into an Observation: a run's phase, progress, steps and
// hosts in BPA's terms. The controller mirrors it into a CR's status and `bpa describe`
// shows it, so both say the same of a run without describe importing the controller.
package observe

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// stepAliases maps the names of ad-hoc template tasks onto the controller's step names, so
// a CR shows the same steps whichever way the run was started.
var stepAliases = map[string]string{"resolve-leases-from-file": "resolve-leases"}

// StepName is BPA's name for a DAG task's display name.
func StepName(display string) string {
	if a, ok := stepAliases[display]; ok {
		return a
	}
	return display
}

// hostOutputSteps are the steps whose `hosts` output describes the chosen hosts, the most
// complete (with IPs) first.
var hostOutputSteps = []string{"resolve-leases", "discover-hosts"}

// Observation is what a Workflow says about a run, in BPA's terms.
type Observation struct {
	Phase        bpav1.RunPhase
	Progress     string
	Message      string
	StartedAt    *metav1.Time
	FinishedAt   *metav1.Time
	Steps        []bpav1.StepStatus
	Hosts        []bpav1.HostStatus
	HostSoftware []bpav1.HostSoftwareStatus
	// Backups are the etcd snapshots the run's backup-etcd steps stored (their backup
	// output), oldest first.
	Backups []bpav1.BackupStatus
	// Certificates is what a verify that succeeded read of the cluster's certificates; nil
	// when it did not run, failed, or wrote nothing.
	Certificates *stepio.Certificates
	// Restore is restore-etcd's record, once it succeeded.
	Restore *stepio.Restore
	// Renewal is renew-certificates' record, once it succeeded.
	Renewal *stepio.Renewal
	// Drift is what check-drift found, once it succeeded.
	Drift *stepio.Drift
}

// Workflow observes a Workflow whose DAG runs steps. It decompresses status.compressedNodes with Argo's packer; when
// the nodes are offloaded to Argo's database it reports the phase and says where the
// detail is instead of failing.
func Workflow(wf *wfv1.Workflow, steps []string) Observation {
	o := Observation{
		Phase:   runPhase(wf.Status.Phase),
		Message: wf.Status.Message,
	}
	if !wf.Status.StartedAt.IsZero() {
		o.StartedAt = wf.Status.StartedAt.DeepCopy()
	}
	if !wf.Status.FinishedAt.IsZero() {
		o.FinishedAt = wf.Status.FinishedAt.DeepCopy()
	}
	nodes := wf.Status.Nodes
	if wf.Status.CompressedNodes != "" {
		c := wf.DeepCopy()
		if err := packer.DecompressWorkflow(c); err != nil {
			o.Message = joinMessages(o.Message, fmt.Sprintf("cannot decompress the Workflow's nodes: %v", err))
			return o
		}
		nodes = c.Status.Nodes
	}
	if wf.Status.IsOffloadNodeStatus() && len(nodes) == 0 {
		o.Progress = string(wf.Status.Progress)
		o.Message = joinMessages(o.Message, "step detail is offloaded to Argo's database; see `argo get "+wf.Name+"` or the Argo UI")
		return o
	}

	byStep := taskNodes(nodes)
	for _, s := range steps {
		st := bpav1.StepStatus{Name: s, Phase: "Pending"}
		if n, ok := byStep[s]; ok {
			st.Phase = string(n.Phase)
			st.Message = failureMessage(nodes, n)
			if !n.StartedAt.IsZero() {
				st.StartedAt = n.StartedAt.DeepCopy()
			}
			if !n.FinishedAt.IsZero() {
				st.FinishedAt = n.FinishedAt.DeepCopy()
			}
		}
		o.Steps = append(o.Steps, st)
	}
	// Progress counts BPA's steps, not Argo's pods: retries and the ad-hoc lookup would
	// otherwise make a finished run read 6/7.
	done := 0
	for _, st := range o.Steps {
		if st.Phase == string(wfv1.NodeSucceeded) {
			done++
		}
	}
	o.Progress = fmt.Sprintf("%d/%d", done, len(o.Steps))
	for _, s := range hostOutputSteps {
		if n, ok := byStep[s]; ok && n.Phase == wfv1.NodeSucceeded {
			if hosts, ok := hostsOutput(n); ok {
				o.Hosts = hosts
				break
			}
		}
	}
	if n, ok := byStep["verify"]; ok && n.Phase == wfv1.NodeSucceeded {
		o.Certificates = certificatesOutput(n)
	}
	if n, ok := byStep[translator.StepRestoreEtcd]; ok && n.Phase == wfv1.NodeSucceeded {
		o.Restore = &stepio.Restore{}
		if !jsonOutput(n, RestoreOutput, o.Restore) || o.Restore.Snapshot == "" {
			o.Restore = nil
		}
	}
	if n, ok := byStep[translator.StepRenewCertificates]; ok && n.Phase == wfv1.NodeSucceeded {
		o.Renewal = &stepio.Renewal{}
		if !jsonOutput(n, RenewalOutput, o.Renewal) || len(o.Renewal.Masters) == 0 {
			o.Renewal = nil
		}
	}
	if n, ok := byStep[translator.StepCheckDrift]; ok && n.Phase == wfv1.NodeSucceeded {
		o.Drift = &stepio.Drift{}
		if !jsonOutput(n, DriftOutput, o.Drift) || o.Drift.CheckedAt.IsZero() {
			o.Drift = nil
		}
	}
	if n, ok := byStep["install-software"]; ok {
		o.HostSoftware = hostSoftware(nodes, n)
	}
	for _, s := range steps {
		if n, ok := byStep[s]; ok && n.Phase == wfv1.NodeSucceeded {
			if b, ok := backupOutput(n); ok {
				o.Backups = append(o.Backups, b)
			}
		}
	}
	if o.Phase == bpav1.PhaseFailed || o.Phase == bpav1.PhaseError {
		// The last failed step says most: for Software, verify-software's "2 of 5 hosts
		// failed: ..." comes after the fan-out node, whose own message Argo leaves empty.
		for i := len(o.Steps) - 1; i >= 0; i-- {
			if st := o.Steps[i]; st.Phase == string(wfv1.NodeFailed) || st.Phase == string(wfv1.NodeError) {
				o.Message = fmt.Sprintf("step %s failed: %s", st.Name, st.Message)
				break
			}
		}
	}
	return o
}

func runPhase(p wfv1.WorkflowPhase) bpav1.RunPhase {
	switch p {
	case wfv1.WorkflowRunning:
		return bpav1.PhaseRunning
	case wfv1.WorkflowSucceeded:
		return bpav1.PhaseSucceeded
	case wfv1.WorkflowFailed:
		return bpav1.PhaseFailed
	case wfv1.WorkflowError:
		return bpav1.PhaseError
	default:
		return bpav1.PhasePending
	}
}

// taskNodes indexes the DAG task nodes by step name. A task is the node whose display name
// is the task's name (a Retry or TaskGroup node wrapping attempts, or the Pod itself);
// skipped tasks (the unused lease variant of an ad-hoc run) are left out.
func taskNodes(nodes wfv1.Nodes) map[string]wfv1.NodeStatus {
	out := map[string]wfv1.NodeStatus{}
	for _, n := range nodes {
		if n.Phase == wfv1.NodeSkipped || n.Phase == wfv1.NodeOmitted {
			continue
		}
		switch n.Type {
		case wfv1.NodeTypePod, wfv1.NodeTypeRetry, wfv1.NodeTypeTaskGroup, wfv1.NodeTypeSuspend:
		default:
			continue
		}
		name := StepName(n.DisplayName)
		if prev, ok := out[name]; ok && !preferNode(n, prev) {
			continue
		}
		out[name] = n
	}
	return out
}

// preferNode picks the wrapper (Retry/TaskGroup) over its pods, then the later attempt.
func preferNode(n, prev wfv1.NodeStatus) bool {
	if (n.Type == wfv1.NodeTypePod) != (prev.Type == wfv1.NodeTypePod) {
		return n.Type != wfv1.NodeTypePod
	}
	return prev.StartedAt.Before(&n.StartedAt)
}

// failureMessage finds the most specific message under a failed node: a Retry node only
// says "No more retries left", while its last attempt says what actually failed.
func failureMessage(nodes wfv1.Nodes, n wfv1.NodeStatus) string {
	if n.Phase != wfv1.NodeFailed && n.Phase != wfv1.NodeError {
		return n.Message
	}
	var last *wfv1.NodeStatus
	for _, id := range n.Children {
		c, ok := nodes[id]
		if !ok || (c.Phase != wfv1.NodeFailed && c.Phase != wfv1.NodeError) {
			continue
		}
		if last == nil || last.StartedAt.Before(&c.StartedAt) {
			cc := c
			last = &cc
		}
	}
	if last == nil || n.Type == wfv1.NodeTypeTaskGroup {
		return n.Message
	}
	msg := failureMessage(nodes, *last)
	if n.Type == wfv1.NodeTypeRetry && len(n.Children) > 1 {
		msg = fmt.Sprintf("%s (after %d attempts)", msg, len(n.Children))
	}
	return msg
}

// backupOutput is a backup-etcd step's record of the snapshot it stored.
func backupOutput(n wfv1.NodeStatus) (bpav1.BackupStatus, bool) {
	var b bpav1.BackupStatus
	if n.Outputs == nil {
		return b, false
	}
	for _, p := range n.Outputs.Parameters {
		if p.Name == BackupOutput && p.Value != nil {
			return b, json.Unmarshal([]byte(p.Value.String()), &b) == nil && b.Name != ""
		}
	}
	return b, false
}

// RestoreOutput is the restore-etcd template's output parameter: its record.
const RestoreOutput = "restore"

// RenewalOutput is the renew-certificates template's output parameter: its record.
const RenewalOutput = "renewal"

// DriftOutput is the check-drift template's output parameter: what it found.
const DriftOutput = "drift"

// jsonOutput decodes the node's output parameter name into v, and says whether it could.
func jsonOutput(n wfv1.NodeStatus, name string, v any) bool {
	if n.Outputs == nil {
		return false
	}
	for _, p := range n.Outputs.Parameters {
		if p.Name == name && p.Value != nil {
			return json.Unmarshal([]byte(p.Value.String()), v) == nil
		}
	}
	return false
}

// BackupOutput is the backup-etcd template's output parameter: the snapshot's record.
const BackupOutput = "backup"

func hostsOutput(n wfv1.NodeStatus) ([]bpav1.HostStatus, bool) {
	if n.Outputs == nil {
		return nil, false
	}
	for _, p := range n.Outputs.Parameters {
		if p.Name != "hosts" || p.Value == nil {
			continue
		}
		var hosts []bpav1.HostStatus
		if err := json.Unmarshal([]byte(p.Value.String()), &hosts); err != nil {
			return nil, false
		}
		return hosts, true
	}
	return nil, false
}

// certificatesOutput reads verify's certificates output; nil when it has none (a verify
// older than the output, or one that found nothing to read).
func certificatesOutput(n wfv1.NodeStatus) *stepio.Certificates {
	if n.Outputs == nil {
		return nil
	}
	for _, p := range n.Outputs.Parameters {
		if p.Name != "certificates" || p.Value == nil {
			continue
		}
		var c stepio.Certificates
		if err := json.Unmarshal([]byte(p.Value.String()), &c); err != nil || c.CheckedAt.IsZero() {
			return nil
		}
		return &c
	}
	return nil
}

// hostSoftware collects the per-host results of the install-software fan-out: the result a
// host's step wrote, or, when it wrote none (unreachable host), the node's own message.
func hostSoftware(nodes wfv1.Nodes, group wfv1.NodeStatus) []bpav1.HostSoftwareStatus {
	var out []bpav1.HostSoftwareStatus
	for _, id := range group.Children {
		n, ok := nodes[id]
		if !ok {
			continue
		}
		var h bpav1.HostSoftwareStatus
		if n.Outputs != nil {
			for _, p := range n.Outputs.Parameters {
				if p.Name == "result" && p.Value != nil {
					_ = json.Unmarshal([]byte(p.Value.String()), &h)
				}
			}
		}
		if h.Name == "" && n.Inputs != nil {
			for _, p := range n.Inputs.Parameters {
				if p.Name == "host" && p.Value != nil {
					var in struct {
						Name string `json:"name"`
						IP   string `json:"ip"`
					}
					_ = json.Unmarshal([]byte(p.Value.String()), &in)
					h.Name, h.IP = in.Name, in.IP
				}
			}
		}
		h.Phase = string(n.Phase)
		if n.Phase == wfv1.NodeFailed || n.Phase == wfv1.NodeError {
			h.Message = failureMessage(nodes, n)
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func joinMessages(a, b string) string {
	if a == "" {
		return b
	}
	return strings.TrimSuffix(a, ".") + "; " + b
}
