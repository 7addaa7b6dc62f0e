package policy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in        string
		algorithm string
		model     string
		load      LoadMode
	}{
		{"hpa", "hpa", "", LoadObserved},
		{"APA", "apa", "", LoadObserved},
		{"debi", "debi", DefaultDebiModel, LoadEffective},
		{"naive-hpa", "hpa", "naive", LoadForecast},
		{"seasonal-naive-hpa", "hpa", "seasonal-naive", LoadForecast},
		{"evt-holtwinters-hpa", "hpa", "holtwinters", LoadEffective},
		{"naive-debi", "debi", "naive", LoadEffective},
		{"budget", "budget", DefaultBudgetModel, LoadBudget},
		{"arima-budget", "budget", "arima", LoadBudget},
	} {
		s, err := Parse(tc.in, "")
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if s.Algorithm != tc.algorithm || s.Model != tc.model || s.Load != tc.load {
			t.Errorf("Parse(%q) = %+v", tc.in, s)
		}
	}
	for _, bad := range []string{"", "kpa", "-hpa", "evt--hpa", "crystalball-hpa", "evt-crystalball-hpa"} {
		if _, err := Parse(bad, ""); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "naive") {
			t.Errorf("Parse(%q) error should list the models: %v", bad, err)
		}
	}
	if s, err := Parse("debi", "naive"); err != nil || s.Model != "naive" {
		t.Errorf("debi with model naive: %+v %v", s, err)
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRunner(t *testing.T, name string, mut func(*Config)) *Runner {
	t.Helper()
	spec, err := Parse(name, "naive")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(spec)
	cfg.Request = 1
	if mut != nil {
		mut(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMissingDataNeverScalesDown: a missing sample keeps the current size (HPA's rule), and the
// error says why.
func TestMissingDataNeverScalesDown(t *testing.T) {
	r := newRunner(t, "hpa", nil)
	res, err := r.Step(context.Background(), Observation{Time: t0, Demand: math.NaN(), Current: 9, Ready: 9})
	if !errors.Is(err, ErrNoData) {
		t.Fatalf("want ErrNoData, got %v", err)
	}
	if res.Decision.Replicas != 9 || res.Decision.Reason != scaling.ReasonNoLoad {
		t.Fatalf("missing data decided %+v, want to keep 9", res.Decision)
	}
}

// TestLoadsAtCurrentSize checks the unit conversions of METHOD §0: every load is demand over
// N·R, and the effective load follows eq. (16).
func TestLoadsAtCurrentSize(t *testing.T) {
	r := newRunner(t, "debi", func(c *Config) { c.History = 50; c.POT.MinExcesses = 5 })
	var res Result
	for i := 0; i < 40; i++ {
		d := 4.0
		if i%7 == 0 {
			d = 8 // spikes make a tail for the EVT fit
		}
		var err error
		res, err = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * time.Minute), Demand: d, Current: 4, Ready: 4})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Last demand (i=39, 39%7≠0) is 4 cores on 4 pods of 1 core: W1 = 1.
	if res.W1 != 1 {
		t.Errorf("W1 = %v, want 1", res.W1)
	}
	// naive forecast = last value = 4 → W2 = 1.
	if res.W2 != 1 || res.DemandForecast != 4 {
		t.Errorf("W2 = %v (forecast %v), want 1 (4)", res.W2, res.DemandForecast)
	}
	if math.IsNaN(res.W3) || res.W3 != res.HighWater/4 {
		t.Errorf("W3 = %v, high-water %v: want z/(N·R)", res.W3, res.HighWater)
	}
	if want := scaling.EffectiveLoad(res.W1, res.W2, res.W3); res.W != want {
		t.Errorf("W = %v, want %v", res.W, want)
	}
}

// TestAsyncTrainingSwapsModel: live training runs in the background on a clone and the
// trained model is used from the step after it finishes.
func TestAsyncTrainingSwapsModel(t *testing.T) {
	r := newRunner(t, "naive-hpa", func(c *Config) { c.AsyncTraining = true })
	ctx := context.Background()
	// Step 1 has too little history (naive needs lead+1 = 2 points); step 2 starts training in
	// the background and cannot report it; step 3 sees the finished run and the trained model.
	for i, d := range []float64{2, 3} {
		res, _ := r.Step(ctx, Observation{Time: t0.Add(time.Duration(i) * time.Minute), Demand: d, Current: 2, Ready: 2})
		r.Wait()
		if res.Training != nil || !math.IsNaN(res.DemandForecast) {
			t.Fatalf("step %d: training %v, forecast %v before any run finished", i+1, res.Training, res.DemandForecast)
		}
	}
	res, _ := r.Step(ctx, Observation{Time: t0.Add(2 * time.Minute), Demand: 5, Current: 2, Ready: 2})
	if res.Training == nil {
		t.Fatal("finished training not reported")
	}
	if res.DemandForecast != 5 {
		t.Fatalf("forecast %v, want the naive 5", res.DemandForecast)
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	spec, _ := Parse("hpa", "")
	for _, tc := range []struct {
		field string
		mut   func(*Config)
	}{
		{"request", func(c *Config) { c.Request = 0 }},
		{"lead_steps", func(c *Config) { c.LeadSteps = 0 }},
		{"history", func(c *Config) { c.History = 1 }},
		{"max_replicas", func(c *Config) { c.Params.MaxReplicas = -1 }},
	} {
		c := DefaultConfig(spec)
		tc.mut(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	// The priced rule prices every tick: scored once per sample it is refused by name.
	bs, _ := Parse("budget", "naive")
	c := DefaultConfig(bs)
	c.Params.Budget.Rule, c.Calibration.Scoring = scaling.RulePriced, forecast.ScoringSample
	if _, err := New(c); err == nil || !strings.Contains(err.Error(), "budget.rule") || !strings.Contains(err.Error(), "budget.scoring") {
		t.Errorf("priced rule scored per sample: %v, want an error naming budget.rule and budget.scoring", err)
	}
	c.Calibration.Scoring = forecast.ScoringTick
	if _, err := New(c); err != nil {
		t.Errorf("priced rule scored per tick: %v", err)
	}
}

// TestForecastOnDemandNotUtilization is METHOD §0's [fix]: models and the EVT fit see demand,
// so a history in which the replicas doubled (halving utilization) is still a flat load.
func TestForecastOnDemandNotUtilization(t *testing.T) {
	r := newRunner(t, "evt-naive-hpa", func(c *Config) { c.History = 40 })
	for i := 0; i < 40; i++ {
		n := int32(4)
		if i >= 20 {
			n = 8 // the deployment doubled: utilization halves, demand does not move
		}
		if _, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * time.Minute), Demand: 3, Current: n, Ready: n}); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range r.History() {
		if v != 3 {
			t.Fatalf("history[%d] = %v: the models would learn the scaling decisions, not the load", i, v)
		}
	}
}

// TestAsyncTrainingOutlivesStepContext: the exporter gives each step a context that ends with
// the step; a background training run must not die with it.
func TestAsyncTrainingOutlivesStepContext(t *testing.T) {
	r := newRunner(t, "naive-hpa", func(c *Config) { c.AsyncTraining = true })
	defer r.Close()
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		res, _ := r.Step(ctx, Observation{Time: t0.Add(time.Duration(i) * time.Minute), Demand: 2, Current: 2, Ready: 2})
		cancel() // the step is over
		r.Wait()
		if res.TrainError != nil {
			t.Fatalf("step %d: training failed: %v", i, res.TrainError)
		}
	}
	res, _ := r.Step(context.Background(), Observation{Time: t0.Add(3 * time.Minute), Demand: 2, Current: 2, Ready: 2})
	if res.TrainError != nil || math.IsNaN(res.DemandForecast) {
		t.Fatalf("model not trained: err %v, forecast %v", res.TrainError, res.DemandForecast)
	}
}

// TestHorizon is METHOD §2's [fix]: the horizon reaches past the actuation delay,
// h = ceil(lead/step) + 1.
func TestHorizon(t *testing.T) {
	for _, tc := range []struct {
		lead, step time.Duration
		want       int
	}{
		{0, time.Minute, 1},                        // no delay: the next step
		{2 * time.Minute, 5 * time.Minute, 2},      // ceil(2/5) + 1
		{2 * time.Minute, time.Minute, 3},          // 2 + 1
		{135 * time.Second, time.Minute, 4},        // ceil(2.25) + 1
		{5 * time.Minute, 15 * time.Second, 21},    // 20 + 1
		{time.Minute, 0, 1},                        // no step: guard
		{24 * time.Hour, 5 * time.Minute, 288 + 1}, // a day of 5-minute steps
		{24*time.Hour + 1, 5 * time.Minute, 289 + 1} /* just over: one more */} {
		if got := Horizon(tc.lead, tc.step); got != tc.want {
			t.Errorf("Horizon(%v, %v) = %d, want %d", tc.lead, tc.step, got, tc.want)
		}
	}
	for _, tc := range []struct {
		season, step time.Duration
		want         int
	}{{24 * time.Hour, 5 * time.Minute, 288}, {24 * time.Hour, time.Minute, 1440}, {24 * time.Hour, 15 * time.Second, 5760}, {time.Second, time.Minute, 1}} {
		if got := SeasonSteps(tc.season, tc.step); got != tc.want {
			t.Errorf("SeasonSteps(%v, %v) = %d, want %d", tc.season, tc.step, got, tc.want)
		}
	}
}

// TestW2IsLargestOverHorizon: a spike the model sees coming inside the horizon is ordered now,
// although the horizon's last point is low again.
func TestW2IsLargestOverHorizon(t *testing.T) {
	r := newRunner(t, "seasonal-naive-hpa", func(c *Config) { c.Model.Season = 4; c.LeadSteps = 4 })
	var res Result
	// Period 1, 1, 9, 1: the history ends on a 1 whose next three steps are 1, 1, 9.
	for i := range 16 {
		d := 1.0
		if i%4 == 2 {
			d = 9
		}
		res, _ = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * time.Minute), Demand: d, Current: 2, Ready: 2})
	}
	if res.DemandForecast != 9 || res.DemandForecastEnd != 1 {
		t.Fatalf("forecast over t+1…t+4 = 1, 1, 9, 1: got max %v, end %v; want 9 and 1", res.DemandForecast, res.DemandForecastEnd)
	}
	if res.W2 != 9.0/2 {
		t.Fatalf("W2 = %v, want 9 cores over 2 pods of 1 core", res.W2)
	}
}

