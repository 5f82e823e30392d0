package translator_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/reference"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func samples(t *testing.T) []string {
	var paths []string
	for _, glob := range []string{"../../examples/*.yaml", "../validation/testdata/good/*.yaml"} {
		m, err := filepath.Glob(glob)
		require.NoError(t, err)
		paths = append(paths, m...)
	}
	require.NotEmpty(t, paths)
	return paths
}

// TestEverySampleTranslatesToAValidWorkflow: every sample renders, Argo's validator accepts
// the Workflow, and the Workflow has the properties every BPA run relies on.
func TestEverySampleTranslatesToAValidWorkflow(t *testing.T) { checkTranslates(t, samples(t)) }

// TestReferenceSamplesTranslate: ICN's own samples too.
func TestReferenceSamplesTranslate(t *testing.T) { checkTranslates(t, reference.Samples(t)) }

func checkTranslates(t *testing.T, paths []string) {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		docs, problems := validation.ValidateFile(context.Background(), p, data)
		require.Empty(t, problems)
		for _, d := range docs {
			t.Run(filepath.Base(p)+"/"+d.Name, func(t *testing.T) {
				wf, err := translator.Translate(d.Object, translator.Options{})
				require.NoError(t, err)
				if d.Kind == "Cluster" {
					require.Nil(t, wf)
					return
				}
				require.NoError(t, validation.ValidateWorkflow(wf))
				assertWorkflowInvariants(t, d.Object.(metav1.Object), d.Kind, wf)
			})
		}
	}
}

func assertWorkflowInvariants(t *testing.T, cr metav1.Object, kind string, wf *wfv1.Workflow) {
	t.Helper()
	cluster := cr.GetLabels()["cluster"]
	assert.LessOrEqual(t, len(wf.Name), 63)
	assert.Equal(t, cluster, wf.Labels[bpav1.ClusterNameLabel])
	want := translator.ProvisioningSteps
	nameLabel, template := bpav1.ProvisioningNameLabel, "bpa-provision"
	if kind == "Software" {
		want, nameLabel, template = translator.SoftwareSteps, bpav1.SoftwareNameLabel, "bpa-software"
	}
	assert.Equal(t, cr.GetName(), wf.Labels[nameLabel])
	assert.Equal(t, template, wf.Labels["workflows.argoproj.io/workflow-template"])
	require.Len(t, wf.OwnerReferences, 1)
	assert.True(t, *wf.OwnerReferences[0].Controller)
	assert.Equal(t, kind, wf.OwnerReferences[0].Kind)
	require.NotNil(t, wf.Spec.Synchronization)
	require.Len(t, wf.Spec.Synchronization.Mutexes, 1)
	assert.Equal(t, "bpa-cluster-"+cluster, wf.Spec.Synchronization.Mutexes[0].Name)
	assert.Equal(t, wfv1.PodGCOnPodSuccess, wf.Spec.PodGC.Strategy)
	assert.Equal(t, translator.PodLogsKept, wf.Spec.PodGC.DeleteDelayDuration, "step logs outlive the steps")
	assert.GreaterOrEqual(t, *wf.Spec.TTLStrategy.SecondsAfterFailure, int32(3*24*3600))
	require.NotNil(t, wf.Spec.TTLStrategy.SecondsAfterCompletion, "a Workflow in Error goes by SecondsAfterCompletion only")
	assert.Equal(t, *wf.Spec.TTLStrategy.SecondsAfterFailure, *wf.Spec.TTLStrategy.SecondsAfterCompletion)
	assert.NotNil(t, wf.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, "bpa-step", wf.Spec.ServiceAccountName)

	// The DAG runs the steps in order, each depending on the one before.
	require.Len(t, wf.Spec.Templates, 1)
	tasks := wf.Spec.Templates[0].DAG.Tasks
	var names []string
	for i, task := range tasks {
		names = append(names, task.Name)
		if i > 0 {
			assert.Contains(t, task.Depends, tasks[i-1].Name)
		}
	}
	assert.Equal(t, want, names)

	// Nothing secret travels as a parameter: only names of Secrets do.
	for _, p := range wf.Spec.Arguments.Parameters {
		v := p.Value.String()
		assert.NotContains(t, v, "PRIVATE KEY", p.Name)
		assert.NotContains(t, v, "client-key-data", p.Name)
	}
}

