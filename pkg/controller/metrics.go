package controller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// runBuckets span a run or an operation: 10 s to ~5.7 h.
var runBuckets = prometheus.ExponentialBuckets(10, 2, 12)

// Event metrics, counted as the controller reports a transition it has written, next to
// controller-runtime's own on the manager's metrics endpoint (docs/monitoring.md).
var (
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bpa_runs_total",
		Help: "Runs (Workflows) that finished, by kind and phase.",
	}, []string{"kind", "phase"})
	runsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bpa_runs_started_total",
		Help: "Runs (Workflows) the controller started, by kind.",
	}, []string{"kind"})
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "bpa_run_duration_seconds",
		Help:    "Duration of finished runs, by kind and phase.",
		Buckets: runBuckets,
	}, []string{"kind", "phase"})
	operationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "bpa_operation_duration_seconds",
		Help: "Duration of finished operations, by kind, operation (a plan step such as run-kubespray, scale-workers, " +
			"remove-workers, upgrade, backup-etcd; etcd-restore, certificate-renewal; install-software) and result.",
		Buckets: runBuckets,
	}, []string{"kind", "operation", "result"})
)

// observeOperation records one finished operation, when both its ends are known.
func observeOperation(kind, operation, result string, started, finished *metav1.Time) {
	if started == nil || finished == nil {
		return
	}
	operationDuration.WithLabelValues(kind, operation, result).Observe(finished.Sub(started.Time).Seconds())
}

// Status metrics: read from the manager's cache at scrape time, as kube-state-metrics does,
// so a deleted Provisioning's series go with it and nothing is kept between scrapes.
var (
	hostsClaimedDesc = prometheus.NewDesc("bpa_hosts_claimed",
		"BareMetalHosts the cluster's Provisionings hold: the hosts of their current run (status.hosts), less those removed and released.",
		[]string{"namespace", "cluster"}, nil)
	driftedDesc = prometheus.NewDesc("bpa_cluster_drifted",
		"1 when the Drifted condition is True, 0 when it is False; absent while unknown.",
		[]string{"namespace", "cluster"}, nil)
	certExpiryDesc = prometheus.NewDesc("bpa_certificate_expiry_timestamp_seconds",
		"When a certificate of status.certificates expires (Unix time), by node and component.",
		[]string{"namespace", "cluster", "node", "component"}, nil)
	lastBackupDesc = prometheus.NewDesc("bpa_last_verified_backup_timestamp_seconds",
		"When the newest verified etcd snapshot of status.backups was taken (Unix time); absent before the first.",
		[]string{"namespace", "cluster"}, nil)
	artifactsMissingDesc = prometheus.NewDesc("bpa_artifacts_missing",
		"Artifacts the offline pre-flight of the current run found missing on the site's artifact server (0: none).",
		[]string{"namespace", "cluster"}, nil)
)

// scrapeTimeout bounds a scrape's wait for the cache (only before it first synced).
const scrapeTimeout = 5 * time.Second

// statusCollector is the one collector of the status metrics in the process-wide registry.
// Each manager adds its cache while it leads (registerStatusMetrics): tests and benchmarks
// run several managers in one process, and a replica that does not lead exports nothing, so
// alerts do not count a cluster once per replica.
type statusCollector struct {
	mu      sync.Mutex
	readers map[*readerKey]client.Reader
}

type readerKey struct{}

var statusMetrics = &statusCollector{readers: map[*readerKey]client.Reader{}}

// StatusCollector is a collector of the status metrics of the Provisionings r lists (a
// cache), for a registry of the caller's (test/bench measures a scrape's cost with it).
func StatusCollector(r client.Reader) prometheus.Collector {
	return &statusCollector{readers: map[*readerKey]client.Reader{{}: r}}
}

// MetricCollectors are the controller's own metrics, besides controller-runtime's: for the
// test that checks config/prometheus against what BPA exports.
func MetricCollectors() []prometheus.Collector {
	return []prometheus.Collector{runsTotal, runsStarted, runDuration, operationDuration, statusMetrics}
}

func init() {
	metrics.Registry.MustRegister(MetricCollectors()...)
}

