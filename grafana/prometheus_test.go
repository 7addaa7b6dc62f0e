package grafana

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/internal/testenv"
)

// exposition is what an exporter and a webhook publish for two policies, with the label sets of
// exporter/collector.go and webhook/metrics.go: enough for every panel query to find its series.
// shop-web is a debi policy; shop-db a budget policy, which also publishes the budget series;
// shop-web-hpa an hpa policy in shadow on shop-web's workload, its baseline.
func exposition(step int) string {
	var b strings.Builder
	for i, pol := range []struct{ name, workload, alg, mode string }{
		{"shop-web", "web", "debi", "act"},
		{"shop-db", "db", "budget", "act"},
		{"shop-web-hpa", "web", "hpa", "shadow"},
	} {
		p, alg := pol.name, pol.alg
		// The hpa baseline recommends 3 replicas, too few for the demand (overloaded all along).
		rec := map[bool]string{false: "6", true: "3"}[alg == "hpa"]
		l := fmt.Sprintf(`policy=%q,namespace="shop",workload_type="deployment",workload=%q`, p, pol.workload)
		d := 1.5 + float64(i%2) + 0.1*float64(step%5)
		fmt.Fprintf(&b, "debi_policy_info{%s,algorithm=%q,model=\"holtwinters\"} 1\n", l, alg)
		if alg != "hpa" {
			fmt.Fprintf(&b, "debi_model_active{%s,metric=\"cpu\",model=\"arima\"} 1\n", l)
		}
		fmt.Fprintf(&b, "debi_webhook_policy_info{policy=%q,mode=%q,algorithm=%q} 1\n", p, pol.mode, alg)
		if alg == "budget" {
			fmt.Fprintf(&b, "debi_load_ratio{%s,load=\"down\"} 0.8\n", l)
			fmt.Fprintf(&b, "debi_budget_quantile_cores{%s,window=\"lead\"} %g\n", l, d*1.5)
			fmt.Fprintf(&b, "debi_budget_quantile_cores{%s,window=\"hold\"} %g\n", l, d*1.8)
			for _, m := range []string{"debi_budget_forecast_cores 2", "debi_budget_margin 1.4", "debi_budget_level 0.008",
				"debi_budget_overload_budget 0.01", "debi_budget_error_samples 120", "debi_budget_price 42"} {
				name, v, _ := strings.Cut(m, " ")
				fmt.Fprintf(&b, "%s{%s} %s\n", name, l, v)
			}
			// One step in 50 overloaded: burn rate 2.
			fmt.Fprintf(&b, "debi_budget_observed_seconds_total{%s} %d\n", l, 15*step)
			fmt.Fprintf(&b, "debi_budget_overloaded_seconds_total{%s} %g\n", l, 0.3*float64(step))
		}
		fmt.Fprintf(&b, "debi_policy_lead_time_seconds{%s} 120\n", l)
		for _, c := range []string{"startup", "path"} {
			fmt.Fprintf(&b, "debi_lead_time_seconds{%s,component=%q,quantile=\"0.9\"} 90\n", l, c)
			fmt.Fprintf(&b, "debi_lead_time_samples{%s,component=%q} 8\n", l, c)
		}
		for load, v := range map[string]float64{"w1": 0.5, "w2": 0.6, "w3": 0.7, "w": 0.6, "window": 0.55} {
			fmt.Fprintf(&b, "debi_load_ratio{%s,load=%q} %g\n", l, load, v)
		}
		for load, v := range map[string]float64{"w1": d, "w2": d * 1.2, "w3": d * 1.4} {
			fmt.Fprintf(&b, "debi_demand_cores{%s,load=%q} %g\n", l, load, v)
		}
		for _, m := range []string{
			"debi_forecast_horizon_seconds 60", "debi_request_cores 0.5", "debi_target_utilization_ratio 0.6",
			"debi_recommended_replicas " + rec, "debi_current_replicas 4", "debi_ready_replicas 4", "debi_policy_stale 0",
			"debi_policy_last_success_timestamp_seconds 1.7e9", "debi_forecast_mean_absolute_error_cores 0.2",
			"debi_evt_shape 0.1", "debi_evt_threshold_cores 1.8", "debi_evt_fallback 0",
			"debi_decision_floor_replicas 2", "debi_decision_ceiling_replicas 12",
			"debi_policy_min_replicas 1", "debi_policy_max_replicas 40", "debi_policy_idle_seconds 0",
		} {
			name, v, _ := strings.Cut(m, " ")
			fmt.Fprintf(&b, "%s{%s} %s\n", name, l, v)
		}
		fmt.Fprintf(&b, "debi_query_errors_total{%s,query=\"demand\"} %d\n", l, step)
		fmt.Fprintf(&b, "debi_webhook_decisions_total{policy=%q,source=\"prometheus\",result=\"change\"} %d\n", p, step)
		fmt.Fprintf(&b, "debi_webhook_patches_total{policy=%q,mode=\"act\",result=\"success\"} %d\n", p, step)
		fmt.Fprintf(&b, "debi_webhook_decisions_total{policy=%q,source=\"prometheus\",result=\"held\"} %d\n", p, step)
		fmt.Fprintf(&b, "debi_webhook_decisions_total{policy=%q,source=\"annotation\",result=\"change\"} %d\n", p, step)
		fmt.Fprintf(&b, "debi_webhook_policy_paused{policy=%q} 0\n", p)
		fmt.Fprintf(&b, "debi_decision_info{%s,term=\"w2\",reason=\"scale-up\"} 1\n", l)
		fmt.Fprintf(&b, "debi_webhook_last_decision_replicas{policy=%q,mode=\"act\"} %d\n", p, 5+step%2)
		for _, le := range []string{"0.01", "0.1", "+Inf"} {
			fmt.Fprintf(&b, "debi_webhook_decision_duration_seconds_bucket{policy=%q,le=%q} %d\n", p, le, step)
		}
	}
	fmt.Fprintf(&b, "debi_webhook_notifications_total{endpoint=\"alertmanager\",code=\"200\"} %d\n", step)
	for _, le := range []string{"0.1", "1", "+Inf"} {
		fmt.Fprintf(&b, "debi_exporter_loop_duration_seconds_bucket{le=%q} %d\n", le, step)
	}
	fmt.Fprintf(&b, "debi_exporter_skipped_steps_total 0\n")
	return b.String()
}

