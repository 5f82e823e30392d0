package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestOnlyMainIsSubmittable: a Workflow from bpa-provision or bpa-software runs main, the
// one entrypoint that looks the CR up and checks it against the site policy. The attack is
// `argo submit --from workflowtemplate/bpa-provision --entrypoint run-kubespray -p
// kubespray-image=... -p ssh-secret=...` (or resolve-leases-from-file with a hostPath and
// podSpecPatch): the Workflow argo submit creates, refused by the real apiserver with Argo's
// CRDs, as is one that brings a podSpecPatch or service account of its own. What argo submit
// makes for main, and Workflows that reference other templates, are admitted.
func TestOnlyMainIsSubmittable(t *testing.T) {
	r := rig.ForTest(t, rig.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallAdmissionPolicy(ctx, r.RESTConfig))
	dyn, err := dynamic.NewForConfig(r.RESTConfig)
	require.NoError(t, err)
	workflows := dyn.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}).Namespace(r.Namespace)
	n := 0
	// submit creates what `argo submit --from workflowtemplate/TEMPLATE` creates (a
	// workflowTemplateRef, the -p arguments, --entrypoint), plus extra spec fields.
	submit := func(template, entrypoint string, params map[string]string, extra map[string]any) error {
		n++
		spec := map[string]any{"workflowTemplateRef": map[string]any{"name": template}}
		var ps []any
		for k, v := range params {
			ps = append(ps, map[string]any{"name": k, "value": v})
		}
		spec["arguments"] = map[string]any{"parameters": ps}
		if entrypoint != "" {
			spec["entrypoint"] = entrypoint
		}
		for k, v := range extra {
			spec[k] = v
		}
		wf := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
			"metadata": map[string]any{"name": fmt.Sprintf("adhoc-%d", n)}, "spec": spec}}
		_, err := workflows.Create(ctx, wf, metav1.CreateOptions{})
		return err
	}
	attack := map[string]string{"provisioning": "p1", "kubespray-image": "registry.evil/kubespray", "ssh-secret": "someone-elses",
		"inventory": "[all]\n", "extra-vars": "{}", "ssh-user": "root", "ssh-port": "22", "insecure-ignore-host-key": "true", "artifacts-ca": ""}
	// The policy loads asynchronously: wait until it refuses.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return submit("bpa-provision", "run-kubespray", attack, nil) != nil, nil
	}), "the entrypoint policy never took effect")

	for _, tc := range []struct{ template, entrypoint string }{
		{"bpa-provision", "run-kubespray"},
		{"bpa-provision", "provision"},
		{"bpa-provision", "resolve-leases-from-file"},
		{"bpa-software", "install-software"},
	} {
		err := submit(tc.template, tc.entrypoint, attack, nil)
		require.Error(t, err, tc.entrypoint)
		assert.Contains(t, err.Error(), "spec.entrypoint: Forbidden: a Workflow from WorkflowTemplate "+tc.template+" runs main only")
		assert.Contains(t, err.Error(), "not "+tc.entrypoint)
	}
	for field, value := range map[string]any{
		"podSpecPatch":       `{"hostPID": true}`,
		"serviceAccountName": "bpa-step-publish-kubeconfig",
		"volumes":            []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}},
	} {
		err := submit("bpa-provision", "main", map[string]string{"provisioning": "p1"}, map[string]any{field: value})
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), "spec: Forbidden: a Workflow from WorkflowTemplate bpa-provision sets only workflowTemplateRef, arguments and entrypoint main, not "+field)
	}

	require.NoError(t, submit("bpa-provision", "", map[string]string{"provisioning": "p1"}, nil), "argo submit --from, as docs/day2.md says")
	require.NoError(t, submit("bpa-provision", "main", map[string]string{"provisioning": "p1"}, nil))
	require.NoError(t, submit("bpa-software", "main", map[string]string{"software": "s1"}, nil))
	require.NoError(t, submit("someone-elses", "anything", nil, map[string]any{"podSpecPatch": "{}"}), "not BPA's template: not BPA's rule")
}
