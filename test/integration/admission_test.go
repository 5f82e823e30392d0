// Package integration runs BPA's manifests on a real kube-apiserver and etcd.
package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/reference"
)

var resources = map[string]string{"Provisioning": "provisionings", "Software": "softwares", "Cluster": "clusters", "BPAPolicy": "bpapolicies"}

func gvr(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "bpa.akraino.org", Version: "v1alpha1", Resource: resources[kind]}
}

// TestAdmissionAgreesWithLint applies every good sample and every bad CR to a real
// kube-apiserver with BPA's CRDs and admission policies, and checks that the apiserver and
// `bpa lint` (pkg/validation) accept and refuse exactly the same objects, naming the field.
func TestAdmissionAgreesWithLint(t *testing.T) {
	ctx, create := admissionRig(t)

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
				require.NoError(t, create(u), "apiserver")
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

			err = create(objs[0])
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
