package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// statusProvisioning is a Provisioning of cluster c whose status holds what the status
// metrics read.
func statusProvisioning(name, c string, mutate func(*bpav1.Provisioning)) *bpav1.Provisioning {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "site", UID: types.UID("uid-" + name), Labels: map[string]string{bpav1.ClusterLabel: c}}}
	mutate(p)
	return p
}

func withStatusMetricsOf(t *testing.T, objs ...client.Object) {
	t.Helper()
	r := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	k := &readerKey{}
	statusMetrics.mu.Lock()
	old := statusMetrics.readers
	// The same cache twice, as two managers watching one namespace would be: each CR once.
	statusMetrics.readers = map[*readerKey]client.Reader{k: r, {}: r}
	statusMetrics.mu.Unlock()
	t.Cleanup(func() {
		statusMetrics.mu.Lock()
		statusMetrics.readers = old
		statusMetrics.mu.Unlock()
	})
}

// TestStatusMetrics: each status gauge from the cached Provisionings, folded per cluster,
// and a cluster whose condition is unknown has no bpa_cluster_drifted series.
func TestStatusMetrics(t *testing.T) {
	expiry := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	backup := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a := statusProvisioning("a", "c1", func(p *bpav1.Provisioning) {
		p.Status.Workflow = &bpav1.WorkflowReference{Name: "a-provision-2", UID: "wf2"}
		p.Status.Hosts = []bpav1.HostStatus{{Name: "m1"}, {Name: "w1"}, {Name: "w2", Removing: true}}
		p.Status.Conditions = []metav1.Condition{{Type: bpav1.ConditionDrifted, Status: metav1.ConditionTrue}}
		p.Status.Certificates = []bpav1.CertificateStatus{
			{Node: "m1", Component: "apiserver", NotAfter: metav1.NewTime(expiry)},
			{Node: "m1", Component: "etcd-member", NotAfter: metav1.NewTime(expiry.Add(time.Hour))},
		}
		p.Status.Backups = []bpav1.BackupStatus{
			{Name: "old", TakenAt: metav1.NewTime(backup.Add(-time.Hour)), Verified: true},
			{Name: "new", TakenAt: metav1.NewTime(backup), Verified: true},
		}
		p.Status.Steps = []bpav1.StepStatus{{Name: "run-kubespray", Phase: "Failed",
			Message: "offline: the artifact server https://a:8443 " + kubespray.MissingArtifactsPhrase(3, 23) + " kubespray v2.28.0 downloads"}}
	})
	// A sibling waiting for c1 claims one host of its own, and one whose removal was released.
	b := statusProvisioning("b", "c1", func(p *bpav1.Provisioning) {
		p.Status.Workflow = &bpav1.WorkflowReference{Name: "b-provision-1", UID: "wf1"}
		p.Status.ReleasedAfter = "wf1"
		p.Status.Hosts = []bpav1.HostStatus{{Name: "w3"}, {Name: "w4", Removing: true}}
		p.Status.Conditions = []metav1.Condition{{Type: bpav1.ConditionDrifted, Status: metav1.ConditionFalse}}
	})
	c := statusProvisioning("c", "c2", func(p *bpav1.Provisioning) {
		p.Status.Conditions = []metav1.Condition{{Type: bpav1.ConditionDrifted, Status: metav1.ConditionFalse}}
		p.Status.Backups = []bpav1.BackupStatus{{Name: "unverified", TakenAt: metav1.NewTime(backup), Verified: false}}
	})
	d := statusProvisioning("d", "c3", func(*bpav1.Provisioning) {})
	withStatusMetricsOf(t, a, b, c, d)

	want := `
# HELP bpa_artifacts_missing Artifacts the offline pre-flight of the current run found missing on the site's artifact server (0: none).
# TYPE bpa_artifacts_missing gauge
bpa_artifacts_missing{cluster="c1",namespace="site"} 3
bpa_artifacts_missing{cluster="c2",namespace="site"} 0
bpa_artifacts_missing{cluster="c3",namespace="site"} 0
# HELP bpa_certificate_expiry_timestamp_seconds When a certificate of status.certificates expires (Unix time), by node and component.
# TYPE bpa_certificate_expiry_timestamp_seconds gauge
bpa_certificate_expiry_timestamp_seconds{cluster="c1",component="apiserver",namespace="site",node="m1"} 1.798859045e+09
bpa_certificate_expiry_timestamp_seconds{cluster="c1",component="etcd-member",namespace="site",node="m1"} 1.798862645e+09
# HELP bpa_cluster_drifted 1 when the Drifted condition is True, 0 when it is False; absent while unknown.
# TYPE bpa_cluster_drifted gauge
bpa_cluster_drifted{cluster="c1",namespace="site"} 1
bpa_cluster_drifted{cluster="c2",namespace="site"} 0
# HELP bpa_hosts_claimed BareMetalHosts the cluster's Provisionings hold: the hosts of their current run (status.hosts), less those removed and released.
# TYPE bpa_hosts_claimed gauge
bpa_hosts_claimed{cluster="c1",namespace="site"} 4
bpa_hosts_claimed{cluster="c2",namespace="site"} 0
bpa_hosts_claimed{cluster="c3",namespace="site"} 0
# HELP bpa_last_verified_backup_timestamp_seconds When the newest verified etcd snapshot of status.backups was taken (Unix time); absent before the first.
# TYPE bpa_last_verified_backup_timestamp_seconds gauge
bpa_last_verified_backup_timestamp_seconds{cluster="c1",namespace="site"} 1.7934912e+09
`
	require.NoError(t, testutil.CollectAndCompare(statusMetrics, strings.NewReader(want)))
	require.NoError(t, testutil.CollectAndCompare(statusMetrics, strings.NewReader(want)), "a second scrape: nothing carried over")
}

// TestStatusMetricsFollowTheCache: a deleted Provisioning's series go with it.
func TestStatusMetricsFollowTheCache(t *testing.T) {
	withStatusMetricsOf(t)
	assert.Equal(t, 0, testutil.CollectAndCount(statusMetrics))
}

// TestOperationDurationFromReportedOperations: each operation that finished, once, under
// its plan step (a numbered hop counts as its base step).
func TestOperationDurationFromReportedOperations(t *testing.T) {
	operationDuration.Reset()
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(90 * time.Second))
	p := &bpav1.Provisioning{}
	p.Status.Operations = []bpav1.OperationRecord{
		{Workflow: "w", Name: "upgrade-2", Result: "Succeeded", StartedAt: &t0, FinishedAt: &t1},
		{Workflow: "w", Name: "scale-workers", Result: "Failed", StartedAt: &t0, FinishedAt: &t1},
		{Workflow: "w", Name: "reconfigure", Result: "Running", StartedAt: &t0},
	}
	rec := record.NewFakeRecorder(10)
	reportOperations(rec, p, nil)
	reportOperations(rec, p, p.Status.Operations) // nothing new
	assert.Equal(t, 2, testutil.CollectAndCount(operationDuration))
	assert.Equal(t, uint64(1), histogramCount(t, operationDuration.WithLabelValues("Provisioning", "upgrade", "Succeeded")))
	assert.Equal(t, uint64(1), histogramCount(t, operationDuration.WithLabelValues("Provisioning", "scale-workers", "Failed")))
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, o.(prometheus.Metric).Write(m))
	return m.GetHistogram().GetSampleCount()
}