// TestTicksBetweenSamples: called at 15 s ticks, the runner takes one history point per
// 5-minute step; between steps the forecast stands while W1 follows every tick.
func TestTicksBetweenSamples(t *testing.T) {
	r := newRunner(t, "naive-hpa", func(c *Config) { c.Step = 5 * time.Minute })
	newSamples := 0
	var last Result
	for i := range 60 { // 15 minutes of ticks
		d := float64(1 + i) // demand rises every tick
		res, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: 4, Ready: 4})
		if err != nil {
			t.Fatal(err)
		}
		if res.NewSample {
			newSamples++
			if i%20 != 0 {
				t.Fatalf("tick %d began a history step; want only ticks 0, 20, 40", i)
			}
		} else if i > 20 && res.DemandForecast != last.DemandForecast {
			t.Fatalf("tick %d: the forecast moved (%v → %v) between history steps", i, last.DemandForecast, res.DemandForecast)
		}
		last = res
	}
	if newSamples != 3 || len(r.History()) != 3 {
		t.Fatalf("%d new steps, %d history points over 15 minutes of 5-minute steps; want 3", newSamples, len(r.History()))
	}
	// The stabilised W1 (60 s mean of the last ticks) moved with the load at the last tick.
	if last.Demand < 55 {
		t.Fatalf("W1 demand %v at the last tick: it should follow the ticks (≈59)", last.Demand)
	}
}

