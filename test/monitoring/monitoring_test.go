// Package monitoring tests config/prometheus: the alerting rules with the real promtool
// (built by hack/build-tools.sh promtool), the metrics the rules and the dashboard use
// against those BPA exports, and the runbook of each alert in docs/monitoring.md.
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/test/framework/promtest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

func configFile(t *testing.T, name string) []byte {
	t.Helper()
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "config", "prometheus", name))
	require.NoError(t, err)
	return data
}

// prometheusRule is the part of the operator's PrometheusRule the tests read; spec is
// Prometheus's own rule file format.
type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
	raw map[string]any
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func rules(t *testing.T) prometheusRule {
	t.Helper()
	var r prometheusRule
	data := configFile(t, "alerts.yaml")
	require.NoError(t, yaml.Unmarshal(data, &r))
	require.NoError(t, yaml.Unmarshal(data, &r.raw))
	require.Equal(t, "PrometheusRule", r.raw["kind"])
	return r
}

func promtool(t *testing.T) string {
	t.Helper()
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	p := filepath.Join(root, "bin", "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run hack/build-tools.sh promtool", p)
	}
	return p
}

// TestAlertRules: promtool checks the PrometheusRule's rules and runs their unit tests
// (testdata/alerts_test.yaml), which must cover every alert both firing and silent.
func TestAlertRules(t *testing.T) {
	r := rules(t)
	dir := t.TempDir()
	spec, err := yaml.Marshal(r.raw["spec"]) // as written, with every field
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600))
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o600))
	bin := promtool(t)

	out, err := exec.Command(bin, "check", "rules", "--lint-fatal", filepath.Join(dir, "rules.yaml")).CombinedOutput()
	require.NoError(t, err, string(out))
	cmd := exec.Command(bin, "test", "rules", "alerts_test.yaml")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	var unit struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(tests, &unit))
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range unit.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				silent[a.AlertName] = true
			}
		}
	}
	for _, a := range alerts(r) {
		assert.True(t, fires[a.Alert], "a unit test where %s fires", a.Alert)
		assert.True(t, silent[a.Alert], "a unit test where %s stays silent", a.Alert)
		for _, k := range []string{"summary", "description", "runbook_url"} {
			assert.NotEmpty(t, a.Annotations[k], "%s: annotation %s", a.Alert, k)
		}
		assert.Contains(t, []string{"warning", "critical"}, a.Labels["severity"], a.Alert)
	}
}

func alerts(r prometheusRule) []rule {
	var out []rule
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert != "" {
				out = append(out, rule)
			}
		}
	}
	return out
}

// bpaName is a name in BPA's namespace in an expression; label values are quoted, and the
// names follow Prometheus's conventions, so a bare bpa_ word is a metric.
var bpaName = regexp.MustCompile(`\bbpa_[a-z0-9_]+\b`)

// TestMonitoringUsesExportedMetrics: every BPA metric the rules and the dashboard query is
// one the controller or bpa serve exports (a histogram's as _bucket, _sum or _count), and the
// rules' up{job} names the controller's metrics Service.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	exported := promtest.Names(append(controller.MetricCollectors(), artifacts.MetricCollectors()...)...)
	known := func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(exported, base) {
				return true
			}
		}
		return false
	}
	exprs := map[string]string{}
	for _, a := range alerts(rules(t)) {
		exprs["alert "+a.Alert] = a.Expr
	}
	for title, e := range dashboardQueries(t) {
		exprs["panel "+title] = e
	}
	used := 0
	for where, e := range exprs {
		for _, name := range bpaName.FindAllString(e, -1) {
			used++
			assert.True(t, known(name), "%s: %s is not a metric BPA exports (%v)", where, name, exported)
		}
	}
	assert.Greater(t, used, 10)

	var svc corev1.Service
	manager := strings.Split(string(mustRead(t, filepath.Join("config", "manager", "manager.yaml"))), "\n---\n")
	require.NoError(t, yaml.Unmarshal([]byte(manager[len(manager)-1]), &svc))
	assert.Contains(t, exprs["alert BPAControllerDown"], `up{job="`+svc.Name+`"}`, "the ServiceMonitor's job is the Service's name")
}

// dashboardQueries are the dashboard's PromQL queries by panel title.
func dashboardQueries(t *testing.T) map[string]string {
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(configFile(t, "dashboard.yaml"), &cm))
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"], "the label Grafana's sidecar loads dashboards by")
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal([]byte(cm.Data["bpa.json"]), &dash))
	out := map[string]string{}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			out[p.Title+"#"+string(rune('A'+i))] = tg.Expr
		}
	}
	require.NotEmpty(t, out)
	return out
}

func mustRead(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return data
}

// TestRunbooks: each alert's runbook_url points at its own section of docs/monitoring.md.
func TestRunbooks(t *testing.T) {
	doc := string(mustRead(t, filepath.Join("docs", "monitoring.md")))
	for _, a := range alerts(rules(t)) {
		anchor := strings.ToLower(a.Alert)
		assert.Equal(t, "https://github.com/akraino-edge-stack/bpa/blob/main/docs/monitoring.md#"+anchor, a.Annotations["runbook_url"])
		assert.Contains(t, doc, "\n### "+a.Alert+"\n", "a section for %s", a.Alert)
	}
}

// TestPrometheusBase: config/prometheus builds with the pinned kustomize into what
// docs/monitoring.md describes, in bpa-system, and leaves Prometheus's own namespace alone.
func TestPrometheusBase(t *testing.T) {
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(root, "bin", "kustomize"), "build", filepath.Join(root, "config", "prometheus")).Output()
	require.NoError(t, err, "kustomize build config/prometheus (hack/build-tools.sh kustomize)")
	var kinds []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
			Subjects []struct{ Name, Namespace string } `json:"subjects"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		kinds = append(kinds, o.Kind+"/"+o.Metadata.Name)
		if o.Kind != "ClusterRoleBinding" {
			assert.Equal(t, "bpa-system", o.Metadata.Namespace, o.Kind)
		}
		for _, s := range o.Subjects {
			if s.Name == "prometheus-k8s" {
				assert.Equal(t, "monitoring", s.Namespace, "kube-prometheus's Prometheus keeps its namespace")
			}
		}
	}
	assert.ElementsMatch(t, []string{"ServiceMonitor/bpa-controller", "ServiceMonitor/bpa-artifacts", "PrometheusRule/bpa",
		"ConfigMap/bpa-grafana-dashboard", "ServiceAccount/bpa-metrics", "ClusterRoleBinding/bpa-metrics-reader-prometheus",
		"ClusterRoleBinding/bpa-metrics-reader-bpa-metrics"}, kinds)
}
