package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/grafana"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// Closed-loop parameters: one trace step per second.
const (
	e2eSteps   = 240
	e2eRequest = 0.5 // cores per pod
	e2eMax     = 20
	e2eNS      = "shop"
	e2eName    = "web"
	// e2eBudget is a budget policy in shadow on the same workload's series: the webhook decides
	// it from Prometheus and writes nothing, and the dashboards' budget row reads its series.
	e2eBudget = "web-budget"
	// e2eHPA is an hpa policy in shadow on the acting policy's own target (one policy acts on a
	// target, others on it are shadow baselines): the webhook decides it and writes nothing, and
	// the policy dashboard's baseline row draws it beside web.
	e2eHPA = "web-hpa"
	// e2eLead is the policy's lead_time, decision delay + pod start-up: the pipeline's floor of
	// about 3 s (scrape + rule evaluation + group_wait) and the simulator's 1 s start-up. With
	// a 1 s history step the horizon is policy.Horizon(4s, 1s) = 5 steps, live and in the
	// backtest alike.
	e2eLead = 4 * time.Second
)

// TestClosedLoop runs the whole loop on 127.0.0.1 — simulator → Prometheus (debi's rules) →
// debi exporter → DebiScaleRecommended → Alertmanager → debi webhook → scale subresource →
// simulator — for a few hundred trace steps, and checks that the replicas the live loop set
// track what the backtest decides for the same demand and parameters, once the backtest is given
// the decision delay the pipeline adds (measured here, and reported with the latency of
// recommendation → patch next to its floor: scrape + rule evaluation + group_wait). A budget
// policy watches the same workload in shadow: the webhook decides it from Prometheus and writes
// nothing, and the dashboards' budget row is checked against its series. An hpa policy in
// shadow on the acting policy's own target is its live baseline: decided, never written, and
// drawn by the dashboards' baseline row.
func TestClosedLoop(t *testing.T) {
	promDir := requireEnv(t, "DEBI_PROMETHEUS_DIR")
	amDir := requireEnv(t, "DEBI_ALERTMANAGER_DIR")
	assets := requireEnv(t, "DEBI_K8S_ASSETS")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	kubeconfig := startKubeAPIServer(t, assets)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	demand := e2eDemand(t)
	initial := int32(math.Ceil(demand[0] / (0.5 * e2eRequest)))
	createDeployment(ctx, t, client, e2eName, initial, true)
	createDeployment(ctx, t, client, e2eBudget, initial, false) // the shadow policy's target

	sim := &Sim{Client: client, Namespace: e2eNS, Deployment: e2eName, Request: e2eRequest, Demand: demand, StartupDelay: 1}
	simL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	simSrv := &http.Server{Handler: sim}
	go simSrv.Serve(simL)
	t.Cleanup(func() { simSrv.Close() })

	debi := buildDebi(t, dir)
	promPort, amPort, expPort, whPort := freePort(t), freePort(t), freePort(t), freePort(t)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	writeFile(t, filepath.Join(dir, "token"), "e2e-secret-token\n")
	writeFile(t, filepath.Join(dir, "debi.yml"), fmt.Sprintf(`
global:
  prometheus_url: %s
  interval: 1s
policies:
  - name: web
    target: {namespace: %s, name: %s}
    algorithm: debi
    model: naive
    request: %g
    # One history point per trace step (1 s), like the backtest's sample period; the horizon
    # covers decision delay + start-up.
    history_step: 1s
    lead_time: %[7]s
    queries:
      # irate over 1 s scrapes: the closed loop runs one trace step per second, far faster than
      # the rate1m recording rule a cluster uses.
      demand: sum(irate(container_cpu_usage_seconds_total{namespace="%[2]s",container="app"}[5s]))
      replicas: max(kube_deployment_spec_replicas{namespace="%[2]s",deployment="%[3]s"})
      ready_replicas: max(kube_deployment_status_replicas_ready{namespace="%[2]s",deployment="%[3]s"})
    # Windows in seconds, not minutes: one trace step per second.
    scaling: {min_replicas: 1, max_replicas: %[5]d, window: 10s}
    metrics: {window: 2s}
  # An overload-budget policy on the same workload's series, in shadow (webhook.policies), on the
  # default (priced) rule: the webhook decides it from W, W1 and the hold quantile in Prometheus
  # (the priced size as W and down) and writes nothing, and the budget row's price panel reads it.
  - name: %[8]s
    target: {namespace: %[2]s, name: %[8]s}
    algorithm: naive-budget
    request: %[4]g
    history_step: 1s
    lead_time: %[7]s
    queries:
      demand: sum(irate(container_cpu_usage_seconds_total{namespace="%[2]s",container="app"}[5s]))
      replicas: max(kube_deployment_spec_replicas{namespace="%[2]s",deployment="%[3]s"})
      ready_replicas: max(kube_deployment_status_replicas_ready{namespace="%[2]s",deployment="%[3]s"})
    scaling: {min_replicas: 1, max_replicas: %[5]d, budget: {hold: 10s}}
    metrics: {window: 2s}
    # irate over 1 s scrapes: the observation is about one second old, not half a minute.
    observation_window: 1s
  # The HPA's baseline on web's own target, in shadow (webhook.policies): decided, never written.
  - name: %[9]s
    target: {namespace: %[2]s, name: %[3]s}
    algorithm: hpa
    request: %[4]g
    history_step: 1s
    lead_time: %[7]s
    queries:
      demand: sum(irate(container_cpu_usage_seconds_total{namespace="%[2]s",container="app"}[5s]))
      replicas: max(kube_deployment_spec_replicas{namespace="%[2]s",deployment="%[3]s"})
      ready_replicas: max(kube_deployment_status_replicas_ready{namespace="%[2]s",deployment="%[3]s"})
    # Seconds for minutes, as above: a 10 s scale-down stabilisation instead of 5 m.
    scaling: {min_replicas: 1, max_replicas: %[5]d, scale_down_stabilization: 10s}
    metrics: {window: 2s}
webhook:
  mode: act
  bearer_token_file: %[6]s
  tidal: {enabled: false}
  leader_election: {enabled: false}
  policies:
    - {name: %[8]s, mode: shadow}
    - {name: %[9]s, mode: shadow}
  queries:
    # The exporter's W and window term, and the size they were computed at.
    load: 'debi_load_ratio{policy="{{.Policy}}",load="w"}'
    window_load: 'debi_load_ratio{policy="{{.Policy}}",load="window"}'
    load_replicas: 'debi_current_replicas{policy="{{.Policy}}"}'
`, promURL, e2eNS, e2eName, e2eRequest, e2eMax, filepath.Join(dir, "token"), e2eLead, e2eBudget, e2eHPA))
	writeServerConfigs(t, dir, fmt.Sprintf("http://127.0.0.1:%d", whPort), filepath.Join(dir, "token"), amPort, simL.Addr().String(), expPort, whPort)

	startLoopServers(t, dir, amDir, promDir, debi, kubeconfig, amPort, promPort, whPort)

	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(ctx, time.Second) }()
	// The exporter tries every query once at start-up: give Prometheus two scrapes first.
	waitFor(t, 20*time.Second, func() bool {
		out, err := promQuery(ctx, promURL, `sum(irate(container_cpu_usage_seconds_total{namespace="shop"}[5s]))`)
		return err == nil && len(parseVector(out)) == 1
	})
	startProc(t, dir, "exporter", debi, "exporter", "--config.file="+filepath.Join(dir, "debi.yml"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", expPort))

	if err := <-simDone; err != nil {
		t.Fatalf("simulator: %v", err)
	}
	recs := sim.Records()

	// Live behaviour: the webhook must have scaled, following the load both ways.
	ups, downs := 0, 0
	for i := 1; i < len(recs); i++ {
		switch {
		case recs[i].Replicas > recs[i-1].Replicas:
			ups++
		case recs[i].Replicas < recs[i-1].Replicas:
			downs++
		}
	}
	t.Logf("live loop: %d scale-ups, %d scale-downs over %d steps", ups, downs, len(recs))
	if ups == 0 || downs == 0 {
		t.Fatalf("the live loop did not scale both ways (ups %d, downs %d): %v", ups, downs, replicaSeries(recs))
	}

	// The backtest on the same demand, parameters and step, at every decision delay from 0 to
	// 8 steps: the best-matching delay is the pipeline's, and at it the live replicas must track.
	live := replicaSeries(recs)
	served := make([]float64, len(recs))
	for i, r := range recs {
		served[i] = r.Demand
	}
	bestDelay, bestMatch, bestMAE := -1, -1.0, 0.0
	var bestSeries []int32
	for d := 1; d <= 9; d++ {
		// The live loop's clock: one sample and one decision per second, the decision reaching
		// the Deployment d seconds later, a pod serving 1 s after that (the simulator's
		// StartupDelay); the exporter's horizon (lead_time over its 1 s history step) and
		// retraining (the default 120 history steps).
		o := backtest.DefaultOptions()
		o.Request, o.Warmup, o.Tick, o.SamplePeriod = e2eRequest, 0, time.Second, time.Second
		o.StartupDelay, o.DecisionDelay, o.MetricWindow, o.Demand = time.Second, time.Duration(d)*time.Second, 0, backtest.DemandStep
		o.Horizon, o.Retrain = policy.Horizon(e2eLead, time.Second), 120*time.Second
		o.Params = scaling.DefaultParams()
		o.Params.MaxReplicas, o.Params.Window = e2eMax, 10*time.Second
		o.Metrics.Window = 2 * time.Second
		o.DebiModel, o.KeepSeries, o.Scale = "naive", true, 1
		w, err := backtest.NewWorld(served, time.Second, o)
		if err != nil {
			t.Fatal(err)
		}
		run, err := backtest.SimulateFrom(ctx, w, "debi", o, initial)
		if err != nil {
			t.Fatal(err)
		}
		match, mae := agreement(live, run.Series.Replicas, 30)
		if match > bestMatch {
			bestDelay, bestMatch, bestMAE, bestSeries = d, match, mae, run.Series.Replicas
		}
	}
	lat := latencies(ctx, t, promURL, recs)
	t.Logf("closed loop vs backtest: best decision delay %ds; %.0f%% of steps within ±1 replica, mean |Δ| %.2f replicas",
		bestDelay, 100*bestMatch, bestMAE)
	if len(lat) > 0 {
		t.Logf("recommendation → replicas patched: median %.1fs, p99 %.1fs over %d changes; floor = scrape 1s + rule evaluation 1s + group_wait 1s (+ exporter interval 1s)",
			quantile(lat, 0.5), quantile(lat, 0.99), len(lat))
	}
	checkDashboards(ctx, t, promURL)
	checkBudgetShadow(ctx, t, promURL)
	checkHPAShadow(ctx, t, promURL)
	checkLeadTime(ctx, t, promURL, time.Duration(sim.StartupDelay)*time.Second, lat)
	if bestMatch < 0.9 || bestMAE > 0.75 {
		t.Fatalf("live replicas do not track the backtest: best %.0f%% within ±1, mean |Δ| %.2f (delay %d)\nlive:     %v\nbacktest: %v",
			100*bestMatch, bestMAE, bestDelay, live, bestSeries)
	}
	if len(lat) == 0 {
		t.Fatal("no recommendation change was followed by a patch")
	}
	if m := quantile(lat, 0.5); m > 15 {
		t.Fatalf("median recommendation → patch latency %.1fs, want well under 15s", m)
	}
}

// checkDashboards runs every panel query of grafana/*.json against the live loop's Prometheus
// and fails on any that errors or returns nothing: a query can parse and still match no series.
func checkDashboards(ctx context.Context, t *testing.T, promURL string) {
	t.Helper()
	qs, err := grafana.Queries()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"policy": e2eName, "__range": "2m", "__range_s": "120", "__rate_interval": "15s", "horizon": "5"}
	budgetVars := map[string]string{"policy": e2eBudget, "__range": "2m", "__range_s": "120", "__rate_interval": "15s", "horizon": "5"}
	failed := 0
	for _, q := range qs {
		expr := grafana.Expand(q.Expr, vars)
		switch q.Row {
		case grafana.BudgetRow:
			expr = grafana.Expand(q.Expr, budgetVars) // series only budget policies publish
		case grafana.ZeroRow:
			continue // no policy here scales to zero: TestLLMServing's decode role does (checkZeroRow)
		}
		out, err := promQuery(ctx, promURL, expr)
		if err != nil || !nonEmpty(out) {
			failed++
			t.Errorf("dashboard %s, panel %q (%s): %s returned nothing (err %v)", q.Dashboard, q.Panel, q.RefID, expr, err)
		}
	}
	t.Logf("dashboards: %d panel queries run against the closed loop's Prometheus, %d empty or failing", len(qs), failed)
}

