package exporter

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/debi-scaler/debi/scaling"
)

// budgetCfg is an overload-budget policy on the drift model. min_errors above the errors the
// test can collect keeps the margin at cold_margin: the margin then depends on no forecast made
// before the exporter's first background training run was swapped in (the reference trains in
// line), so every published figure must equal the reference's exactly once a trained model
// has made the latest forecast.
const budgetCfg = `
global: {interval: 15s}
# Acting: the exporter's state follows the observed changes of size (the hold restarts at each).
webhook: {mode: act, allow_unauthenticated: true}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: exporter-test-drift-budget
    request: 0.5
    history_step: 30s
    lead_time: 30s
    history: 40
    scaling: {min_replicas: 1, max_replicas: 40, budget: {hold: 1m, rule: quantile}}
    metrics: {window: 30s}
    budget: {overload_budget: 0.05, calibration_gain: 0.01, min_errors: 700}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`

// TestBudgetSeries drives a budget policy through its start-up history and 30 live steps and
// checks the budget series against a reference runner fed the same inputs: the quantiles over
// the lead time and the hold, the forecast and margin, the calibrated level, the configured
// budget, the scale-down gate's load (load="down"), and the burn counters. It then replays the
// decision from the published series alone, as the webhook does: scaling.Budget fed W
// (load="w"), WNow (load="w1") and WDown (load="down") decides what the runner decided.
func TestBudgetSeries(t *testing.T) { budgetSeries(t, budgetCfg, false) }

// TestBudgetSeriesPriced is TestBudgetSeries under the priced rule: the price is published
// (debi_budget_price), the term that decided is "price" (or "hold" when the priced hold kept
// pods, "saturated" when the forecast is above what max_replicas serve), and the webhook's
// replay from the
// published series decides what the runner decided.
func TestBudgetSeriesPriced(t *testing.T) {
	// The need is read at the cold margin (min_errors is not reached). At cold_margin 2 it is
	// twice the demand, mostly several pods above the size the schedule sets and about 30 above
	// in the burst, and covering that costs more than leaving it overloaded at the price these
	// 30 steps reach: no scale-up. At 1 the need moves a pod or two at a time, so the replay
	// crosses scale-ups as well as the hold and scale-downs.
	budgetSeries(t, strings.NewReplacer("rule: quantile", "rule: priced",
		"min_errors: 700", "min_errors: 700, cold_margin: 1").Replace(budgetCfg), true)
}