// TestModelHistoryShortfall: a daily Holt-Winters on one-minute steps needs two days of history;
// the runner says so rather than silently forecasting nothing.
func TestModelHistoryShortfall(t *testing.T) {
	r := newRunner(t, "holtwinters-hpa", nil)
	need, have := r.ModelHistory()
	if need != 2*1440 || have != 0 {
		t.Fatalf("needed %d, have %d; want 2880 (two days of 1-minute steps) and 0", need, have)
	}
	res, _ := r.Step(context.Background(), Observation{Time: t0, Demand: 1, Current: 1, Ready: 1})
	if res.ForecastError == nil || !strings.Contains(res.ForecastError.Error(), "2880") {
		t.Fatalf("forecast error %v should name the history it needs", res.ForecastError)
	}
	r5 := newRunner(t, "holtwinters-hpa", func(c *Config) { c.Step = 5 * time.Minute })
	if need, _ := r5.ModelHistory(); need != 2*288 {
		t.Fatalf("5-minute steps: needed %d, want 576", need)
	}
}

// TestHPAActsOnTheRawObservation: Kubernetes' HPA acts on the metrics-server value as it comes;
// the metrics policy's stabilisation is the Elastic Scaler's (apa, debi).
func TestHPAActsOnTheRawObservation(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   float64
	}{{"hpa", 4}, {"apa", 3}} {
		r := newRunner(t, tc.policy, nil)
		var res Result
		for i, d := range []float64{2, 3, 4} { // 20 s apart: all inside the 60 s window
			res, _ = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 20 * time.Second), Demand: d, Current: 1, Ready: 1})
		}
		if res.Demand != tc.want {
			t.Errorf("%s: observed demand %v, want %v", tc.policy, res.Demand, tc.want)
		}
	}
}

