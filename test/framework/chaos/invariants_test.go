package chaos

import (
	"errors"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

const ns = "site"

// healthy is a settled site that breaks no invariant: cluster a (m1, w1) Succeeded, its
// Workflow, published Secret, claimed hosts and Nodes.
func healthy() *State {
	p := bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns, UID: "p-a", Generation: 2, Labels: map[string]string{bpav1.ClusterLabel: "a"}}}
	p.Status.Phase, p.Status.ObservedGeneration = bpav1.PhaseSucceeded, 2
	p.Status.Conditions = []metav1.Condition{{Type: bpav1.ConditionReady, Status: metav1.ConditionTrue}}
	p.Status.Hosts = []bpav1.HostStatus{{Name: "a-m1", Roles: []string{"master"}, BareMetalHost: "bmh-1"}, {Name: "a-w1", Roles: []string{"worker"}, BareMetalHost: "bmh-2"}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: p.Status.Hosts}
	return &State{
		Provisionings: []bpav1.Provisioning{p},
		Workflows:     []wfv1.Workflow{workflow("a-provision-2", "wf-1", "")},
		Hosts:         []metal3v1.BareMetalHost{host("bmh-1", "a", "p-a"), host("bmh-2", "a", "p-a"), host("bmh-3", "", "")},
		Secrets:       []corev1.Secret{{ObjectMeta: managed("a-kubeconfig", "p-a")}},
		ConfigMaps:    []corev1.ConfigMap{{ObjectMeta: managed("a-configmap", "p-a")}},
		Nodes:         map[string][]corev1.Node{ns + "/a": {node("a-m1", true), node("a-w1", false)}},
	}
}

func workflow(name, uid, rerun string) wfv1.Workflow {
	wf := wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid),
		Labels:          map[string]string{translator.GenerationLabel: "2"},
		Annotations:     map[string]string{},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Provisioning", Name: "a", UID: "p-a", Controller: new(true)}}}}
	if rerun != "" {
		wf.Annotations[bpav1.RerunAnnotation] = rerun
	}
	return wf
}

func host(name, cr, uid string) metal3v1.BareMetalHost {
	h := metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if cr != "" {
		h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Provisioning", Name: cr, Namespace: ns, UID: types.UID(uid)}
	}
	return h
}

func managed(name, owner string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{bpav1.ManagedByLabel: bpav1.ManagedByValue, bpav1.ClusterNameLabel: "a"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Provisioning", Name: "a", UID: types.UID(owner)}}}
}

func node(name string, master bool) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if master {
		n.Labels[ControlPlaneLabel] = ""
	}
	return n
}

// violated runs check on a healthy state that break broke, and wants one violation of
// invariant whose text says want.
func violated(t *testing.T, check func(*State) []Violation, invariant, want string, broke func(*State)) {
	t.Helper()
	s := healthy()
	require.Empty(t, check(s), "a healthy state breaks nothing")
	broke(s)
	got := check(s)
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, invariant, got[0].Invariant)
	assert.Contains(t, got[0].String(), want)
}

func TestHealthyStateBreaksNothing(t *testing.T) {
	v, accepted := Check(healthy())
	assert.Empty(t, v)
	assert.Empty(t, accepted)
}

func TestDuplicateWorkflowIsCaught(t *testing.T) {
	violated(t, NoDuplicateWorkflows, "no-duplicate-workflow", "2 Workflows for one run: a-provision-2, a-provision-2-x", func(s *State) {
		s.Workflows = append(s.Workflows, workflow("a-provision-2-x", "wf-2", ""))
	})
	// The same name made again after the first was deleted: a run done twice.
	violated(t, NoDuplicateWorkflows, "no-duplicate-workflow", "2 Workflows for one run", func(s *State) {
		s.History = append(s.History, RecordOf(new(workflow("a-provision-2", "wf-0", ""))))
	})
	// A rerun is another run.
	s := healthy()
	s.Workflows = append(s.Workflows, workflow("a-provision-2-abc", "wf-2", "1"))
	assert.Empty(t, NoDuplicateWorkflows(s))
}

func TestDoubleClaimAndLeaksAreCaught(t *testing.T) {
	violated(t, HostClaims, "host-claims", "leaked: claimed by Provisioning gone (uid p-gone), which is gone", func(s *State) {
		s.Hosts[2] = host("bmh-3", "gone", "p-gone")
	})
	violated(t, HostClaims, "host-claims", "leaked: claimed by Provisioning a, whose status does not list it", func(s *State) {
		s.Hosts[2] = host("bmh-3", "a", "p-a")
	})
	violated(t, HostClaims, "host-claims", "listed by Provisioning a but not claimed by it", func(s *State) {
		s.Hosts[1] = host("bmh-2", "", "")
	})
	s := healthy()
	b := s.Provisionings[0].DeepCopy()
	b.Name, b.UID = "b", "p-b"
	b.Status.Hosts = []bpav1.HostStatus{{Name: "b-m1", BareMetalHost: "bmh-1"}}
	s.Provisionings = append(s.Provisionings, *b)
	got := HostClaims(s)
	require.NotEmpty(t, got)
	assert.Contains(t, got[0].String(), "claimed twice: listed by Provisionings a, b")
}

