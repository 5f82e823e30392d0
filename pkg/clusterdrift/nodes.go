package clusterdrift

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ControlPlaneLabel is the role label kubeadm puts on a control-plane node, and the key of
// the taint it gives one that runs no workloads (kubespray's kubeadm-config templates: a
// node of kube_control_plane and not kube_node).
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// The hosts file's roles (software.RoleMaster and RoleWorker).
const (
	roleMaster = "master"
	roleWorker = "worker"
)

// Applied is what BPA applied to every node besides status.applied's hosts and release:
// kubespray's node_labels (the kubernetes/node-label role labels every node with them on
// every run) and node_taints (the kubelet's --register-with-taints), from the vars file.
type Applied struct {
	Labels map[string]string
	Taints []corev1.Taint
}

// AppliedFromVars reads node_labels and node_taints from a decoded vars file
// (inventory.ReadVars). Kubespray's node_taints are "key=value:Effect" or "key:Effect".
func AppliedFromVars(vars map[string]any) (Applied, error) {
	var a Applied
	if l, ok := vars["node_labels"]; ok {
		m, ok := l.(map[string]any)
		if !ok {
			return a, fmt.Errorf("node_labels is a %T, want a map", l)
		}
		a.Labels = map[string]string{}
		for k, v := range m {
			a.Labels[k] = fmt.Sprint(v)
		}
	}
	if t, ok := vars["node_taints"]; ok {
		list, ok := t.([]any)
		if !ok {
			return a, fmt.Errorf("node_taints is a %T, want a list", t)
		}
		for _, item := range list {
			taint, err := ParseTaint(fmt.Sprint(item))
			if err != nil {
				return a, fmt.Errorf("node_taints: %w", err)
			}
			a.Taints = append(a.Taints, taint)
		}
	}
	return a, nil
}

// ParseTaint reads kubespray's (and kubectl's) form of a taint, key[=value]:Effect.
func ParseTaint(s string) (corev1.Taint, error) {
	// The effect is after the last ':' (a value holds none).
	i := strings.LastIndex(s, ":")
	if i <= 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:Effect", s)
	}
	effect := s[i+1:]
	k, v, _ := strings.Cut(s[:i], "=")
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return corev1.Taint{Key: k, Value: v, Effect: e}, nil
	}
	return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
}

// taintString is a taint as kubectl prints it.
func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// transientTaint says whether Kubernetes itself sets and clears the taint (the node
// lifecycle controller's not-ready, unreachable, unschedulable and pressure taints, the
// cloud provider's uninitialized): no drift of BPA's.
func transientTaint(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") || strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/")
}

// Nodes compares the Nodes with status.applied and what BPA applied to every node, and
// lists each difference, one line per node and field, sorted:
//   - a host of status.applied with no Node of its name, and a Node of no host in it;
//   - a kubelet version other than status.applied.kubernetesVersion;
//   - the control-plane role label missing on a master, or present on a host applied as a
//     worker only;
//   - a label of node_labels missing or with another value (labels BPA did not apply are
//     not compared: the kubelet and others add many);
//   - a taint BPA applied missing (node_taints, and the control-plane taint on a master
//     that is no worker), or a taint BPA did not apply, but for those Kubernetes itself
//     sets and clears (transientTaint).
//
// rerun are the lines of drift that a run of the spec puts back, as kubespray v2.28.0's
// cluster.yml does on every host of the inventory:
//   - a label of node_labels: roles/kubernetes/node-label/tasks/main.yml, "Set label to
//     node" (kubectl label --overwrite=true, every run);
//   - the kubelet's release: roles/kubernetes/node/tasks/install.yml, "Install | Copy kubelet
//     binary from download dir" (kube_version's kubelet) and its handler "Node | restart
//     kubelet".
//
// No run puts back the rest: kubeadm sets the role label and the registration taints once,
// at init or join; a node gone or unknown is remediation's or a person's; kubeadm's config
// is rewritten only by an upgrade.
func Nodes(nodes []corev1.Node, applied *bpav1.AppliedState, a Applied) (drift, rerun []string) {
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	kept := map[string]bool{}
	for _, h := range bpav1.KeptHosts(applied.Hosts) {
		kept[h.Name] = true
		n := byName[h.Name]
		if n == nil {
			drift = append(drift, fmt.Sprintf("node %s: not registered, applied as %s", h.Name, roles(h)))
			continue
		}
		d, r := node(n, h, applied.KubernetesVersion, a)
		drift, rerun = append(drift, d...), append(rerun, r...)
	}
	for _, n := range nodes {
		if !kept[n.Name] {
			drift = append(drift, fmt.Sprintf("node %s: registered, not applied by BPA", n.Name))
		}
	}
	sort.Strings(drift)
	sort.Strings(rerun)
	return drift, rerun
}