// checkBudgetShadow checks the budget policy's live path: the exporter published its burn, the
// rules recorded the burn rate, and the webhook decided it in shadow from Prometheus (W, W1
// and the hold quantile), writing nothing to its target.
func checkBudgetShadow(ctx context.Context, t *testing.T, promURL string) {
	t.Helper()
	for _, q := range []string{
		fmt.Sprintf(`debi_budget_observed_seconds_total{policy=%q} > 60`, e2eBudget),
		fmt.Sprintf(`policy:debi_budget_burn_rate:ratio_rate5m{policy=%q}`, e2eBudget),
		fmt.Sprintf(`debi_load_ratio{policy=%q,load="down"}`, e2eBudget),
		fmt.Sprintf(`debi_webhook_decisions_total{policy=%q,source="prometheus"} > 0`, e2eBudget),
	} {
		out, err := promQuery(ctx, promURL, q)
		if err != nil || !nonEmpty(out) {
			t.Errorf("budget policy in shadow: %s returned nothing (err %v)", q, err)
		}
	}
	out, err := promQuery(ctx, promURL, fmt.Sprintf(`sum(debi_webhook_patches_total{policy=%q})`, e2eBudget))
	if err == nil && nonEmpty(out) {
		if v := parseVector(out); len(v) > 0 && v[0] > 0 {
			t.Errorf("the shadow budget policy wrote %v times", v[0])
		}
	}
	out, _ = promQuery(ctx, promURL, fmt.Sprintf(`debi_budget_overloaded_seconds_total{policy=%[1]q} / debi_budget_observed_seconds_total{policy=%[1]q}`, e2eBudget))
	if v := parseVector(out); len(v) > 0 {
		t.Logf("budget policy in shadow: overloaded %.1f%% of the observed time at the acting policy's sizes", 100*v[0])
	}
}

