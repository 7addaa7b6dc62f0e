package policy

import (
	"math"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// The priced rule (scaling.RulePriced; METHOD §9): at every decision the size that minimises
// pods + λ·(overloaded ticks) over the lead ahead, by the programme the backtest's floor solves
// in hindsight (scaling.Plan), on the need of each tick read from the forecast path at the time
// the tick comes (not the largest sample of a wider window) plus the calibrated margin; λ is
// priced online by dual ascent on the budget, and the margin's level is priced by λ too (1/λ, or
// a multiple of it where the tail given up costs more pods than its overload), so one price
// decides both which ticks to cover and how surely.
const (
	// pricedGain is η of ln λ ← ln λ + η·(overloaded − budget) at every tick: a run of
	// overloaded ticks raises λ by about η each, and 1/budget served ticks lower it by η.
	pricedGain = 0.02
	// pricedLook is the most elements of the programme's start-up window: a longer lead is read
	// in blocks of ticks (an element is a block, its need the largest of its ticks).
	pricedLook = 8
	// pricedWindows is the programme's horizon in start-up windows: its last window is
	// truncated, so a longer horizon adds little to the first decision.
	pricedWindows = 3
	// shapeSpan is the number of scored forecasts whose mean absolute error judges each shape of
	// the path between samples (an exponential mean of that span): 240, an hour of 15 s ticks.
	shapeSpan = 240
)

// The shapes of the path between samples the priced rule reads its forecasts in: which one the
// ticks follow depends on how the history was sampled (a mean over the step before each sample
// holds behind it; a reading at the sample's time ahead of it) and on the workload, so each is
// scored on the lead's forecast and the one with the smaller recent error is read (pricer.shape).
const (
	shapeLinear  = iota // linear between samples, anchored at the demand now
	shapeAhead          // each sample held until the next; the interval of now at the last path's forecast of it
	shapeBehind         // each sample held over the step before it
	shapeFromNow        // linear, from the demand at the history step (not the history point), anchored at the demand now
	shapes
)

// pricer is the priced rule's state.
type pricer struct {
	plan   scaling.Plan
	stride int     // ticks per element
	lnL    float64 // ln λ (λ in pod-ticks per overloaded tick)
	need   []int32
	// The mean absolute error of the lead's forecast in each shape, over the forecasts scored.
	err    [shapes]float64
	scored int
	// ahead is the previous path's forecast of the sample that starts the current path (NaN:
	// none), which shapeAhead holds over the current path's first interval.
	ahead float64
	last  time.Time // the last tick priced
	hold  pricedHold
	// idle is whether the last plan was quiet under budget.idle hold: min_replicas at every
	// tick ahead at any price (always false under earn).
	idle bool
	// fromNow is whether shapeFromNow may be read: where the history point lags the demand by
	// half a history step or more, the model forecasts a series as late as its own step, and a
	// path from the demand now would join points of two different times.
	fromNow bool
}

// score judges the shapes of the forecast f, come due, against the demand d.
func (p *pricer) score(d float64, f pendingForecast) {
	a := 1.0 / shapeSpan
	if p.scored < shapeSpan {
		p.scored++
		a = 1 / float64(p.scored)
	}
	for i := range p.err {
		p.err[i] += a * (math.Abs(d-f.shaped[i]) - p.err[i])
	}
}

// shape is the shape the path is read in: the one with the smallest recent error.
func (p *pricer) shape() int {
	best := shapeLinear
	if p.scored == 0 {
		return best
	}
	for i := range p.err {
		if i == shapeFromNow && !p.fromNow {
			continue
		}
		if p.err[i] < p.err[best] {
			best = i
		}
	}
	return best
}

// pathAt is the path at τ in shape s, given the demand now d and the linear path's anchor off.
func (p *pricer) pathAt(tb *tickBudget, s int, now time.Time, d, off float64, tau time.Time) float64 {
	if s == shapeLinear || !tb.ok || len(tb.path) == 0 {
		return tb.at(tau) + off
	}
	if s == shapeFromNow {
		// The history point is a mean over the metrics window, which lags the demand; the path
		// from the demand the nowcast read at its start has the slope of the model's forecast
		// over the first interval from where the demand was, not from where the mean was.
		return tb.atFrom(tb.start, tau) + d - tb.atFrom(tb.start, now)
	}
	x := float64(tau.Sub(tb.t0)) / float64(tb.step)
	if s == shapeBehind {
		// Point j is at t0 + (j+1)·step and holds over the step before it. The step that holds
		// now is the demand now, and the path after it is anchored there (shifted by the demand
		// now less its forecast), as the linear path is.
		last := len(tb.path) - 1
		jn := min(max(int(math.Ceil(float64(now.Sub(tb.t0))/float64(tb.step)))-1, 0), last)
		j := min(max(int(math.Ceil(x))-1, 0), last)
		if j <= jn {
			return d
		}
		return tb.path[j] + d - tb.path[jn]
	}
	j := int(x)
	if j == 0 {
		if !math.IsNaN(p.ahead) {
			return p.ahead
		}
		return d
	}
	return tb.path[min(j, len(tb.path))-1]
}

// shaped sets f's forecasts of the lead in every shape: the larger of the path at a and at b.
func (p *pricer) shaped(tb *tickBudget, f *pendingForecast, now time.Time, d, off float64, a, b time.Time) {
	for s := range f.shaped {
		f.shaped[s] = math.Max(0, math.Max(p.pathAt(tb, s, now, d, off, a), p.pathAt(tb, s, now, d, off, b)))
	}
}

// newPath keeps the outgoing path's forecast of the time t the new path starts at, for
// shapeAhead.
func (p *pricer) newPath(tb *tickBudget, t time.Time) {
	p.ahead = math.NaN()
	if tb.ok && len(tb.path) > 0 && t.After(tb.t0) {
		j := int(t.Sub(tb.t0) / tb.step)
		if j >= 1 && j <= len(tb.path) {
			p.ahead = tb.path[j-1]
		}
	}
}

// lambdaBounds are the bounds of ln λ: λ at least one pod-tick (below it nothing is covered that
// costs a pod), at most ten times 1/budget (a level of a tenth of the budget).
func lambdaBounds(budget float64) (lo, hi float64) { return 0, math.Log(10 / budget) }

// price runs the priced rule at the tick obs, after tickBudget's forecasts: dt is the time since
// the last tick, d the demand now, off the linear path's anchor at it, fu the demand forecast at
// the lead in the path's shape, judged the demand of the tick just served and exceeded whether it
// was overloaded (as the calibration counts it).
func (r *Runner) price(obs Observation, dt time.Duration, d, off, fu, judged float64, exceeded bool) {
	tb, b, p := &r.tb, &r.budget, &r.pr
	b.Lambda = math.Exp(p.lnL)
	if math.IsNaN(d) || math.IsNaN(fu) {
		// No demand now (a missing observation): no size, and scaling.Budget keeps the one there
		// is; the price waits for a tick it can judge.
		b.Quantile, b.QuantileDown, b.Margin = math.NaN(), math.NaN(), math.NaN()
		b.Saturated = false
		if p.stride == 0 {
			b.Lambda = math.NaN()
		}
		return
	}
	bud := r.cfg.Calibration.Budget
	minR := r.cfg.Params.RuleParams().MinReplicas // at least one: going to zero is the composition's step
	tick := dt
	k := max(int((tb.lead+tick-1)/tick), 1)
	if p.stride == 0 {
		p.stride = (k + pricedLook - 1) / pricedLook
		p.plan = scaling.Plan{Look: (k + p.stride - 1) / p.stride, Min: minR}
		p.lnL = math.Log(float64(p.plan.Look + 1))
		p.hold.init(k, int(r.cfg.Params.Budget.Hold/tick), int(tb.settle/tick))
		p.fromNow = 2*r.historyLag() < r.cfg.Step
	}
	// The price follows the overload of the tick just served, except at max_replicas, where no
	// size could have avoided it, and once per tick: a doubled or late observation moves nothing.
	fresh := obs.Time.After(p.last)
	if fresh {
		p.last = obs.Time
	}
	// Under budget.idle hold a tick served while the last plan was quiet (min_replicas at every
	// tick ahead, even at the price's ceiling: the size at any price) leaves the price alone: a
	// quiet spell earns nothing.
	if fresh && (r.quantileMiss(exceeded, obs) || !exceeded && !p.idle) {
		x := 0.0
		if exceeded {
			x = 1
		}
		p.lnL += pricedGain * (x - bud)
	}
	lo, hi := lambdaBounds(bud)
	p.lnL = min(max(p.lnL, lo), hi)
	lambda := math.Exp(p.lnL)
	// The margin of a tick at the level λ prices (Calibrator.PricedUpperAtOf): 1/λ, where an
	// exceedance costs a pod-tick, or 2/λ, 4/λ, … where the margin given up saves more pods than
	// the overload it adds costs at λ (the tail of a spike's onset among the errors at its base).
	// Each tick's margin is read from the errors of its class (classOf): those of forecasts that
	// a history point came between, and those of forecasts that none did.
	// Each is read once, when a tick of its class first needs it (on a 1-minute history every
	// tick crosses a point, and the other class is never read).
	per := r.cfg.Params.Budget.SLAUtilization * r.cfg.Request
	var margin [forecast.Classes]float64
	var read [forecast.Classes]bool
	marginOf := func(c int) float64 {
		if !read[c] {
			margin[c], read[c] = math.Max(0, r.calUp.PricedUpperAtOf(c, fu, lambda, per)-fu), true
		}
		return margin[c]
	}
	// Under budget.idle hold: whether every tick ahead needs min_replicas even with the margin
	// at the price's ceiling, so that the plan is min_replicas at any price (a quiet plan).
	quiet := r.cfg.Params.Budget.Idle == scaling.IdleHold
	var marginHi [forecast.Classes]float64
	var readHi [forecast.Classes]bool
	marginHiOf := func(c int) float64 {
		if !readHi[c] {
			marginHi[c], readHi[c] = math.Max(0, r.calUp.PricedUpperAtOf(c, fu, math.Exp(hi), per)-fu), true
		}
		return marginHi[c]
	}
	shape := p.shape()
	ticks := (pricedWindows*p.plan.Look + 1) * p.stride
	p.need = p.need[:0]
	missing, saturated := false, false
	for j := 0; j < ticks; j++ {
		tau := obs.Time.Add(time.Duration(j) * tick)
		n := r.cfg.Params.MaxReplicas
		v := p.pathAt(tb, shape, obs.Time, d, off, tau)
		x := math.Ceil((v + marginOf(r.classOf(obs.Time, tau))) / per)
		// Quiet needs min_replicas at this price and at the ceiling (read only when this price
		// leaves the tick at min_replicas: a busy tick costs no second margin).
		if quiet && !(x <= float64(minR) && math.Ceil((v+marginHiOf(r.classOf(obs.Time, tau)))/per) <= float64(minR)) {
			quiet = false
		}
		switch {
		case math.IsNaN(x):
			n, missing = max(obs.Current, minR), true // a forecast without a number
		case x < float64(n):
			n = max(int32(max(x, 0)), minR)
		}
		e := j / p.stride
		// Demand forecast above what max_replicas serve at the lead, where the pods ordered now
		// come: overloaded at every size, and served as far as max_replicas go, not left to the
		// price (leaving it overloaded at fewer pods would shed the load they serve).
		saturated = saturated || e == p.plan.Look && v > per*float64(r.cfg.Params.MaxReplicas)
		if e >= len(p.need) {
			p.need = append(p.need, 0)
		}
		p.need[e] = max(p.need[e], n)
	}
	p.idle = quiet && !missing && !saturated
	// An element the pods ordered before now serve needs at most what they are: its need is read
	// at the margin, so a need above them is no certain overload, and the pods there serve it as
	// far as they go (releasing them while the demand is forecast above them would be perverse).
	for e := 0; e < p.plan.Look && e < len(p.need); e++ {
		p.need[e] = min(p.need[e], max(obs.Current, minR))
	}
	n := p.plan.First(p.need, lambda*float64(p.stride))
	if saturated {
		n = r.cfg.Params.MaxReplicas
	}
	// The priced hold (hold.go): the size held for the hold that has cost least.
	priced := n
	if fresh {
		settling := obs.Time.Sub(tb.t0) < tb.settle // the nowcast has not read the last history point yet
		n = p.hold.observe(judged, r.cfg.Params.Budget.SLAUtilization, r.cfg.Request, lambda, 1/(pricedGain*bud), n, settling)
	} else {
		n = max(n, p.hold.held())
	}
	b.Hold, b.HoldSettle, b.Held, b.Saturated = p.hold.hold(tick), p.hold.settles(), n > priced, saturated
	if missing {
		n = max(n, obs.Current) // missing input never scales down
	}
	b.Lambda = lambda
	b.Margin = math.NaN()
	if fu > 0 {
		// The margin the need at the lead was read with.
		b.Margin = (fu + marginOf(r.classOf(obs.Time, obs.Time.Add(tb.lead)))) / fu
	}
	b.Quantile = (float64(n) - 0.5) * per
	b.QuantileDown = b.Quantile
}

// historyLag is about how far a history point lags the demand: the mean over the observation's
// window (a rate), and over the metrics' stabilisation window of those.
func (r *Runner) historyLag() time.Duration {
	lag := r.cfg.ObservationWindow / 2
	if !r.cfg.Spec.Raw {
		lag += r.cfg.Metrics.Window / 2
	}
	return lag
}
