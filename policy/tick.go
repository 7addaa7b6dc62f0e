package policy

import (
	"math"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// tickBudget is the budget policy scored at every decision rather than at every history step:
// the forecast path of the last history step, anchored at the load observed now, gives the
// demand expected at t + lead (what capacity ordered now will meet) and the largest over
// [t, t + lead + hold] (what a scale-down must still fit); each is scored against what was
// observed when its time came.
type tickBudget struct {
	lead, hold, step time.Duration
	// settle is how long the nowcast takes to read a step whole (classOf): two ticks behind an
	// observation window, none without one.
	settle time.Duration
	// The path: base at t0, then path[j] at t0 + (j+1)·step.
	t0   time.Time
	base float64
	path []float64
	ok   bool // path holds a model forecast (else the path is flat at base)
	// start is the demand at t0 as the nowcast read it (the base until then, or without one): the
	// priced rule's shapeFromNow starts the path there rather than at the history point, which is
	// a mean over the metrics window and lags the demand.
	start float64
	fresh bool // the path is new, and start not yet read
	// Pending forecasts: up ones wait for their time, down ones keep the largest observation
	// since they were made.
	up        []pendingForecast
	down      []pendingForecast
	prev      time.Time
	prevObs   float64
	prevReady int32
	fu, fd    float64
	// The mean demand over each recent tick (the deconvolved nowcast), as far back as a window.
	tickMeans []timedValue
}

type timedValue struct {
	t time.Time
	v float64
}

type pendingForecast struct {
	due      time.Time
	from     time.Time // down: the forecast sees the observations of demand from here on
	forecast float64
	// class is the forecast's class of errors (classCrossing or classWithin).
	class int
	seen  float64 // down: the largest observation since the forecast was made
	// The priced rule's up forecasts in each shape of the path between samples (pricer.shape).
	shaped [shapes]float64
}

func (tb *tickBudget) newPath(t time.Time, base float64, pred []float64, ok bool) {
	tb.t0, tb.base, tb.ok, tb.start, tb.fresh = t, base, ok, base, true
	tb.path = append(tb.path[:0], pred...)
}

// at is the path's value at τ: linear between its points, flat past its ends.
func (tb *tickBudget) at(tau time.Time) float64 { return tb.atFrom(tb.base, tau) }

// atFrom is at with the path's first value (at t0) base.
func (tb *tickBudget) atFrom(base float64, tau time.Time) float64 {
	if !tb.ok || len(tb.path) == 0 || !tau.After(tb.t0) {
		return base
	}
	x := float64(tau.Sub(tb.t0)) / float64(tb.step)
	j := int(x) // between point j−1 (base for j = 0) and point j
	if j >= len(tb.path) {
		return tb.path[len(tb.path)-1]
	}
	lo := base
	if j > 0 {
		lo = tb.path[j-1]
	}
	return lo + (x-float64(j))*(tb.path[j]-lo)
}

// maxOver is the path's largest value over [a, b]: its ends and the points inside.
func (tb *tickBudget) maxOver(a, b time.Time) float64 {
	m := math.Max(tb.at(a), tb.at(b))
	if tb.ok {
		for j, v := range tb.path {
			if tj := tb.t0.Add(time.Duration(j+1) * tb.step); tj.After(a) && tj.Before(b) {
				m = math.Max(m, v)
			}
		}
	}
	return m
}

// tickJudged is what tickBudget judges the step obs on, without changing any state: the demand
// now (the nowcast), the time since the last step, and the demand and the ready count the
// exceedance is judged on.
//
// The observation is a mean over the last ObservationWindow, so the demand now is recovered by
// inverting that mean (deconvolve): exact for demand that is constant over each tick, clipped
// between the observation and the trend's nowcast (the last tick's trend extrapolated by half a
// window, the lag of a mean over it; exact under a linear trend but 1.5× a jump a window after
// it), so that it is no noisier than the trend's and repairs itself whenever the observation is
// flat. Chosen out of sample over the trend's nowcast alone (docs/results-budget.md, issue 19's
// seventh and eighth rounds).
func (r *Runner) tickJudged(obs Observation) judgement {
	tb := &r.tb
	d := obs.Demand
	tickMean := math.NaN()
	// The trend is the last tick's (measured against the trend over half a window, which lags at
	// the samples' corners: docs/results-budget.md).
	dt := 15 * time.Second
	if !tb.prev.IsZero() && obs.Time.After(tb.prev) {
		dt = obs.Time.Sub(tb.prev)
		span := r.cfg.ObservationWindow / 2
		if r.cfg.ObservationWindow > 0 && !math.IsNaN(tb.prevObs) {
			trend := math.Max(0, d+(d-tb.prevObs)*float64(span)/float64(dt))
			d, tickMean = tb.deconvolve(obs, dt, trend, r.cfg.ObservationWindow)
		}
	}
	j := judgement{now: d, dt: dt, missDemand: d, missReady: obs.Ready, tickMean: tickMean}
	// The exceedance is counted as a clock would: the mean demand over the last tick against the
	// capacity over that tick (the smaller ready count of its two ends), so a miss is counted for
	// as long as it lasted, not a tick short (the nowcast of a jump is a tick late) nor over an
	// overshoot.
	if !math.IsNaN(tickMean) {
		j.missDemand, j.missReady = tickMean, min(obs.Ready, tb.prevReady)
	}
	return j
}

// judgement is what tickBudget judges a step on (tickJudged).
type judgement struct {
	now float64       // the demand now (the nowcast): what the forecasts are judged on
	dt  time.Duration // since the last step
	// What the exceedance is judged on: a demand against a ready count.
	missDemand float64
	missReady  int32
	tickMean   float64 // the mean demand over the last tick (NaN: none)
}

// deconvolve is the deconvolved demand now, given the trend's nowcast trend and the time
// dt since the last tick, and the mean demand over the last tick, to be kept for the ticks to
// come. The observation m is a mean over the window w, so m(t) − m(t−dt) = (dt/w)·(the mean over
// (t−dt, t] − the mean over (t−w−dt, t−w]): the mean over the last tick is the one a window ago
// plus (w/dt)·(m(t) − m(t−dt)). That mean is clipped between the observation and the
// observation plus its change scaled up to the window, m(t) + (w/dt)·(m(t) − m(t−dt)): the
// farthest from the observation the mean over the last tick can be when the tick a window
// before was at the observation, so a step within the last tick is read whole (the exceedance
// after a jump is judged on the demand there was, not on three quarters of the jump). The demand
// now (that mean plus half its change since the last tick) is clipped between the observation
// and the trend's nowcast, so it is no noisier than the trend's. With no tick means a window
// back yet (start-up, a gap), the trend's nowcast stands, and the mean over the last tick is
// that less half the tick's change. No mean is kept at the first tick, or at the first after a
// missing observation: the observation lags the demand by half a window, and a mean kept from
// it would be carried a window at a time for as long as the observation is not flat.
func (tb *tickBudget) deconvolve(obs Observation, dt time.Duration, trend float64, w time.Duration) (now, tickMean float64) {
	lo, hi := math.Min(obs.Demand, trend), math.Max(obs.Demand, trend)
	clip := func(v float64) float64 { return math.Min(hi, math.Max(lo, v)) }
	past, ok := tb.tickMeanAt(obs.Time.Add(-w))
	if !ok || len(tb.tickMeans) == 0 {
		// The mean over the last tick under the trend: the demand now less half its change
		// over the tick (under a linear trend the observation changes as the demand does).
		return trend, clip(trend - (obs.Demand-tb.prevObs)/2)
	}
	change := (obs.Demand - tb.prevObs) * float64(w) / float64(dt)
	far := math.Max(0, obs.Demand+change)
	tickMean = math.Min(math.Max(obs.Demand, far), math.Max(math.Min(obs.Demand, far), past+change))
	last := tb.tickMeans[len(tb.tickMeans)-1].v
	return math.Max(0, clip(tickMean+(tickMean-last)/2)), tickMean
}

// tickMeanAt is the kept mean demand over the tick that ended at τ, linear between the kept
// ticks; false when τ is before the oldest or after the newest kept by more than a tick's slack.
func (tb *tickBudget) tickMeanAt(tau time.Time) (float64, bool) {
	m := tb.tickMeans
	if len(m) == 0 || tau.Before(m[0].t) {
		return 0, false
	}
	for k := len(m) - 1; k >= 0; k-- {
		if m[k].t.After(tau) {
			continue
		}
		if k == len(m)-1 || m[k].t.Equal(tau) {
			return m[k].v, m[k].t.Equal(tau)
		}
		f := float64(tau.Sub(m[k].t)) / float64(m[k+1].t.Sub(m[k].t))
		return m[k].v + f*(m[k+1].v-m[k].v), true
	}
	return 0, false
}

// budgetMiss reports whether the step obs is an exceedance for this metric's budget
// calibration (its demand, as the calibration judges it, above u_sla·ready·R), without changing
// any state: what a Multi that calibrates jointly combines over its metrics before they step.
func (r *Runner) budgetMiss(obs Observation) bool {
	if r.cfg.Spec.Load != LoadBudget {
		return false
	}
	if r.cfg.Calibration.Scoring != forecast.ScoringTick {
		return scaling.Overloaded(obs.Demand, r.cfg.Params.Budget.SLAUtilization, obs.Ready, r.cfg.Request)
	}
	j := r.tickJudged(obs)
	return scaling.Overloaded(j.missDemand, r.cfg.Params.Budget.SLAUtilization, j.missReady, r.cfg.Request)
}

func (r *Runner) tickBudget(obs Observation) {
	tb := &r.tb
	j := r.tickJudged(obs)
	d, dt, tickMean := j.now, j.dt, j.tickMean
	// The nowcast reads a step from the first tick whose observation holds it, at three quarters
	// on a 1-minute window of 15 s ticks, and whole from the second (TestBudgetNowcastDeconvolved);
	// an instantaneous observation reads it at once.
	tb.settle = 0
	if r.cfg.ObservationWindow > 0 {
		tb.settle = 2 * dt
	}
	tb.prev, tb.prevObs, tb.prevReady = obs.Time, obs.Demand, obs.Ready
	if math.IsNaN(tickMean) && r.cfg.ObservationWindow <= 0 {
		tickMean = d // the observation is the demand now, and the tick's mean is read at the tick
	}
	// A tick without a number (a missing observation), or not after the last one kept (a
	// doubled or late observation), keeps no mean: the means stay a time series of numbers,
	// and a missing tick is a gap, which tickMeanAt reports.
	if n := len(tb.tickMeans); !math.IsNaN(tickMean) && !math.IsInf(tickMean, 0) && (n == 0 || obs.Time.After(tb.tickMeans[n-1].t)) {
		tb.tickMeans = append(tb.tickMeans, timedValue{obs.Time, tickMean})
		k := 0 // keep the newest at or before a window ago, and every later one
		for k+1 < len(tb.tickMeans) && !tb.tickMeans[k+1].t.After(obs.Time.Add(-r.cfg.ObservationWindow)) {
			k++
		}
		// Moved down rather than resliced, so that the append above reuses the array.
		tb.tickMeans = tb.tickMeans[:copy(tb.tickMeans, tb.tickMeans[k:])]
	}
	exceeded := scaling.Overloaded(j.missDemand, r.cfg.Params.Budget.SLAUtilization, j.missReady, r.cfg.Request)
	if r.jointMiss != nil {
		exceeded = *r.jointMiss
	}
	if r.quantileMiss(exceeded, obs) || !exceeded {
		r.calUp.Observe(exceeded)
		if r.calDown != nil {
			r.calDown.Observe(exceeded)
		}
	}
	// Score what has come due.
	priced := r.cfg.Params.Budget.Rule == scaling.RulePriced
	n := 0
	for _, p := range tb.up {
		if p.due.After(obs.Time) {
			tb.up[n] = p
			n++
			continue
		}
		_ = r.calUp.AddErrorOf(p.class, d, p.forecast)
		if priced {
			r.pr.score(d, p)
		}
	}
	tb.up = tb.up[:n]
	n = 0
	for _, p := range tb.down {
		if !obs.Time.Before(p.from) {
			p.seen = math.Max(p.seen, d)
		}
		if p.due.After(obs.Time) {
			tb.down[n] = p
			n++
			continue
		}
		_ = r.calDown.AddError(p.seen, p.forecast)
	}
	tb.down = tb.down[:n]
	// The demand at a new path's start, as the nowcast reads it at the path's first tick.
	if tb.fresh && obs.Time.Equal(tb.t0) && !math.IsNaN(d) && !math.IsInf(d, 0) {
		tb.start = d
	}
	tb.fresh = false
	// Forecast from now: the path anchored at the demand now, at each tick (its reactivity).
	if math.IsNaN(tb.base) {
		tb.base, tb.t0 = d, obs.Time
	}
	off := d - tb.at(obs.Time)
	upAt := obs.Time.Add(tb.lead)
	fu := math.Max(0, math.Max(tb.at(upAt), tb.at(upAt.Add(dt)))+off)
	fd := math.Max(0, tb.maxOver(obs.Time, obs.Time.Add(tb.lead+tb.hold))+off)
	fd = math.Max(fd, fu)
	pf := pendingForecast{due: upAt.Add(dt), forecast: fu}
	if priced {
		pf.class = r.classOf(obs.Time, pf.due)
		// The priced rule's forecast of the lead is read from the path between samples in the
		// shape the ticks have followed (pricer.shape), and its margin from the errors of that.
		r.pr.shaped(tb, &pf, obs.Time, d, off, upAt, upAt.Add(dt))
		fu = pf.shaped[r.pr.shape()]
		pf.forecast = fu
	}
	tb.up = append(tb.up, pf)
	if !priced {
		tb.down = append(tb.down, pendingForecast{due: obs.Time.Add(tb.lead + tb.hold), from: obs.Time, forecast: fd, seen: math.Inf(-1)})
	}
	b := &r.budget
	b.Exceeded, b.Observed = r.calUp.Exceeded()
	b.Alpha = r.calUp.Alpha()
	b.Errors = r.calUp.Errors()
	b.Forecast = fu
	if priced {
		r.price(obs, dt, d, off, fu, j.missDemand, exceeded)
		return
	}
	b.Quantile = r.calUp.Upper(fu)
	b.QuantileDown = math.Max(r.calDown.Upper(fd), b.Quantile)
	b.Margin, b.Lambda = math.NaN(), math.NaN()
	if fu > 0 {
		b.Margin = b.Quantile / fu
	}
}

// The classes of a forecast's errors (forecast.Calibrator.AddErrorOf): whether a history point
// comes between the forecast and the time it is for. Under a forecast refreshed once a history
// step, the demand before the next history point is the one the path already describes, and what
// the next point brings (a step in a sampled series, a turn of the trend) is new: the two kinds of
// error differ, and the priced rule reads each tick's margin from the errors of its own class.
const (
	classCrossing = iota // a history point comes in between
	classWithin          // none does
)

// classOf is the class of a forecast made at a for the time b: classWithin when no history point
// falls in (a − settle, b] (history points are at the multiples of Step, as Runner.prepare
// advances them). A forecast made before the nowcast has read a step at the last point whole
// (tickBudget.settle) is made without that step, as one made before the point is: counted
// within, its errors would put the steps of a sampled series into the margin of every tick
// that none comes before (docs/results-budget.md, issue 31's fourteenth round).
func (r *Runner) classOf(a, b time.Time) int {
	if b.UnixNano()/int64(r.cfg.Step) > a.Add(-r.tb.settle).UnixNano()/int64(r.cfg.Step) {
		return classCrossing
	}
	return classWithin
}
