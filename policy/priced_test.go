package policy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// TestPricedPathShapes: the path between samples read in each shape, and the shape picked is the
// one whose forecasts of the lead were nearer what came.
func TestPricedPathShapes(t *testing.T) {
	t0 := time.Unix(0, 0)
	step := 5 * time.Minute
	tb := &tickBudget{step: step}
	var p pricer
	p.newPath(tb, t0) // no path before: nothing ahead
	if !math.IsNaN(p.ahead) {
		t.Fatalf("ahead %v with no path before, want NaN", p.ahead)
	}
	tb.newPath(t0, 10, []float64{20, 40}, true)
	at := func(m float64) time.Time { return t0.Add(time.Duration(m * float64(time.Minute))) }
	const d, off = 12.0, 2.0 // the demand now at t0+1m, and the linear path's anchor there
	for _, c := range []struct {
		shape int
		tau   time.Time
		want  float64
	}{
		{shapeLinear, at(2.5), 15 + off}, // halfway from 10 to 20
		{shapeLinear, at(7.5), 30 + off}, // halfway from 20 to 40
		{shapeLinear, at(20), 40 + off},  // flat past the end
		{shapeAhead, at(2.5), d},         // the interval of now: nothing ahead, the demand now
		{shapeAhead, at(5), 20},          // each sample from its time on
		{shapeAhead, at(9.9), 20},        //
		{shapeAhead, at(10), 40},         //
		{shapeBehind, at(2.5), d},        // the step that holds now: the demand now
		{shapeBehind, at(5), d},
		{shapeBehind, at(5.1), 40 + d - 20}, // each sample over the step before it, anchored now
		{shapeBehind, at(30), 40 + d - 20},  // flat past the end
		// From the demand at t0 (start 15, set below) instead of the history point 10: at t0+1m
		// the path is 15 + (1/5)·(20 − 15) = 16, so the anchor is d − 16.
		{shapeFromNow, at(2.5), 17.5 + d - 16}, // halfway from 15 to 20
		{shapeFromNow, at(7.5), 30 + d - 16},   // the points beyond are the model's
	} {
		tb.start = 15
		if got := p.pathAt(tb, c.shape, at(1), d, off, c.tau); got != c.want {
			t.Errorf("shape %d at %v: %v, want %v", c.shape, c.tau.Sub(t0), got, c.want)
		}
	}
	// A new path at t0+5m: shapeAhead holds the old path's forecast of that time (20) over the
	// new path's first interval.
	p.newPath(tb, at(5))
	tb.newPath(at(5), 18, []float64{30}, true)
	if got := p.pathAt(tb, shapeAhead, at(6), d, off, at(7)); got != 20 {
		t.Errorf("ahead over the first interval of a new path: %v, want 20 (the old path's forecast)", got)
	}
	// Scoring: the shape whose forecasts were nearest is read.
	if got := p.shape(); got != shapeLinear {
		t.Errorf("nothing scored: shape %d, want linear", got)
	}
	for range 10 {
		p.score(20, pendingForecast{shaped: [shapes]float64{25, 21, 30}})
	}
	if got := p.shape(); got != shapeAhead {
		t.Errorf("errors 5, 1, 10: shape %d, want ahead (%d); errors %v", got, shapeAhead, p.err)
	}
	for range 200 {
		p.score(20, pendingForecast{shaped: [shapes]float64{20.5, 26, 30, 30}})
	}
	if got := p.shape(); got != shapeLinear {
		t.Errorf("linear nearest since: shape %d, want linear; errors %v", got, p.err)
	}
	// The path from the demand at its start is read only where the history point lags the
	// demand by less than half a step.
	for range 2000 {
		p.score(20, pendingForecast{shaped: [shapes]float64{20.5, 26, 30, 20.1}})
	}
	if got := p.shape(); got != shapeLinear {
		t.Errorf("from-now nearest but not allowed: shape %d, want linear; errors %v", got, p.err)
	}
	p.fromNow = true
	if got := p.shape(); got != shapeFromNow {
		t.Errorf("from-now nearest and allowed: shape %d, want %d; errors %v", got, shapeFromNow, p.err)
	}
}

