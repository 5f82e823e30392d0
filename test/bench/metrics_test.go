package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
)

// scrapeRounds is how many scrapes each figure is the median of.
const scrapeRounds = 50

// BenchmarkMetricsScrape: the cost of one scrape of the controller's /metrics with 500
// Provisionings in its cache, each with the status a provisioned cluster has (3 hosts, 11
// certificates, 2 backups, Drifted), against a scrape of controller-runtime's metrics alone in
// the same process (a manager of BPA's running on an empty namespace, so its controllers'
// metrics exist). A scrape is what promhttp serves, gathered and encoded (text format);
// the HTTPS and token review in front of it are the same for both, and cached.
func BenchmarkMetricsScrape(b *testing.B) {
	const n = 500
	e := newEnv(b)
	ns := e.namespace(b, "scrape")
	crs := e.createProvisionings(b, ns, n)
	now := time.Now()
	must(b, parallel(n, func(ctx context.Context, i int) error {
		p := crs[i]
		provisionedStatus(p, now)
		return e.client.Status().Update(ctx, p)
	}), "writing the Provisionings' status")

	// controller-runtime's metrics, as a running controller has them.
	mgr, err := controller.NewManager(e.cfg, controller.Options{Namespaces: []string{e.namespace(b, "empty")}, MetricsAddr: "0", ProbeAddr: "0", SkipNameValidation: true})
	must(b, err, "controller manager")
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	defer func() { stop(); must(b, <-stopped, "manager") }()

	// The status metrics read a cache of the 500, as the leading controller's.
	c, err := cache.New(e.cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	must(b, err, "cache")
	go func() { _ = c.Start(ctx) }()
	list := &bpav1.ProvisioningList{}
	must(b, c.List(ctx, list), "listing the cache")
	if len(list.Items) != n {
		b.Fatalf("the cache holds %d Provisionings, want %d", len(list.Items), n)
	}
	status := prometheus.NewRegistry()
	status.MustRegister(controller.StatusCollector(c))
	mgr.GetCache().WaitForCacheSync(ctx)

	base, baseBytes := scrapeCost(b, metrics.Registry)
	full, fullBytes := scrapeCost(b, prometheus.Gatherers{metrics.Registry, status})
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(base), "ms/scrape-controller-runtime")
	b.ReportMetric(float64(baseBytes)/1024, "KiB/scrape-controller-runtime")
	b.ReportMetric(ms(full), "ms/scrape-with-500-provisionings")
	b.ReportMetric(float64(fullBytes)/1024, "KiB/scrape-with-500-provisionings")
}

// scrapeCost is the median time, and the size, of a scrape of g.
func scrapeCost(b *testing.B, g prometheus.Gatherer) (time.Duration, int) {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	times := make([]time.Duration, scrapeRounds)
	size := 0
	for i := range times {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		start := time.Now()
		h.ServeHTTP(rec, req)
		times[i] = time.Since(start)
		if rec.Code != http.StatusOK {
			b.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	return percentile(times, 0.5), size
}

// provisionedStatus gives p the status a provisioned one-master, two-worker cluster has.
func provisionedStatus(p *bpav1.Provisioning, now time.Time) {
	p.Status.Phase = bpav1.PhaseSucceeded
	p.Status.Hosts = []bpav1.HostStatus{{Name: "master-1"}, {Name: "worker-1"}, {Name: "worker-2"}}
	for i, c := range []string{"ca", "apiserver", "apiserver-kubelet-client", "front-proxy-ca", "front-proxy-client",
		"etcd-ca", "etcd-member", "etcd-admin", "admin.conf", "kubelet-client", "apiserver-served"} {
		p.Status.Certificates = append(p.Status.Certificates, bpav1.CertificateStatus{Node: "master-1", Component: c,
			NotAfter: metav1.NewTime(now.Add(time.Duration(365*24+i) * time.Hour))})
	}
	for i := range 2 {
		p.Status.Backups = append(p.Status.Backups, bpav1.BackupStatus{Name: fmt.Sprintf("snap-%d", i), Size: 1,
			SHA256: fmt.Sprintf("%064d", i), TakenAt: metav1.NewTime(now.Add(-time.Duration(i) * time.Hour)), Verified: true})
	}
	p.Status.Conditions = []metav1.Condition{{Type: bpav1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "NoDrift",
		LastTransitionTime: metav1.NewTime(now), ObservedGeneration: p.Generation}}
}
