package exporter

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/debi-scaler/debi/internal/testenv"
)

// TestElasticScalerSeveralMetrics: an ElasticScaler as the guide writes one with several metrics
// of different types — an ExternalServer (PromQL) metric and an External metric — created on a
// real kube-apiserver, whose External metric a test aggregated metrics server serves behind the
// real aggregator, is honoured metric by metric on the non-HPA path (APA): the exporter reads
// the External metric through the aggregator at every step, each metric has its own loads, the
// one asking for more decides (queue_depth, then qps when the queue drains), and when the
// external metrics API goes away queue_depth is named missing, with its cause, and nothing
// scales down although qps asks for less.
func TestElasticScalerSeveralMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; skipped in -short mode")
	}
	rc := startKubeAPIServer(t)
	dyn := dynamic.NewForConfigOrDie(rc)
	kube := kubernetes.NewForConfigOrDie(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installElasticScalerCRD(t, dyn)
	ns := testenv.KubeNamespace(t, kube, "debi-es")
	ms := testenv.NewMetricsServer(t, kube, ns, "metrics")
	ms.Set("queue_depth", 300, 60) // 360 messages
	ms.Register(t, rc, testenv.ExternalMetricsGV)

	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(`
global: {interval: 1s, prometheus_url: 'http://prometheus:9090', elastic_scalers: {enabled: true}}
exporter: {batch_queries: false}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	const qpsQuery = `sum(rate(http_requests_total{job="worker"}[1m]))`
	qps := 450.0
	f := &fakeQuerier{byExpr: map[string]series{
		qpsQuery: func(time.Time) (float64, bool, error) { return qps, true, nil },
		`max(kube_deployment_spec_replicas{namespace="` + ns + `",deployment="worker"})`:         constant(10),
		`max(kube_deployment_status_replicas_ready{namespace="` + ns + `",deployment="worker"})`: constant(10),
	}}
	l := listen(t)
	logs := &testenv.Buffer{}
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: f, RestConfig: rc}, slog.New(slog.NewTextHandler(logs, nil)), prometheus.NewRegistry())
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serveAndRun(rctx, srv, l) }()
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("exporter log:\n%s", logs.String())
		}
	}()

	// The guide's shape: two metrics of two types on one MetricsTrigger, algorithm APA.
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		// A 5 s stabilisation window (the guide's metrics-policy annotation; default 60 s).
		"metadata": map[string]any{"name": "worker", "namespace": ns, "annotations": map[string]any{"elasticscaler.io/metrics.windowSeconds": "5"}},
		"spec": map[string]any{
			"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
			"minReplicas": int64(1), "maxReplicas": int64(40),
			"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
				"scalingAlgorithm": "APA",
				"metrics": []any{
					map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
						"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
						"query": qpsQuery, "protocol": "http"}},
					map[string]any{"type": "External", "external": map[string]any{
						"metric": map[string]any{"name": "queue_depth", "selector": map[string]any{"matchLabels": map[string]any{"queue": "orders"}}},
						"target": map[string]any{"type": "AverageValue", "averageValue": "30"}}},
				},
			}},
		},
	}}
	if _, err := dyn.Resource(esGVR).Namespace(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := `policy="` + ns + `.worker"`
	scrape := func() string { return scrapeText(l.Addr().String()) }
	decisionRe := regexp.MustCompile(`debi_decision_info\{[^}]*metric="([a-z_]+)"[^}]*` + regexp.QuoteMeta(policy) + `[^}]*reason="([a-z-]+)"`)
	recRe := regexp.MustCompile(`debi_recommended_replicas\{[^}]*` + regexp.QuoteMeta(policy) + `[^}]*\} (\S+)`)
	// wait returns the body once the deciding metric is metric and ok holds for the recommendation.
	wait := func(what, metric string, within time.Duration, ok func(rec float64) bool) string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			body := scrape()
			d, r := decisionRe.FindStringSubmatch(body), recRe.FindStringSubmatch(body)
			if d != nil && r != nil && d[1] == metric {
				if rec, err := strconv.ParseFloat(r[1], 64); err == nil && ok(rec) {
					t.Logf("%s: %s decides (%s), recommendation %v", what, d[1], d[2], rec)
					return body
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: decision %v, recommendation %v; want %s deciding", what, d, r, metric)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// 360 messages at 30 per pod ask for 12 of the 10 pods; 450 QPS at 100 for 5: queue_depth
	// decides a scale-up.
	body := wait("queue 360, 450 QPS", "queue_depth", 40*time.Second, func(rec float64) bool { return rec > 10 })
	for _, m := range []string{"qps", "queue_depth"} {
		if !strings.Contains(body, `debi_load_ratio{load="w",metric="`+m+`",namespace="`+ns+`",`+policy) {
			t.Errorf("no load of metric %s published:\n%s", m, grepPolicy(body))
		}
	}
	// The queue drains: qps decides, a scale-down to its 5.
	ms.Set("queue_depth", 0, 0)
	wait("queue 0, 450 QPS", "qps", 40*time.Second, func(rec float64) bool { return rec < 10 })
	// The external metrics API goes away while QPS falls further: queue_depth is missing, with
	// its cause, and nothing goes below the current 10.
	ms.Set("queue_depth", 300, 60)
	wait("queue 360 again", "queue_depth", 40*time.Second, func(rec float64) bool { return rec > 10 })
	qps = 200
	ms.Unregister(t, rc, testenv.ExternalMetricsGV)
	// The metric's samples stand for its stabilisation window (5 s), then it is missing.
	body = wait("external metrics API gone, 200 QPS", "qps", 60*time.Second, func(rec float64) bool { return rec == 10 })
	if m := decisionRe.FindStringSubmatch(body); m == nil || m[2] != "metric-missing" {
		t.Errorf("decision %v; want reason metric-missing", m)
	}
	if !regexp.MustCompile(`debi_metric_source_failed\{metric="queue_depth",[^}]*` + regexp.QuoteMeta(policy) + `[^}]*reason="(not_found|not_served)"[^}]*\} 1`).MatchString(body) {
		t.Errorf("debi_metric_source_failed does not name queue_depth's cause:\n%s", grepSource(body))
	}
}

// grepSource keeps the metrics-API source series of a scrape.
func grepSource(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "debi_metric_source") || strings.HasPrefix(l, "debi_decision_info") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
