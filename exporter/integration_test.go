package exporter

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
)

// The trace of the integration test, in seconds since the workload started: 0.4 core, a burst
// of 3 cores, 0.4 core again. With 2 replicas of 1 core (min_replicas 2, bounds 0.3–0.7),
// Algorithm 2 keeps 2 replicas while demand stays at or below about 0.66 core and recommends
// more above (METHOD §5: U(2) = 0.3, tolerance 0.1), so the scale alert must fire during the
// burst and resolve once rate1m has forgotten it.
const (
	burstStart = 10 * time.Second
	burstEnd   = 25 * time.Second
	lowDemand  = 0.4
	highDemand = 3.0
)

// cumulativeCPU is ∫₀ᵗ demand: the CPU-seconds the workload has used t after it started.
func cumulativeCPU(t time.Duration) float64 {
	s := t.Seconds()
	a, b := burstStart.Seconds(), burstEnd.Seconds()
	switch {
	case s < a:
		return lowDemand * s
	case s < b:
		return lowDemand*a + highDemand*(s-a)
	default:
		return lowDemand*a + highDemand*(b-a) + lowDemand*(s-b)
	}
}

// workload serves cAdvisor- and kube-state-metrics-shaped series of a 2-replica Deployment
// shop/web whose CPU use follows the trace.
type workload struct {
	start time.Time
}