// TestBudgetRunner: the budget policy sizes for the calibrated quantile of the demand at
// t + lead time, anchored at the observation now: on a steady ramp its quantile leads the
// observed load by about the lead time's growth, its calibration counts every tick, and the
// recommended size covers the quantile at u_sla.
func TestBudgetRunner(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
		c.Params.Budget.Rule = scaling.RuleQuantile
	})
	var res Result
	for i := range 2000 { // a ramp of 0.01 core per 15 s tick, from 10 cores
		d := 10 + 0.01*float64(i)
		var err error
		res, err = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: 40, Ready: 40})
		if err != nil {
			t.Fatal(err)
		}
	}
	b := res.Budget
	if b == nil {
		t.Fatal("no budget state")
	}
	if b.Observed != 2000 || b.Exceeded != 0 {
		t.Fatalf("observed %d, exceeded %d: want every tick counted, none above 0.9·40 pods", b.Observed, b.Exceeded)
	}
	// Now 29.99 cores observed; the nowcast adds half the 60 s window of the trend, 0.02 core,
	// and the naive path carries it flat over the lead time: 30.01 cores. The ramp the naive
	// forecast misses is what the calibrated margin is for.
	if math.Abs(b.Forecast-30.01) > 1e-9 {
		t.Fatalf("forecast %v, want 30.01 cores (the nowcast, carried flat)", b.Forecast)
	}
	if b.Errors < 100 || !(b.Quantile > b.Forecast) {
		t.Fatalf("%d errors, quantile %v: on a ramp the naive forecast is always low, so the margin must lift it", b.Errors, b.Quantile)
	}
	if !(b.Quantile >= b.Forecast) || b.QuantileDown < b.Quantile {
		t.Fatalf("quantile %v, down %v, forecast %v: want forecast ≤ quantile ≤ down", b.Quantile, b.QuantileDown, b.Forecast)
	}
	if want := int32(math.Ceil(b.Quantile / 0.9)); res.Decision.Replicas < want && res.Decision.Replicas != 40 {
		t.Fatalf("decided %d pods for a quantile of %v cores", res.Decision.Replicas, b.Quantile)
	}
}

