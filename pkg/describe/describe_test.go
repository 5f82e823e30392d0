package describe_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/describe"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is when the golden trees were "printed": ages and running times count from it.
var now = time.Date(2026, 11, 1, 10, 5, 0, 0, time.UTC)

// loadObjects reads a multi-document YAML file of Kubernetes objects.
func loadObjects(t *testing.T, file string) []client.Object {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	decode := serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()
	var objs []client.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decode.Decode(doc, nil, nil)
		require.NoError(t, err, file)
		objs = append(objs, obj.(client.Object))
	}
	return objs
}

// describeFixture fetches through a fake client holding the fixture's objects and
// renders, as the command does.
func describeFixture(t *testing.T, objs []client.Object, kind, name string, color bool) string {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	tree, err := describe.Fetch(context.Background(), c, kind, "bpa-system", name)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, describe.Render(&out, tree, describe.Options{Now: now, Color: color, History: 3}))
	return out.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run: go test ./pkg/describe -update")
	assert.Equal(t, string(want), got, golden)
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		fixture, kind, name string
		also                []string // fixtures whose objects are there too
	}{
		{"provisioning", describe.KindProvisioning, "provisioning-sample-xyz", nil},
		{"provisioning-running", describe.KindProvisioning, "provisioning-running", nil},
		{"provisioning-workflow-gone", describe.KindProvisioning, "provisioning-gone", nil},
		{"provisioning-offloaded", describe.KindProvisioning, "provisioning-offloaded", nil},
		{"software", describe.KindSoftware, "example-software", nil},
		{"software-latest", describe.KindSoftware, "site-tools", nil},
		{"cluster", describe.KindCluster, "cluster-sample", []string{"provisioning"}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			objs := loadObjects(t, filepath.Join("testdata", tc.fixture+".yaml"))
			for _, f := range tc.also {
				objs = append(objs, loadObjects(t, filepath.Join("testdata", f+".yaml"))...)
			}
			got := describeFixture(t, objs, tc.kind, tc.name, false)
			checkGolden(t, tc.fixture, got)
			assert.NotContains(t, got, "\x1b", "no colour unless asked")
			assert.NotContains(t, got, "SECRET-KUBECONFIG-DATA")
		})
	}
}

