package translator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
)

// randomProvisioning draws a spec and an applied state from small universes of nodes, roles,
// releases and settings, so that every phase of the planner and every refusal is reached.
func randomProvisioning(r *rand.Rand) *bpav1.Provisioning {
	pick := func(n int) bool { return r.IntN(n) == 0 }
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"cluster": "c"}, Generation: 3}}
	etcd := func() *bpav1.NodeRequirements {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return &bpav1.NodeRequirements{Etcd: ptr.To(true)}
		}
		return &bpav1.NodeRequirements{Etcd: ptr.To(false)}
	}
	for _, m := range []string{"m1", "m2", "m3", "m4", "m5"} {
		if m == "m1" && !pick(8) || pick(2) {
			p.Spec.Masters = append(p.Spec.Masters, bpav1.NodeEntry{m: etcd()})
		}
	}
	for _, w := range []string{"w1", "w2", "w3", "m2"} {
		if pick(2) {
			p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{w: nil})
		}
	}
	if pick(3) {
		p.Spec.WorkerPools = []bpav1.WorkerPool{{Name: "edge", Replicas: int32(r.IntN(4))}}
		if pick(2) {
			p.Annotations = map[string]string{bpav1.DeleteNodesAnnotation: "edge-2"}
		}
	}
	kubespray := []string{"", "v2.27.1", "v2.28.0", "v2.28.1"}[r.IntN(4)]
	if kubespray != "" || pick(4) {
		p.Spec.Kubespray = &bpav1.KubesprayConfig{Version: kubespray}
		if pick(4) {
			p.Spec.Kubespray.ExtraVars = map[string]apiextensionsv1.JSON{"kube_version": {Raw: []byte([]string{`"1.31.4"`, `"1.32.5"`, `7`}[r.IntN(3)])}}
		}
		if pick(4) {
			p.Spec.Kubespray.ExtraVars = map[string]apiextensionsv1.JSON{"kube_network_plugin": {Raw: []byte(`"flannel"`)}}
		}
	}
	if pick(2) {
		p.Spec.Kubernetes = &bpav1.KubernetesConfig{Version: []string{"1.30.4", "1.31.4", "1.32.5", "v1.31.9", "2.0"}[r.IntN(5)]}
	}
	if pick(3) {
		p.Spec.PodSubnet = "10.244.64.0/18"
	}
	if pick(3) {
		p.Spec.NodeRemoval = &bpav1.NodeRemoval{AllowUngraceful: pick(2), DrainRetries: ptr.To(int32(r.IntN(3)))}
	}
	if pick(3) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[bpav1.RerunAnnotation] = "1"
		if pick(2) {
			p.Status.LastHandledRerun = "1"
		}
	}
	return p
}

// randomChange is a cluster built from one random spec (status.applied as the controller
// records it), now asked for another: usually the same spec with a few nodes, a role, a
// release or a setting changed, sometimes one drawn anew; now and then a first creation, or
// an applied state that is stale or odd (other MACs, releases, nodes being removed).
func randomChange(r *rand.Rand) *bpav1.Provisioning {
	pick := func(n int) bool { return r.IntN(n) == 0 }
	prev := randomProvisioning(r)
	cur := randomProvisioning(r)
	if pick(8) {
		return cur // a first creation
	}
	if !pick(4) {
		cur = prev.DeepCopy()
		mutate(r, cur)
	}
	built, err := hostmatch.Desired(prev)
	before, perr := PlanChange(prev)
	if err != nil || perr != nil {
		return cur
	}
	a := &bpav1.AppliedState{KubesprayVersion: before.KubesprayVersion, KubernetesVersion: before.KubernetesVersion, Settings: before.Settings, Immutable: before.Immutable}
	for i, n := range built {
		h := bpav1.HostStatus{Name: n.Name, Etcd: n.Etcd, Removing: pick(12)}
		if n.Master {
			h.Roles = append(h.Roles, "master")
		}
		if n.Worker {
			h.Roles = append(h.Roles, "worker")
		}
		if pick(4) {
			h.MAC = fmt.Sprintf("52:54:00:00:00:%02x", i+r.IntN(2))
		}
		a.Hosts = append(a.Hosts, h)
	}
	if pick(6) {
		a.KubesprayVersion = []string{"v2.27.0", "v2.27.1", "v2.28.0", "v2.28.1", "v2.26.0", ""}[r.IntN(6)]
	}
	if pick(6) {
		a.KubernetesVersion = []string{"1.30.4", "1.31.4", "1.32.5", "1.29.1", ""}[r.IntN(5)]
	}
	if pick(8) {
		a.Immutable = map[string]string{"kube_pods_subnet": "10.233.64.0/18"}
	}
	if pick(8) {
		a.Settings = "old"
	}
	cur.Status.Applied = a
	return cur
}

// mutate changes one to three things of a spec.
func mutate(r *rand.Rand, p *bpav1.Provisioning) {
	for range 1 + r.IntN(3) {
		switch r.IntN(8) {
		case 0: // a master joins, with or without etcd
			name := []string{"m6", "m7", "m0"}[r.IntN(3)]
			p.Spec.Masters = append(p.Spec.Masters, bpav1.NodeEntry{name: &bpav1.NodeRequirements{Etcd: ptr.To(r.IntN(2) == 0)}})
		case 1: // a master leaves
			if len(p.Spec.Masters) > 1 {
				i := r.IntN(len(p.Spec.Masters))
				p.Spec.Masters = append(p.Spec.Masters[:i:i], p.Spec.Masters[i+1:]...)
			}
		case 2: // a worker joins
			p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{[]string{"w4", "w5", "m1"}[r.IntN(3)]: nil})
		case 3: // a worker leaves
			if len(p.Spec.Workers) > 0 {
				i := r.IntN(len(p.Spec.Workers))
				p.Spec.Workers = append(p.Spec.Workers[:i:i], p.Spec.Workers[i+1:]...)
			}
		case 4: // a pool scales
			p.Spec.WorkerPools = []bpav1.WorkerPool{{Name: "edge", Replicas: int32(r.IntN(4))}}
		case 5: // a release changes
			if p.Spec.Kubespray == nil {
				p.Spec.Kubespray = &bpav1.KubesprayConfig{}
			}
			p.Spec.Kubespray.Version = []string{"v2.27.1", "v2.28.0", "v2.28.1"}[r.IntN(3)]
		case 6:
			p.Spec.Kubernetes = &bpav1.KubernetesConfig{Version: []string{"1.30.4", "1.31.4", "1.31.9", "1.32.5"}[r.IntN(4)]}
		case 7: // a setting changes
			p.Spec.KUDPlugins = append(p.Spec.KUDPlugins, "multus")
		}
	}
}

// The planner plans every input as PlanChange did before it was split into phases: the same
// plan, or the same error. (To be deleted with oldPlanChange once the planner has settled.)
func TestPlannerAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 3))
	steps, refusals := map[string]int{}, 0
	for i := range 20000 {
		p := randomChange(r)
		want, wantErr := oldPlanChange(p.DeepCopy())
		got, err := PlanChange(p.DeepCopy())
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error(), "input %d", i)
			refusals++
			continue
		}
		require.NoError(t, err, "input %d", i)
		require.Equal(t, want, got, "input %d", i)
		for _, s := range got.Steps {
			steps[StepBase(s.Name)]++
		}
	}
	// The inputs reach every kind of step, and refusals.
	for _, s := range PlanSteps {
		require.NotZero(t, steps[s], "no input planned %s: %v", s, steps)
	}
	require.NotZero(t, refusals)
	t.Logf("steps planned: %v; errors: %d", steps, refusals)
}
