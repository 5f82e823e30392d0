package validation_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/reference"
)

// TestCRDsAreAcceptedByTheAPIServerValidation runs the apiserver's CRD validation, which
// compiles every CEL rule and rejects rules whose estimated cost is over the limit.
func TestCRDsAreAcceptedByTheAPIServerValidation(t *testing.T) {
	crds, err := validation.CRDs()
	require.NoError(t, err)
	require.Len(t, crds, 5)
	for _, crd := range crds {
		internal := &apiextensions.CustomResourceDefinition{}
		crd.Status.StoredVersions = []string{"v1alpha1"} // set by the apiserver on create
		require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil))
		errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal)
		assert.Empty(t, errs, crd.Name)
	}
}

// samplePaths lists the project's samples BPA must accept unchanged: the examples, and its
// own files in the shapes of ICN's samples (testdata/good).
func samplePaths(t *testing.T) []string {
	var paths []string
	for _, glob := range []string{"../../examples/*.yaml", "testdata/good/*.yaml"} {
		m, err := filepath.Glob(glob)
		require.NoError(t, err)
		paths = append(paths, m...)
	}
	require.GreaterOrEqual(t, len(paths), 10)
	return paths
}

func TestSamplesAreValid(t *testing.T) { checkValid(t, samplePaths(t)) }

// TestReferenceSamplesAreValid: ICN's own samples, unchanged.
func TestReferenceSamplesAreValid(t *testing.T) { checkValid(t, reference.Samples(t)) }

func checkValid(t *testing.T, paths []string) {
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			docs, problems := validation.ValidateFile(context.Background(), p, data)
			assert.Empty(t, problems)
			require.NotEmpty(t, docs)
			for _, d := range docs {
				assert.NotNil(t, d.Object, d.Name)
			}
		})
	}
}

// TestBadCRs: each file in testdata/bad holds one CR with one mistake, and a first-line
// comment `# want: <field> | <reason substring>`. Those of testdata/bad/kubespray are what the
// chosen kubespray release refuses of the variables, which admission cannot see (the
// integration test checks the apiserver refuses the others).
func TestBadCRs(t *testing.T) {
	cases, err := filepath.Glob("testdata/bad/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 20)
	kubesprayCases, err := filepath.Glob("testdata/bad/kubespray/*.yaml")
	require.NoError(t, err)
	// download_localhost, kubespray's fourth, is refused by BPA first (kubespray.ControllerVars).
	require.Len(t, kubesprayCases, 5)
	cases = append(cases, kubesprayCases...)
	for _, c := range cases {
		t.Run(filepath.Base(c), func(t *testing.T) {
			wantField, wantReason := BadCaseExpectation(t, c)
			data, err := os.ReadFile(c)
			require.NoError(t, err)
			_, problems := validation.ValidateFile(context.Background(), c, data)
			require.NotEmpty(t, problems, "must be rejected")
			var lines []string
			for _, p := range problems {
				lines = append(lines, p.String())
				if p.Field == wantField && strings.Contains(p.Reason, wantReason) {
					return
				}
			}
			t.Fatalf("no problem names field %q with %q; got:\n%s", wantField, wantReason, strings.Join(lines, "\n"))
		})
	}
}

// BadCaseExpectation reads the `# want: field | reason` header of a bad-CR file. It is
// exported to the e2e suite through copy, which checks the real apiserver's answer too.
func BadCaseExpectation(t testing.TB, path string) (field, reason string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	want, ok := strings.CutPrefix(first, "# want: ")
	require.True(t, ok, "%s: first line must be '# want: <field> | <reason>'", path)
	f, r, ok := strings.Cut(want, " | ")
	require.True(t, ok, path)
	return strings.TrimSpace(f), strings.TrimSpace(r)
}

// TestCRDHoldsTheKubesprayProfiles: the CRD's kubespray.version enum and its Kubernetes range
// rule are pkg/kubespray's profiles, so admission, lint and the steps share one table.
func TestCRDHoldsTheKubesprayProfiles(t *testing.T) {
	crds, err := validation.CRDs()
	require.NoError(t, err)
	for _, crd := range crds {
		if crd.Spec.Names.Kind != "Provisioning" {
			continue
		}
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		var rules []string
		for _, r := range spec.XValidations {
			if r.Rule == kubespray.CELRule() {
				assert.Equal(t, kubespray.CELMessage(), r.Message)
				assert.Equal(t, ".kubernetes.version", r.FieldPath)
			}
			rules = append(rules, r.Rule)
		}
		assert.Contains(t, rules, kubespray.CELRule(), "regenerate the marker on ProvisioningSpec from kubespray.CELRule")
		var enum []string
		for _, e := range spec.Properties["kubespray"].Properties["version"].Enum {
			enum = append(enum, strings.Trim(string(e.Raw), `"`))
		}
		assert.Equal(t, kubespray.Versions(), enum)
		return
	}
	t.Fatal("no Provisioning CRD")
}

func TestValidateEtcdBackupSchedule(t *testing.T) {
	for schedule, ok := range map[string]bool{"": true, "0 */6 * * *": true, "@daily": true, "30 2 * * 1-5": true, "61 * * * *": false, "0 0 * * 8": false, "0 0 30 2 *": false} {
		p := &bpav1.Provisioning{Spec: bpav1.ProvisioningSpec{EtcdBackup: &bpav1.EtcdBackup{Schedule: schedule}}}
		errs := validation.ValidateEtcdBackup(p)
		if ok {
			assert.Empty(t, errs, schedule)
			continue
		}
		require.Len(t, errs, 1, schedule)
		assert.Equal(t, "spec.etcdBackup.schedule", errs[0].Field)
	}
}