func roles(h bpav1.HostStatus) string {
	if len(h.Roles) == 0 {
		return "no role"
	}
	return strings.Join(h.Roles, " and ")
}

// node compares one Node with its host; rerun are the lines a run puts back (Nodes).
func node(n *corev1.Node, h bpav1.HostStatus, kube string, a Applied) (drift, rerun []string) {
	add := func(format string, args ...any) {
		drift = append(drift, fmt.Sprintf("node %s: ", n.Name)+fmt.Sprintf(format, args...))
	}
	byRun := func(format string, args ...any) {
		add(format, args...)
		rerun = append(rerun, drift[len(drift)-1])
	}
	if want := "v" + strings.TrimPrefix(kube, "v"); kube != "" && n.Status.NodeInfo.KubeletVersion != want {
		byRun("kubelet %s, applied %s", n.Status.NodeInfo.KubeletVersion, want)
	}
	master, worker := slices.Contains(h.Roles, roleMaster), slices.Contains(h.Roles, roleWorker)
	if _, has := n.Labels[ControlPlaneLabel]; has != master {
		if master {
			add("role control-plane missing (label %s)", ControlPlaneLabel)
		} else {
			add("role control-plane (label %s), applied as %s", ControlPlaneLabel, roles(h))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
		got, has := n.Labels[k]
		switch want := a.Labels[k]; {
		case !has:
			byRun("label %s=%s missing", k, want)
		case got != want:
			byRun("label %s=%s, applied %s=%s", k, got, k, want)
		}
	}
	want := slices.Clone(a.Taints)
	if master && !worker {
		want = append(want, corev1.Taint{Key: ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule})
	}
	for _, t := range want {
		if !hasTaint(n.Spec.Taints, t) {
			add("taint %s missing", taintString(t))
		}
	}
	for _, t := range n.Spec.Taints {
		if !transientTaint(t.Key) && !hasTaint(want, t) {
			add("taint %s not applied by BPA", taintString(t))
		}
	}
	return drift, rerun
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) && o.Value == t.Value })
}

// MaxFieldLength bounds one line of status.drift.fields (the CRD's items MaxLength): a
// value quoted from the cluster (kubeadm's config, a label) can be longer, and a status the
// apiserver refuses would hide every finding.
const MaxFieldLength = 512

// Cap keeps at most max lines of fields, the last saying how many more there are, each at
// most MaxFieldLength bytes (cut on a rune boundary, ending in "...").
func Cap(fields []string, max int) []string {
	out := slices.Clone(fields)
	if len(out) > max {
		out = append(out[:max-1], fmt.Sprintf("... and %d more (the check-drift step's output lists them all)", len(fields)-max+1))
	}
	for i, f := range out {
		if len(f) > MaxFieldLength {
			cut := MaxFieldLength - len("...")
			for cut > 0 && !utf8.RuneStart(f[cut]) {
				cut--
			}
			out[i] = f[:cut] + "..."
		}
	}
	return out
}