// TestPricedPathStartsAtTheDemand: under demand that ramps, seen through a 1-minute rate and
// stabilised over a minute, the history point lags the demand by 52.5 s (the mean over the
// window of the means over theirs); the path's start is the nowcast at the history step, the
// demand there. The history-point lag decides whether the rule may read the path from there: on
// 5-minute history steps, but not on 1-minute ones.
func TestPricedPathStartsAtTheDemand(t *testing.T) {
	for _, c := range []struct {
		step    time.Duration
		fromNow bool
	}{{5 * time.Minute, true}, {time.Minute, false}} {
		r := newRunner(t, "naive-budget", func(cfg *Config) {
			cfg.Params.Budget.Rule = scaling.RulePriced
			cfg.Step, cfg.LeadSteps, cfg.LeadTime, cfg.ObservationWindow = c.step, 2, 2*time.Minute, time.Minute
		})
		// Flat for five minutes, so that the deconvolution's tick means start exact, then a ramp;
		// the observation is the mean over the minute before each tick.
		const slope = 0.01 // cores per second
		demand := func(s float64) float64 { return 10 + slope*max(0, s-300) }
		integral := func(s float64) float64 { return 10*s + slope*max(0, s-300)*max(0, s-300)/2 }
		checked := 0
		for i := range 2000 {
			s := float64(i) * 15
			obs := Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: (integral(s) - integral(s-60)) / 60, Current: 40, Ready: 40}
			res, err := r.Step(context.Background(), obs)
			if err != nil {
				t.Fatal(err)
			}
			if !res.NewSample || i < 100 {
				continue
			}
			checked++
			if got := r.tb.start; math.Abs(got-demand(s)) > 1e-6 {
				t.Fatalf("step %v, tick %d: the path starts at %v, want the demand there %v", c.step, i, got, demand(s))
			}
			if got, want := r.tb.base, demand(s-52.5); math.Abs(got-want) > 1e-6 {
				t.Fatalf("step %v, tick %d: the history point %v, want the demand 52.5 s before (%v)", c.step, i, got, want)
			}
		}
		if checked == 0 {
			t.Fatalf("step %v: no history step checked", c.step)
		}
		// A doubled observation at a history step reads the start once; a missing one leaves the
		// history point as the start.
		per := int(c.step / (15 * time.Second))
		at := func(i int, v float64) Observation {
			return Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: v, Current: 40, Ready: 40}
		}
		ramp := func(i int) float64 { s := float64(i) * 15; return (integral(s) - integral(s-60)) / 60 }
		i := 2000
		for ; i%per != 0; i++ {
			if _, err := r.Step(context.Background(), at(i, ramp(i))); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := r.Step(context.Background(), at(i, ramp(i))); err != nil || !res.NewSample {
			t.Fatalf("step %v: tick %d is not a history step (%v, %v)", c.step, i, res.NewSample, err)
		}
		start := r.tb.start
		if _, err := r.Step(context.Background(), at(i, ramp(i)+20)); err != nil {
			t.Fatal(err)
		}
		if r.tb.start != start {
			t.Errorf("step %v: a doubled observation moved the start from %v to %v", c.step, start, r.tb.start)
		}
		for i++; i%per != 0; i++ {
			if _, err := r.Step(context.Background(), at(i, ramp(i))); err != nil {
				t.Fatal(err)
			}
		}
		if res, _ := r.Step(context.Background(), at(i, math.NaN())); !res.NewSample {
			t.Fatalf("step %v: no history step at tick %d with a missing observation", c.step, i)
		}
		if math.IsNaN(r.tb.start) || r.tb.start != r.tb.base {
			t.Errorf("step %v: a missing observation at a history step: start %v, want the history point %v", c.step, r.tb.start, r.tb.base)
		}
		if r.pr.fromNow != c.fromNow {
			t.Errorf("step %v: from-now allowed %v, want %v (the history point lags 60 s)", c.step, r.pr.fromNow, c.fromNow)
		}
	}
}

