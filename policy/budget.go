package policy

import (
	"math"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// BudgetState is what the budget policy sized for at one step (METHOD §9).
type BudgetState struct {
	// Quantile is the calibrated upper quantile of the demand over the lead time (cores);
	// QuantileDown over the lead time plus the hold, which a scale-down must still fit.
	Quantile, QuantileDown float64
	// Forecast is the largest point forecast over the lead time, Margin the calibrated factor
	// on it (Quantile = Forecast·Margin), Alpha the calibrated level (the margin is the (1−α)
	// quantile of the forecast's recent errors).
	Forecast, Margin, Alpha float64
	// Exceeded and Observed count the steps whose observed demand exceeded u_sla·Nr·R, and
	// all steps observed: the budget used so far is Exceeded/Observed.
	Exceeded, Observed int
	// Errors is the number of forecast errors the margin comes from.
	Errors int
	// Lambda is the priced rule's price of an overloaded tick, in pod-ticks, at least 1 (NaN or
	// 0 under the quantile rule).
	Lambda float64
	// Hold is the priced rule's hold, the one of its candidates that has cost least (0 under the
	// quantile rule, whose hold is scaling.budget.hold); Held says it kept pods the price alone
	// would have released. HoldSettle says the hold chosen also holds through the ticks after a
	// history point before the nowcast has read it.
	Hold       time.Duration
	Held       bool
	HoldSettle bool
	// Saturated says the priced rule ordered max_replicas because the demand forecast where the
	// pods ordered now come is above what max_replicas serve (not by the price).
	Saturated bool
}

// quantileMiss says whether an overloaded tick is the budget quantile's miss, which its
// calibration (and the priced rule's price) observes. Two are not, since counting them would only
// drive the level down until every other hour pays for them: an overload at max_replicas, which
// no size could have avoided, and one with no pod ready in a policy that scales to zero, whose
// size was the zero step's (asleep, or woken and starting), not the quantile's.
func (r *Runner) quantileMiss(exceeded bool, obs Observation) bool {
	return exceeded && obs.Current < r.cfg.Params.MaxReplicas && !(r.cfg.Params.MinReplicas == 0 && obs.Ready == 0)
}

// observeBudget counts this step against the budget (was the observed demand above u_sla·Nr·R?),
// adapts the calibration and sizes the quantiles with the current margins.
func (r *Runner) observeBudget(obs Observation) {
	exceeded := scaling.Overloaded(obs.Demand, r.cfg.Params.Budget.SLAUtilization, obs.Ready, r.cfg.Request)
	if r.jointMiss != nil {
		exceeded = *r.jointMiss
	}
	if r.quantileMiss(exceeded, obs) || !exceeded {
		r.calUp.Observe(exceeded)
		r.calDown.Observe(exceeded)
	}
	b := &r.budget
	b.Exceeded, b.Observed = r.calUp.Exceeded()
	b.Alpha = r.calUp.Alpha()
	b.Margin, b.Lambda = math.NaN(), math.NaN()
	b.Errors = r.calUp.Errors()
	k := len(r.fUp)
	up, down := r.fUp[(r.steps-1+k)%k], r.fDown[(r.steps-1+k)%k]
	b.Forecast = up
	b.Quantile = r.calUp.Upper(up)
	b.QuantileDown = r.calDown.Upper(down)
	if up > 0 {
		b.Margin = b.Quantile / up
	}
}

// recordBudget keeps the window forecasts of this history step (the model's, or the last
// value when the model has none yet) and scores the ones whose windows have just closed.
func (r *Runner) recordBudget(demand float64) {
	k := len(r.fUp)
	up, down := demand, demand
	if !math.IsNaN(r.fcMax) {
		up, down = math.Inf(-1), math.Inf(-1)
		for i, f := range r.pred {
			if math.IsNaN(f) {
				continue
			}
			f = math.Max(f, 0)
			if i < r.hUp {
				up = math.Max(up, f)
			}
			down = math.Max(down, f)
		}
		if math.IsInf(up, 0) || math.IsInf(down, 0) {
			up, down = demand, demand
		}
	}
	// Score the forecasts made h steps ago against the largest demand of the h steps since.
	score := func(cal *forecast.Calibrator, ring []float64, h int) {
		if r.steps <= h || len(r.history) < h {
			return
		}
		f := ring[(r.steps-1-h+k)%k]
		if math.IsNaN(f) {
			return
		}
		actual := math.Inf(-1)
		for _, v := range r.history[len(r.history)-h:] {
			actual = math.Max(actual, v)
		}
		_ = cal.AddError(actual, f)
	}
	score(r.calUp, r.fUp, r.hUp)
	score(r.calDown, r.fDown, r.hDown)
	r.fUp[(r.steps-1)%k], r.fDown[(r.steps-1)%k] = up, down
}