// checkHPAShadow checks the hpa baseline on web's own target: the exporter published it on the
// same workload, the webhook decided it in shadow (its last decision carries mode shadow) and
// never wrote for it, while the acting policy's writes went through.
func checkHPAShadow(ctx context.Context, t *testing.T, promURL string) {
	t.Helper()
	for _, q := range []string{
		fmt.Sprintf(`debi_policy_info{policy=%q,algorithm="hpa"} and on (namespace, workload_type, workload) debi_policy_info{policy=%q}`, e2eHPA, e2eName),
		fmt.Sprintf(`debi_webhook_policy_info{policy=%q,mode="shadow"}`, e2eHPA),
		fmt.Sprintf(`debi_webhook_decisions_total{policy=%q,source="prometheus"} > 0`, e2eHPA),
		fmt.Sprintf(`debi_webhook_last_decision_replicas{policy=%q,mode="shadow"}`, e2eHPA),
		fmt.Sprintf(`sum(debi_webhook_patches_total{policy=%q,result="success"}) > 0`, e2eName),
	} {
		out, err := promQuery(ctx, promURL, q)
		if err != nil || !nonEmpty(out) {
			t.Errorf("hpa baseline in shadow: %s returned nothing (err %v)", q, err)
		}
	}
	out, err := promQuery(ctx, promURL, fmt.Sprintf(`debi_webhook_last_decision_replicas{policy=%q,mode!="shadow"}`, e2eHPA))
	if err != nil || nonEmpty(out) {
		t.Errorf("the hpa baseline decided in a mode other than shadow: %s (err %v)", out, err)
	}
	out, err = promQuery(ctx, promURL, fmt.Sprintf(`sum(debi_webhook_patches_total{policy=%q})`, e2eHPA))
	if err != nil {
		t.Errorf("patches of the hpa baseline: %v", err)
	} else if v := parseVector(out); len(v) > 0 && v[0] > 0 {
		t.Errorf("the shadow hpa policy wrote %v times", v[0])
	}
	out, _ = promQuery(ctx, promURL, fmt.Sprintf(`sum(avg_over_time(debi_current_replicas{policy=%[1]q}[2m])) / sum(avg_over_time(debi_recommended_replicas{policy=%[2]q}[2m]))`, e2eName, e2eHPA))
	if v := parseVector(out); len(v) > 0 {
		t.Logf("hpa baseline in shadow: web applied %.0f%% of the replicas the hpa recommended over the last 2 minutes", 100*v[0])
	}
}