func TestOrphansAreCaught(t *testing.T) {
	violated(t, NoOrphans, "no-orphans", "Secret site/a-kubeconfig: orphaned: its owners are gone: Provisioning a (uid p-old)", func(s *State) {
		s.Secrets[0].OwnerReferences[0].UID = "p-old"
	})
	violated(t, NoOrphans, "no-orphans", `ConfigMap site/x-configmap: orphaned: no owner, and no Provisioning of cluster "x"`, func(s *State) {
		s.ConfigMaps = append(s.ConfigMaps, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x-configmap", Namespace: ns,
			Labels: map[string]string{bpav1.ManagedByLabel: bpav1.ManagedByValue, bpav1.ClusterNameLabel: "x"}}})
	})
	// A user's Secret (the SSH key) is not BPA's to clean up.
	s := healthy()
	s.Secrets = append(s.Secrets, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a-ssh", Namespace: ns}})
	assert.Empty(t, NoOrphans(s))
}

func TestMismatchedNodeSetIsCaught(t *testing.T) {
	violated(t, AppliedIsNodes, "applied-is-nodes", "applied a-w1 (worker) has no Node", func(s *State) {
		s.Nodes[ns+"/a"] = s.Nodes[ns+"/a"][:1]
	})
	violated(t, AppliedIsNodes, "applied-is-nodes", "Node a-w2 (worker) is not in status.applied", func(s *State) {
		s.Nodes[ns+"/a"] = append(s.Nodes[ns+"/a"], node("a-w2", false))
	})
	violated(t, AppliedIsNodes, "applied-is-nodes", "a-w1 is a worker in status.applied, a master Node", func(s *State) {
		s.Nodes[ns+"/a"][1] = node("a-w1", true)
	})
}

func TestConvergedNeedsSucceededOrAStallANamedHostFaultExplains(t *testing.T) {
	stall := func(s *State) {
		p := &s.Provisionings[0]
		p.Status.Phase = bpav1.PhaseFailed
		p.Status.Conditions = []metav1.Condition{{Type: bpav1.ConditionStalled, Status: metav1.ConditionTrue, Reason: bpav1.ReasonRunFailed,
			Message: "step run-kubespray failed: a-w1 (10.213.2.11) UNREACHABLE"}}
	}
	conv := func(s *State) []Violation { v, _ := Converged(s); return v }
	violated(t, conv, "converged", "Stalled RunFailed (step run-kubespray failed: a-w1 (10.213.2.11) UNREACHABLE) names no host a fault took away", stall)
	// A fault of the control plane explains nothing.
	violated(t, conv, "converged", "names no host", func(s *State) {
		stall(s)
		s.Faults = []Injected{{Fault: Fault{Kind: KillEtcd}, Target: "etcd"}}
	})
	violated(t, conv, "converged", `phase "Running" for generation 2 of 3`, func(s *State) {
		s.Provisionings[0].Generation = 3
		s.Provisionings[0].Status.Phase = bpav1.PhaseRunning
	})
	s := healthy()
	stall(s)
	s.Faults = []Injected{{Fault: Fault{Kind: CutHostNetwork}, Target: "a-w1", Names: []string{"bmh-2", "10.213.2.11"}, Err: errors.New("x")}}
	v, accepted := Converged(s)
	assert.Empty(t, v)
	require.Len(t, accepted, 1)
	assert.True(t, strings.Contains(accepted[0], "host-network-cut of a-w1 (RunFailed)"), accepted[0])
}

func TestReportNamesTheReplay(t *testing.T) {
	r := &Report{Plan: NewPlan(99, short), Faults: []Injected{{Fault: Fault{Kind: KillEtcd}}}, Runs: map[string]int{"Succeeded": 3}}
	var b strings.Builder
	r.Write(&b)
	assert.Contains(t, b.String(), "1 faults injected (bpa-controller 0, workflow-controller 0, kube-apiserver 0, etcd 1")
	assert.Contains(t, b.String(), "1 survived")
	assert.NotContains(t, b.String(), "replay")
	r.Violations = []Violation{{"no-orphans", "Secret x", "orphaned"}}
	b.Reset()
	r.Write(&b)
	assert.Contains(t, b.String(), "0 survived")
	assert.Contains(t, b.String(), "replay: make soak SEED=99 FAULTS=10")
}