// TestQueriesReturnData runs every panel query against a real Prometheus (DEBI_PROMETHEUS_DIR)
// that scrapes exporter- and webhook-shaped series and evaluates rules/*.yaml, and requires a
// non-empty answer from each: a query whose label sets do not match (a load label left on one
// side of a division, say) parses fine and returns nothing, which only this catches.
func TestQueriesReturnData(t *testing.T) {
	prom, ctx := scrapingPrometheus(t, exposition)
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"policy": "shop-web", "__range": "1m", "__range_s": "60", "__rate_interval": "30s", "horizon": "1"}
	budgetVars := map[string]string{"policy": "shop-db", "__range": "1m", "__range_s": "60", "__rate_interval": "30s", "horizon": "1"}
	for _, q := range qs {
		expr := Expand(q.Expr, vars)
		if q.Row == BudgetRow {
			expr = Expand(q.Expr, budgetVars) // series only budget policies publish
		}
		v, warn, _, err := prom.Query(ctx, expr, time.Now())
		if err != nil {
			t.Errorf("%s / %q %s: %v\n%s", q.Dashboard, q.Panel, q.RefID, err, expr)
			continue
		}
		if len(warn) > 0 {
			t.Logf("%s / %q %s: warnings %v", q.Dashboard, q.Panel, q.RefID, warn)
		}
		if vec, ok := v.(model.Vector); ok && vec.Len() == 0 {
			t.Errorf("%s / %q %s returns nothing:\n%s", q.Dashboard, q.Panel, q.RefID, expr)
		}
		// The baseline row joins every policy on shop-web's workload (shop-web acting at 4
		// replicas, its shadow shop-web-hpa recommending 3), and not shop-db on another one.
		if want, ok := baselineWant[q.Panel]; ok && q.Instant {
			vec, _ := v.(model.Vector)
			got := map[string]float64{}
			for _, s := range vec {
				got[string(s.Metric["policy"])] = float64(s.Value)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s / %q %s = %v, want %v\n%s", q.Dashboard, q.Panel, q.RefID, got, want, expr)
			}
		}
	}
}

// baselineWant are the answers of the baseline row's stats for policy shop-web, by policy.
var baselineWant = map[string]map[string]float64{
	"Cost of every policy on the workload (replica-minutes)":  {"shop-web": 4, "shop-web-hpa": 3},
	"Counterfactual overload of every policy on the workload": {"shop-web": 0, "shop-web-hpa": 1},
	"Cost against the baseline":                               {"": 4.0 / 3},
}

