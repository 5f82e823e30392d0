package artifacts

import (
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsPath is where bpa serve exports its metrics, for a token (of the server's
// audience) that may get this nonResourceURL: the bpa-metrics-reader ClusterRole.
const MetricsPath = "/metrics"

// Route classes label the request metrics: one per part of the server, never a path, so the
// series stay few whatever clients ask for.
const (
	routeHealthz  = "healthz"
	routeMetrics  = "metrics"
	routeRegistry = "registry"
	routeApt      = "apt"
	routeFiles    = "files"
	routeMeta     = "meta"
	routeBackups  = "backups"
	routeStatus   = "status"
	routeOther    = "other"
)

var routes = []string{routeHealthz, routeMetrics, routeRegistry, routeApt, routeFiles, routeMeta, routeBackups, routeStatus, routeOther}

// routeOf is the route class of a request path; ServeHTTP dispatches on it.
func routeOf(p string) string {
	switch {
	case p == "/healthz":
		return routeHealthz
	case p == MetricsPath:
		return routeMetrics
	case strings.HasPrefix(p, "/v2/") || p == "/v2":
		return routeRegistry
	case strings.HasPrefix(p, "/apt/"):
		return routeApt
	case strings.HasPrefix(p, "/files/"):
		return routeFiles
	case p == "/api/v1/files" || strings.HasPrefix(p, "/api/v1/files/"):
		return routeMeta
	case strings.HasPrefix(p, "/backups/"):
		return routeBackups
	case strings.HasPrefix(p, "/api/v1/status/"):
		return routeStatus
	}
	return routeOther
}

// serverMetrics are one Server's metrics, in a registry of its own: a process (a test) may
// run several servers.
type serverMetrics struct {
	registry *prometheus.Registry
	handlers map[string]http.Handler // per route class: counted, timed
	received *prometheus.CounterVec
}

// newServerMetrics counts and times every request, by route class, around dispatch.
func newServerMetrics(q *quota, dispatch func(route string, w http.ResponseWriter, r *http.Request)) *serverMetrics {
	c := newCollectors(q)
	m := &serverMetrics{registry: prometheus.NewRegistry(), handlers: map[string]http.Handler{}, received: c.received}
	m.registry.MustRegister(c.all()...)
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, route := range routes {
		l := prometheus.Labels{"route": route}
		m.handlers[route] = promhttp.InstrumentHandlerCounter(c.requests.MustCurryWith(l),
			promhttp.InstrumentHandlerDuration(c.duration.MustCurryWith(l), m.countBody(route, dispatch)))
	}
	return m
}

// serverCollectors are bpa serve's own metrics.
type serverCollectors struct {
	requests, received *prometheus.CounterVec
	duration           *prometheus.HistogramVec
	storage            storageCollector
}

func (c serverCollectors) all() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.received, c.duration, c.storage}
}

func newCollectors(q *quota) serverCollectors {
	return serverCollectors{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bpa_serve_requests_total",
			Help: "Requests answered, by route class (registry, files, apt, meta, backups, status, healthz, metrics, other), method and HTTP code.",
		}, []string{"route", "method", "code"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bpa_serve_upload_bytes_total",
			Help: "Request body bytes received by writes (POST, PUT, PATCH: file and image uploads), by route class.",
		}, []string{"route"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bpa_serve_request_duration_seconds",
			Help:    "Time to answer a request, by route class and method (an upload's request lasts as long as its body).",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5 ms to ~22 min
		}, []string{"route", "method"}),
		storage: storageCollector{q},
	}
}

// MetricCollectors are bpa serve's own metrics (not the Go runtime's), unregistered and
// empty: for the test that checks config/prometheus against what BPA exports.
func MetricCollectors() []prometheus.Collector { return newCollectors(&quota{}).all() }

// countBody counts what writes read of their bodies, then dispatches.
func (m *serverMetrics) countBody(route string, dispatch func(route string, w http.ResponseWriter, r *http.Request)) http.Handler {
	c := m.received.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			r.Body = &countingBody{ReadCloser: r.Body, c: c}
		}
		dispatch(route, w, r)
	})
}

type countingBody struct {
	io.ReadCloser
	c prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.Add(float64(n))
	return n, err
}

// serveMetrics answers GET /metrics for a token that may get it.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if !s.opts.Auth.allowPath(w, r, "get", MetricsPath) {
		return
	}
	promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

var (
	storageUsedDesc = prometheus.NewDesc("bpa_serve_storage_used_bytes",
		"Bytes the store holds as the quota counts them (published files, uploads in progress, the registry), by part; only with a quota (--quota-total or --quota-per-uploader).",
		[]string{"part"}, nil)
	storageQuotaDesc = prometheus.NewDesc("bpa_serve_storage_quota_bytes",
		"The store's total quota (bpa serve --quota-total); absent when unlimited.", nil, nil)
)

// storageCollector reads the quota's counts at scrape time.
type storageCollector struct{ q *quota }

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storageUsedDesc
	ch <- storageQuotaDesc
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.q.limited() {
		return // nothing is counted without a quota (newQuota)
	}
	c.q.mu.Lock()
	_, all := c.q.usage("")
	c.q.mu.Unlock()
	for part, v := range map[string]int64{"files": all.files, "uploads": all.uploads, "registry": all.registry} {
		ch <- prometheus.MustNewConstMetric(storageUsedDesc, prometheus.GaugeValue, float64(v), part)
	}
	if c.q.total > 0 {
		ch <- prometheus.MustNewConstMetric(storageQuotaDesc, prometheus.GaugeValue, float64(c.q.total))
	}
}
