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

// TestOverloadEpisodes: the runs of consecutive ticks with avoidable overload, the longest one's
// duration, and a run the trace ends in; a tick above what max_replicas serve is overload no
// size avoids and neither starts nor joins an episode.
func TestOverloadEpisodes(t *testing.T) {
	// Demand 5 on 4 pods is overloaded, 50 is above max_replicas (10 pods of 1).
	demand := []float64{1, 5, 5, 1, 5, 50, 5, 1, 1, 5, 5, 5}
	o := DefaultOptions()
	o.Demand, o.MetricWindow, o.Warmup = DemandStep, 0, 0
	o.Request, o.SLAUtilization, o.StartupDelay, o.DecisionDelay = 1, 1, 0, 0
	o.Params.MinReplicas, o.Params.MaxReplicas = 1, 10
	w, err := NewWorld(demand, time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	per := int(time.Minute / w.Tick) // ticks per sample; the world ends at sample 11's time
	fixed := func(context.Context, int, policy.Observation) (policy.Result, error) {
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: 4}}, nil
	}
	for _, tc := range []struct {
		count string
		last  int // ticks of the last episode, from sample 9 to the end
	}{
		// At the ticks: samples 1–2, 4, 6 (sample 5 is unavoidable and ends sample 4's
		// episode) and 9 to the last tick, sample 11's.
		{OverloadTick, len(w.Inst) - 9*per},
		// Between them: under step demand an interval holds the level of the tick that starts
		// it, so each episode is the intervals after the same ticks, and the last one ends with
		// the interval before the last tick.
		{OverloadTime, len(w.Inst) - 1 - 9*per},
	} {
		o.Overload = tc.count
		r, err := simulate(context.Background(), w, "fixed", o, 4, fixed, false, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !math.IsNaN(r.BandMissChance) {
			t.Errorf("%s count: band_miss_chance %v before the trace is finished (no budget read), want NaN", tc.count, r.BandMissChance)
		}
		if r.OverloadEpisodes != 4 {
			t.Errorf("%s count: %d episodes, want 4 (samples 1–2, 4, 6, 9 to the end)", tc.count, r.OverloadEpisodes)
		}
		if want := float64(tc.last) * w.Tick.Seconds(); r.LongestOverload != want {
			t.Errorf("%s count: longest episode %vs, want %vs (sample 9 to the end)", tc.count, r.LongestOverload, want)
		}
		if want := float64(4*per + tc.last); r.avoidable != want {
			t.Errorf("%s count: avoidable overload %v ticks, want %v", tc.count, r.avoidable, want)
		}
		// The avoidable overload is the overload less the unavoidable (sample 5).
		if got, want := r.avoidable, r.OverloadFraction*float64(r.Ticks)-float64(per); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s count: avoidable overload %v ticks, overload less the unavoidable %v", tc.count, got, want)
		}
	}
}

// TestBandMissChance: against the Poisson probabilities summed directly, the chance is large
// where the budget is a few episodes (the 29 hours of NAB ELB at 0.5 %: 34.8 ticks, episodes
// of 9) and small where it is many; undefined without an episode or a budget.
func TestBandMissChance(t *testing.T) {
	direct := func(mu float64) float64 {
		in, p := 0.0, math.Exp(-mu)
		for n := 0; n < 2000; n++ {
			if x := float64(n); x >= mu/2 && x <= 1.5*mu {
				in += p
			}
			p *= mu / float64(n+1)
		}
		return 1 - in
	}
	for _, tc := range []struct {
		budget, over float64
		episodes     int
	}{
		{34.8, 62, 7}, {34.8, 9, 1}, {327, 533, 59}, {654, 90, 10}, {3000, 9, 1},
	} {
		mu := tc.budget * float64(tc.episodes) / tc.over
		got, want := BandMissChance(tc.budget, tc.over, tc.episodes), direct(mu)
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("budget %v ticks, %v in %d episodes (μ %.1f): chance %v, want %v", tc.budget, tc.over, tc.episodes, mu, got, want)
		}
	}
	if c := BandMissChance(34.8, 62, 7); !(c > 0.2 && c < 0.4) {
		t.Errorf("3.9 episodes expected: chance %v, want about 0.3 (P(N ≤ 1) + P(N ≥ 6))", c)
	}
	if c := BandMissChance(327, 9*36, 36); !(c < 0.01) {
		t.Errorf("36 episodes expected: chance %v, want under 0.01", c)
	}
	for _, tc := range []struct {
		budget, over float64
		episodes     int
	}{{34.8, 0, 0}, {0, 62, 7}, {math.NaN(), 62, 7}} {
		if c := BandMissChance(tc.budget, tc.over, tc.episodes); !math.IsNaN(c) {
			t.Errorf("budget %v, %v ticks in %d episodes: chance %v, want NaN", tc.budget, tc.over, tc.episodes, c)
		}
	}
}