// checkLeadTime: the exporter's measured pod start-up (kube-state-metrics' creation and
// readiness, through debi's rule) matches the simulator's start-up within one scrape interval
// (1 s; the API's times are whole seconds), and its decision path is measured for the acting
// policy, beside the latency the test measures itself.
func checkLeadTime(ctx context.Context, t *testing.T, promURL string, startup time.Duration, lat []float64) {
	t.Helper()
	q := func(expr string) (float64, bool) {
		out, err := promQuery(ctx, promURL, expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			return 0, false
		}
		v := parseVector(out)
		return firstOr(v), len(v) > 0
	}
	m, ok := q(fmt.Sprintf(`debi_lead_time_seconds{policy=%q,component="startup",quantile="0.5"}`, e2eName))
	n, _ := q(fmt.Sprintf(`debi_lead_time_samples{policy=%q,component="startup"}`, e2eName))
	switch {
	case !ok:
		t.Error("the exporter published no measured start-up for the acting policy")
	case math.Abs(m-startup.Seconds()) > 1:
		t.Errorf("measured start-up median %vs over %v start-ups; the simulator's pods start in %v (one scrape interval, 1 s, allowed)", m, n, startup)
	default:
		t.Logf("measured start-up: median %vs over %v start-ups (simulator: %v)", m, n, startup)
	}
	p, ok := q(fmt.Sprintf(`debi_lead_time_seconds{policy=%q,component="path",quantile="0.5"}`, e2eName))
	switch {
	case !ok:
		t.Error("the exporter published no measured decision path for the acting policy")
	case p <= 0 || p > 15:
		t.Errorf("measured decision path median %vs, want within (0, 15] s", p)
	case len(lat) > 0:
		t.Logf("measured decision path: median %vs (the test's recommendation → patch median: %.1fs; the exporter's adds the size's scrape)", p, quantile(lat, 0.5))
	}
}