// registerStatusMetrics makes the status metrics read mgr's cache while mgr leads.
func registerStatusMetrics(mgr ctrl.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		k := &readerKey{}
		statusMetrics.mu.Lock()
		statusMetrics.readers[k] = mgr.GetCache()
		statusMetrics.mu.Unlock()
		<-ctx.Done()
		statusMetrics.mu.Lock()
		delete(statusMetrics.readers, k)
		statusMetrics.mu.Unlock()
		return nil
	}))
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hostsClaimedDesc, driftedDesc, certExpiryDesc, lastBackupDesc, artifactsMissingDesc} {
		ch <- d
	}
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	readers := make([]client.Reader, 0, len(c.readers))
	for _, r := range c.readers {
		readers = append(readers, r)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	seen := map[types.UID]bool{}
	var g gauges
	for _, r := range readers {
		list := &bpav1.ProvisioningList{}
		if err := r.List(ctx, list); err != nil {
			// Not an invalid metric: that fails the whole scrape (controller-runtime's
			// HTTPErrorOnError), and its own metrics with it, for a cache still syncing.
			ctrl.Log.WithName("metrics").Error(err, "status metrics: listing Provisionings from the cache")
			continue
		}
		for i := range list.Items {
			if p := &list.Items[i]; !seen[p.UID] { // managers whose namespaces overlap
				seen[p.UID] = true
				g.add(p)
			}
		}
	}
	g.emit(ch)
}

// gauges folds the Provisionings of one cluster (one holds it, others may wait for it)
// into one series per label set: hosts add up, the rest keep the value that matters most
// (drifted, the most missing artifacts, the earliest expiry, the newest backup).
type gauges struct {
	hosts, drifted, missing, backup map[[2]string]float64
	expiry                          map[[4]string]float64
}

func (g *gauges) add(p *bpav1.Provisioning) {
	cluster := p.Labels[bpav1.ClusterLabel]
	if cluster == "" {
		return // invalid: Stalled, and never ran
	}
	if g.hosts == nil {
		g.hosts, g.drifted, g.missing, g.backup, g.expiry = map[[2]string]float64{}, map[[2]string]float64{}, map[[2]string]float64{}, map[[2]string]float64{}, map[[4]string]float64{}
	}
	k := [2]string{p.Namespace, cluster}
	g.hosts[k] += float64(hostsClaimed(p))
	g.missing[k] = max(g.missing[k], float64(artifactsMissing(p)))
	if c := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionDrifted); c != nil && c.Status != metav1.ConditionUnknown {
		g.drifted[k] = max(g.drifted[k], boolValue(c.Status == metav1.ConditionTrue))
	}
	if t, ok := lastVerifiedBackup(p); ok {
		g.backup[k] = max(g.backup[k], t)
	}
	for _, c := range p.Status.Certificates {
		ck := [4]string{p.Namespace, cluster, c.Node, c.Component}
		t := float64(c.NotAfter.Unix())
		if old, ok := g.expiry[ck]; !ok || t < old {
			g.expiry[ck] = t
		}
	}
}

func (g *gauges) emit(ch chan<- prometheus.Metric) {
	for desc, m := range map[*prometheus.Desc]map[[2]string]float64{hostsClaimedDesc: g.hosts, driftedDesc: g.drifted, artifactsMissingDesc: g.missing, lastBackupDesc: g.backup} {
		for k, v := range m {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, k[0], k[1])
		}
	}
	for k, v := range g.expiry {
		ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, v, k[0], k[1], k[2], k[3])
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// hostsClaimed counts the hosts of the current run, which discover-hosts claimed; those
// it removes count until the controller released them after the run succeeded
// (releaseRemoved, status.releasedAfter).
func hostsClaimed(p *bpav1.Provisioning) int {
	released := p.Status.Workflow != nil && p.Status.ReleasedAfter == string(p.Status.Workflow.UID)
	n := 0
	for _, h := range p.Status.Hosts {
		if !h.Removing || !released {
			n++
		}
	}
	return n
}

// artifactsMissing is what the offline pre-flight (run-kubespray, preflight) of the current
// run found missing, from the failed step's message (kubespray.MissingArtifacts).
func artifactsMissing(p *bpav1.Provisioning) int {
	for _, s := range p.Status.Steps {
		if n, ok := kubespray.MissingArtifacts(s.Message); ok {
			return n
		}
	}
	return 0
}

func lastVerifiedBackup(p *bpav1.Provisioning) (float64, bool) {
	var newest *metav1.Time
	for i, b := range p.Status.Backups {
		if b.Verified && (newest == nil || newest.Before(&b.TakenAt)) {
			newest = &p.Status.Backups[i].TakenAt
		}
	}
	if newest == nil {
		return 0, false
	}
	return float64(newest.Unix()), true
}