func TestGolden(t *testing.T) {
	for _, p := range samples(t) {
		if !strings.Contains(p, "examples/") {
			continue
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		docs, problems := validation.ValidateFile(context.Background(), p, data)
		require.Empty(t, problems)
		for _, d := range docs {
			wf, err := translator.Translate(d.Object, translator.Options{})
			require.NoError(t, err)
			if wf == nil {
				continue
			}
			checkGolden(t, filepath.Join("testdata/golden", strings.TrimSuffix(filepath.Base(p), ".yaml")+".workflow.yaml"), wf)
		}
	}
}

// checkGolden compares got, as YAML, with the golden file (written with -update).
func checkGolden(t *testing.T, golden string, got any) {
	t.Helper()
	text, err := yaml.Marshal(got)
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(golden, text, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run: go test ./pkg/translator -update")
	assert.Equal(t, string(want), string(text), golden)
}

func TestWorkflowNameIsDeterministicAndBounded(t *testing.T) {
	a := translator.WorkflowName("provisioning-sample", "provision", 3, "", "")
	assert.Equal(t, "provisioning-sample-provision-3", a)
	assert.Equal(t, a, translator.WorkflowName("provisioning-sample", "provision", 3, "", ""))
	assert.NotEqual(t, a, translator.WorkflowName("provisioning-sample", "provision", 4, "", ""))
	assert.NotEqual(t, a, translator.WorkflowName("provisioning-sample", "provision", 3, "now", ""))
	long := strings.Repeat("a", 250)
	n1 := translator.WorkflowName(long, "provision", 12, "", "")
	n2 := translator.WorkflowName(long[:249]+"b", "provision", 12, "", "")
	assert.LessOrEqual(t, len(n1), 63)
	assert.NotEqual(t, n1, n2, "truncation must not make two CRs share a name")
	assert.True(t, strings.HasSuffix(n1, "-provision-12"))
}

func TestMissingClusterLabelIsAnError(t *testing.T) {
	_, err := translator.Provisioning(&bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, translator.Options{})
	require.ErrorContains(t, err, "metadata.labels.cluster")
}

func TestFileLeasesUseTheFileTemplate(t *testing.T) {
	p := bigProvisioning(1)
	p.Spec.Leases = &bpav1.LeaseSource{Type: bpav1.LeaseSourceISC, HostPath: "/var/lib/dhcp/dhcpd.leases"}
	wf, err := translator.Provisioning(p, translator.Options{})
	require.NoError(t, err)
	require.NoError(t, validation.ValidateWorkflow(wf))
	assert.Equal(t, "resolve-leases-from-file", wf.Spec.Templates[0].DAG.Tasks[1].TemplateRef.Template)
	assert.Equal(t, "resolve-leases", wf.Spec.Templates[0].DAG.Tasks[1].Name)
}

func bigProvisioning(workers int) *bpav1.Provisioning {
	p := &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default", Generation: 1, UID: "u", Labels: map[string]string{"cluster": "big"}},
	}
	cpu := int32(8)
	for i := 0; i < 3; i++ {
		p.Spec.Masters = append(p.Spec.Masters, bpav1.NodeEntry{fmt.Sprintf("master-%d", i): {MACAddress: fmt.Sprintf("00:00:00:00:%02x:%02x", i/256, i%256)}})
	}
	for i := 0; i < workers; i++ {
		p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{fmt.Sprintf("worker-%d", i): {CPU: &cpu, MACAddress: fmt.Sprintf("00:00:00:01:%02x:%02x", i/256, i%256)}})
	}
	return p
}

// TestThousandNodeWorkflowIsSmall: the Workflow names the CR rather than listing its hosts,
// so its size does not grow with the cluster and stays far below Argo's 1 MiB object limit.
func TestThousandNodeWorkflowIsSmall(t *testing.T) {
	small, err := translator.Provisioning(bigProvisioning(1), translator.Options{})
	require.NoError(t, err)
	big, err := translator.Provisioning(bigProvisioning(1000), translator.Options{})
	require.NoError(t, err)
	require.NoError(t, validation.ValidateWorkflow(big))
	sb, _ := yaml.Marshal(small)
	bb, _ := yaml.Marshal(big)
	t.Logf("workflow size: 1 worker %d bytes, 1000 workers %d bytes", len(sb), len(bb))
	assert.Less(t, len(bb), 64*1024)
	assert.Equal(t, len(sb), len(bb), "the Workflow must not grow with the number of hosts")
}

func BenchmarkTranslateProvisioning1000(b *testing.B) {
	p := bigProvisioning(1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := translator.Provisioning(p, translator.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTranslateAndValidate1000(b *testing.B) {
	p := bigProvisioning(1000)
	b.ReportAllocs()
	for b.Loop() {
		wf, err := translator.Provisioning(p, translator.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := validation.ValidateWorkflow(wf); err != nil {
			b.Fatal(err)
		}
	}
}
