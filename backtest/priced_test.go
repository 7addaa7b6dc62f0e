package backtest

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// TestPricedOracleKeepsTheBudget: on bursty step demand the priced oracle's overload tracks the
// budget (within 0.5–1.5×) and it costs less than the oracle, which overloads nothing.
func TestPricedOracleKeepsTheBudget(t *testing.T) {
	o := DefaultOptions()
	o.Demand = DemandStep
	w, err := NewWorld(burstySamples(3, 4, 3), 5*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	po, err := Simulate(context.Background(), w, PricedOraclePolicy, o)
	if err != nil {
		t.Fatal(err)
	}
	or, err := Simulate(context.Background(), w, OraclePolicy, o)
	if err != nil {
		t.Fatal(err)
	}
	b := o.Calibration.Budget
	if po.OverloadFraction < 0.5*b || po.OverloadFraction > 1.5*b {
		t.Errorf("overload %.4f, want within 0.5–1.5× the budget %v", po.OverloadFraction, b)
	}
	if !(po.Cost < or.Cost) {
		t.Errorf("cost %v, the oracle's %v: spending the budget saved nothing", po.Cost, or.Cost)
	}
	if or.OverloadFraction != 0 {
		t.Errorf("the oracle overloads %v", or.OverloadFraction)
	}
}

// TestPricedOracleLongLead: a lead longer than the programme's states allow is refused by name.
func TestPricedOracleLongLead(t *testing.T) {
	o := DefaultOptions()
	o.StartupDelay = 10 * time.Minute
	w, err := NewWorld(make([]float64, 100), 5*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Simulate(context.Background(), w, PricedOraclePolicy, o); err == nil {
		t.Error("a 10-minute start-up on 15 s ticks: no error")
	}
}

// TestPricedRuleSpends: with a perfect forecast of the samples, the priced rule
// (budget.rule priced) keeps its avoidable overload within 0.5–1.5× the budget on bursty
// demand and costs less than the quantile rule on the same forecast, which cannot spend it.
func TestPricedRuleSpends(t *testing.T) {
	for _, demand := range []string{DemandLinear, DemandStep} {
		t.Run(demand, func(t *testing.T) {
			o := DefaultOptions()
			o.Demand = demand
			w, err := NewWorld(burstySamples(7, 8, 2), 5*time.Minute, o)
			if err != nil {
				t.Fatal(err)
			}
			const name = "clairvoyant-0s-budget"
			o.Params.Budget.Rule = scaling.RuleQuantile
			q, err := Simulate(context.Background(), w, name, o)
			if err != nil {
				t.Fatal(err)
			}
			o.Params.Budget.Rule, o.Params.Budget.Hold = scaling.RulePriced, 0
			p, err := Simulate(context.Background(), w, name, o)
			if err != nil {
				t.Fatal(err)
			}
			b := o.Calibration.Budget
			if p.OverloadFraction < 0.5*b || p.OverloadFraction > 1.5*b {
				t.Errorf("priced: overload %.4f, want within 0.5–1.5× the budget %v", p.OverloadFraction, b)
			}
			if !(p.Cost < q.Cost) {
				t.Errorf("priced: cost %.0f, the quantile rule's %.0f (overload %.4f): the price saved nothing", p.Cost, q.Cost, q.OverloadFraction)
			}
			t.Logf("%s demand: priced cost %.0f overload %.4f; quantile cost %.0f overload %.4f", demand, p.Cost, p.OverloadFraction, q.Cost, q.OverloadFraction)
		})
	}
}

// burstySamples is 3,000 five-minute samples of a slow wave with noise of the given standard
// deviation and a short tall spike (+25) one sample in 25 on average, from the seeds given.
func burstySamples(seed1, seed2 uint64, noise float64) []float64 {
	rng := rand.New(rand.NewPCG(seed1, seed2))
	samples := make([]float64, 3000)
	for i := range samples {
		samples[i] = 20 + 10*math.Sin(float64(i)/40) + noise*rng.NormFloat64()
		if rng.IntN(25) == 0 {
			samples[i] += 25 // a short tall spike
		}
		samples[i] = max(samples[i], 1)
	}
	return samples
}
