package policy

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

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