// TestDecidingTerm: the term is the load W was taken from, the window when it decided.
func TestDecidingTerm(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{W: 0.5, W1: 0.5, W2: 0.4, W3: 0.9}, "w1"}, // max(min(0.4, 0.9), 0.5) = W1
		{Result{W: 0.6, W1: 0.5, W2: 0.6, W3: 0.9}, "w2"}, // min(W2, W3) = W2 above W1
		{Result{W: 0.7, W1: 0.5, W2: 0.9, W3: 0.7}, "w3"}, // the high-water caps the forecast
		{Result{W: 0.5, W1: 0.5, W2: nan, W3: nan}, "w1"}, // no model yet
		{Result{W: nan, W1: nan}, ""},                     // no load
		{Result{W: 0.8, W1: 0.5, Budget: &BudgetState{}}, "quantile"},
		{Result{W: 0.4, W1: 0.5, Budget: &BudgetState{}}, "w1"},              // the observed floor
		{Result{W: 0.4, W1: 0.5, Budget: &BudgetState{Lambda: 40}}, "price"}, // the priced rule: no floor
		{Result{W: 0.4, W1: 0.5, Budget: &BudgetState{Lambda: 40, Held: true}}, "hold"},
		{Result{W: 0.4, W1: 0.5, Budget: &BudgetState{Lambda: 40, Saturated: true}}, "saturated"},
		{Result{W: 0.8, W1: 0.5, Budget: &BudgetState{Lambda: nan}}, "quantile"},
		{Result{W: 0.5, W1: 0.5, Decision: scaling.Decision{Reason: scaling.ReasonWindow}}, "window"},
	} {
		if got := decidingTerm(&tc.r); got != tc.want {
			t.Errorf("%+v: term %q, want %q", tc.r, got, tc.want)
		}
	}
}

// TestBudgetPathAt: the path is read linearly between its points: 2 minutes into a 5-minute
// step from the base 10 to the point 20 it is 10 + (2/5)·10 = 14; flat past its end, the base
// at t0.
func TestBudgetPathAt(t *testing.T) {
	tb := tickBudget{step: 5 * time.Minute, t0: t0, base: 10, path: []float64{20, 20}, ok: true}
	if got := tb.at(t0.Add(2 * time.Minute)); math.Abs(got-14) > 1e-9 {
		t.Fatalf("linear at 2 of 5 minutes: %v, want 14", got)
	}
	if got := tb.at(t0.Add(time.Hour)); got != 20 {
		t.Fatalf("past the end: %v, want the last point 20", got)
	}
	if got := tb.at(t0); got != 10 {
		t.Fatalf("at t0: %v, want the base 10", got)
	}
}

// TestBudgetAnchorEachTick: one tick whose observation jumps by 20 cores moves the path,
// anchored at each tick's nowcast, by the whole nowcast.
func TestBudgetAnchorEachTick(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	var before, after float64
	for i := range 1000 {
		d := 10.0
		if i == 999 {
			d = 30
		}
		res, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: 40, Ready: 40})
		if err != nil {
			t.Fatal(err)
		}
		before, after = after, res.Budget.Forecast
	}
	// The trend's nowcast of the jump is 30 + 20·(30 s / 15 s) = 70, and the deconvolved one is
	// clipped to it (10 + 20·(60 s / 15 s) = 90 above it): 60 above the path at 10.
	if moved := after - before; math.Abs(moved-60) > 1e-9 {
		t.Errorf("the forecast moved %v, want 60", moved)
	}
}

// TestBudgetMissOnTheTick: an observation that rises by half a core, to 35.5 cores on 40 pods
// at u_sla 0.9 (36 cores), is one exceedance: the mean demand over the tick it rose in is
// 35 + 0.5·(60 s / 15 s) = 37, clipped to the trend's nowcast 35.5 + 0.5·2 = 36.5, above 36; the
// ticks after it are flat at 35.5.
func TestBudgetMissOnTheTick(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	var res Result
	for i := range 100 {
		d := 35.0
		if i >= 50 {
			d = 35.5
		}
		var err error
		if res, err = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: 40, Ready: 40}); err != nil {
			t.Fatal(err)
		}
	}
	if res.Budget.Exceeded != 1 {
		t.Errorf("%d exceedances, want 1", res.Budget.Exceeded)
	}
}