func firstOr(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return v[0]
}

func nonEmpty(body string) bool {
	var v struct {
		Data struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(body), &v) != nil {
		return false
	}
	r := string(v.Data.Result)
	return r != "" && r != "[]" && r != "null"
}

// e2eDemand is 240 steps of the embedded periodic trace (Azure 2019, most of a day), its
// range stretched so that the load sweeps from about 2 to 14 pods' worth and back: the loop must
// scale out and in, and a smooth load lets the comparison speak about the pipeline rather than
// about the chaos of a bursty trace.
func e2eDemand(t *testing.T) []float64 {
	ts, err := trace.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var vals []float64
	for _, tr := range ts {
		if tr.Class == "periodic" {
			vals = tr.Values[100 : 100+e2eSteps]
		}
	}
	if vals == nil {
		t.Fatal("no periodic embedded trace")
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = e2eRequest * (1 + 9*(v-lo)/(hi-lo)) // 0.5 to 5 cores
	}
	return out
}

// createDeployment creates the Deployment name in e2eNS, and the namespace first when asked.
func createDeployment(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, replicas int32, namespace bool) {
	t.Helper()
	if namespace {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e2eNS}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2eNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/sim:1"}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(e2eNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("condition not met after %v", timeout)
}

func replicaSeries(recs []Record) []int32 {
	out := make([]int32, len(recs))
	for i, r := range recs {
		out[i] = r.Replicas
	}
	return out
}

