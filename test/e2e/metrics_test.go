package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/promtest"
)

// scrapeController reads the site's controller's /metrics with token ("": none), as
// Prometheus does: HTTPS (the certificate is the controller's own, self-signed) and a bearer
// token. It returns the status code and, on 200, the samples.
func (e *env) scrapeController(t *testing.T, token string) (int, promtest.Samples) {
	t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, "https://"+e.MetricsAddr+"/metrics", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the controller's generated certificate
	// The controller may be starting (a new site, a restart): it listens within seconds.
	var resp *http.Response
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if resp, err = hc.Do(req); err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, promtest.Parse(t, body)
}

// controllerMetrics is a scrape that must succeed.
func (e *env) controllerMetrics(t *testing.T, token string) promtest.Samples {
	t.Helper()
	status, m := e.scrapeController(t, token)
	require.Equal(t, http.StatusOK, status)
	return m
}

// metricsReaderToken is a Kubernetes API token of a ServiceAccount with bpa-metrics-reader,
// as Prometheus's; the second is one without it.
func (e *env) metricsReaderToken(t *testing.T) (reader, stranger string) {
	artifactstest.InstallRoles(e.ctx, t, e.Rig)
	return artifactstest.TokenFor(e.ctx, t, e.Rig, "metrics-reader", "bpa-metrics-reader"),
		artifactstest.TokenFor(e.ctx, t, e.Rig, "metrics-stranger", "")
}

// counter is a counter's or a histogram count's value, 0 before its first sample.
func counter(m promtest.Samples, name string, labels model.LabelSet) float64 {
	var v float64
	for _, s := range m.Find(name, labels) {
		v += float64(s.Value)
	}
	return v
}

// assertRunMetrics checks the controller's metrics after p's one run, against before (a
// scrape from before it was created): the run and its create operation counted once, with
// its kind and result; the hosts it claimed; each certificate's expiry as status says; no
// artifacts missing. Only a token with bpa-metrics-reader reads them.
func (e *env) assertRunMetrics(t *testing.T, p *bpav1.Provisioning, before promtest.Samples, reader, stranger string) {
	t.Helper()
	status, _ := e.scrapeController(t, "")
	assert.Equal(t, http.StatusUnauthorized, status, "no token")
	status, _ = e.scrapeController(t, stranger)
	assert.Equal(t, http.StatusForbidden, status, "a token without bpa-metrics-reader")
	after := e.controllerMetrics(t, reader)

	succeeded := model.LabelSet{"kind": "Provisioning", "phase": "Succeeded"}
	assert.Equal(t, 1.0, counter(after, "bpa_runs_total", succeeded)-counter(before, "bpa_runs_total", succeeded))
	created := model.LabelSet{"kind": "Provisioning", "operation": "run-kubespray", "result": "Succeeded"}
	assert.Equal(t, 1.0, counter(after, "bpa_operation_duration_seconds_count", created)-counter(before, "bpa_operation_duration_seconds_count", created))
	assert.Positive(t, counter(after, "bpa_operation_duration_seconds_sum", created)-counter(before, "bpa_operation_duration_seconds_sum", created))

	cluster := model.LabelSet{"namespace": model.LabelValue(p.Namespace), "cluster": model.LabelValue(p.Labels[bpav1.ClusterLabel])}
	assert.Equal(t, float64(len(p.Status.Hosts)), after.Value(t, "bpa_hosts_claimed", cluster))
	assert.Zero(t, after.Value(t, "bpa_artifacts_missing", cluster))
	require.NotEmpty(t, p.Status.Certificates)
	assert.Len(t, after.Find("bpa_certificate_expiry_timestamp_seconds", cluster), len(p.Status.Certificates))
	for _, c := range p.Status.Certificates {
		l := cluster.Clone().Merge(model.LabelSet{"node": model.LabelValue(c.Node), "component": model.LabelValue(c.Component)})
		assert.Equal(t, float64(c.NotAfter.Unix()), after.Value(t, "bpa_certificate_expiry_timestamp_seconds", l), "%s/%s", c.Node, c.Component)
	}
	assert.NotEmpty(t, after["controller_runtime_reconcile_total"], "controller-runtime's own")
}