// TestBudgetNowcastDeconvolved: demand that steps from 10 to 30 cores at a tick, seen through a
// 60 s mean at 15 s ticks (15, 20, 25, 30 cores over the minute after). The trend's nowcast
// would overshoot a window after the jump (25, 30, 35, 40, then 30: 40 cores on 40 pods at u_sla
// 0.9, an exceedance that never happened); the deconvolved one is the jump from the second tick
// on (25, clipped to the trend's, then 30), never overshoots, and counts no exceedance.
func TestBudgetNowcastDeconvolved(t *testing.T) {
	demand := func(i int) float64 { // the 60 s mean over ticks i−3 … i of a step at tick 1000
		if i < 1000 {
			return 10
		}
		return 10 + 20*math.Min(1, float64(i-999)/4)
	}
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	want := []float64{25, 30, 30, 30, 30, 30}
	var got []float64
	var res Result
	for i := range 1006 {
		var err error
		res, err = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: demand(i), Current: 40, Ready: 40})
		if err != nil {
			t.Fatal(err)
		}
		if i >= 1000 {
			got = append(got, res.Budget.Forecast)
		}
	}
	for k := range got {
		if math.Abs(got[k]-want[k]) > 1e-9 {
			t.Errorf("the forecasts after the jump are %v, want %v", got, want)
			break
		}
	}
	if res.Budget.Exceeded != 0 {
		t.Errorf("%d exceedances, want 0", res.Budget.Exceeded)
	}
}

// TestBudgetMissAtStep: demand that steps at a tick, seen through a 60 s mean at 15 s ticks,
// with the pods changed at the step as a scaler that knew it would. Each exceedance is counted
// on the demand over the tick, read whole from the first tick after the step: a step down from
// 30 to 10 cores with 40 pods cut to 12 at it (10.8 cores at u_sla 0.9) is no exceedance (three
// quarters of the step, 15 cores, would be one), and a step up from 10 to 30 on 30 pods (27
// cores) until 40 are ready 8 ticks later is one at each of the 9 ticks the smaller of a tick's
// two ready counts was 30 (three quarters, 25 cores, would miss the first).
func TestBudgetMissAtStep(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	tick := func(i int) (d float64, ready int32) { // the demand over tick i and the pods ready at its end
		switch {
		case i < 1000:
			return 30, 40
		case i < 1090:
			return 10, 12
		case i < 1100:
			return 10, 30
		case i < 1108:
			return 30, 30
		}
		return 30, 40
	}
	var res Result
	for i := range 1200 {
		var sum float64
		for k := i - 3; k <= i; k++ {
			d, _ := tick(k)
			sum += d
		}
		_, ready := tick(i)
		var err error
		if res, err = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: sum / 4, Current: ready, Ready: ready}); err != nil {
			t.Fatal(err)
		}
		if i == 1050 && res.Budget.Exceeded != 0 {
			t.Fatalf("after the step down: %d exceedances, want 0", res.Budget.Exceeded)
		}
	}
	if res.Budget.Exceeded != 9 {
		t.Errorf("after the step up: %d exceedances, want 9", res.Budget.Exceeded)
	}
}

