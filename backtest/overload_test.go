package backtest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// TestOverloadTime: a schedule that sizes each tick for the demand at that tick (just in time) is
// never overloaded at the ticks, but on a ramp the demand passes the pods ready over the interval
// before the pods it needs arrive: the time count reads the share of each interval it was above
// them. Under step demand an interval holds one level, and the two counts agree.
func TestOverloadTime(t *testing.T) {
	for _, tc := range []struct {
		demand string
		want   float64 // overloaded intervals, in ticks
	}{
		// Ticks 4–8 ramp 10 → 20 (12.5, 15, 17.5 between); sized 10, 13, 15, 18, 20, the four
		// intervals are overloaded 2.5/2.5, (15−13)/2.5, 2.5/2.5 and (20−18)/2.5 of their time.
		{DemandLinear, 3.6},
		{DemandStep, 0},
	} {
		for _, count := range []string{OverloadTick, OverloadTime} {
			o := DefaultOptions()
			o.Demand, o.Overload, o.MetricWindow, o.Warmup = tc.demand, count, 0, 0
			o.Request, o.SLAUtilization, o.StartupDelay, o.DecisionDelay = 1, 1, 0, 0
			o.Params.MinReplicas, o.Params.MaxReplicas = 1, 100
			w, err := NewWorld([]float64{10, 10, 20, 20}, time.Minute, o)
			if err != nil {
				t.Fatal(err)
			}
			jit := func(_ context.Context, i int, _ policy.Observation) (policy.Result, error) {
				return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: needAt(w.Inst[i], o)}}, nil
			}
			r, err := simulate(context.Background(), w, "jit", o, 10, jit, false, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			ticks := float64(len(w.Inst))
			if got := r.OverloadTime * ticks; math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("%s demand, %s count: overloaded for %v ticks, want %v", tc.demand, count, got, tc.want)
			}
			want := 0.0 // the tick count sees no overload
			if count == OverloadTime {
				want = tc.want
			}
			if got := r.OverloadFraction * ticks; math.Abs(got-want) > 1e-9 {
				t.Errorf("%s demand, %s count: overload %v ticks, want %v", tc.demand, count, got, want)
			}
		}
	}
}

// TestOverloadShareMetrics: over an interval, each metric is above the capacity on a part that
// starts it or ends it, and the workload is overloaded on their union.
func TestOverloadShareMetrics(t *testing.T) {
	w := &World{Inst: []float64{12, 10}, MInst: [][]float64{{12, 10}, {9, 13}, {11, 10}}}
	// Against 11 pods of 1: metric 0 is above them for the first half (12 → 10), metric 1 for
	// the last half ((13 − 11)/(13 − 9)), metric 2 never (11 is not above 11): the union is the whole.
	if got := w.overShare(1, 11, 11, 1, false); math.Abs(got-1) > 1e-12 {
		t.Errorf("head 0.5 and tail 0.5: share %v, want 1", got)
	}
	w.MInst[1] = []float64{9, 12}
	if got, want := w.overShare(1, 11, 11, 1, false), 0.5+1.0/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("head 0.5 and tail 1/3: share %v, want %v", got, want)
	}
	if got := w.overShare(1, 11, 11, 1, true); got != 1 {
		t.Errorf("step: the interval holds the first tick's levels (12 > 11): share %v, want 1", got)
	}
	if got := w.overShare(1, 12, 12, 1, false); got != 0 {
		t.Errorf("nothing above 12: share %v, want 0", got)
	}
	// With no tick before, or no ready count for it, the tick is read at itself against the pods
	// ready then: the workload's demand there (Inst, 12 at tick 0 and 10 at tick 1).
	if got := w.overShare(0, 13, 11, 1, false); got != 1 {
		t.Errorf("tick 0, 11 pods ready: share %v, want 1 (12 > 11)", got)
	}
	if got := w.overShare(1, -1, 10, 1, false); got != 0 {
		t.Errorf("tick 1 with no ready count before, 10 ready: share %v, want 0 (10 ≤ 10)", got)
	}
}

// TestOverloadTimeOracleAndFloor: counted over time, the oracle covers the interval after each
// tick too, so it is never overloaded, and the floor stays at or below the oracle's cost and
// below every run's frontier ratio, under both demand models; counted at the ticks, the
// oracle of the tick count is overloaded over time on linear demand.
func TestOverloadTimeOracleAndFloor(t *testing.T) {
	for _, demand := range []string{DemandLinear, DemandStep} {
		o := quickOptions()
		o.Demand, o.Overload = demand, OverloadTime
		for _, tr := range embedded(t) {
			w := world(t, tr, o)
			r, err := Simulate(context.Background(), w, OraclePolicy, o)
			if err != nil {
				t.Fatal(err)
			}
			if w.UnavoidableTime(o) == 0 && r.OverloadFraction != 0 {
				t.Errorf("%s, %s demand: the oracle is overloaded %v of the time", tr.Name, demand, r.OverloadFraction)
			}
			if got := w.NeedBound(o, 0.05).Cost(0); !(got <= r.Cost*(1+1e-12)) {
				t.Errorf("%s, %s demand: the floor at zero overload %v is above the oracle's cost %v", tr.Name, demand, got, r.Cost)
			}
			if demand == DemandLinear {
				ot := o
				ot.Overload = OverloadTick
				rt, err := Simulate(context.Background(), world(t, tr, ot), OraclePolicy, ot)
				if err != nil {
					t.Fatal(err)
				}
				if rt.OverloadFraction != 0 || !(rt.OverloadTime > 0) {
					t.Errorf("%s: the tick count's oracle: overload %v at the ticks, %v over time; want 0 and more", tr.Name, rt.OverloadFraction, rt.OverloadTime)
				}
			}
		}
		o.Policies = []string{"hpa", "budget", "clairvoyant-0s-budget"}
		rep, err := RunTraces(context.Background(), embedded(t), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range rep.Traces {
			for _, r := range tr.Runs {
				if !(r.FrontierBound <= r.FrontierRatio*(1+1e-12)) {
					t.Errorf("%s demand, %s/%s: frontier ratio %v below the floor %v", demand, tr.Trace, r.Policy, r.FrontierRatio, r.FrontierBound)
				}
				if r.OverloadFraction != r.OverloadTime {
					t.Errorf("%s demand, %s/%s: overload %v, over time %v; the time count judges on the time", demand, tr.Trace, r.Policy, r.OverloadFraction, r.OverloadTime)
				}
			}
		}
	}
}