// scrapingPrometheus starts a real Prometheus (DEBI_PROMETHEUS_DIR) that scrapes expo(n) at its
// n-th scrape every second and evaluates rules/*.yaml, and returns it once rates have samples
// and the recording rules have run, with a context for the test's queries.
func scrapingPrometheus(t *testing.T, expo func(step int) string) (v1.API, context.Context) {
	t.Helper()
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	var mu sync.Mutex
	step := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		step++
		n := step
		mu.Unlock()
		fmt.Fprint(w, expo(n))
	}))
	t.Cleanup(target.Close)
	tmp := t.TempDir()
	rules, _ := filepath.Glob("../rules/*.yaml")
	for i := range rules {
		rules[i], _ = filepath.Abs(rules[i])
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%s]\nscrape_configs:\n  - job_name: debi-exporter\n    static_configs: [{targets: [%q]}]\n",
		strings.Join(rules, ", "), strings.TrimPrefix(target.URL, "http://"))
	if err := os.WriteFile(filepath.Join(tmp, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(filepath.Join(dir, "prometheus"), "--config.file="+filepath.Join(tmp, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(tmp, "data"), "--web.listen-address="+addr, "--log.level=warn")
	logf, err := os.Create(filepath.Join(tmp, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(tmp, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})

	client, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	// Ready once rates have samples to work with and the recording rules have run.
	for {
		v, _, _, err := prom.Query(ctx, `count_over_time(debi_current_replicas{policy="shop-web"}[1m]) >= 4 and on() count(policy:debi_replicas_delta:diff) > 0 and on() count(policy:debi_budget_burn_rate:ratio_rate1d) > 0`, time.Now())
		if err == nil && v.(model.Vector).Len() > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Prometheus never had the series: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return prom, ctx
}

// modeSwitch is exposition with shop-web in shadow for its first 8 scrapes and acting after,
// and a webhook gap (no debi_webhook_policy_info at all, the webhook down or restarting) from
// scrape 15 to 21.
func modeSwitch(step int) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(exposition(step), "\n") {
		if strings.HasPrefix(line, "debi_webhook_policy_info{") {
			if step >= 15 && step < 22 {
				continue
			}
			if step <= 8 {
				line = strings.Replace(line, `policy="shop-web",mode="act"`, `policy="shop-web",mode="shadow"`, 1)
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestQueriesOverModeSwitch evaluates every panel query on a real Prometheus over a range that
// spans shop-web's switch from shadow to act and a webhook gap, as instant queries over the
// whole range ($__range) and as range queries across it, and requires no error: a series that
// changes which side of an "or" it comes from inside a subquery gives two series of one label
// set ("vector cannot contain metrics with the same labelset") unless each side is aggregated.
func TestQueriesOverModeSwitch(t *testing.T) {
	prom, ctx := scrapingPrometheus(t, modeSwitch)
	t0 := time.Now()
	for {
		v, _, _, err := prom.Query(ctx, `count_over_time(debi_current_replicas{policy="shop-web"}[5m]) >= 30`, time.Now())
		if err == nil && v.(model.Vector).Len() > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Prometheus never had 30 scrapes: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	now := time.Now()
	span := now.Sub(t0) + 10*time.Second // from before the first scrape of the mode switch
	// Check that the history holds the switch and the gap, so the test tests them.
	v, _, _, err := prom.Query(ctx, `count(count_over_time(debi_webhook_policy_info{policy="shop-web",mode="shadow"}[5m])) > 0 and on () count(count_over_time(debi_webhook_policy_info{policy="shop-web",mode="act"}[5m])) > 0`, now)
	if err != nil || v.(model.Vector).Len() == 0 {
		t.Fatalf("the history lacks shop-web in shadow and acting: %v %v", v, err)
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	rng := fmt.Sprintf("%ds", int(5*time.Minute/time.Second))
	vars := map[string]string{"policy": "shop-web", "__range": rng, "__range_s": "300", "__rate_interval": "30s", "horizon": "1"}
	short := map[string]string{"policy": "shop-web", "__range": "10s", "__range_s": "10", "__rate_interval": "30s", "horizon": "1"}
	checked := 0
	for _, q := range qs {
		policy := "shop-web"
		if q.Row == BudgetRow {
			policy = "shop-db"
		}
		vars["policy"], short["policy"] = policy, policy
		if _, _, _, err := prom.Query(ctx, Expand(q.Expr, vars), now); err != nil {
			t.Errorf("%s / %q %s over the last 5m: %v\n%s", q.Dashboard, q.Panel, q.RefID, err, Expand(q.Expr, vars))
		}
		r := v1.Range{Start: now.Add(-span), End: now, Step: time.Second}
		if _, _, _, err := prom.QueryRange(ctx, Expand(q.Expr, short), r); err != nil {
			t.Errorf("%s / %q %s as a range query across the switch: %v\n%s", q.Dashboard, q.Panel, q.RefID, err, Expand(q.Expr, short))
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d queries checked", checked)
	}
}
