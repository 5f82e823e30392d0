// Package promtest reads what a /metrics endpoint answered, for the tests that scrape BPA's
// controller and bpa serve.
package promtest

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// Samples are a scrape's samples by metric name (a histogram's as _bucket, _sum, _count).
type Samples map[string][]*model.Sample

// Parse reads a scrape in Prometheus's text format.
func Parse(t testing.TB, body []byte) Samples {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	out := Samples{}
	for _, f := range families {
		v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, f)
		require.NoError(t, err)
		for _, s := range v {
			name := string(s.Metric[model.MetricNameLabel])
			out[name] = append(out[name], s)
		}
	}
	return out
}

// Find is the samples of name whose labels include want.
func (m Samples) Find(name string, want model.LabelSet) []*model.Sample {
	var out []*model.Sample
	for _, s := range m[name] {
		if have := model.LabelSet(s.Metric); have.Clone().Merge(want).Equal(have) {
			out = append(out, s)
		}
	}
	return out
}

// Value is the one sample of name whose labels include want; it fails t unless there is
// exactly one.
func (m Samples) Value(t testing.TB, name string, want model.LabelSet) float64 {
	t.Helper()
	found := m.Find(name, want)
	require.Lenf(t, found, 1, "%s%v among %v", name, want, m[name])
	return float64(found[0].Value)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names are the metric names collectors describe.
func Names(collectors ...prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}
