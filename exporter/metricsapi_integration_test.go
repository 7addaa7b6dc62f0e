package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/webhook"
)

// TestMetricsAPIIntegration runs a policy on a PromQL CPU metric and an External metric on the
// real servers: the CPU use is scraped by a real Prometheus, the External metric is served by a
// test aggregated API server behind a real kube-apiserver's aggregator (APIService and
// ExternalName Service), read by the exporter through the clients it builds from its kube
// credentials; a Pods metric reads the pods of the target Deployment's scale subresource's
// selector. The policy is decided metric by metric, in the exporter and in the webhook alike:
// the External metric decides while it asks for more, cpu when the queue empties. When the
// external metrics API is removed, the metric is named missing with its cause (the exporter's
// debi_metric_source_failed, and the webhook's MetricsPipeline condition), and nothing scales
// down although cpu asks for less. The values the exporter read are in Prometheus as
// debi_metric_source_value, the history a restarted exporter loads.
func TestMetricsAPIIntegration(t *testing.T) {
	dir := os.Getenv("DEBI_PROMETHEUS_DIR")
	if dir == "" {
		testenv.SkipOrFail(t, "DEBI_PROMETHEUS_DIR is not set: set it to the directory holding the prometheus binary (hack/servers.sh prometheus prints it)")
	}
	if testing.Short() {
		t.Skip("integration test; skipped in -short mode")
	}
	rc := startKubeAPIServer(t)
	kube := kubernetes.NewForConfigOrDie(rc)
	ns := testenv.KubeNamespace(t, kube, "debi-ext")
	ms := testenv.NewMetricsServer(t, kube, ns, "metrics")
	ms.Set("queue_depth", 300, 60)             // two series, 360 in all
	ms.Set("http_requests_per_second", 10, 20) // two pods, 30 in all: 1 pod at 100 per pod
	ms.Register(t, rc, testenv.ExternalMetricsGV, testenv.CustomMetricsGV)
	// The target, for its pods' selector: the scale subresource's status.selector, which the
	// API server computes from spec.selector (no controller needed).
	labels := map[string]string{"app": "web"}
	if _, err := kube.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(4)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	wlL, expL := listen(t), listen(t)
	promAddr := startPrometheus(t, dir, wlL.Addr().String(), expL.Addr().String())
	wl := &mixWorkload{}
	wl.set(1, 0) // 1 core: cpu asks ceil(1/0.5) = 2 pods of the 4
	wlSrv := &http.Server{Handler: wl, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = wlSrv.Serve(wlL) }()
	t.Cleanup(func() { _ = wlSrv.Close() })

	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
global:
  prometheus_url: http://%s
  interval: 1s
  query_timeout: 800ms
exporter:
  query_offset: 500ms
policies:
  - name: web
    target: {namespace: %s, name: web}
    algorithm: hpa
    history_step: 2s
    lead_time: 2s
    scaling: {min_replicas: 1, max_replicas: 40, target: 0.5, scale_up_percent: 1000, scale_down_stabilization: 0s}
    queries:
      replicas: 'max(kube_deployment_spec_replicas{namespace="shop",deployment="web"})'
      ready_replicas: 'max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"})'
    metrics:
      - name: cpu
        query: 'sum(app_cpu_cores{namespace="shop",app="web"})'
        target: {type: Utilization}
        request: 1
        stabilization: {window: 2s}
      - name: queue_depth
        unit: items
        external: {metric: queue_depth, selector: {match_labels: {queue: orders}}}
        target: {type: AverageValue, averageValue: "30"}
        stabilization: {window: 2s}
      - name: pod_rps
        unit: requests_per_second
        pods: {metric: http_requests_per_second}
        target: {type: AverageValue, averageValue: "100"}
        stabilization: {window: 2s}
webhook:
  mode: shadow
  allow_unauthenticated: true
`, promAddr, ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	client, err := api.NewClient(api.Config{Address: "http://" + promAddr})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)
	var logBuf testenv.Buffer
	logger := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: prom, RestConfig: rc}, logger, reg)
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- serveAndRun(ctx, srv, expL) }()
	t.Cleanup(func() {
		cancel()
		<-runErr
		if t.Failed() {
			t.Logf("exporter log:\n%s", logBuf.String())
		}
	})
	var last elasticscaler.Decision
	ctl, err := webhook.NewController(cfg, webhook.ControllerOptions{Actuator: fixedTarget{},
		Query: webhook.PrometheusQuery(client, time.Second, 0), Registerer: prometheus.NewRegistry(), Logger: logger,
		Observe: func(o elasticscaler.Decision) { last = o }})
	if err != nil {
		t.Fatal(err)
	}
	instant := func(q string) (model.Vector, error) {
		v, _, _, err := prom.Query(context.Background(), q, time.Now())
		vec, _ := v.(model.Vector)
		return vec, err
	}
	// decided waits until Prometheus has the exporter deciding want by metric (reason, when set).
	decided := func(metric, reason string, want float64) {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		for {
			info, _ := instant(`debi_decision_info{policy="web"}`)
			rec, _ := instant(`debi_recommended_replicas{policy="web"}`)
			if len(info) == 1 && len(rec) == 1 && string(info[0].Metric["metric"]) == metric &&
				(reason == "" || string(info[0].Metric["reason"]) == reason) && float64(rec[0].Value) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("exporter: decision %v recommending %v; want %v by %s (%s)", info, rec, want, metric, reason)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	alert := func() webhook.Outcome {
		t.Helper()
		outs, err := ctl.Alerts(context.Background(), &webhook.AlertmanagerMessage{Version: "4", Status: webhook.StatusFiring,
			Alerts: []webhook.Alert{{Status: webhook.StatusFiring, Labels: map[string]string{"policy": "web"}, StartsAt: time.Now()}}})
		if err != nil {
			t.Fatal(err)
		}
		return outs[0]
	}

	// 1. 360 messages at 30 per pod: ceil(360/30) = 12 pods, above cpu's 2: queue_depth decides,
	// in the exporter and the webhook.
	decided("queue_depth", "", 12)
	if o := alert(); o.After != 12 || o.Metric != "queue_depth" || o.Held != "" {
		t.Errorf("webhook: %d→%d by %q (held %q); want 12 by queue_depth", o.Before, o.After, o.Metric, o.Held)
	}
	// What the exporter read is in Prometheus, as the history query reads it back.
	if v, err := instant(config.SourceHistoryQuery("web", "queue_depth")); err != nil || len(v) != 1 || v[0].Value != 360 {
		t.Errorf("history series %v %v; want 360", v, err)
	}
	// The selector reached the metrics server through the aggregator.
	found := false
	for q := range ms.Seen("queue_depth") {
		found = found || strings.Contains(q, "labelSelector=queue%3Dorders")
	}
	if !found {
		t.Errorf("the metrics server saw %v; want reads with the selector queue=orders", ms.Seen("queue_depth"))
	}
	// The Pods metric reads the pods of the Deployment's selector, read from its scale
	// subresource.
	found = false
	for q := range ms.Seen("http_requests_per_second") {
		found = found || strings.HasPrefix(q, "pods/*?labelSelector=app%3Dweb")
	}
	if !found {
		t.Errorf("the metrics server saw %v; want pods/* reads with the selector app=web", ms.Seen("http_requests_per_second"))
	}
	if v, err := instant(`debi_metric_source_value{policy="web",metric="pod_rps"}`); err != nil || len(v) != 1 || v[0].Value != 30 {
		t.Errorf("pod_rps read %v %v; want 10 + 20 = 30", v, err)
	}

	// 2. The queue empties to 15: ceil(15/30) = 1 pod, below cpu's 2: cpu decides, down to 2.
	ms.Set("queue_depth", 15)
	decided("cpu", "", 2)

	// 3. Back to 360, then the external metrics API is removed: queue_depth is missing, cpu
	// still asks for 2, and the policy holds at the current 4 (metric-missing), never lower.
	ms.Set("queue_depth", 360)
	decided("queue_depth", "", 12)
	ms.Unregister(t, rc, testenv.ExternalMetricsGV)
	decided("cpu", "metric-missing", 4)
	failed, err := instant(`debi_metric_source_failed{policy="web",metric="queue_depth"} == 1`)
	if err != nil || len(failed) != 1 {
		t.Fatalf("debi_metric_source_failed: %v %v; want one reason at 1", failed, err)
	}
	reason := string(failed[0].Metric["reason"])
	// The Reader's discovery answer is kept for a minute: the API's removal is first a 404 of
	// the read (not_found), then, once discovery is asked again, not_served.
	if reason != "not_found" && reason != "not_served" {
		t.Errorf("reason %q; want not_found or not_served", reason)
	}
	wantLog := fmt.Sprintf(`external metric \"queue_depth\" in namespace \"%s\"`, ns)
	if !strings.Contains(logBuf.String(), wantLog) || !strings.Contains(logBuf.String(), "reason="+reason) {
		t.Errorf("the exporter's log does not name %s with reason %s", wantLog, reason)
	}
	o := alert()
	if o.After < 4 {
		t.Errorf("webhook scaled down to %d with queue_depth missing", o.After)
	}
	cond := sourcesOf(t, last)
	wantCause := fmt.Sprintf(`queue_depth: external metric "queue_depth" in namespace %q: %s`, ns, config.SourceReasonText(reason))
	if !strings.Contains(cond, wantCause) {
		t.Errorf("webhook observation %q; want it to name %q", cond, wantCause)
	}
	t.Logf("webhook with the API removed: %d→%d held %q; metrics read: %s", o.Before, o.After, o.Held, cond)
	if n := math.Round(gaugeValue(t, reg, "debi_metric_source_errors_total", "metric", "queue_depth", "reason", reason)); n < 1 {
		t.Errorf("debi_metric_source_errors_total{reason=%q} = %v", reason, n)
	}
}

// sourcesOf is what the MetricsPipeline condition adds of an observation's reads: the
// failed metrics-API metrics with their cause (elasticscaler.MetricsRead.Sources).
func sourcesOf(t *testing.T, o elasticscaler.Decision) string {
	t.Helper()
	if o.Metrics == nil {
		t.Fatalf("observation %+v read no metrics", o)
	}
	return strings.Join(o.Metrics.Sources, "; ")
}

// gaugeValue is the value of the exporter's series of policy web with the given labels.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	v, ok := value(t, reg, name, "web", kv...)
	if !ok {
		t.Fatalf("%s %v absent", name, kv)
	}
	return v
}