// TestPricedRuleInputs: under the priced rule a missing observation keeps the size, a doubled
// one moves the price once, and the price rises while ticks are overloaded and falls while they
// are not.
func TestPricedRuleInputs(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Params.Budget.Rule, c.Params.Budget.Hold = scaling.RulePriced, 0
		c.Step, c.LeadSteps, c.LeadTime = time.Minute, 3, 2*time.Minute
	})
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 15 * time.Second) }
	step := func(i int, demand float64, n int32) Result {
		t.Helper()
		res, err := r.Step(ctx, Observation{Time: at(i), Demand: demand, Current: n, Ready: n})
		if err != nil && !errors.Is(err, ErrNoData) {
			t.Fatal(err)
		}
		return res
	}
	i := 0
	for ; i < 200; i++ { // a flat load on 10 pods: no overload, the price falls
		step(i, 2, 10)
	}
	res := step(i, 2, 10)
	if res.Budget == nil || !(res.Budget.Lambda >= 1) {
		t.Fatalf("no price: %+v", res.Budget)
	}
	low := res.Budget.Lambda
	if res.Term != "price" {
		t.Errorf("term %q, want price", res.Term)
	}
	// The same tick again: the price stays.
	if again := step(i, 2, 10); again.Budget.Lambda != low {
		t.Errorf("a doubled observation moved the price from %v to %v", low, again.Budget.Lambda)
	}
	// No observation: the size is kept whatever the rule would say.
	i++
	if res := step(i, math.NaN(), 10); res.Decision.Replicas != 10 {
		t.Errorf("no observation: %d replicas, want the 10 there are", res.Decision.Replicas)
	}
	// Overloaded ticks (demand above u_sla·ready·request on 1 pod): the price rises.
	for k := range 20 {
		i++
		res = step(i, 50, 1)
		if k == 0 {
			low = res.Budget.Lambda
		}
	}
	if !(res.Budget.Lambda > low) {
		t.Errorf("20 overloaded ticks: price %v, not above %v", res.Budget.Lambda, low)
	}
}

