package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Run metrics, next to controller-runtime's own on the manager's metrics endpoint.
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
		Buckets: prometheus.ExponentialBuckets(10, 2, 12), // 10 s to ~5.7 h
	}, []string{"kind", "phase"})
)

func init() {
	metrics.Registry.MustRegister(runsTotal, runsStarted, runDuration)
}
