package scaling

import (
	"math"
	"strings"
	"testing"
	"time"
)

// budgetParams are the quantile rule's (the priced rule's own tests set it).
func budgetParams() Params {
	p := DefaultParams()
	p.MinReplicas, p.MaxReplicas = 1, 50
	p.Budget.Rule = RuleQuantile
	return p
}

// TestBudgetDecisions: sizes are ceil(load·N/u_sla) of the calibrated quantile, at once up,
// never below the observed load, down only when the quantile over the hold fits in at least one
// pod fewer and the hold has passed, never on missing data.
func TestBudgetDecisions(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Minute) }
	b, _ := New("budget", budgetParams())
	// 10 pods; the quantile is 1.08 of their capacity → 10·1.08/0.9 = 12 pods, at once.
	if d := b.Recommend(Input{Time: at(0), Current: 10, Ready: 10, W: 1.08, WNow: 0.5, WDown: 1.08}); d.Replicas != 12 || d.Reason != ReasonScaleUp {
		t.Fatalf("scale-up: %+v, want 12", d)
	}
	// The observed load alone asks for more than the quantile: 12·0.99/0.9 = 13.2 → 14.
	if d := b.Recommend(Input{Time: at(1), Current: 12, Ready: 12, W: 0.5, WNow: 0.99, WDown: 0.5}); d.Replicas != 14 {
		t.Fatalf("observed floor: %+v, want 14", d)
	}
	// The quantile falls to 14·0.45/0.9 = 7 pods: but the hold (10m) since the last change at
	// minute 1 has not passed.
	if d := b.Recommend(Input{Time: at(5), Current: 14, Ready: 14, W: 0.45, WNow: 0.3, WDown: 0.45}); d.Replicas != 14 || d.Reason != ReasonStabilized {
		t.Fatalf("inside the hold: %+v, want 14 stabilized", d)
	}
	// After the hold, down to the larger of the two quantiles: WDown 0.5 → ceil(7.78) = 8.
	if d := b.Recommend(Input{Time: at(12), Current: 14, Ready: 14, W: 0.45, WNow: 0.3, WDown: 0.5}); d.Replicas != 8 || d.Reason != ReasonScaleDown {
		t.Fatalf("after the hold: %+v, want 8", d)
	}
	// Missing observation: keep the size whatever the quantiles say.
	if d := b.Recommend(Input{Time: at(40), Current: 8, Ready: 8, W: 0.01, WNow: math.NaN(), WDown: 0.01}); d.Replicas != 8 || d.Reason != ReasonNoLoad {
		t.Fatalf("no data: %+v, want 8", d)
	}
	// A saving of less than one pod is no scale-down: 8·0.85/0.9 = 7.6 → 8.
	if d := b.Recommend(Input{Time: at(60), Current: 8, Ready: 8, W: 0.85, WNow: 0.5, WDown: 0.85}); d.Replicas != 8 || d.Reason != ReasonTolerance {
		t.Fatalf("dead band: %+v, want 8", d)
	}
	// Bounds.
	if d := b.Recommend(Input{Time: at(61), Current: 8, Ready: 8, W: 100, WNow: 0.5}); d.Replicas != 50 || d.Reason != ReasonMaxReplicas {
		t.Fatalf("max: %+v", d)
	}
}

// TestBudgetMinSaving: with min_saving 0.25 a 10-pod deployment only shrinks for 3 pods or more.
func TestBudgetMinSaving(t *testing.T) {
	p := budgetParams()
	p.Budget.MinSaving, p.Budget.Hold = 0.25, 0
	b, _ := New("budget", p)
	// 10·0.72/0.9 = 8 pods: saves 2 < ceil(2.5) = 3.
	if d := b.Recommend(Input{Time: t0, Current: 10, Ready: 10, W: 0.72, WNow: 0.5, WDown: 0.72}); d.Replicas != 10 {
		t.Fatalf("saving 2 of 10: %+v, want 10", d)
	}
	// 10·0.63/0.9 = 7 pods: saves 3.
	if d := b.Recommend(Input{Time: t0.Add(time.Minute), Current: 10, Ready: 10, W: 0.63, WNow: 0.5, WDown: 0.63}); d.Replicas != 7 {
		t.Fatalf("saving 3 of 10: %+v, want 7", d)
	}
}