// TestPricedRuleNaNForecast: a forecast path with a point that is not a number is missing input:
// no scale-down, and the ticks it covers need the pods there are, never none (the lead's own
// forecast is a number here, so the rule runs).
func TestPricedRuleNaNForecast(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Params.Budget.Rule, c.Params.Budget.Hold = scaling.RulePriced, 0
		c.Step, c.LeadSteps, c.LeadTime = time.Minute, 8, 2*time.Minute
	})
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 15 * time.Second) }
	for i := range 201 {
		if _, err := r.Step(context.Background(), Observation{Time: at(i), Demand: 8, Current: 10, Ready: 10}); err != nil {
			t.Fatal(err)
		}
	}
	// The path's points from 5 minutes on are NaN: ticks past the lead have no forecast.
	for j := 4; j < len(r.tb.path); j++ {
		r.tb.path[j] = math.NaN()
	}
	r.tb.ok = true
	res, err := r.Step(context.Background(), Observation{Time: at(201), Demand: 8, Current: 10, Ready: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.NewSample {
		t.Fatal("the step took a new history sample: the path under test was replaced")
	}
	if res.Budget == nil || math.IsNaN(res.Budget.Quantile) {
		t.Fatalf("the rule did not run: %+v", res.Budget)
	}
	if res.Decision.Replicas < 10 {
		t.Errorf("a NaN forecast: %d replicas, below the 10 there are (%+v)", res.Decision.Replicas, res.Budget)
	}
}

// TestPricedMarginByClass: under a demand that steps at every history point (5 minutes) and is
// flat between, the last value's forecast of a time before the next point is right and of one
// past it 10 cores off (on 40 pods of one core, never overloaded): the margin read for the lead
// follows the class of the lead's forecast, none while the lead ends before the next point and
// the step once it reaches past it (read from every error alike, both would be the step).
func TestPricedMarginByClass(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Params.Budget.Rule, c.Params.Budget.Hold = scaling.RulePriced, 0
		c.Step, c.LeadSteps, c.LeadTime = 5*time.Minute, 2, 2*time.Minute
		// Each observation is the demand of its tick, and each history point the observation at
		// its time, so that the last value's forecast is exact until the next point.
		c.ObservationWindow, c.Metrics.Window = 0, 15*time.Second
	})
	ctx := context.Background()
	const tick = 15 * time.Second
	demand := func(tau time.Duration) float64 { // 10 or 20 cores, alternating every 5 minutes
		if int(tau/(5*time.Minute))%2 == 0 {
			return 10
		}
		return 20
	}
	var within, crossing []float64
	for i := range 6 * 60 * 4 { // six hours of 15 s ticks
		tau := time.Duration(i) * tick
		res, err := r.Step(ctx, Observation{Time: t0.Add(tau), Demand: demand(tau), Current: 40, Ready: 40})
		if err != nil {
			t.Fatal(err)
		}
		if i < 4*60*4 || res.Budget == nil { // the last two hours, both classes long calibrated
			continue
		}
		// The class of the lead's forecast: whether a history point falls in (now, now + lead].
		if phase := tau % (5 * time.Minute); phase+2*time.Minute < 5*time.Minute {
			within = append(within, res.Budget.Margin)
		} else {
			crossing = append(crossing, res.Budget.Margin)
		}
	}
	if len(within) == 0 || len(crossing) == 0 {
		t.Fatalf("%d margins within, %d crossing", len(within), len(crossing))
	}
	mid := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	mw, mc := mid(within), mid(crossing)
	t.Logf("median margin factor at the lead: %.3f within a step, %.3f across a history point", mw, mc)
	if !(mw < 1.1) {
		t.Errorf("margin within a step %v, want under 1.1: the forecast is right there", mw)
	}
	if !(mc > 1.3) {
		t.Errorf("margin across a history point %v, want over 1.3: the forecast misses the step there", mc)
	}
}

// TestPricedRuleSaturated: demand forecast above what max_replicas serve is overloaded at every
// size, and the rule serves it as far as max_replicas go. At the lowest price (a long calm start)
// the programme alone would leave it overloaded at min_replicas, since covering a tick costs
// more pods than the price of its overload: shedding the load that max_replicas serve.
func TestPricedRuleSaturated(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Params.Budget.Rule, c.Params.Budget.Hold = scaling.RulePriced, 0
		c.Params.MinReplicas, c.Params.MaxReplicas = 1, 10
		c.Step, c.LeadSteps, c.LeadTime = time.Minute, 3, 2*time.Minute
		c.Calibration.Budget = 0.05 // the price falls by η·5 % a tick served
	})
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 15 * time.Second) }
	n := int32(2)
	for i := range 3000 {
		demand := 0.5 // calm: the price falls to its floor
		if i >= 2600 {
			demand = 50 // five times what 10 pods serve
		}
		res, err := r.Step(ctx, Observation{Time: at(i), Demand: demand, Current: n, Ready: n})
		if err != nil && !errors.Is(err, ErrNoData) {
			t.Fatal(err)
		}
		n = res.Decision.Replicas
		if i == 2599 && !(res.Budget.Lambda < 2) {
			t.Fatalf("the price after the calm start is %v, want under 2 pod-ticks", res.Budget.Lambda)
		}
		if i >= 2700 && n != 10 {
			t.Fatalf("tick %d, saturated for %v: %d replicas, want max_replicas 10 (%+v)", i, time.Duration(i-2600)*15*time.Second, n, res.Budget)
		}
		// The "why" says the forecast above max_replicas decided, not the price; in the calm the
		// price did.
		switch {
		case i >= 2700 && res.Term != "saturated":
			t.Fatalf("tick %d, saturated: term %q, want saturated (%+v)", i, res.Term, res.Budget)
		case i > 100 && i < 2590 && res.Term != "price":
			t.Fatalf("tick %d, calm: term %q, want price (%+v)", i, res.Term, res.Budget)
		}
	}
}

