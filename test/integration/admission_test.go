// Package integration runs BPA's manifests on a real kube-apiserver and etcd.
package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/bpatest"
	"github.com/akraino-edge-stack/bpa/test/reference"
	"github.com/akraino-edge-stack/bpa/test/rig"
)

var resources = map[string]string{"Provisioning": "provisionings", "Software": "softwares", "Cluster": "clusters"}

func gvr(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "bpa.akraino.org", Version: "v1alpha1", Resource: resources[kind]}
}

// TestAdmissionAgreesWithLint applies every good sample and every bad CR to a real
// kube-apiserver with BPA's CRDs and admission policies, and checks that the apiserver and
// `bpa lint` (pkg/validation) accept and refuse exactly the same objects, naming the field.
func TestAdmissionAgreesWithLint(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallAdmissionPolicy(ctx, r.RESTConfig))
	dyn, err := dynamic.NewForConfig(r.RESTConfig)
	require.NoError(t, err)
	ns := r.Namespace

	create := func(u *unstructured.Unstructured) error {
		_, err := dyn.Resource(gvr(u.GetKind())).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
		return err
	}
	// Policies load asynchronously: wait until a CR without the cluster label is refused.
	unlabelled := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bpa.akraino.org/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"generateName": "probe-"}, "spec": map[string]any{"provisioningCR": "x"},
	}}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return create(unlabelled.DeepCopy()) != nil, nil
	}), "the admission policy never took effect")

	good := sampleFiles(t)
	for _, f := range good {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		objs, err := validation.ReadDocuments(data)
		require.NoError(t, err)
		for _, u := range objs {
			if u.GroupVersionKind().Group != "bpa.akraino.org" {
				continue
			}
			t.Run("good/"+filepath.Base(f)+"/"+u.GetName(), func(t *testing.T) {
				_, errs := validation.ValidateUnstructured(ctx, u)
				require.Empty(t, errs, "lint")
				require.NoError(t, create(u.DeepCopy()), "apiserver")
				require.NoError(t, dyn.Resource(gvr(u.GetKind())).Namespace(ns).Delete(ctx, u.GetName(), metav1.DeleteOptions{}))
			})
		}
	}

	bad, err := filepath.Glob("../../pkg/validation/testdata/bad/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(bad), 20)
	for _, f := range bad {
		t.Run("bad/"+filepath.Base(f), func(t *testing.T) {
			field, reason := expectation(t, f)
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			objs, err := validation.ReadDocuments(data)
			require.NoError(t, err)
			require.Len(t, objs, 1)
			_, errs := validation.ValidateUnstructured(ctx, objs[0])
			require.NotEmpty(t, errs, "lint must refuse it")

			err = create(objs[0].DeepCopy())
			require.Error(t, err, "the apiserver must refuse it")
			msg := err.Error()
			// The admission policy names the list (spec.masterSoftware) where lint, which can
			// walk the item, names the item's own field.
			coarse, _, _ := strings.Cut(field, "[")
			if !strings.Contains(msg, field) && !strings.Contains(msg, coarse) && !(field == "<object>" && strings.Contains(msg, reason)) {
				t.Fatalf("apiserver error does not name %s: %s", field, msg)
			}
		})
	}
}

// sampleFiles are the project's samples, and ICN's own when BPA_REFERENCE_DIR is set (the
// apiserver run is too costly to repeat in a suite of its own).
func sampleFiles(t *testing.T) []string {
	var out []string
	for _, g := range []string{"../../examples/*.yaml", "../../pkg/validation/testdata/good/*.yaml"} {
		m, err := filepath.Glob(g)
		require.NoError(t, err)
		out = append(out, m...)
	}
	require.GreaterOrEqual(t, len(out), 10)
	if os.Getenv(reference.Env) != "" {
		out = append(out, reference.Samples(t)...)
	}
	return out
}

func expectation(t *testing.T, path string) (field, reason string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	want, ok := strings.CutPrefix(first, "# want: ")
	require.True(t, ok)
	f, r, _ := strings.Cut(want, " | ")
	return strings.TrimSpace(f), strings.TrimSpace(r)
}
