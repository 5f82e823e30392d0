package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// admissionRig starts a real kube-apiserver with BPA's CRDs and admission policies, waits
// until the policies are in force, and returns a function that creates (then deletes) an
// object, returning the apiserver's refusal.
func admissionRig(t *testing.T) (context.Context, func(u *unstructured.Unstructured) error) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallAdmissionPolicy(ctx, r.RESTConfig))
	dyn, err := dynamic.NewForConfig(r.RESTConfig)
	require.NoError(t, err)
	create := func(u *unstructured.Unstructured) error {
		res := dyn.Resource(gvr(u.GetKind())).Namespace(r.Namespace)
		if u.GetKind() == "BPAPolicy" { // cluster-scoped
			res = dyn.Resource(gvr(u.GetKind()))
		}
		if _, err := res.Create(ctx, u.DeepCopy(), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return err
		}
		return res.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
	}
	// Policies (and the site policy's params) load asynchronously: wait until each refuses
	// what it should. A probe admitted too early is deleted again, so it cannot pass later.
	jinja := provisioning(1, 0, map[string]any{"x": "{{ y }}"})
	image := provisioning(1, 0, nil)
	_ = unstructured.SetNestedField(image.Object, "registry.invalid/kubespray", "spec", "kubespray", "image")
	unlabelled := provisioning(1, 0, nil)
	unlabelled.SetLabels(nil)
	for _, probe := range []*unstructured.Unstructured{jinja, image, unlabelled} {
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return create(probe) != nil, nil
		}), "the admission policies never took effect")
	}
	return ctx, create
}

// provisioning is a Provisioning with masters and workers, every one MAC-pinned with the
// longest node name, the dash spelling of the MAC in upper case (the costliest to normalise),
// and resources; extraVars if given.
func provisioning(masters, workers int, extraVars map[string]any) *unstructured.Unstructured {
	node := func(role string, i int) map[string]any {
		name := fmt.Sprintf("%s-%d-", role, i)
		name += strings.Repeat("x", 63-len(name))
		mac := fmt.Sprintf("AA-BB-CC-%02X-%02X-%02X", role[0], i/256, i%256)
		return map[string]any{name: map[string]any{"mac-address": mac, "cpu": int64(64), "memory": "512Gi", "sriov": true, "qat": true}}
	}
	spec := map[string]any{}
	var ms, ws []any
	for i := range masters {
		ms = append(ms, node("master", i))
	}
	for i := range workers {
		ws = append(ws, node("worker", i))
	}
	spec["masters"] = ms
	if workers > 0 {
		spec["workers"] = ws
	}
	if extraVars != nil {
		spec["kubespray"] = map[string]any{"extraVars": extraVars}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bpa.akraino.org/v1alpha1", "kind": "Provisioning",
		"metadata": map[string]any{"name": "limits", "labels": map[string]any{"cluster": "c1"}},
		"spec":     spec,
	}}
}

// TestWorkerLimitIsTrue: the bound docs/api.md states (15 masters, 300 workers) holds in the worst
// case, every node MAC-pinned, on the real apiserver and in lint; one more worker is refused
// by the schema's own limit, naming it. (Before, the pairwise MAC rules ran out of the
// apiserver's per-rule CEL cost from about 165 MAC-pinned workers.)
func TestWorkerLimitIsTrue(t *testing.T) {
	ctx, create := admissionRig(t)

	full := provisioning(15, 300, nil)
	_, errs := validation.ValidateUnstructured(ctx, full)
	assert.Empty(t, errs, "lint")
	start := time.Now()
	require.NoError(t, create(full), "the apiserver refuses 15 masters and 300 workers, all MAC-pinned")
	t.Logf("15 masters and 300 MAC-pinned workers: admitted in %v", time.Since(start).Round(time.Millisecond))

	over := provisioning(15, 301, nil)
	_, errs = validation.ValidateUnstructured(ctx, over)
	require.NotEmpty(t, errs, "lint")
	assert.Equal(t, "spec.workers: Too many: 301: must have at most 300 items", errs[0].Error())
	err := create(over)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.workers: Too many: 301: must have at most 300 items")

	// A 1,000-node cluster (MaxNodes): the 315 named nodes and twenty worker pools of the
	// longest names, each with a selector and every requirement, within the apiserver's CEL
	// cost budget.
	thousand := provisioning(15, 300, nil)
	var pools []any
	for i := range 20 {
		name := fmt.Sprintf("pool-%02d-", i)
		replicas := int64(35)
		if i == 19 {
			replicas = bpav1.MaxNodes - 315 - 19*35
		}
		pools = append(pools, map[string]any{
			"name": name + strings.Repeat("p", 40-len(name)), "replicas": replicas, "cpu": int64(64), "memory": "512Gi", "sriov": true, "qat": true,
			"hostSelector": map[string]any{"matchLabels": map[string]any{"rack": fmt.Sprintf("r%d", i)},
				"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a", "b"}}}},
		})
	}
	thousand.Object["spec"].(map[string]any)["workerPools"] = pools
	_, errs = validation.ValidateUnstructured(ctx, thousand)
	assert.Empty(t, errs, "lint")
	start = time.Now()
	require.NoError(t, create(thousand), "the apiserver refuses 15 masters, 300 named workers and 700 pool members")
	t.Logf("1,000 nodes (315 named, 20 pools): admitted in %v", time.Since(start).Round(time.Millisecond))
	// One node more, in any pool, is refused by both, naming the cap.
	more := thousand.DeepCopy()
	more.Object["metadata"].(map[string]any)["name"] = "one-more"
	more.Object["spec"].(map[string]any)["workerPools"].([]any)[0].(map[string]any)["replicas"] = int64(36)
	_, errs = validation.ValidateUnstructured(ctx, more)
	require.NotEmpty(t, errs, "lint")
	assert.Contains(t, errs[0].Error(), "at most 1000 nodes per Provisioning")
	err = create(more)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 1000 nodes per Provisioning")
	// A named node in a pool's namespace of names is refused, at full size, naming the field.
	clash := thousand.DeepCopy()
	clash.Object["spec"].(map[string]any)["workerPools"].([]any)[19].(map[string]any)["name"] = "worker-299"
	_, errs = validation.ValidateUnstructured(ctx, clash)
	require.NotEmpty(t, errs, "lint")
	assert.Contains(t, errs.ToAggregate().Error(), "spec.workerPools: Invalid value")
	err = create(clash)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must not start with a worker pool's name")

	// The uniqueness rules still bite at full size.
	dup := provisioning(15, 300, nil)
	workers := dup.Object["spec"].(map[string]any)["workers"].([]any)
	for _, v := range workers[299].(map[string]any) {
		v.(map[string]any)["mac-address"] = "aa:bb:cc:77:00:00" // worker 0's MAC ('w' is 0x77), spelled otherwise
	}
	_, errs = validation.ValidateUnstructured(ctx, dup)
	require.NotEmpty(t, errs, "lint")
	assert.Contains(t, errs.ToAggregate().Error(), "mac-address must be unique: two nodes in this list name the same MAC")
	err = create(dup)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mac-address must be unique: two nodes in this list name the same MAC")
}