func budgetSeries(t *testing.T, cfg string, priced bool) {
	// The size moves every 3 live steps (45 s, inside the 1 m hold): 4 5 6 7 4 5 …, 4 over the
	// history. The exporter's state follows the observed changes of size (observedSizes), so
	// these changes are what restarts the hold.
	replicas := func(ts time.Time) float64 {
		i := int(ts.Sub(t0) / step)
		if i < 0 {
			return 4
		}
		return float64(4 + (i/3)%4)
	}
	ready := func(ts time.Time) float64 { return replicas(ts) - 1 }
	f := &fakeQuerier{byExpr: map[string]series{
		"demand":   func(ts time.Time) (float64, bool, error) { return demandTrace(ts), true, nil },
		"replicas": func(ts time.Time) (float64, bool, error) { return replicas(ts), true, nil },
		"ready":    func(ts time.Time) (float64, bool, error) { return ready(ts), true, nil },
	}}
	e, reg := newTestExporter(t, cfg, f)
	p := e.policies[0].cfg
	if got := p.Scaling.Budget.Rule == scaling.RulePriced; got != priced {
		t.Fatalf("rule %q, want priced %v", p.Scaling.Budget.Rule, priced)
	}
	if priced {
		// The priced rule remembers which shape of the path forecast best, from the first
		// forecasts on: the exporter trains in line, as the reference, so that those are the
		// reference's too.
		e.mu.Lock()
		e.syncTraining = true
		ps := e.policies[0]
		ps.runner.Close()
		var err error
		if e.policies[0], err = e.newPolicyState(e.cfg, ps.cfg); err != nil {
			t.Fatal(err)
		}
		e.mu.Unlock()
	}
	schedule := append(times(t0.Add(-39*histStep), 39, histStep), times(t0, 30, step)...)
	ref := replay(t, e.cfg, p, schedule, func(ts time.Time) [numQueries]float64 {
		return [numQueries]float64{replicas(ts), ready(ts), math.NaN(), demandTrace(ts)}
	})
	get := func(name string, extra ...string) float64 {
		t.Helper()
		v, ok := value(t, reg, name, "web", extra...)
		if !ok {
			t.Fatalf("%s %v not published", name, extra)
		}
		return v
	}
	overloaded, compared := 0, 0
	for i := range 30 {
		ts := t0.Add(time.Duration(i) * step)
		e.Step(context.Background(), ts)
		e.Wait()
		// The burn: every live step observed, overloaded when D > u_sla·Nr·R (0.9 the default
		// u_sla, R the policy's request).
		if demandTrace(ts) > scaling.DefaultBudgetParams().SLAUtilization*ready(ts)*p.Request {
			overloaded++
		}
		if got, want := get("debi_budget_observed_seconds_total"), 15*float64(i+1); got != want {
			t.Fatalf("step %d: observed seconds %v, want %v (15 s per live step, none for the history)", i, got, want)
		}
		if got, want := get("debi_budget_overloaded_seconds_total"), 15*float64(overloaded); got != want {
			t.Fatalf("step %d: overloaded seconds %v, want %v", i, got, want)
		}
		if get("debi_budget_overload_budget") != 0.05 {
			t.Fatalf("step %d: overload budget %v, want the configured 0.05", i, get("debi_budget_overload_budget"))
		}
		if i < 2 {
			continue // steps 0 and 1 stand on a forecast made while the first training may have run
		}
		want := ref[ts.UnixMilli()]
		b := want.Budget
		if b == nil {
			t.Fatalf("step %d: the reference has no budget state", i)
		}
		capacity := replicas(ts) * p.Request
		for _, c := range []struct {
			name  string
			want  float64
			extra []string
		}{
			{"debi_budget_quantile_cores", b.Quantile, []string{"window", "lead"}},
			{"debi_budget_quantile_cores", b.QuantileDown, []string{"window", "hold"}},
			{"debi_budget_forecast_cores", b.Forecast, nil},
			{"debi_budget_margin", b.Margin, nil},
			{"debi_budget_level", b.Alpha, nil},
			{"debi_budget_error_samples", float64(b.Errors), nil},
			{"debi_load_ratio", want.W, []string{"load", "w"}},
			{"debi_load_ratio", want.W1, []string{"load", "w1"}},
			{"debi_load_ratio", b.QuantileDown / capacity, []string{"load", "down"}},
			{"debi_recommended_replicas", float64(want.Decision.Replicas), nil},
			// The bounds the budget's hold allowed: the webhook clamps its rule into them.
			{"debi_decision_floor_replicas", float64(want.Floor), nil},
			{"debi_decision_ceiling_replicas", float64(want.Ceiling), nil},
			// Why: the load that decided and the rule's branch.
			{"debi_decision_info", 1, []string{"term", want.Term, "reason", want.Decision.Reason}},
			{"debi_policy_max_replicas", 40, nil},
		} {
			// Not available (NaN) is left out: the margin of a zero forecast.
			if got, ok := value(t, reg, c.name, "web", c.extra...); !near(got, c.want) || ok == math.IsNaN(c.want) {
				t.Fatalf("step %d: %s %v = %v (present %v), want %v", i, c.name, c.extra, got, ok, c.want)
			}
		}
		price, ok := value(t, reg, "debi_budget_price", "web")
		hold, holdOK := value(t, reg, "debi_budget_hold_seconds", "web")
		settle, settleOK := value(t, reg, "debi_budget_hold_settle", "web")
		if wantSettle := map[bool]float64{true: 1}[b.HoldSettle]; priced != settleOK || priced && settle != wantSettle {
			t.Fatalf("step %d: debi_budget_hold_settle %v (present %v), want %v under the priced rule only", i, settle, settleOK, wantSettle)
		}
		switch {
		case priced && (!ok || price != b.Lambda || !(price >= 1)):
			t.Fatalf("step %d: debi_budget_price %v (present %v), want the runner's λ %v (at least 1)", i, price, ok, b.Lambda)
		case !priced && ok:
			t.Fatalf("step %d: debi_budget_price %v published under the quantile rule", i, price)
		case priced && !near(hold, b.Hold.Seconds()) || priced != holdOK:
			t.Fatalf("step %d: debi_budget_hold_seconds %v (present %v), want the runner's hold %v under the priced rule only", i, hold, holdOK, b.Hold)
		case priced && want.Term != "price" && want.Term != "hold" && want.Term != "saturated":
			t.Fatalf("step %d: a priced decision decided by %q, want price, hold or saturated", i, want.Term)
		case priced && (want.Term == "saturated") != b.Saturated:
			t.Fatalf("step %d: decided by %q, but the forecast above max_replicas was %v", i, want.Term, b.Saturated)
		case priced && (want.Term == "saturated") && want.Decision.Replicas != 40:
			t.Fatalf("step %d: decided by saturated at %d replicas, want max_replicas 40", i, want.Decision.Replicas)
		case priced && (want.Term == "hold") != b.Held:
			t.Fatalf("step %d: decided by %q, but the priced hold held %v", i, want.Term, b.Held)
		case !priced && want.Term != "quantile" && want.Term != "w1":
			t.Fatalf("step %d: a budget decision decided by %q, want quantile or w1", i, want.Term)
		}
		if want.Ceiling < want.Floor || want.Ceiling == 0 {
			t.Fatalf("step %d: bounds [%d, %d]", i, want.Floor, want.Ceiling)
		}
		if s := scaling.Clamp(want.Decision.Replicas, want.Floor, want.Ceiling); s != want.Decision.Replicas {
			t.Fatalf("step %d: decision %d outside its bounds [%d, %d]", i, want.Decision.Replicas, want.Floor, want.Ceiling)
		}
		// Below min_errors the margin is cold_margin.
		if m, ok := value(t, reg, "debi_budget_margin", "web"); ok && !near(m, p.Budget.ColdMargin) {
			t.Fatalf("step %d: margin %v, want cold_margin %v", i, m, p.Budget.ColdMargin)
		}
		compared++
	}
	if compared != 28 {
		t.Fatalf("compared %d steps, want 28", compared)
	}
	if lvl := get("debi_budget_level"); lvl == 0.05 {
		t.Errorf("level %v never moved from the budget: the calibration saw no overload and no quiet step", lvl)
	}
	if overloaded == 0 || overloaded == 30 {
		t.Errorf("%d of 30 steps overloaded: the test needs both", overloaded)
	}

	// What the webhook does: the algorithm fed the published loads. The published w, w1 and
	// down are the reference's W, W1 and QuantileDown/capacity (checked above), so the
	// algorithm fed those at every step of the schedule must decide what the runner decided.
	rc, err := p.RunnerConfig()
	if err != nil {
		t.Fatal(err)
	}
	alg, err := scaling.New("budget", rc.Params)
	if err != nil {
		t.Fatal(err)
	}
	alg.(scaling.Unapplied).SetUnapplied(observedSizes)
	reasons := map[string]int{}
	for _, ts := range schedule {
		r, ok := ref[ts.UnixMilli()]
		if !ok {
			t.Fatalf("%v: no reference step", ts)
		}
		n := int32(replicas(ts))
		d := alg.Recommend(scaling.Input{Time: ts, Current: n, Ready: int32(ready(ts)),
			W: r.W, WNow: r.W1, WDown: r.Budget.QuantileDown / (float64(n) * p.Request), WindowW: r.WindowW})
		if d != r.Decision {
			t.Fatalf("%v: the algorithm fed the published loads decides %+v, the runner %+v", ts, d, r.Decision)
		}
		reasons[d.Reason]++
	}
	// The replay must have crossed the algorithm's branches: up, down, and the hold (the
	// priced rule's is in its W, which the webhook reads as it is: policy.TestPricedHold).
	branches := []string{scaling.ReasonScaleUp, scaling.ReasonScaleDown, scaling.ReasonStabilized}
	if priced {
		branches = branches[:2]
	}
	for _, want := range branches {
		if reasons[want] == 0 {
			t.Errorf("no %s decision in the replay (%v): the equivalence proves little", want, reasons)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestBudgetCounters: the burn counters count live steps with a demand only, never decrease
// (a failing Prometheus or a missing demand adds nothing), and are exported for budget
// policies only.
func TestBudgetCounters(t *testing.T) {
	demandOK := true
	f := &fakeQuerier{byExpr: map[string]series{
		// 2 ready pods of 1 core carrying 1.9 cores: above u_sla·2·1 for any u_sla below 0.95.
		"demand":   func(time.Time) (float64, bool, error) { return 1.9, demandOK, nil },
		"replicas": constant(2), "ready": constant(2),
	}}
	e, reg := newTestExporter(t, `
global: {interval: 15s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: naive-budget
    request: 1
    history_step: 15s
    scaling: {budget: {u_sla: 0.9}}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
  - name: db
    target: {namespace: shop, name: db}
    algorithm: hpa
    request: 1
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`, f)
	counters := func() (overloaded, observed float64) {
		t.Helper()
		o, ok1 := value(t, reg, "debi_budget_overloaded_seconds_total", "web")
		s, ok2 := value(t, reg, "debi_budget_observed_seconds_total", "web")
		if !ok1 || !ok2 {
			t.Fatal("budget counters not published")
		}
		return o, s
	}
	ctx := context.Background()
	e.Step(ctx, t0)
	if o, s := counters(); o != 15 || s != 15 {
		t.Fatalf("one overloaded live step: %v of %v s, want 15 of 15", o, s)
	}
	demandOK = false
	e.Step(ctx, t0.Add(step))
	f.setDown(true)
	e.Step(ctx, t0.Add(2*step))
	if o, s := counters(); o != 15 || s != 15 {
		t.Fatalf("no demand, then Prometheus down: %v of %v s, want still 15 of 15", o, s)
	}
	f.setDown(false)
	demandOK = true
	e.Step(ctx, t0.Add(3*step))
	if o, s := counters(); o != 30 || s != 30 {
		t.Fatalf("back: %v of %v s, want 30 of 30", o, s)
	}
	for _, name := range []string{"debi_budget_overloaded_seconds_total", "debi_budget_quantile_cores", "debi_budget_level", "debi_budget_overload_budget"} {
		if _, ok := value(t, reg, name, "db"); ok {
			t.Errorf("%s published for the hpa policy", name)
		}
	}
	if _, ok := value(t, reg, "debi_load_ratio", "db", "load", "down"); ok {
		t.Error(`load="down" published for the hpa policy`)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