// TestBudgetHoldRestartsOnAnyChange: a size changed by someone else restarts the hold.
func TestBudgetHoldRestartsOnAnyChange(t *testing.T) {
	b, _ := New("budget", budgetParams())
	b.Recommend(Input{Time: t0, Current: 10, Ready: 10, W: 0.8, WNow: 0.5, WDown: 0.8})
	// At 11 min the hold since t0 has passed, but the size went 10 → 12 at minute 5.
	b.Recommend(Input{Time: t0.Add(5 * time.Minute), Current: 12, Ready: 12, W: 0.6, WNow: 0.4, WDown: 0.6})
	if d := b.Recommend(Input{Time: t0.Add(11 * time.Minute), Current: 12, Ready: 12, W: 0.3, WNow: 0.2, WDown: 0.3}); d.Replicas != 12 {
		t.Fatalf("%+v: the external change at 5m should hold until 15m", d)
	}
	if d := b.Recommend(Input{Time: t0.Add(16 * time.Minute), Current: 12, Ready: 12, W: 0.3, WNow: 0.2, WDown: 0.3}); d.Replicas != 4 {
		t.Fatalf("%+v: want 12·0.3/0.9 = 4 after the hold", d)
	}
}

func TestBudgetParamsValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		mut   func(*BudgetParams)
	}{
		{"budget.u_sla", func(b *BudgetParams) { b.SLAUtilization = 1.5 }},
		{"budget.hold", func(b *BudgetParams) { b.Hold = -time.Second }},
		{"budget.min_saving", func(b *BudgetParams) { b.MinSaving = 1 }},
	} {
		p := budgetParams()
		tc.mut(&p.Budget)
		if _, err := New("budget", p); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}

// TestBudgetFreshInstanceHolds: the hold is the one piece of budget state, and it errs on the
// safe side. A fresh instance (a restarted or second webhook replica) has seen no change of
// size, so it treats its first decision as one: for the hold it scales up as the quantile asks
// but never down, whatever the quantiles say; two fresh instances fed the same inputs decide the
// same.
func TestBudgetFreshInstanceHolds(t *testing.T) {
	a, _ := New("budget", budgetParams())
	b, _ := New("budget", budgetParams())
	low := Input{Time: t0, Current: 20, Ready: 20, W: 0.2, WNow: 0.1, WDown: 0.2}
	for _, alg := range []Algorithm{a, b} {
		if d := alg.Recommend(low); d.Replicas != 20 || d.Reason != ReasonStabilized {
			t.Fatalf("fresh instance: %+v, want 20 held", d)
		}
	}
	up := Input{Time: t0.Add(time.Minute), Current: 20, Ready: 20, W: 1.2, WNow: 0.5, WDown: 1.2}
	da, db := a.Recommend(up), b.Recommend(up)
	if da != db || da.Replicas != 27 { // 20·1.2/0.9 = 26.7 → 27, at once
		t.Fatalf("scale-up %+v vs %+v, want both 27", da, db)
	}
	later := Input{Time: t0.Add(12 * time.Minute), Current: 27, Ready: 27, W: 0.2, WNow: 0.1, WDown: 0.2}
	if da, db := a.Recommend(later), b.Recommend(later); da != db || da.Replicas != 6 { // 27·0.2/0.9 = 6
		t.Fatalf("after the hold: %+v vs %+v, want both 6", da, db)
	}
}

