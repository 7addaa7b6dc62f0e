package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"
	"golang.org/x/crypto/bcrypt"

	"github.com/debi-scaler/debi/internal/promclient"
	"github.com/debi-scaler/debi/internal/testenv"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// endpointBackfill writes series (name{labels} → value, constant) over [start, end] at step
// into a new TSDB with promtool and returns its directory.
func endpointBackfill(t *testing.T, promDir string, start, end time.Time, step time.Duration, series map[string]float64) string {
	t.Helper()
	tmp := t.TempDir()
	var om strings.Builder
	families := map[string]bool{}
	for s := range series {
		name, _, _ := strings.Cut(s, "{")
		if !families[name] {
			families[name] = true
			fmt.Fprintf(&om, "# TYPE %s gauge\n", name)
			for s2, v := range series {
				if n2, _, _ := strings.Cut(s2, "{"); n2 == name {
					for ts := start; !ts.After(end); ts = ts.Add(step) {
						fmt.Fprintf(&om, "%s %g %d\n", s2, v, ts.Unix())
					}
				}
			}
		}
	}
	om.WriteString("# EOF\n")
	omFile := filepath.Join(tmp, "history.om")
	if err := os.WriteFile(omFile, []byte(om.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(tmp, "data")
	if out, err := exec.Command(filepath.Join(promDir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", "-q", omFile, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	return data
}

// startAuthPrometheus starts a real Prometheus over data whose API asks for basic auth
// (user debi, password pw): its --web.config.file.
func startAuthPrometheus(t *testing.T, promDir, data string) string {
	t.Helper()
	tmp := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(tmp, "web.yml")
	cfg := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(web, []byte(fmt.Sprintf("basic_auth_users:\n  debi: %q\n", hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("global: {scrape_interval: 15s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	addr := l.Addr().String()
	l.Close()
	testenv.Start(t, tmp, "prometheus-b", filepath.Join(promDir, "prometheus"), "--config.file="+cfg, "--web.config.file="+web,
		"--storage.tsdb.path="+data, "--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn")
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, url+"/-/ready", nil)
		req.SetBasicAuth("debi", "pw")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTwoPrometheusEndpoints: two real Prometheus servers hold the same series with different
// values; a policy reads one metric from each (the second behind basic auth, which only its
// endpoint's http_config has). The exporter's step and history, and the what-if, read each
// metric from its own server; a metric on an endpoint that does not answer is an error naming
// the metric and the endpoint, and the other policy runs.
func TestTwoPrometheusEndpoints(t *testing.T) {
	promDir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	const step = 15 * time.Second
	end := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	start := end.Add(-time.Hour)
	sizes := map[string]float64{
		`kube_deployment_spec_replicas{namespace="shop",deployment="web"}`:         2,
		`kube_deployment_status_replicas_ready{namespace="shop",deployment="web"}`: 2,
		`kube_deployment_spec_replicas{namespace="shop",deployment="api"}`:         2,
		`kube_deployment_status_replicas_ready{namespace="shop",deployment="api"}`: 2,
		`debi_ep_requests_per_second{namespace="shop",workload="web"}`:             30, // A's: web's first metric
		`debi_ep_requests_per_second{namespace="shop",workload="api"}`:             10,
	}
	aURL := testenv.Prometheus(t, promDir, endpointBackfill(t, promDir, start, end, step, sizes))
	bURL := startAuthPrometheus(t, promDir, endpointBackfill(t, promDir, start, end, step, map[string]float64{
		`debi_ep_requests_per_second{namespace="shop",workload="web"}`: 70, // B's: the same series, another value
	}))
	// A port nothing listens on: an endpoint that does not answer.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + l.Addr().String()
	l.Close()

	query := `sum(debi_ep_requests_per_second{namespace="shop",workload="web"})`
	cfg := loadConfig(t, fmt.Sprintf(`
global: {interval: 15s, prometheus_url: %[1]q}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    history_step: 15s
    history: 20
    metrics:
      - {name: rps_a, unit: requests_per_second, query: '%[3]s', target: {type: AverageValue, averageValue: "10"}}
      - name: rps_b
        unit: requests_per_second
        query: '%[3]s'
        endpoint: {url: %[2]q, http_config: {basic_auth: {username: debi, password: pw}}}
        target: {type: AverageValue, averageValue: "10"}
  - name: api
    target: {namespace: shop, name: api}
    algorithm: hpa
    history_step: 15s
    history: 20
    metrics:
      - {name: rps, unit: requests_per_second, query: 'sum(debi_ep_requests_per_second{namespace="shop",workload="api"})', target: {type: AverageValue, averageValue: "10"}}
      - {name: down, unit: requests_per_second, query: 'sum(debi_ep_requests_per_second{namespace="shop",workload="api"})', endpoint: {url: %[4]q}, target: {type: AverageValue, averageValue: "10"}}
`, aURL, bURL, query, downURL))
	client, err := promclient.New(aURL, commoncfg.DefaultHTTPClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	a := v1.NewAPI(client)
	logs := &testenv.Buffer{}
	e, err := New(cfg, cfg.Policies, a, slog.New(slog.NewTextHandler(logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if len(e.endpoints) != 2 {
		t.Fatalf("%d endpoint clients, want 2 (B and the one that does not answer)", len(e.endpoints))
	}

	// The exporter: the history and two live steps at the backfilled range's end.
	ctx := context.Background()
	for k := range 2 {
		e.Step(ctx, end.Add(-step).Add(time.Duration(k)*step))
	}
	want := map[string]float64{"web/rps_a": 30, "web/rps_b": 70, "api/rps": 10}
	for _, p := range e.snap.Load().policies {
		for _, m := range p.metrics {
			key := p.labels[0] + "/" + m.name
			w, ok := want[key]
			if !ok {
				if !math.IsNaN(m.demand) {
					t.Errorf("%s: demand %v from an endpoint that does not answer", key, m.demand)
				}
				continue
			}
			if m.demand != w {
				t.Errorf("%s: demand %v, want %v from its own server", key, m.demand, w)
			}
		}
		if p.labels[0] == "web" && (p.stale != 0 || p.historyPoints == 0) {
			t.Errorf("web: stale %v, %v history points: want fresh, with history", p.stale, p.historyPoints)
		}
	}
	// The error of the metric on the endpoint that does not answer names the metric and the
	// endpoint; so does the exporter's log.
	api := e.policies[1]
	_, unanswered := e.checkPolicy(ctx, api, end)
	if len(unanswered) != 1 {
		t.Fatalf("unanswered %v, want the down metric's query", unanswered)
	}
	msg := unanswered[0].Error()
	for _, w := range []string{"policies[1].metrics[1].query", `metric "down"`, "endpoint " + downURL, "connection refused"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not name %s", msg, w)
		}
	}
	if log := logs.String(); !strings.Contains(log, `metric \"down\"`) && !strings.Contains(log, "metric down") || !strings.Contains(log, downURL) {
		t.Errorf("the exporter's log does not name the down metric and its endpoint:\n%s", log)
	}

	// The what-if: each metric's history from its own server.
	web := &cfg.Policies[0]
	h, err := DemandHistory(ctx, a, web, start, end, web.HistoryStep)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []float64{30, 70} {
		m := h.Metrics[i]
		for j, v := range m.Values {
			if v != w {
				t.Fatalf("what-if %s point %d: %v, want %v from its own server", m.Name, j, v, w)
			}
		}
	}
	_, err = DemandHistory(ctx, a, &cfg.Policies[1], start, end, web.HistoryStep)
	if err == nil || !strings.Contains(err.Error(), "metrics[1].query (metric down, endpoint "+downURL+")") {
		t.Errorf("what-if over the endpoint that does not answer: %v, want an error naming the metric and its endpoint", err)
	}
	t.Logf("what-if error: %v", err)
}
