package exporter

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/webhook"
)

// mixWorkload serves a 4-replica Deployment's CPU use (cores) and request rate as gauges, set
// by the test.
type mixWorkload struct {
	mu       sync.Mutex
	cpu, rps float64
}

func (w *mixWorkload) set(cpu, rps float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cpu, w.rps = cpu, rps
}

func (w *mixWorkload) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	w.mu.Lock()
	cpu, rps := w.cpu, w.rps
	w.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# TYPE app_cpu_cores gauge\napp_cpu_cores{namespace=\"shop\",app=\"web\"} %g\n", cpu)
	fmt.Fprintf(&b, "# TYPE app_requests_per_second gauge\napp_requests_per_second{namespace=\"shop\",app=\"web\"} %g\n", rps)
	b.WriteString("# TYPE kube_deployment_spec_replicas gauge\nkube_deployment_spec_replicas{namespace=\"shop\",deployment=\"web\"} 4\n")
	b.WriteString("# TYPE kube_deployment_status_replicas_ready gauge\nkube_deployment_status_replicas_ready{namespace=\"shop\",deployment=\"web\"} 4\n")
	_, _ = rw.Write(b.Bytes())
}

// fixedTarget is a scale subresource at 4 replicas that nothing writes (the policy is shadow).
type fixedTarget struct{}

func (fixedTarget) GetScale(context.Context, config.Target) (webhook.ScaleInfo, error) {
	return webhook.ScaleInfo{Replicas: 4, Ready: 4, ReadyKnown: true, UID: "uid-web"}, nil
}
func (fixedTarget) SetReplicas(context.Context, config.Target, int32, webhook.ScaleInfo) (webhook.WriteResult, error) {
	return webhook.WriteResult{}, fmt.Errorf("shadow: nothing is written")
}
func (fixedTarget) SetHPAFloor(context.Context, config.Target, int32) (webhook.WriteResult, error) {
	return webhook.WriteResult{}, fmt.Errorf("not in this test")
}
func (fixedTarget) ScalingHPA(context.Context, config.Target) (string, error) { return "", nil }
func (fixedTarget) GetTidal(context.Context, config.WatchResource, string, string) (*unstructured.Unstructured, error) {
	return nil, fmt.Errorf("not in this test")
}
func (fixedTarget) MarkTidal(context.Context, config.WatchResource, string, string, string) error {
	return fmt.Errorf("not in this test")
}

// TestTwoMetricsIntegration runs a policy on CPU and requests per second through a real
// Prometheus: the exporter publishes both metrics' loads and names the deciding metric in
// debi_decision_info, which switches from rps to cpu when the load mix changes, and the webhook,
// reading fresh per-metric inputs from Prometheus, decides the same count and names the same
// metric.
func TestTwoMetricsIntegration(t *testing.T) {
	dir := os.Getenv("DEBI_PROMETHEUS_DIR")
	if dir == "" {
		testenv.SkipOrFail(t, "DEBI_PROMETHEUS_DIR is not set: set it to the directory holding the prometheus binary (hack/servers.sh prometheus prints it)")
	}
	if testing.Short() {
		t.Skip("integration test; skipped in -short mode")
	}
	wlL, expL := listen(t), listen(t)
	promAddr := startPrometheus(t, dir, wlL.Addr().String(), expL.Addr().String())
	wl := &mixWorkload{}
	// 4 pods: cpu 1 core (request 1, target 0.5: ceil(1/0.5) = 2 pods), 1500 rps at 100 per pod
	// (15 pods): rps decides.
	wl.set(1, 1500)
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
    target: {namespace: shop, name: web}
    algorithm: hpa
    history_step: 2s
    lead_time: 2s
    scaling: {min_replicas: 1, max_replicas: 40, target: 0.5, scale_up_percent: 1000}
    queries:
      replicas: 'max(kube_deployment_spec_replicas{namespace="shop",deployment="web"})'
      ready_replicas: 'max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"})'
    metrics:
      - name: cpu
        query: 'sum(app_cpu_cores{namespace="shop",app="web"})'
        target: {type: Utilization}
        request: 1
        stabilization: {window: 2s}
      - name: rps
        unit: requests_per_second
        query: 'sum(app_requests_per_second{namespace="shop",app="web"})'
        target: {type: AverageValue, averageValue: "100"}
        stabilization: {window: 2s}
webhook:
  mode: shadow
  allow_unauthenticated: true
`, promAddr)), 0o644); err != nil {
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
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: prom}, logger, prometheus.NewRegistry())
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
	ctl, err := webhook.NewController(cfg, webhook.ControllerOptions{Actuator: fixedTarget{},
		Query: webhook.PrometheusQuery(client, time.Second, 0), Registerer: prometheus.NewRegistry(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	info := func() (metric string, recommended float64) {
		v, _, _, err := prom.Query(context.Background(), `debi_decision_info{policy="web"}`, time.Now())
		if err != nil {
			return "", math.NaN()
		}
		vec, _ := v.(model.Vector)
		if len(vec) != 1 {
			return "", math.NaN()
		}
		metric = string(vec[0].Metric["metric"])
		v, _, _, err = prom.Query(context.Background(), `debi_recommended_replicas{policy="web"}`, time.Now())
		if vec, _ := v.(model.Vector); err == nil && len(vec) == 1 {
			recommended = float64(vec[0].Value)
		}
		return metric, recommended
	}
	check := func(want string, wantReplicas int32) {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		for {
			m, rec := info()
			if m == want && rec == float64(wantReplicas) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the exporter's deciding metric is %q recommending %v; want %q recommending %d", m, rec, want, wantReplicas)
			}
			time.Sleep(300 * time.Millisecond)
		}
		// Per-metric loads are published with the metric label.
		for _, m := range []string{"cpu", "rps"} {
			v, _, _, err := prom.Query(context.Background(), fmt.Sprintf(`debi_load_ratio{policy="web",metric=%q,load="w"}`, m), time.Now())
			if vec, _ := v.(model.Vector); err != nil || len(vec) != 1 {
				t.Errorf("debi_load_ratio for metric %s: %v %v", m, v, err)
			}
		}
		outs, err := ctl.Alerts(context.Background(), &webhook.AlertmanagerMessage{Version: "4", Status: webhook.StatusFiring,
			Alerts: []webhook.Alert{{Status: webhook.StatusFiring, Labels: map[string]string{"policy": "web"}, StartsAt: time.Now()}}})
		if err != nil {
			t.Fatal(err)
		}
		o := outs[0]
		t.Logf("exporter: %s decides %d; webhook: %d→%d (%s, metric %s) held %q", want, wantReplicas, o.Before, o.After, o.Reason, o.Metric, o.Held)
		if o.Metric != want || o.After != wantReplicas || o.Held != "" {
			t.Errorf("webhook decided %d by %q (held %q); want %d by %q", o.After, o.Metric, o.Held, wantReplicas, want)
		}
	}
	// hpa at target 0.5 on 4 pods: rps ceil(1500/100) = 15, cpu ceil(1/0.5) = 2.
	check("rps", 15)
	// The mix changes: cpu 12 cores → ceil(12/0.5) = 24 pods, rps 300 → 3.
	wl.set(12, 300)
	check("cpu", 24)
}