// Argo compresses the nodes of a large Workflow into status.compressedNodes; the tree
// must be the same as with the nodes in the clear.
func TestRenderCompressedNodes(t *testing.T) {
	// Small enough that these Workflows are "large", large enough for their packed nodes.
	defer packer.SetMaxWorkflowSize(1500)()
	for _, tc := range []struct{ fixture, kind, name string }{
		{"provisioning-running", describe.KindProvisioning, "provisioning-running"},
		{"software", describe.KindSoftware, "example-software"},
	} {
		objs := loadObjects(t, filepath.Join("testdata", tc.fixture+".yaml"))
		want := describeFixture(t, objs, tc.kind, tc.name, false)
		compressed := 0
		for _, o := range objs {
			if wf, ok := o.(*wfv1.Workflow); ok && len(wf.Status.Nodes) > 0 {
				require.NoError(t, packer.CompressWorkflowIfNeeded(wf))
				require.NotEmpty(t, wf.Status.CompressedNodes)
				require.Empty(t, wf.Status.Nodes)
				compressed++
			}
		}
		require.NotZero(t, compressed)
		assert.Equal(t, want, describeFixture(t, objs, tc.kind, tc.name, false), tc.fixture)
	}
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func TestRenderColor(t *testing.T) {
	objs := loadObjects(t, "testdata/provisioning.yaml")
	plain := describeFixture(t, objs, describe.KindProvisioning, "provisioning-sample-xyz", false)
	colored := describeFixture(t, objs, describe.KindProvisioning, "provisioning-sample-xyz", true)
	assert.Contains(t, colored, "\x1b[32mSucceeded\x1b[0m")
	assert.Contains(t, colored, "\x1b[31mFailed\x1b[0m", "the earlier, failed run")
	assert.Equal(t, plain, sgr.ReplaceAllString(colored, ""), "colour changes nothing else, alignment included")
}

// A step's message comes from a host (an ssh error, a package manager's output): escape
// sequences in it must reach the terminal as text, never as commands, nor may a newline
// forge a line of the tree.
func TestRenderNeutralizesTerminalEscapes(t *testing.T) {
	objs := loadObjects(t, "testdata/software.yaml")
	got := describeFixture(t, objs, describe.KindSoftware, "example-software", true)
	assert.Contains(t, got, `\x1b]0;pwned\a`)
	assert.Contains(t, got, `\x1b[2J`)
	assert.Contains(t, got, `\u202e`)
	assert.NotContains(t, sgr.ReplaceAllString(got, ""), "\x1b", "only describe's own colour codes")
	assert.NotContains(t, got, "\u202e")
	assert.NotContains(t, got, "\n└─forged", "a message stays on its line")
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]string{
		"provisioning": describe.KindProvisioning, "prov": describe.KindProvisioning, "Provisionings": describe.KindProvisioning,
		"provisioning.bpa.akraino.org": describe.KindProvisioning, "sw": describe.KindSoftware, "clusters": describe.KindCluster,
	} {
		got, err := describe.ParseKind(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := describe.ParseKind("pods")
	assert.ErrorContains(t, err, "give provisioning, software or cluster")
}

func TestFetchNotFound(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	_, err := describe.Fetch(context.Background(), c, describe.KindProvisioning, "bpa-system", "nope")
	assert.EqualError(t, err, "Provisioning bpa-system/nope not found")
}

// TestRenderDayTwo: a Provisioning shows what its cluster is (status.applied), the last
// operations newest first, and which hosts the run removes.
func TestRenderDayTwo(t *testing.T) {
	objs := loadObjects(t, filepath.Join("testdata", "provisioning.yaml"))
	var p *bpav1.Provisioning
	for _, o := range objs {
		if x, ok := o.(*bpav1.Provisioning); ok {
			p = x
		}
	}
	require.NotNil(t, p)
	p.Status.Hosts = append(p.Status.Hosts, bpav1.HostStatus{Name: "edge-2", Roles: []string{"worker"}, IP: "10.0.0.9", Removing: true})
	p.Status.Applied = &bpav1.AppliedState{Hosts: p.Status.Hosts[:1], KubernetesVersion: "1.31.4", KubesprayVersion: "v2.28.0", Generation: 4,
		Replacements: []bpav1.Replacement{{Node: "edge-3", BareMetalHost: "bmh-9"}}}
	p.Status.Operations = []bpav1.OperationRecord{
		{Generation: 3, Name: "scale-workers", Nodes: []string{"edge-1", "edge-2"}, Workflow: "p-provision-3", Result: "Succeeded"},
		{Generation: 4, Name: "remove-workers", Nodes: []string{"edge-2"}, Workflow: "p-provision-4", Result: "Failed"},
	}
	p.Status.Backups = []bpav1.BackupStatus{
		{Name: "etcd-20260101T000000Z.db", Size: 3 << 20, Revision: 41, Member: "master-1", Verified: true, Workflow: "p-provision-3", TakenAt: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		{Name: "etcd-20260102T000000Z.db", Size: 5 << 20, Revision: 97, Member: "master-1", Verified: true, Workflow: "p-provision-4", TakenAt: metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))},
	}
	p.Status.Restore = &bpav1.RestoreStatus{Snapshot: "etcd-20260101T000000Z.db", RequestStatus: bpav1.RequestStatus{Request: "etcd-20260101T000000Z.db", Workflow: "p-restore-0-abc123",
		Phase: bpav1.RequestFailed, Message: "step restore-etcd failed: EtcdRestoreFailed: m1: no /usr/local/bin/etcdutl"}}
	p.Status.CertificateRenewal = &bpav1.RequestStatus{Request: "now", Workflow: "p-renew-certificates-0-def456", Phase: bpav1.RequestSucceeded}
	p.Status.Drift = &bpav1.DriftStatus{Workflow: "p-drift-check-1767225600", Fields: []string{"node edge-1: label example.com/role=edge missing", "node master-1: kubelet v1.31.1, applied v1.31.4"},
		Reconcile: &bpav1.DriftReconcileStatus{Request: "drift-1767225000", Provisioning: true, NotPutBack: true, Fields: []string{"node edge-1: label example.com/role=edge missing"},
			RequestedAt: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
	p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: bpav1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: bpav1.ReasonDriftFound, Message: "2 fields differ"})
	p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: bpav1.ConditionRemediating, Status: metav1.ConditionFalse, Reason: bpav1.ReasonRemediationExhausted, Message: "no rung left for [edge-2]: look at the hosts"})
	p.Status.Remediation = &bpav1.RemediationStatus{Nodes: []bpav1.NodeRemediation{{Node: "edge-2", Since: &metav1.Time{Time: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		Rung: bpav1.RungRestart, Attempts: 1, Workflow: "p-remediate-restart-1767312000-3fa2c1", Exhausted: true}}}
	got := describeFixture(t, objs, describe.KindProvisioning, p.Name, false)
	assert.Regexp(t, `Remediation\n.*RemediationExhausted\s+no rung left for \[edge-2\]: look at the hosts\n.*edge-2\s+unhealthy since \S+ ago\s+Restart \(attempt 1\) Workflow p-remediate-restart-1767312000-3fa2c1\s+exhausted`, got)
	assert.Regexp(t, `Drift\n.*2 fields differ from what BPA applied\s+Workflow p-drift-check-1767225600\n.*node edge-1: label example.com/role=edge missing\n.*node master-1: kubelet v1.31.1, applied v1.31.4\n.*rerun drift-1767225000 did not put back 1 fields: look at the nodes\s+asked \S+ ago`, got)
	assert.Regexp(t, `Renewal\n.*certificates\s+Succeeded\s+Workflow p-renew-certificates-0-def456`, got)
	assert.Regexp(t, `Restore\n.*etcd-20260101T000000Z\.db\s+Failed\s+Workflow p-restore-0-abc123\s+step restore-etcd failed: EtcdRestoreFailed`, got)
	assert.Regexp(t, `(?s)Backups\s+2 verified etcd snapshots\n.*etcd-20260102T000000Z\.db\s+\S+ ago\s+revision 97\s+5\.0 MiB\s+from master-1\s+Workflow p-provision-4\n.*etcd-20260101T000000Z\.db`, got)
	assert.Regexp(t, `Applied\s+1 nodes\s+Kubernetes 1\.31\.4\s+kubespray v2\.28\.0\s+generation 4\n.*replacing edge-3\s+dead BareMetalHost bmh-9\s+next: added back on a spare host`, got)
	assert.Regexp(t, `(?s)Operations\n.*remove-workers\s+Failed\s+edge-2\s+generation 4.*\n.*scale-workers\s+Succeeded\s+edge-1,edge-2`, got)
	assert.Regexp(t, `edge-2\s+worker \(removing\)\s+10\.0\.0\.9`, got)
}