// TestBudgetNowcastBadInput: the default (deconvolved) nowcast on the inputs a live exporter
// gets: a doubled observation (the same time twice) changes nothing on flat demand; a missing
// one holds the size; after a 10-minute gap, with no tick means a window back,
// the nowcast is the trend's until a window has passed and then the new level; an observation
// older than the last one is taken without extrapolation. Every forecast is a finite number
// ≥ 0.
func TestBudgetNowcastBadInput(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 15 * time.Second) }
	step := func(tm time.Time, d float64) Result {
		t.Helper()
		res, err := r.Step(ctx, Observation{Time: tm, Demand: d, Current: 20, Ready: 20})
		if err != nil {
			t.Fatal(err)
		}
		if f := res.Budget.Forecast; math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			t.Fatalf("at %v: forecast %v", tm.Sub(t0), f)
		}
		return res
	}
	for i := range 400 {
		step(at(i), 10)
	}
	if f := step(at(399), 10).Budget.Forecast; f != 10 { // doubled
		t.Errorf("a doubled observation: forecast %v, want 10", f)
	}
	if f := step(at(400), 10).Budget.Forecast; f != 10 {
		t.Errorf("after a doubled observation: forecast %v, want 10", f)
	}
	// A missing sample: the stabilised demand still has the window's earlier ones, so no error;
	// the size is held.
	res, err := r.Step(ctx, Observation{Time: at(401), Demand: math.NaN(), Current: 20, Ready: 20})
	if (err != nil && !errors.Is(err, ErrNoData)) || res.Decision.Replicas != 20 {
		t.Errorf("a missing observation: %v, decided %d, want the size 20 held", err, res.Decision.Replicas)
	}
	// A 10-minute gap, then demand at 30: the observation climbs over the window (15, 20, 25, 30).
	for k, d := range []float64{15, 20, 25, 30, 30, 30, 30, 30} {
		f := step(at(442+k), d).Budget.Forecast
		if k >= 4 && f != 30 {
			t.Errorf("%d ticks after the gap: forecast %v, want 30", k, f)
		}
	}
	if f := step(at(445), 30).Budget.Forecast; f != 30 { // older than the last
		t.Errorf("an observation older than the last: forecast %v, want 30 (no extrapolation)", f)
	}
}

// TestBudgetFallback: with a fallback model the budget policy forecasts from the fallback's
// history on (ARIMA: 24 steps) instead of waiting the two days Holt-Winters needs, keeps the
// history Holt-Winters needs although Config.History is shorter, and switches to it when that
// history has arrived. A fallback on a policy without a model, or an unknown one, is refused.
func TestBudgetFallback(t *testing.T) {
	run := func(fallback string) (first int, r *Runner) {
		spec, err := Parse("holtwinters-budget", "")
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig(spec)
		cfg.Request, cfg.Step, cfg.LeadSteps, cfg.LeadTime = 1, 5*time.Minute, 2, 2*time.Minute
		cfg.History, cfg.Fallback = 100, fallback
		if r, err = New(cfg); err != nil {
			t.Fatal(err)
		}
		first = -1
		for i := range 600 {
			d := 10 + 4*math.Sin(2*math.Pi*float64(i)/288) + 0.3*float64(i%3)
			res, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 5 * time.Minute), Demand: d, Current: 20, Ready: 20})
			if err != nil {
				t.Fatal(err)
			}
			if first < 0 && !math.IsNaN(res.DemandForecast) {
				first = i + 1
			}
		}
		return first, r
	}
	without, _ := run("")
	with, r := run("arima")
	if without != 576 || with != 24 {
		t.Fatalf("first forecast after %d steps without a fallback and %d with arima; want 576 (two days of 5 min) and 24", without, with)
	}
	fb, ok := r.model.Load().f.(*forecast.Fallback)
	if !ok || fb.Active() != "holtwinters" {
		t.Fatalf("after 600 steps of a 100-step history: model %T active %v, want Holt-Winters (the history it needs kept)", r.model.Load().f, fb)
	}
	if need, _ := r.ModelHistory(); need != 24 {
		t.Fatalf("ModelHistory needs %d, want the fallback's 24 (the first forecast)", need)
	}

	for _, tc := range []struct{ name, fallback, want string }{
		{"hpa", "arima", "no model to fall back from"},
		{"budget", "prophet", `unknown model "prophet"`},
		{"arima-budget", "holtwinters", "never forecast first"},
	} {
		spec, _ := Parse(tc.name, "")
		cfg := DefaultConfig(spec)
		cfg.Request, cfg.Fallback = 1, tc.fallback
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fallback") {
			t.Errorf("%s with fallback %s: %v, want an error naming fallback and %q", tc.name, tc.fallback, err, tc.want)
		}
	}
}

