package policy

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// BenchmarkBudgetDecision is one decision of the budget policy in steady state, at 15 s ticks
// with 5-minute history steps: W1 stabilisation, the calibration update (exceedance, errors of
// the forecasts come due), the quantiles and the hysteresis. One tick in twenty also starts a
// history step (a naive forecast). No allocation. Reading each quantile from the errors of the
// nearest forecasts (forecast.CalibratorConfig.Neighbours, 200 of them at 1 %) costs about
// 6× one pool's sorted errors (10 µs against 1.7 µs per decision, measured in one run): 0.1 s
// of a core per 15 s interval for 10,000 policies.
//
// rule=priced is the priced rule (scaling.RulePriced) on tick scoring: the same, plus the price,
// the need of the 25 ticks of three start-up windows in the shape read, and the programme
// (scaling.Plan, 256 states per tick at a 2-minute lead).
//
// default is the default policy (budget: the priced rule, the model auto) past the two days
// Holt-Winters waits for: one tick in twenty also has Holt-Winters, ARIMA and the last value
// forecast and scores them; the models' refits (every Retrain steps, in the background in the
// exporter) are not in it.
//
// idle=hold is the default policy under scaling.budget.idle hold: each tick also reads the
// margin at the price's ceiling until a tick ahead needs more than min_replicas.
//
// default-vs-tick reports the default's decision time over tick's, the two timed alternately in
// one run (default/tick): the figure to compare across machines.
func BenchmarkBudgetDecision(b *testing.B) {
	cases := []decisionCase{
		{"tick", "naive-budget", "tick", "quantile", ""}, {"sample", "naive-budget", "sample", "quantile", ""},
		{"rule=priced", "naive-budget", "tick", "priced", ""}, {"default", "budget", "tick", "", ""},
		{"idle=hold", "budget", "tick", "", "hold"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			step := c.runner(b)
			b.ReportAllocs()
			for b.Loop() {
				step()
			}
		})
	}
	// default-vs-tick: the default's decision and the quantile rule's, timed alternately in one run,
	// so that the ratio holds on a machine slower or busier than the one the absolute figure was
	// read on.
	b.Run("default-vs-tick", func(b *testing.B) {
		def, tick := cases[3].runner(b), cases[0].runner(b)
		var td, tt time.Duration
		for b.Loop() {
			t := time.Now()
			def()
			m := time.Now()
			tick()
			td, tt = td+m.Sub(t), tt+time.Since(m)
		}
		if tt > 0 {
			b.ReportMetric(float64(td)/float64(tt), "default/tick")
		}
	})
}

// decisionCase is one policy of BenchmarkBudgetDecision.
type decisionCase struct{ name, policy, scoring, rule, idle string }

// runner is c's policy warmed up to its steady state, as a function that makes its next
// decision.
func (c decisionCase) runner(b *testing.B) func() {
	b.Helper()
	spec, _ := Parse(c.policy, "")
	cfg := DefaultConfig(spec)
	cfg.Step, cfg.LeadSteps, cfg.LeadTime = 5*time.Minute, 2, 2*time.Minute
	cfg.Calibration.Scoring = c.scoring
	if c.idle != "" {
		cfg.Params.Budget.Idle = scaling.BudgetIdle(c.idle)
	}
	if c.rule != "" {
		cfg.Params.Budget.Rule = scaling.BudgetRule(c.rule)
	} else {
		cfg.Retrain = 0 // the refits are timed in the models' own benchmarks
	}
	r, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	obs := func(i int) Observation {
		d := 40 + 10*math.Sin(float64(i)/300) + 3*math.Sin(float64(i)*1.7)
		return Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: 12, Ready: 12}
	}
	// Warm up (errors, calibration, buffers at capacity) until every class of errors has its
	// window: a 5-minute history point every 20 ticks, so the errors of forecasts across one
	// come one tick in 20.
	warm := max(20000, 21*cfg.Calibration.Window)
	i := 0
	for ; i < warm; i++ {
		if _, err := r.Step(ctx, obs(i)); err != nil {
			b.Fatal(err)
		}
	}
	return func() {
		if _, err := r.Step(ctx, obs(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkBudgetRunnerMemory is the heap one budget policy's Runner holds in steady state (15 s
// ticks, 5-minute history steps, its error window full): under each rule with the naive model,
// 100 runners fed 4,000 ticks each; and the default policy (budget: the priced rule, the model
// auto), 20 runners fed 12,000 ticks each, past the two days Holt-Winters waits for, so that
// every model auto chooses among holds its state. The growth of the live heap after a GC
// divided by the runners. The priced rule keeps no scale-down pool of errors (its size is both
// W and WDown) but the programme's arrays and the shapes' scores.
func BenchmarkBudgetRunnerMemory(b *testing.B) {
	for _, c := range []struct {
		name, policy, rule string
		runners, ticks     int
	}{
		{"rule=quantile", "naive-budget", "quantile", 100, 4000},
		{"rule=priced", "naive-budget", "priced", 100, 4000},
		{"default", "budget", "", 20, 12000},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				rs := make([]*Runner, c.runners)
				for k := range rs {
					spec, _ := Parse(c.policy, "")
					cfg := DefaultConfig(spec)
					cfg.Step, cfg.LeadSteps, cfg.LeadTime = 5*time.Minute, 2, 2*time.Minute
					if c.rule != "" {
						cfg.Params.Budget.Rule = scaling.BudgetRule(c.rule)
					}
					r, err := New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					for i := range c.ticks {
						d := 40 + 10*math.Sin(float64(i+k)/300) + 3*math.Sin(float64(i)*1.7)
						if _, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: 12, Ready: 12}); err != nil {
							b.Fatal(err)
						}
					}
					if c.policy == "budget" {
						if a, ok := r.model.Load().f.(*forecast.Auto); !ok || a.Active() == "" {
							b.Fatalf("the default policy's model is %T, forecasting with %q", r.model.Load().f, a.Active())
						}
					}
					rs[k] = r
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(c.runners), "bytes/policy")
				runtime.KeepAlive(rs)
			}
		})
	}
}