// agreement compares two replica series after skip steps: the share of steps within ±1 replica
// and the mean absolute difference.
func agreement(a, b []int32, skip int) (float64, float64) {
	n := min(len(a), len(b))
	ok, sum, cnt := 0, 0.0, 0
	for i := skip; i < n; i++ {
		d := math.Abs(float64(a[i] - b[i]))
		if d <= 1 {
			ok++
		}
		sum += d
		cnt++
	}
	if cnt == 0 {
		return 0, math.Inf(1)
	}
	return float64(ok) / float64(cnt), sum / float64(cnt)
}

// latencies measures, for every change of the exporter's recommendation (as Prometheus recorded
// it, 1 s resolution), the time until the simulator first saw the deployment at that size.
func latencies(ctx context.Context, t *testing.T, promURL string, recs []Record) []float64 {
	start, end := recs[0].Time.Add(-5*time.Second), recs[len(recs)-1].Time
	q := url.Values{"query": {`debi_recommended_replicas{policy="web"}`}, "start": {ts(start)}, "end": {ts(end)}, "step": {"1"}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, promURL+"/api/v1/query_range?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("latency query: %v", err)
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Data.Result) == 0 {
		t.Logf("latency query: no data (%v)", err)
		return nil
	}
	type change struct {
		at  time.Time
		val float64
	}
	var changes []change
	prev := -1.0
	for _, v := range body.Data.Result[0].Values {
		sec, _ := v[0].(float64)
		val, _ := strconv.ParseFloat(v[1].(string), 64)
		if prev >= 0 && val != prev {
			changes = append(changes, change{time.Unix(0, int64(sec*1e9)), val})
		}
		prev = val
	}
	// A change counts when the deployment was not already at that size and the recommendation
	// held until it was applied (a superseded recommendation is never applied, by design).
	var out []float64
	for k, c := range changes {
		until := recs[len(recs)-1].Time
		if k+1 < len(changes) {
			until = changes[k+1].at
		}
		before := int32(-1)
		for _, r := range recs {
			if !r.Time.After(c.at) {
				before = r.Replicas
				continue
			}
			if float64(before) == c.val || r.Time.After(until.Add(2*time.Second)) {
				break
			}
			if float64(r.Replicas) == c.val {
				out = append(out, r.Time.Sub(c.at).Seconds())
				break
			}
		}
	}
	return out
}

func ts(t time.Time) string { return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64) }

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

func parseVector(body string) []float64 {
	var v struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(body), &v) != nil {
		return nil
	}
	var out []float64
	for _, r := range v.Data.Result {
		if s, ok := r.Value[1].(string); ok {
			f, _ := strconv.ParseFloat(s, 64)
			out = append(out, f)
		}
	}
	return out
}