// TestExtraVarsAgreeAtTheLimits: lint and the real apiserver accept and refuse the same
// extraVars, at and just past each bound of config/admission/extravars.yaml.
func TestExtraVarsAgreeAtTheLimits(t *testing.T) {
	ctx, create := admissionRig(t)
	nest := func(n int) any {
		var v any = "leaf"
		for i := range n {
			if i%2 == 0 {
				v = []any{v}
			} else {
				v = map[string]any{"k": v}
			}
		}
		return v
	}
	items := func(n int) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = int64(i)
		}
		return l
	}
	longKey := strings.Repeat("k", 253)
	// A large legal extraVars, 1 MB (about what etcd stores in one object): 100 variables of
	// 100 strings of 100 characters. The rules' cost must stay within the apiserver's limit.
	big := map[string]any{}
	for i := range 100 {
		l := make([]any, 100)
		for j := range l {
			l[j] = strings.Repeat("s", 100)
		}
		big[fmt.Sprintf("v%d", i)] = l
	}
	for name, tc := range map[string]struct {
		vars map[string]any
		ok   bool
	}{
		"typed":                {map[string]any{"helm_enabled": true, "n": int64(3), "f": 0.5, "s": "x", "l": []any{}, "m": map[string]any{}}, true},
		"depth 6":              {map[string]any{"x": nest(6)}, true},
		"depth 7":              {map[string]any{"x": nest(7)}, false},
		"100 items":            {map[string]any{"x": items(100)}, true},
		"101 items":            {map[string]any{"x": items(101)}, false},
		"4096 characters":      {map[string]any{"x": strings.Repeat("é", 4096)}, true},
		"4097 characters":      {map[string]any{"x": strings.Repeat("é", 4097)}, false},
		"key of 253":           {map[string]any{"x": map[string]any{longKey: "v"}}, true},
		"key of 254":           {map[string]any{"x": map[string]any{longKey + "k": "v"}}, false},
		"label and port keys":  {map[string]any{"x": map[string]any{"node-role.kubernetes.io/ingress": "", "registry:5000": "v", "1": "v"}}, true},
		"key with a space":     {map[string]any{"x": map[string]any{"a b": "v"}}, false},
		"key with a brace":     {map[string]any{"x": map[string]any{"a{": "v"}}, false},
		"nested null":          {map[string]any{"x": []any{nil}}, false},
		"null, dropped":        {map[string]any{"x": nil, "-bad-key-": nil}, true},
		"braces apart":         {map[string]any{"x": "{ {x} }"}, true},
		"header in upper case": {map[string]any{"x": "#JINJA2:x"}, true},
		"header deep":          {map[string]any{"x": nest(5), "y": []any{map[string]any{"k": []any{"#jinja2:a:'b'\n"}}}}, false},
		"jinja comment":        {map[string]any{"x": "{# #}"}, false},
		"python interpreter":   {map[string]any{"ansible_python_interpreter": "/usr/bin/python3"}, true},
		"ansible user":         {map[string]any{"ANSIBLE_user": "x"}, false},
		"variable name of 128": {map[string]any{strings.Repeat("v", 128): "x"}, true},
		"variable name of 129": {map[string]any{strings.Repeat("v", 129): "x"}, false},
		"100 variables, 1 MB":  {big, true},
	} {
		t.Run(name, func(t *testing.T) {
			u := provisioning(1, 0, tc.vars)
			_, errs := validation.ValidateUnstructured(ctx, u)
			err := create(u)
			if tc.ok {
				assert.Empty(t, errs, "lint")
				assert.NoError(t, err, "apiserver")
			} else {
				assert.NotEmpty(t, errs, "lint")
				require.Error(t, err, "apiserver")
				assert.Contains(t, err.Error(), "spec.kubespray.extraVars")
			}
		})
	}
}