// TestBudgetTickMeanFromStart: on a ramp seen through a 60 s mean at 15 s ticks, the mean demand
// over each tick kept for the deconvolution is exact from the first tick on, and again after a
// missing observation. The observation lags the ramp by half a window, so a mean kept from it at
// the first tick (or the first after the gap) would be carried a window at a time for as long
// as the ramp lasts.
func TestBudgetTickMeanFromStart(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	const slope = 0.1 // cores per tick
	ramp := func(x float64) float64 { return 10 + slope*x }
	const gap = 50
	for i := range 120 {
		obs := Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: ramp(float64(i) - 2), Current: 40, Ready: 40}
		if i == gap {
			obs.Demand = math.NaN()
		}
		if _, err := r.Step(context.Background(), obs); err != nil && !errors.Is(err, ErrNoData) {
			t.Fatal(err)
		}
		for _, m := range r.tb.tickMeans {
			k := float64(m.t.Sub(t0)) / float64(15*time.Second)
			if want := ramp(k - 0.5); math.Abs(m.v-want) > 1e-9 {
				t.Fatalf("at tick %d the mean kept for tick %v is %v, want %v", i, k, m.v, want)
			}
		}
	}
	if len(r.tb.tickMeans) < 4 {
		t.Fatalf("%d tick means kept, want a window's", len(r.tb.tickMeans))
	}
}

// TestBudgetClassAfterStep: demand that steps at every 5-minute history point, to one of two
// levels in an order no model can forecast, seen through a 60 s mean at 15 s ticks. A step is
// news to every forecast made before the nowcast has read it whole (two ticks after the point),
// so the errors of the forecasts that no point comes between hold few of them: the margin read
// from that class at a level of 5 % above a forecast of the lower level is none of a step (20
// cores), while the class that crosses a point holds them. Counted from the point itself, the
// forecasts of its first two ticks would put the steps into the within class (2 in 11 of its
// forecasts, a step in half of them: the margin at 5 % is the step). The level is 5 %, not 1 %,
// because the rule sometimes reads the shape that holds the last path's forecast over the
// interval (pricer.shape), whose forecasts within a step carry the step too.
func TestBudgetClassAfterStep(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Step, c.LeadSteps, c.LeadTime, c.ObservationWindow = 5*time.Minute, 2, 2*time.Minute, time.Minute
	})
	rng := rand.New(rand.NewPCG(7, 31))
	var levels []float64
	level := func(k int) float64 { // the level of history step k
		for len(levels) <= k {
			levels = append(levels, 10+20*float64(rng.IntN(2)))
		}
		return levels[k]
	}
	const tick, perStep = 15 * time.Second, 20
	// tickMean is the demand over tick i, the one ending at t0 + i·tick: the level of the step
	// it lies in.
	tickMean := func(i int) float64 { return level(max(i-1, 0) / perStep) }
	for i := range 3 * 24 * 60 * 4 {
		obs := (tickMean(i) + tickMean(i-1) + tickMean(i-2) + tickMean(i-3)) / 4
		if _, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * tick), Demand: obs, Current: 40, Ready: 40}); err != nil {
			t.Fatal(err)
		}
	}
	within := r.calUp.UpperAtOf(classWithin, 10, 0.05) - 10
	crossing := r.calUp.UpperAtOf(classCrossing, 10, 0.05) - 10
	if within > 2 {
		t.Errorf("margin of the forecasts no history point comes between = %.2f cores at 5 %%, want under 2 (a step is 20)", within)
	}
	if crossing < 10 {
		t.Errorf("margin of the forecasts a history point comes between = %.2f cores at 5 %%, want the steps in it (over 10)", crossing)
	}
}