// TestBudgetUnapplied: the hold of a budget policy whose recommendations nothing applies
// restarts at observed changes of size only, so an unapplied scale-down is recommended again
// at the next step instead of being held for the hold period.
func TestBudgetUnapplied(t *testing.T) {
	p := budgetParams() // the quantile rule's hold
	in := func(k int, cur int32) Input {
		// Load 0.3 at 10 pods: 4 pods would do (ceil(0.3·10/0.9) = 4).
		return Input{Time: t0.Add(time.Duration(k) * 15 * time.Second), Current: cur, Ready: cur, W: 0.3, WNow: 0.3, WDown: 0.3}
	}
	for _, tc := range []struct {
		unapplied bool
		want      []int32
	}{
		// Recorded as applied: the scale-down at 11 m restarts the hold; with the size stuck at
		// 10, the next steps are held (10).
		{false, []int32{4, 10, 10}},
		{true, []int32{4, 4, 4}},
	} {
		b, err := New("budget", p)
		if err != nil {
			t.Fatal(err)
		}
		b.(Unapplied).SetUnapplied(tc.unapplied)
		b.Recommend(in(0, 10)) // the size first seen: the hold starts
		var got []int32
		for k := 44; k < 47; k++ { // 11 m on: past the 10 m hold
			got = append(got, b.Recommend(in(k, 10)).Replicas)
		}
		if !equalSizes(got, tc.want) {
			t.Errorf("unapplied %v: sizes %v, want %v", tc.unapplied, got, tc.want)
		}
	}
}

// TestBudgetPricedNoFloor: under the priced rule the load observed now is priced with the rest
// (the runner's W), not a floor: a spike observed now that the price leaves overloaded orders
// nothing, where the quantile rule chases it; missing data still keeps the size.
func TestBudgetPricedNoFloor(t *testing.T) {
	in := Input{Time: t0, Current: 10, Ready: 10, W: 0.72, WNow: 1.8, WDown: 0.72}
	q, _ := New("budget", budgetParams())
	if d := q.Recommend(in); d.Replicas != 20 {
		t.Errorf("quantile rule: %+v, want 20 (the observed floor, 10·1.8/0.9)", d)
	}
	p := budgetParams()
	p.Budget.Rule, p.Budget.Hold = RulePriced, 0
	pr, _ := New("budget", p)
	if d := pr.Recommend(in); d.Replicas != 8 || d.Reason != ReasonScaleDown {
		t.Errorf("priced rule: %+v, want 8 (W alone: 10·0.72/0.9)", d)
	}
	in.WNow, in.W, in.WDown = math.NaN(), 0.1, 0.1
	if d := pr.Recommend(in); d.Replicas != 10 || d.Reason != ReasonNoLoad {
		t.Errorf("priced rule, no observation: %+v, want 10 (no load)", d)
	}
	// A tick with an observed load but no demand to come (its own observation missing: the
	// quantile or the priced size is NaN) keeps the size under either rule.
	in.WNow, in.W, in.WDown = 0.2, math.NaN(), math.NaN()
	for _, a := range []Algorithm{q, pr} {
		if d := a.Recommend(in); d.Replicas != 10 || d.Reason != ReasonNoLoad {
			t.Errorf("%v: no quantile: %+v, want 10 (no load)", a.(*Budget).p.Budget.Rule, d)
		}
	}
}

// TestBudgetPricedHoldInW: under the priced rule scaling.budget.hold is the longest hold the
// price may choose, and that hold is in the runner's W: the composition releases pods right after
// a change of size, where the quantile rule's hold keeps them.
func TestBudgetPricedHoldInW(t *testing.T) {
	for _, c := range []struct {
		rule BudgetRule
		want int32
	}{{RuleQuantile, 12}, {RulePriced, 4}} {
		p := budgetParams()
		p.Budget.Rule = c.rule
		b, _ := New("budget", p)
		b.Recommend(Input{Time: t0, Current: 10, Ready: 10, W: 1.08, WNow: 0.5, WDown: 1.08}) // 10 → 12
		d := b.Recommend(Input{Time: t0.Add(time.Minute), Current: 12, Ready: 12, W: 0.3, WNow: 0.2, WDown: 0.3})
		if d.Replicas != c.want {
			t.Errorf("%s rule, a minute after a scale-up: %+v, want %d", c.rule, d, c.want)
		}
	}
}
