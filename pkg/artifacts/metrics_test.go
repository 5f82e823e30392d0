package artifacts_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/promtest"
)

// testMetrics: bpa serve's /metrics answers a token of the server's audience with the
// bpa-metrics-reader role, and no other; it counts requests by route class and code, upload
// bytes, and the store's use against its quota.
func testMetrics(t *testing.T, e *env) {
	ctx := context.Background()
	reader := artifactstest.Token(ctx, t, e.rig, "metrics-reader", "bpa-metrics-reader")
	readerAPI := artifactstest.TokenFor(ctx, t, e.rig, "metrics-reader", "")
	s := e.serveOpts(t, "", true, artifacts.Options{Dir: t.TempDir(), QuotaTotal: 4 << 20})
	url := s.URL + artifacts.MetricsPath

	for who, tok := range map[string]string{"no token": "", "an uploader": e.uploader, "the reader's Kubernetes API token": readerAPI} {
		status, _ := get(t, url, tok)
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, who)
	}

	up, _ := s.client(t, e.uploader)
	f, _ := randomFile(t, 300*kib)
	_, err := up.Push(ctx, f, "dl.k8s.io/metrics/a")
	require.NoError(t, err)
	status, _ := get(t, s.URL+"/files/dl.k8s.io/metrics/a", "")
	require.Equal(t, http.StatusOK, status)
	status, _ = get(t, s.URL+"/files/dl.k8s.io/metrics/nothing", "")
	require.Equal(t, http.StatusNotFound, status)

	status, body := get(t, url, reader)
	require.Equal(t, http.StatusOK, status, string(body))
	m := promtest.Parse(t, body)
	assert.Equal(t, 1.0, m.Value(t, "bpa_serve_requests_total", model.LabelSet{"route": "files", "method": "get", "code": "200"}))
	assert.Equal(t, 1.0, m.Value(t, "bpa_serve_requests_total", model.LabelSet{"route": "files", "method": "get", "code": "404"}))
	assert.Equal(t, 1.0, m.Value(t, "bpa_serve_requests_total", model.LabelSet{"route": "files", "method": "post", "code": "201"}))
	assert.Equal(t, 2.0, m.Value(t, "bpa_serve_requests_total", model.LabelSet{"route": "metrics", "code": "401"}), "no token, an API token")
	assert.Equal(t, 1.0, m.Value(t, "bpa_serve_requests_total", model.LabelSet{"route": "metrics", "code": "403"}), "the uploader")
	assert.GreaterOrEqual(t, m.Value(t, "bpa_serve_upload_bytes_total", model.LabelSet{"route": "files"}), float64(300*kib))
	assert.Positive(t, m.Value(t, "bpa_serve_request_duration_seconds_count", model.LabelSet{"route": "files", "method": "patch"}))
	assert.Equal(t, float64(300*kib), m.Value(t, "bpa_serve_storage_used_bytes", model.LabelSet{"part": "files"}))
	assert.Equal(t, float64(4<<20), m.Value(t, "bpa_serve_storage_quota_bytes", nil))
	assert.NotEmpty(t, m["go_goroutines"], "the Go runtime's too")
}
