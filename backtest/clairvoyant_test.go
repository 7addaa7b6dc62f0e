package backtest

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseClairvoyant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       time.Duration
		ok, bad bool
	}{
		{"clairvoyant-15m-budget", 15 * time.Minute, true, false},
		{"Clairvoyant-1h-budget", time.Hour, true, false},
		{"clairvoyant-0s-budget", 0, true, false},
		{"clairvoyant-15m", 0, true, true},
		{"clairvoyant-soon-budget", 0, true, true},
		{"budget", 0, false, false},
	} {
		d, ok, err := ParseClairvoyant(tc.name)
		if ok != tc.ok || (err != nil) != tc.bad || d != tc.d {
			t.Errorf("%s: got %v %v %v", tc.name, d, ok, err)
		}
	}
	o := DefaultOptions()
	o.Policies = []string{"hpa", "clairvoyant-x-budget"}
	if o.Validate() == nil {
		t.Error("Validate accepted clairvoyant-x-budget")
	}
}

// TestClairvoyantKnowsOnlyTheSmoothedFuture: its forecast at each later sample time is the
// centred mean of the demand over d there, so a square wave faster than d is invisible to it.
func TestClairvoyantKnowsOnlyTheSmoothedFuture(t *testing.T) {
	o := DefaultOptions()
	o.MetricWindow = 0
	o.Demand = DemandStep
	// One-minute samples alternating 0 and 10 cores: a 2-minute square wave.
	samples := make([]float64, 200)
	for i := range samples {
		samples[i] = float64(10 * (i % 2))
	}
	w, err := NewWorld(samples, time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	now := 10 * time.Minute
	c := newClairvoyant("clairvoyant-1h", w, time.Hour, &now)
	dst := make([]float64, 3)
	if err := c.Predict(nil, dst); err != nil {
		t.Fatal(err)
	}
	for j, v := range dst {
		if math.Abs(v-5) > 0.2 {
			t.Errorf("1h clairvoyant, step %d: %v, want about 5 (the mean)", j+1, v)
		}
	}
	c0 := newClairvoyant("clairvoyant-0s", w, 0, &now)
	_ = c0.Predict(nil, dst)
	for j, v := range dst {
		if want := samples[10+j+1]; v != want {
			t.Errorf("0s clairvoyant, step %d: %v, want the sample %v", j+1, v, want)
		}
	}
	// It reads the simulation's clock: one step later, the forecast moves with it.
	now += time.Minute
	_ = c0.Predict(nil, dst)
	if dst[0] != samples[12] {
		t.Errorf("after a step: %v, want %v", dst[0], samples[12])
	}
}

// TestClairvoyantRuns: the diagnostic runs through the budget policy in a backtest, and, knowing
// every sample of the future exactly (d = 0), it forecasts on every scored tick.
func TestClairvoyantRuns(t *testing.T) {
	o := DefaultOptions()
	samples := make([]float64, 1200)
	for i := range samples {
		samples[i] = 5 + 4*math.Sin(float64(i)/20)
	}
	w, err := NewWorld(samples, 5*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Simulate(context.Background(), w, "clairvoyant-0s-budget", o)
	if err != nil {
		t.Fatal(err)
	}
	if run.Policy != "clairvoyant-0s-budget" || run.ForecastCoverage != 1 || run.Ticks == 0 {
		t.Fatalf("policy %s, coverage %v, %d ticks", run.Policy, run.ForecastCoverage, run.Ticks)
	}
}

// TestBudgetCandidateOptions: the budget options the backtest measures reach the policy (each
// changes the run of the default Holt-Winters budget on a noisy sine) and an unknown fallback is
// refused.
func TestBudgetCandidateOptions(t *testing.T) {
	base := DefaultOptions()
	samples := make([]float64, 1200)
	for i := range samples {
		samples[i] = 5 + 4*math.Sin(float64(i)/20) + float64((i*7919)%5)/2
	}
	w, err := NewWorld(samples, 5*time.Minute, base)
	if err != nil {
		t.Fatal(err)
	}
	cost := func(o Options) float64 {
		t.Helper()
		run, err := Simulate(context.Background(), w, "budget", o)
		if err != nil {
			t.Fatal(err)
		}
		return run.Cost
	}
	ref := cost(base)
	for name, set := range map[string]func(*Options){
		"one pool of errors": func(o *Options) { o.Calibration.Neighbours = 0 },
	} {
		o := base
		set(&o)
		if c := cost(o); c == ref {
			t.Errorf("%s: cost %v, the same as the default's: the option did not reach the policy", name, c)
		}
	}
	// The budget policy's model: Holt-Winters instead of auto.
	hw := base
	hw.BudgetModel = "holtwinters"
	if c := cost(hw); c == ref {
		t.Errorf("budget.model holtwinters: cost %v, the same as auto's: the option did not reach the policy", c)
	}
	// The fallback forecasts during Holt-Winters' first two days, which a short warm-up leaves
	// in the scored time: the run changes.
	short := hw
	short.Warmup = 100
	fb := short
	fb.Fallback = "arima"
	r0, err := Simulate(context.Background(), w, "budget", short)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := Simulate(context.Background(), w, "budget", fb)
	if err != nil {
		t.Fatal(err)
	}
	if r0.Cost == r1.Cost || r1.ForecastCoverage != 1 {
		t.Errorf("cost %v without a fallback, %v with arima (forecast coverage %v): the fallback did not reach the policy", r0.Cost, r1.Cost, r1.ForecastCoverage)
	}
	o := base
	o.Fallback = "prophet"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "model.fallback") {
		t.Errorf("Validate of fallback \"prophet\": %v, want an error naming model.fallback", err)
	}
	o = base
	o.BudgetModel = "prophet"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "budget.model") {
		t.Errorf("Validate of budget model \"prophet\": %v, want an error naming budget.model", err)
	}
}
