package backtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// pricedBrute is every optimal first size of the priced programme by enumeration of O: the
// sizes x_0 of the sets O that minimise Σ_q max(minR, the largest need outside O over
// [q, q+look]) + λ·|O ∖ doomed|.
func pricedBrute(need []int32, look int, minR int32, lambda float64) []int32 {
	n := len(need)
	best := math.Inf(1)
	var firsts []int32
	for mask := range 1 << n {
		ok := true
		cost := 0.0
		for j, c := range need {
			if c < 0 && mask>>j&1 == 0 {
				ok = false // a doomed tick is overloaded whatever is ordered
				break
			}
			if c >= 0 && mask>>j&1 == 1 {
				cost += lambda
			}
		}
		if !ok {
			continue
		}
		var first int32
		for q := range n {
			x := minR
			for j := q; j <= min(q+look, n-1); j++ {
				if mask>>j&1 == 0 {
					x = max(x, need[j])
				}
			}
			if q == 0 {
				first = x
			}
			cost += float64(x)
		}
		switch {
		case cost < best-1e-9:
			best, firsts = cost, []int32{first}
		case cost <= best+1e-9 && !slices.Contains(firsts, first):
			firsts = append(firsts, first)
		}
	}
	return firsts
}

// TestPricedPlanBrute: the programme's first size is an optimal one, against enumeration on
// random needs with doomed ticks, at prices from below a pod to above a whole window.
func TestPricedPlanBrute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		look := 1 + rng.IntN(4)
		n := 1 + rng.IntN(12)
		need := make([]int32, n)
		for j := range need {
			need[j] = int32(1 + rng.IntN(8))
			if j < look && rng.IntN(5) == 0 {
				need[j] = -1
			}
		}
		lambda := []float64{0.5, 1.5, 3, 7, 20}[trial%5]
		p := &pricedPlan{look: look, minR: 1, lambda: lambda, need: need}
		got := p.first()
		if want := pricedBrute(need, look, 1, lambda); !slices.Contains(want, got) {
			t.Fatalf("need %v, look %d, λ %v: first size %d, optimal first sizes %v", need, look, lambda, got, want)
		}
	}
}

// TestPricedPlanSpends: a one-tick spike is left overloaded when covering it costs more pods than
// the price of a tick, and covered when it costs less; a plateau ahead is ordered in time.
func TestPricedPlanSpends(t *testing.T) {
	spike := []int32{2, 2, 2, 12, 2, 2, 2, 2, 2, 2, 2, 2}
	// Covering the spike at tick 3 holds 10 more pods over the 4 ticks of its window (look 3).
	if got := (&pricedPlan{look: 3, minR: 1, lambda: 20, need: spike}).first(); got != 2 {
		t.Errorf("λ 20 < 40 pod-ticks: first size %d, want 2 (the spike left overloaded)", got)
	}
	if got := (&pricedPlan{look: 3, minR: 1, lambda: 60, need: spike}).first(); got != 12 {
		t.Errorf("λ 60 > 40 pod-ticks: first size %d, want 12 (the spike covered)", got)
	}
	plateau := []int32{2, 2, 2, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	if got := (&pricedPlan{look: 3, minR: 1, lambda: 20, need: plateau}).first(); got != 9 {
		t.Errorf("a long plateau a start-up ahead: first size %d, want 9", got)
	}
	// A doomed tick is not paid for: nothing else needs more than 2.
	doomed := []int32{2, -1, 2, 2, 2}
	if got := (&pricedPlan{look: 3, minR: 1, lambda: 1e6, need: doomed}).first(); got != 2 {
		t.Errorf("a doomed tick: first size %d, want 2", got)
	}
}

// TestPricedOracleKeepsTheBudget: on bursty step demand the priced oracle's overload tracks the
// budget (within 0.5–1.5×) and it costs less than the oracle, which overloads nothing.
func TestPricedOracleKeepsTheBudget(t *testing.T) {
	o := DefaultOptions()
	o.Demand = DemandStep
	rng := rand.New(rand.NewPCG(3, 4))
	samples := make([]float64, 3000)
	for i := range samples {
		samples[i] = 20 + 10*math.Sin(float64(i)/40) + 3*rng.NormFloat64()
		if rng.IntN(25) == 0 {
			samples[i] += 25 // a short tall spike
		}
		samples[i] = max(samples[i], 1)
	}
	w, err := NewWorld(samples, 5*time.Minute, o)
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

// BenchmarkPricedPlan is one decision of the priced programme at a 2-minute lead on 15 s ticks
// (look 8, 256 states), over one start-up window ahead and over three: the cost of the rule,
// to read against the ≤ 50 µs a decision may take.
func BenchmarkPricedPlan(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, windows := range []int{1, 3} {
		b.Run(fmt.Sprintf("windows=%d", windows), func(b *testing.B) {
			const look = 8
			need := make([]int32, windows*look+1)
			p := &pricedPlan{look: look, minR: 1, lambda: 40}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range need {
					need[j] = int32(5 + rng.IntN(20))
				}
				p.need = need
				_ = p.first()
			}
		})
	}
}