func (w *workload) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	cpu := cumulativeCPU(time.Since(w.start)) / 2 // two pods share the load
	rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b bytes.Buffer
	b.WriteString("# TYPE container_cpu_usage_seconds_total counter\n")
	for _, pod := range []string{"web-5f7c-a", "web-5f7c-b"} {
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total{namespace=\"shop\",pod=%q,container=\"app\",image=\"app:1\",cpu=\"total\"} %g\n", pod, cpu)
		// The pod cgroup repeats the container's use; the rules must not count it twice.
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total{namespace=\"shop\",pod=%q,container=\"\",image=\"\",cpu=\"total\"} %g\n", pod, cpu)
	}
	b.WriteString("# TYPE kube_pod_owner gauge\n")
	for _, pod := range []string{"web-5f7c-a", "web-5f7c-b"} {
		fmt.Fprintf(&b, "kube_pod_owner{namespace=\"shop\",pod=%q,owner_kind=\"ReplicaSet\",owner_name=\"web-5f7c\",owner_is_controller=\"true\"} 1\n", pod)
	}
	b.WriteString("# TYPE kube_replicaset_owner gauge\n")
	b.WriteString("kube_replicaset_owner{namespace=\"shop\",replicaset=\"web-5f7c\",owner_kind=\"Deployment\",owner_name=\"web\",owner_is_controller=\"true\"} 1\n")
	b.WriteString("# TYPE kube_pod_container_resource_requests gauge\n")
	for _, pod := range []string{"web-5f7c-a", "web-5f7c-b"} {
		fmt.Fprintf(&b, "kube_pod_container_resource_requests{namespace=\"shop\",pod=%q,container=\"app\",resource=\"cpu\",unit=\"core\"} 1\n", pod)
	}
	b.WriteString("# TYPE kube_deployment_spec_replicas gauge\nkube_deployment_spec_replicas{namespace=\"shop\",deployment=\"web\"} 2\n")
	b.WriteString("# TYPE kube_deployment_status_replicas_ready gauge\nkube_deployment_status_replicas_ready{namespace=\"shop\",deployment=\"web\"} 2\n")
	_, _ = rw.Write(b.Bytes())
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// startPrometheus runs the real Prometheus from dir with 1 s scrape and evaluation intervals,
// the rules of rules/, and the given scrape targets; it returns the API address.
func startPrometheus(t *testing.T, dir, workloadAddr, exporterAddr string) string {
	t.Helper()
	tmp := t.TempDir()
	rules, err := filepath.Abs("../rules")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s/*.yaml
scrape_configs:
  - job_name: workload
    static_configs: [{targets: [%q]}]
  - job_name: debi-exporter
    static_configs: [{targets: [%q]}]
`, rules, workloadAddr, exporterAddr)
	if err := os.WriteFile(filepath.Join(tmp, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	addr := l.Addr().String()
	l.Close() // Prometheus binds it next; a race with another process is unlikely on loopback
	testenv.Start(t, tmp, "prometheus", filepath.Join(dir, "prometheus"),
		"--config.file="+filepath.Join(tmp, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(tmp, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	testenv.WaitReady(t, "http://"+addr)
	return addr
}

// TestIntegration runs the exporter against a real Prometheus that scrapes a trace-driven
// workload and the exporter and evaluates the rules of rules/. It checks, through Prometheus's
// HTTP API, that the published W1, W2, W3, W and recommended replicas equal what a
// policy.Runner computes from the same inputs (the history advancing once per 2 s history
// step while the exporter decides every second), and that DebiScaleRecommended fires during
// the burst and resolves after it.
func TestIntegration(t *testing.T) {
	dir := os.Getenv("DEBI_PROMETHEUS_DIR")
	if dir == "" {
		testenv.SkipOrFail(t, "DEBI_PROMETHEUS_DIR is not set: set it to the directory holding the prometheus binary (hack/servers.sh prometheus prints it) to run the integration test")
	}
	if testing.Short() {
		t.Skip("integration test takes about 90 s; skipped in -short mode")
	}
	began := time.Now()

	wlL, expL := listen(t), listen(t)
	promAddr := startPrometheus(t, dir, wlL.Addr().String(), expL.Addr().String())
	// The trace starts once Prometheus is ready (it may take seconds on a busy machine).
	wl := &workload{start: time.Now()}
	wlSrv := &http.Server{Handler: wl, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = wlSrv.Serve(wlL) }()
	t.Cleanup(func() { _ = wlSrv.Close() })

	client, err := api.NewClient(api.Config{Address: "http://" + promAddr})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)

	// The policy uses the default queries (the recording rules of rules/ and kube-state-metrics)
	// and the default request query. A budget policy watches the same workload (its queries are
	// web's defaults) in shadow: its u_sla of 0.3 makes the burst, which rate1m smooths to at
	// most 1.05 cores on 2 pods of 1 core, an overload (above 0.6 core), and min_errors above
	// what the test collects keeps its margin at cold_margin, so that its quantiles depend on no
	// forecast made before the exporter's first background training (see budgetCfg).
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
global:
  prometheus_url: http://%[1]s
  interval: 1s
  query_timeout: 800ms
exporter:
  query_offset: 800ms
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: %[2]s-debi
    history_step: 2s
    lead_time: 2s
    scaling: {min_replicas: 2, max_replicas: 20, window: 2s}
    metrics: {window: 3s}
  # The quantile rule, not the default priced one: the priced rule scores the shapes of the
  # path at every tick, and the exporter's first forecast comes a tick or two after the
  # synchronous reference's (its model trains in the background), so their shape scores differ
  # from then on; the priced rule's step-by-step equivalence is exporter.TestBudgetSeriesPriced,
  # and its live path on real servers the e2e shadow policy.
  - name: web-budget
    target: {namespace: shop, name: web-budget}
    algorithm: %[2]s-budget
    history_step: 2s
    lead_time: 2s
    scaling: {min_replicas: 2, max_replicas: 20, budget: {u_sla: 0.3, hold: 4s, rule: quantile}}
    metrics: {window: 3s}
    budget: {min_errors: 700}
    queries:
      demand: 'sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload_type="deployment",workload="web"})'
      replicas: 'max(kube_deployment_spec_replicas{namespace="shop",deployment="web"})'
      ready_replicas: 'max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"})'
      request: 'max(namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace="shop",workload_type="deployment",workload="web"})'
`, promAddr, testModel)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}

	// Let Prometheus collect some history before the exporter starts, so that the start-up
	// range queries have something to load.
	time.Sleep(6*time.Second - time.Since(wl.start))
	var logBuf testenv.Buffer
	// The exporter queries the real Prometheus through a recorder, so that the reference can be
	// fed at the times the exporter observed (its start-up history and its first live step
	// depend on when it started); the values the reference sees it queries itself.
	rec := &recordingQuerier{Querier: prom}
	logger := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: rec}, logger, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- serveAndRun(ctx, srv, expL) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exporter log:\n%s", logBuf.String())
		}
	})
	exporterStart := time.Now()

	// The scale alert: fires during the burst with the policy in its labels and the numbers in
	// its annotations, then resolves.
	var firedAt, resolvedAt time.Duration
	var fired v1.Alert
	for firedAt == 0 || resolvedAt == 0 {
		elapsed := time.Since(wl.start)
		if elapsed > burstEnd+90*time.Second {
			dumpTimeline(t, prom, wl.start)
			t.Fatalf("timeout: fired at %v, resolved at %v", firedAt, resolvedAt)
		}
		res, err := prom.Alerts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		firing := false
		for _, a := range res.Alerts {
			if a.Labels["alertname"] == "DebiScaleRecommended" && a.Labels["policy"] == "web" && a.State == v1.AlertStateFiring {
				firing = true
				fired = a
			}
		}
		switch {
		case firing && firedAt == 0:
			firedAt = elapsed
			if firedAt < burstStart {
				t.Fatalf("DebiScaleRecommended fired at %v, before the burst at %v: %v", firedAt, burstStart, fired)
			}
			checkAlert(t, fired)
		case !firing && firedAt != 0:
			resolvedAt = elapsed
		}
		time.Sleep(250 * time.Millisecond)
	}
	if resolvedAt < burstEnd {
		t.Fatalf("DebiScaleRecommended resolved at %v, before the burst ended at %v", resolvedAt, burstEnd)
	}
	t.Logf("DebiScaleRecommended fired %v and resolved %v after the burst started", firedAt-burstStart, resolvedAt-burstStart)

	// Let a few more scrapes land, then stop the exporter.
	time.Sleep(2 * time.Second)
	end := time.Now()
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}

	dumpTimeline(t, prom, wl.start)
	checkAlertFollowsRecommendation(t, prom, exporterStart, end)
	checkHistoryStep(t, prom, exporterStart, end)
	schedule, nHist := rec.schedule(t, cfg)
	compareWithRunner(t, prom, cfg, schedule, schedule[nHist], wl.start, exporterStart, end)
	compareBudget(t, prom, cfg, schedule, schedule[nHist], wl.start, exporterStart, end)
	t.Logf("integration test took %v", time.Since(began).Round(time.Second))
}

// dumpTimeline logs, per second since the trace started, the demand recorded by the rules and
// what the exporter published (shown with -v or on failure).
func dumpTimeline(t *testing.T, prom v1.API, start time.Time) {
	t.Helper()
	r := v1.Range{Start: start.Truncate(time.Second), End: time.Now(), Step: time.Second}
	cols := []string{
		`namespace_workload:debi_cpu_usage_cores:rate1m`,
		`debi_load_ratio{policy="web",load="w1"}`, `debi_load_ratio{policy="web",load="w2"}`, `debi_load_ratio{policy="web",load="w3"}`,
		`debi_load_ratio{policy="web",load="w"}`, `debi_recommended_replicas{policy="web"}`,
		`ALERTS{alertname="DebiScaleRecommended",alertstate="firing",policy="web"}`,
	}
	vals := make([]map[int64]float64, len(cols))
	for i, q := range cols {
		m, err := rangeValues(context.Background(), prom, q, r)
		if err != nil {
			t.Logf("%s: %v", q, err)
		}
		vals[i] = m
	}
	var b bytes.Buffer
	b.WriteString("  s   demand  W1     W2     W3     W      rec firing\n")
	for ts := r.Start; !ts.After(r.End); ts = ts.Add(r.Step) {
		fmt.Fprintf(&b, "%3.0f", ts.Sub(start).Seconds())
		for i := range cols {
			if v, ok := vals[i][ts.UnixMilli()]; ok {
				fmt.Fprintf(&b, " %6.3f", v)
			} else {
				b.WriteString("      -")
			}
		}
		b.WriteString("\n")
	}
	t.Logf("timeline:\n%s", b.String())
}

// checkAlertFollowsRecommendation checks, second by second, that DebiScaleRecommended fires
// exactly while the exporter's recommendation differs from the current size, allowing for the
// scrape and the rule evaluation in between (up to 2 s), and logs the lag of the alert behind
// the recommendation.
func checkAlertFollowsRecommendation(t *testing.T, prom v1.API, start, end time.Time) {
	t.Helper()
	start = start.Truncate(time.Second) // whole ms, so that the points' keys are exact
	r := v1.Range{Start: start, End: end, Step: time.Second}
	diff, err := rangeValues(context.Background(), prom, `debi_recommended_replicas{policy="web"} - debi_current_replicas{policy="web"}`, r)
	if err != nil {
		t.Fatal(err)
	}
	firing, err := rangeValues(context.Background(), prom, `ALERTS{alertname="DebiScaleRecommended",alertstate="firing",policy="web"}`, r)
	if err != nil {
		t.Fatal(err)
	}
	var firstDiff, firstFiring time.Time
	n := 0
	for ts := start.Add(2 * time.Second); !ts.After(end); ts = ts.Add(time.Second) {
		_, f := firing[ts.UnixMilli()]
		seen := false // some sample in the last 2 s agrees with the alert's state
		for lag := time.Duration(0); lag <= 2*time.Second; lag += time.Second {
			d, ok := diff[ts.Add(-lag).UnixMilli()]
			if (ok && (d != 0) == f) || (!ok && !f) { // no recommendation yet: no alert
				seen = true
			}
		}
		if !seen {
			t.Errorf("%v: alert firing=%v but the recommendation of the last 2 s says otherwise", ts.Sub(start), f)
		}
		if f {
			n++
			if firstFiring.IsZero() {
				firstFiring = ts
			}
		}
		if d, ok := diff[ts.UnixMilli()]; ok && d != 0 && firstDiff.IsZero() {
			firstDiff = ts
		}
	}
	if n < 5 {
		t.Fatalf("DebiScaleRecommended fired for %d s, want at least 5", n)
	}
	t.Logf("the alert fired %v after the first scraped recommendation ≠ current (1 s steps; 1 s scrape and evaluation)", firstFiring.Sub(firstDiff))
}

// checkAlert checks the scale alert's routing label and annotations.
func checkAlert(t *testing.T, a v1.Alert) {
	t.Helper()
	if a.Labels["policy"] != "web" || a.Labels["debi_route"] != "webhook" || a.Labels["namespace"] != "shop" ||
		a.Labels["workload"] != "web" || a.Labels["workload_type"] != "deployment" {
		t.Fatalf("DebiScaleRecommended labels = %v", a.Labels)
	}
	num := func(name string) float64 {
		v, err := strconv.ParseFloat(string(a.Annotations[model.LabelName(name)]), 64)
		if err != nil {
			t.Fatalf("annotation %s = %q: %v", name, a.Annotations[model.LabelName(name)], err)
		}
		return v
	}
	// More than 2 replicas, on a load above the low phase's 0.4 core / 2 pods = 0.2 (the
	// window term of Algorithm 2 may decide before W itself leaves the tolerance band), with a
	// dynamic target in [lower, upper].
	if rec, cur := num("recommended_replicas"), num("current_replicas"); rec <= 2 || cur != 2 {
		t.Fatalf("annotations recommended %v current %v, want > 2 and 2", rec, cur)
	}
	if w := num("load"); !(w > lowDemand/2) {
		t.Fatalf("annotation load = %v, want above %v", w, lowDemand/2)
	}
	if u := num("target_utilization"); !(u >= 0.3 && u <= 0.7) {
		t.Fatalf("annotation target_utilization = %v, want in [0.3, 0.7]", u)
	}
}

// compareWithRunner replays the policy with a policy.Runner on inputs read from Prometheus by
// the test itself (instant queries at every grid time since the workload started) and checks
// every published step of the exporter, as Prometheus stored it, against the replay.
func compareWithRunner(t *testing.T, prom v1.API, cfg *config.Config, schedule []time.Time, firstLive, wlStart, expStart, end time.Time) {
	t.Helper()
	ctx := context.Background()
	p := &cfg.Policies[0]

	// What the exporter published, as Prometheus scraped it: at each point of a range query all
	// series come from the same scrape.
	type published struct{ lastSuccess, stale, w1, w2, w3, w, rec float64 }
	r := v1.Range{Start: expStart, End: end, Step: 250 * time.Millisecond}
	series := map[string]string{
		"lastSuccess": `debi_policy_last_success_timestamp_seconds{policy="web"}`,
		"stale":       `debi_policy_stale{policy="web"}`,
		"w1":          `debi_load_ratio{policy="web",load="w1"}`,
		"w2":          `debi_load_ratio{policy="web",load="w2"}`,
		"w3":          `debi_load_ratio{policy="web",load="w3"}`,
		"w":           `debi_load_ratio{policy="web",load="w"}`,
		"rec":         `debi_recommended_replicas{policy="web"}`,
	}
	vals := map[string]map[int64]float64{}
	for k, q := range series {
		m, err := rangeValues(ctx, prom, q, r)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		vals[k] = m
	}
	pubs := map[float64]published{}
	for ts, ls := range vals["lastSuccess"] {
		get := func(k string) float64 {
			if v, ok := vals[k][ts]; ok {
				return v
			}
			return math.NaN()
		}
		if get("stale") != 0 {
			continue
		}
		pubs[ls] = published{ls, 0, get("w1"), get("w2"), get("w3"), get("w"), get("rec")}
	}

	// The reference, from the test's own queries at the times the exporter observed.
	var last time.Time
	for ls := range pubs {
		if ts := time.UnixMilli(int64(math.Round(ls * 1e3))); ts.After(last) {
			last = ts
		}
	}
	schedule = trimSchedule(schedule, wlStart, last)
	ref := replay(t, cfg, p, schedule, func(ts time.Time) [numQueries]float64 {
		v := referenceInputs(ctx, prom, p, ts, firstLive)
		return v
	})

	keys := make([]float64, 0, len(pubs))
	for k := range pubs {
		keys = append(keys, k)
	}
	sort.Float64s(keys)
	compared, scaled := 0, 0
	for _, ls := range keys {
		pub := pubs[ls]
		want, ok := ref[int64(math.Round(ls*1e3))]
		if !ok {
			t.Fatalf("exporter published a fresh step at %v that the replay has no result for", ls)
		}
		if math.IsNaN(pub.w2) && !math.IsNaN(want.W2) {
			// The exporter trains in the background: a step may run before the first
			// training run has been swapped in. Algorithm 2 is stateless, so later steps agree.
			continue
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"W1", pub.w1, want.W1}, {"W2", pub.w2, want.W2}, {"W3", pub.w3, want.W3}, {"W", pub.w, want.W},
			{"recommended replicas", pub.rec, float64(want.Decision.Replicas)},
		} {
			if !near(c.got, c.want) {
				t.Errorf("step %v: %s published %v, runner %v", time.UnixMilli(int64(ls*1e3)).Sub(wlStart), c.name, c.got, c.want)
			}
		}
		compared++
		if pub.rec > 2 {
			scaled++
		}
	}
	t.Logf("compared %d exporter steps with the runner (%d recommending a scale-up) over %v", compared, scaled, end.Sub(expStart).Round(time.Second))
	if compared < 30 || scaled < 3 {
		t.Fatalf("compared %d steps (%d recommending a scale-up); want at least 30 (3)", compared, scaled)
	}
}

// compareBudget checks the budget policy's series as Prometheus scraped them against a
// policy.Runner fed the inputs the test reads itself at the times the exporter observed: the
// quantiles over the lead time and the hold, the forecast, margin and level, the scale-down
// gate's load (load="down"), W, W1 and the recommendation at every fresh step whose history step
// had a forecast (the exporter trains in the background), the burn counters at every fresh
// step, and the burn-rate recording rule at the end.
// referenceInputs are the policy's inputs at ts from the test's own instant queries: at a
// start-up history time (before firstLive), a default demand or request rule without a sample
// there is read from its raw series, as the exporter's warm start does
// (config.Policy.HistoryFallback).
func referenceInputs(ctx context.Context, prom v1.API, p *config.Policy, ts, firstLive time.Time) [numQueries]float64 {
	var v [numQueries]float64
	q, fb := p.Queries, p.HistoryFallback()
	fallback := [numQueries]string{qRequest: fb.Request, qDemand: fb.Demand}
	for k, expr := range [numQueries]string{q.Replicas, q.ReadyReplicas, q.Request, q.Demand} {
		x, err := instantValue(ctx, prom, expr, ts)
		if err != nil && fallback[k] != "" && ts.Before(firstLive) {
			x, err = instantValue(ctx, prom, fallback[k], ts)
		}
		if err != nil {
			x = math.NaN()
		}
		v[k] = x
	}
	return v
}

func compareBudget(t *testing.T, prom v1.API, cfg *config.Config, schedule []time.Time, firstLive, wlStart, expStart, end time.Time) {
	t.Helper()
	ctx := context.Background()
	p := &cfg.Policies[1]
	r := v1.Range{Start: expStart, End: end, Step: 250 * time.Millisecond}
	series := map[string]string{
		"lastSuccess": `debi_policy_last_success_timestamp_seconds{policy="web-budget"}`,
		"stale":       `debi_policy_stale{policy="web-budget"}`,
		"w2":          `debi_load_ratio{policy="web-budget",load="w2"}`,
		"w":           `debi_load_ratio{policy="web-budget",load="w"}`,
		"w1":          `debi_load_ratio{policy="web-budget",load="w1"}`,
		"down":        `debi_load_ratio{policy="web-budget",load="down"}`,
		"lead":        `debi_budget_quantile_cores{policy="web-budget",window="lead"}`,
		"hold":        `debi_budget_quantile_cores{policy="web-budget",window="hold"}`,
		"forecast":    `debi_budget_forecast_cores{policy="web-budget"}`,
		"margin":      `debi_budget_margin{policy="web-budget"}`,
		"level":       `debi_budget_level{policy="web-budget"}`,
		"b":           `debi_budget_overload_budget{policy="web-budget"}`,
		"rec":         `debi_recommended_replicas{policy="web-budget"}`,
		"observed":    `debi_budget_observed_seconds_total{policy="web-budget"}`,
		"overloaded":  `debi_budget_overloaded_seconds_total{policy="web-budget"}`,
	}
	vals := map[string]map[int64]float64{}
	for k, q := range series {
		m, err := rangeValues(ctx, prom, q, r)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		vals[k] = m
	}
	// One published step per last-success time (all series of a range point come from one
	// scrape of one snapshot).
	pubs := map[int64]map[string]float64{}
	for ts, ls := range vals["lastSuccess"] {
		if v, ok := vals["stale"][ts]; !ok || v != 0 {
			continue
		}
		pub := map[string]float64{}
		for k := range series {
			pub[k] = math.NaN()
			if v, ok := vals[k][ts]; ok {
				pub[k] = v
			}
		}
		pubs[int64(math.Round(ls*1e3))] = pub
	}
	var last time.Time
	for ms := range pubs {
		if ts := time.UnixMilli(ms); ts.After(last) {
			last = ts
		}
	}
	schedule = trimSchedule(schedule, wlStart, last)
	inputs := map[int64][numQueries]float64{}
	ref := replay(t, cfg, p, schedule, func(ts time.Time) [numQueries]float64 {
		v := referenceInputs(ctx, prom, p, ts, firstLive)
		inputs[ts.UnixMilli()] = v
		return v
	})
	// The burn counts live steps only, not the start-up history.
	var live []time.Time
	for _, ts := range schedule {
		if !ts.Before(firstLive) {
			live = append(live, ts)
		}
	}

	keys := make([]int64, 0, len(pubs))
	for k := range pubs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	sla := p.Scaling.Budget.SLAUtilization
	compared, overloadedSteps := 0, 0
	for _, ms := range keys {
		pub := pubs[ms]
		want, ok := ref[ms]
		if !ok || want.Budget == nil {
			t.Fatalf("exporter published a fresh budget step at %v that the replay has no result for", time.UnixMilli(ms).Sub(wlStart))
		}
		// The burn: one second per live step with a demand, overloaded above u_sla·Nr·R.
		observed, overloaded := 0.0, 0.0
		for _, ts := range live {
			if ts.UnixMilli() > ms {
				break
			}
			v := inputs[ts.UnixMilli()]
			if _, stepped := ref[ts.UnixMilli()]; !stepped {
				continue
			}
			observed++
			ready := v[qReady]
			if math.IsNaN(ready) {
				ready = v[qReplicas]
			}
			if v[qDemand] > sla*math.Round(ready)*v[qRequest] {
				overloaded++
			}
		}
		if pub["observed"] != observed || pub["overloaded"] != overloaded {
			t.Errorf("step %v: burn counters %v overloaded of %v observed s, want %v of %v",
				time.UnixMilli(ms).Sub(wlStart), pub["overloaded"], pub["observed"], overloaded, observed)
		}
		if pub["b"] != p.Budget.Budget {
			t.Errorf("step %v: debi_budget_overload_budget %v, want %v", time.UnixMilli(ms).Sub(wlStart), pub["b"], p.Budget.Budget)
		}
		if math.IsNaN(pub["w2"]) && !math.IsNaN(want.W2) {
			continue // this history step's forecast came before the first background training
		}
		b := want.Budget
		n := math.Round(inputs[ms][qReplicas])
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"quantile lead", pub["lead"], b.Quantile}, {"quantile hold", pub["hold"], b.QuantileDown},
			{"forecast", pub["forecast"], b.Forecast}, {"margin", pub["margin"], b.Margin}, {"level", pub["level"], b.Alpha},
			{"W", pub["w"], want.W}, {"W1", pub["w1"], want.W1},
			{"down", pub["down"], b.QuantileDown / (math.Max(n, 1) * inputs[ms][qRequest])},
			{"recommended replicas", pub["rec"], float64(want.Decision.Replicas)},
		} {
			if !near(c.got, c.want) {
				t.Errorf("step %v: budget %s published %v, runner %v", time.UnixMilli(ms).Sub(wlStart), c.name, c.got, c.want)
			}
		}
		compared++
		if pub["overloaded"] > 0 {
			overloadedSteps++
		}
	}
	t.Logf("compared %d budget steps with the runner (%d after the first overload)", compared, overloadedSteps)
	if compared < 20 || overloadedSteps == 0 {
		t.Fatalf("compared %d budget steps (%d after an overload); want at least 20 (1)", compared, overloadedSteps)
	}
	// The recording rule: the burn over 5 minutes is a share of the time, in units of b.
	burn, err := instantValue(ctx, prom, `policy:debi_budget_burn_rate:ratio_rate5m{policy="web-budget"}`, end)
	if err != nil || !(burn > 0) || burn > 1/p.Budget.Budget {
		t.Errorf("policy:debi_budget_burn_rate:ratio_rate5m = %v (%v), want in (0, 1/b]", burn, err)
	}
}

// recordingQuerier passes queries through and records their times in order.
type recordingQuerier struct {
	Querier
	mu     sync.Mutex
	events []queryEvent
}

// queryEvent is one query: an instant query at t, or a successful range query over r.
type queryEvent struct {
	t     time.Time
	r     v1.Range
	isRng bool
}

func (q *recordingQuerier) Query(ctx context.Context, expr string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	q.mu.Lock()
	q.events = append(q.events, queryEvent{t: ts})
	q.mu.Unlock()
	return q.Querier.Query(ctx, expr, ts, opts...)
}

func (q *recordingQuerier) QueryRange(ctx context.Context, expr string, r v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	v, w, i, err := q.Querier.QueryRange(ctx, expr, r, opts...)
	if err == nil {
		q.mu.Lock()
		q.events = append(q.events, queryEvent{r: r, isRng: true})
		q.mu.Unlock()
	}
	return v, w, i, err
}

// schedule is the sequence of observation times the exporter fed its runner: the points of
// its start-up range queries, then the times of its live instant queries (those of the
// start-up query check come before the range queries). It checks the documented shape: the
// history on the history-step grid, ending before the first live step, which is at most one
// history step later; live steps every interval without a gap.
//
// It returns the schedule and the number of history points at its start.
func (q *recordingQuerier) schedule(t *testing.T, cfg *config.Config) ([]time.Time, int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	hs, iv := cfg.Policies[0].HistoryStep, cfg.Global.Interval
	var out []time.Time
	var hist *v1.Range
	for _, ev := range q.events {
		switch {
		case ev.isRng && hist == nil:
			hist = &ev.r
			for ts := ev.r.Start; !ts.After(ev.r.End); ts = ts.Add(ev.r.Step) {
				out = append(out, ts)
			}
		case ev.isRng:
			if *hist != ev.r {
				t.Fatalf("history range queries over %+v and %+v", *hist, ev.r)
			}
		case hist != nil && ev.t.After(out[len(out)-1]):
			out = append(out, ev.t)
		}
	}
	if hist == nil {
		t.Fatal("the exporter loaded no history")
	}
	nHist := int(hist.End.Sub(hist.Start)/hs) + 1
	if hist.Step != hs || hist.Start.UnixMilli()%hs.Milliseconds() != 0 || hist.End.UnixMilli()%hs.Milliseconds() != 0 {
		t.Fatalf("history range %+v: want step %v on its grid", *hist, hs)
	}
	if len(out) <= nHist+30 {
		t.Fatalf("%d live steps recorded", len(out)-nHist)
	}
	if first := out[nHist]; first.Sub(hist.End) <= 0 || first.Sub(hist.End) > hs {
		t.Fatalf("first live step %v, history ends %v: want it within one history step after", first, hist.End)
	}
	for i := nHist + 1; i < len(out); i++ {
		if out[i].Sub(out[i-1]) != iv {
			t.Fatalf("live steps %v and %v: want one every %v", out[i-1], out[i], iv)
		}
	}
	t.Logf("the exporter queried %d history steps (%v … %v, step %v) and ran %d live steps from %v", nHist,
		hist.Start.Format(time.TimeOnly), hist.End.Format(time.TimeOnly), hs, len(out)-nHist, out[nHist].Format(time.TimeOnly))
	return out, nHist
}

// checkHistoryStep checks, through Prometheus, the history-step series of the policy: the model
// history grows by one point per 2 s history step although the exporter steps every second,
// and the horizon is h = ceil(lead_time 2 s / 2 s) + 1 = 2 history steps = 4 s.
func checkHistoryStep(t *testing.T, prom v1.API, start, end time.Time) {
	t.Helper()
	ctx := context.Background()
	for q, want := range map[string]float64{
		`debi_model_history_step_seconds{policy="web"}`:   2,
		`debi_forecast_horizon_seconds{policy="web"}`:     4,
		`debi_model_history_required_steps{policy="web"}`: driftSpan + 1,
	} {
		v, err := instantValue(ctx, prom, q, end)
		if err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", q, v, err, want)
		}
	}
	a, errA := instantValue(ctx, prom, `debi_model_history_steps{policy="web"}`, start.Add(5*time.Second))
	b, errB := instantValue(ctx, prom, `debi_model_history_steps{policy="web"}`, end)
	span := end.Sub(start.Add(5 * time.Second)).Seconds()
	if errA != nil || errB != nil || math.Abs((b-a)-span/2) > 2 {
		t.Errorf("debi_model_history_steps grew from %v to %v over %.0f s (%v %v): want one per 2 s history step", a, b, span, errA, errB)
	}
}

// trimSchedule keeps the observation times the exporter published a step for: none after the
// last publication, and none before the workload started (there were no replicas to observe,
// so nothing was fed then).
func trimSchedule(schedule []time.Time, wlStart, last time.Time) []time.Time {
	for len(schedule) > 0 && schedule[len(schedule)-1].After(last) {
		schedule = schedule[:len(schedule)-1]
	}
	for len(schedule) > 0 && schedule[0].Before(wlStart.Add(-time.Second)) {
		schedule = schedule[1:]
	}
	return schedule
}