// TestPricedIdle replays a business week's shape through the priced rule: a busy day, a quiet
// weekend at min_replicas, and the next rise to a plateau, with pods ready a lead after they are
// ordered. Under budget.idle earn (the default) the weekend lowers the price as any tick served
// does, and the rise meets a price near its floor: one long episode while it climbs back.
// Under hold a quiet tick leaves the price alone, and the rise meets the price the busy day set.
func TestPricedIdle(t *testing.T) {
	const (
		tick = 15 * time.Second
		day  = int(24 * time.Hour / tick)
		lead = 8 // ticks: the lead time of two minutes
	)
	run := func(idle scaling.BudgetIdle) (before, after float64, longest int) {
		r := newRunner(t, "naive-budget", func(c *Config) {
			c.Params.Budget.Rule, c.Params.Budget.Idle = scaling.RulePriced, idle
			c.Params.MinReplicas, c.Params.MaxReplicas = 1, 40
			c.Step, c.LeadSteps, c.LeadTime = time.Minute, 3, lead*tick
			c.Calibration.Budget = 0.01
		})
		rng := rand.New(rand.NewPCG(1, 2))
		var spec []int32 // the size ordered at each tick
		ready := func(i int) int32 {
			n := spec[len(spec)-1]
			for _, s := range spec[max(len(spec)-1-lead, 0):] {
				n = min(n, s) // a pod ordered serves a lead later; one released goes at once
			}
			return n
		}
		n, run := int32(1), 0
		for i := range 4 * day {
			demand := 0.3 // quiet: what one pod serves at any price
			if i < day || i >= 3*day+day/3 {
				demand = 20 * (1 + 0.1*rng.NormFloat64()) // busy: about 22 pods at u_sla 0.9
			}
			nr := n
			if len(spec) > 0 {
				nr = ready(i)
			}
			res, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * tick), Demand: demand, Current: n, Ready: nr})
			if err != nil && !errors.Is(err, ErrNoData) {
				t.Fatal(err)
			}
			n = res.Decision.Replicas
			spec = append(spec, n)
			switch {
			case i == day-1:
				before = res.Budget.Lambda
			case i == 3*day+day/3-1:
				after = res.Budget.Lambda
			case i >= 3*day+day/3 && i < 3*day+day/3+day/24:
				// The first hour of the rise: its longest run of overloaded ticks.
				if demand > 0.9*float64(nr) {
					run++
					longest = max(longest, run)
				} else {
					run = 0
				}
			}
		}
		return before, after, longest
	}
	eb, ea, el := run(scaling.IdleEarn)
	hb, ha, hl := run(scaling.IdleHold)
	t.Logf("earn: price %.2f after the busy day, %.2f after the weekend, longest episode in the rise's first hour %d ticks", eb, ea, el)
	t.Logf("hold: price %.2f after the busy day, %.2f after the weekend, longest episode in the rise's first hour %d ticks", hb, ha, hl)
	if !(eb > 2) || hb != eb {
		t.Fatalf("the busy day set the price to %v (earn) and %v (hold): want the same, above 2 pod-ticks", eb, hb)
	}
	if !(ea < eb/10) {
		t.Errorf("earn: the price after a quiet weekend is %v, want under a tenth of the busy day's %v", ea, eb)
	}
	// The ticks of the fall itself, before the plan needs only min_replicas, still lower it.
	if !(ha > 0.9*hb && ha <= hb) {
		t.Errorf("hold: the price went from %v to %v over the quiet weekend, want it within 10 %% of where the busy day left it", hb, ha)
	}
	if !(el > 4*lead) {
		t.Errorf("earn: the rise's longest episode is %d ticks, want the long one the fallen price leaves (over %d)", el, 4*lead)
	}
	if !(hl <= 2*lead) {
		t.Errorf("hold: the rise's longest episode is %d ticks, want at most two leads (%d)", hl, 2*lead)
	}
}
