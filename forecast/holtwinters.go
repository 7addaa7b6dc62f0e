package forecast

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/optimize"
)

// Holt–Winters defaults. The starting parameters are the textbook middle ground: a level that
// follows the data moderately, a slow trend and a slow seasonal profile.
const (
	hwDefaultMaxIterations = 200
	hwDefaultTimeBudget    = 2 * time.Second
	hwStartAlpha           = 0.3
	hwStartBeta            = 0.05
	hwStartGamma           = 0.1
	// hwParamEdge keeps warm-start parameters off 0 and 1, where the logit is infinite.
	hwParamEdge = 1e-6
	// Nelder–Mead settings in logit space: a cold start explores widely, a warm start stays
	// near the previous optimum so that retraining on a slightly longer history is cheap.
	hwColdSimplex = 1.0
	hwWarmSimplex = 0.2
	// The optimiser has converged when the loss has not improved by more than hwRelTol
	// (relative) for hwStallIterations iterations in a row.
	hwRelTol          = 1e-7
	hwStallIterations = 20
)

func init() {
	Register("holtwinters", func(cfg Config) (Forecaster, error) { return hwNew(cfg) })
}

// hwModel is additive Holt–Winters exponential smoothing (Winters 1960) with level ℓ, trend b
// and a seasonal profile s of period m:
//
//	ℓ_t = α(y_t − s_{t−m}) + (1−α)(ℓ_{t−1} + b_{t−1})
//	b_t = β(ℓ_t − ℓ_{t−1}) + (1−β)b_{t−1}
//	s_t = γ(y_t − ℓ_t) + (1−γ)s_{t−m}
//	ŷ_{t+h} = ℓ_t + h·b_t + s_{t+h−m⌈h/m⌉}
//
// Demand is additive in practice (a daily pattern of a few cores on top of a base), and the
// additive form stays defined when the load is near zero, unlike the multiplicative one.
//
// The state is not kept between calls: Predict re-runs the filter over the history it is given,
// so a forecast is a pure function of (α, β, γ) and that history, and a model fitted on one
// window can forecast from another. The seasonal state lives in a scratch buffer owned by the
// model, which keeps Predict free of allocations and the model unsafe for concurrent use.
type hwModel struct {
	cfg     Config
	season  int
	maxIter int
	budget  time.Duration

	alpha, beta, gamma float64
	// fitted says whether the parameters come from a Fit, which selects the warm-start simplex.
	fitted bool

	seas []float64 // scratch: the seasonal profile while filtering, len season
}

func hwNew(cfg Config) (*hwModel, error) {
	season, err := snSeasonFromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("holtwinters: %w", err)
	}
	m := &hwModel{
		cfg:     cfg,
		season:  season,
		maxIter: cfg.MaxIterations,
		budget:  cfg.TimeBudget,
		alpha:   hwStartAlpha,
		beta:    hwStartBeta,
		gamma:   hwStartGamma,
		seas:    make([]float64, season),
	}
	switch {
	case cfg.MaxIterations < 0:
		return nil, fmt.Errorf("holtwinters: max_iterations (%d) must not be negative", cfg.MaxIterations)
	case cfg.MaxIterations == 0:
		m.maxIter = hwDefaultMaxIterations
	}
	switch {
	case cfg.TimeBudget < 0:
		return nil, fmt.Errorf("holtwinters: time_budget (%v) must not be negative", cfg.TimeBudget)
	case cfg.TimeBudget == 0:
		m.budget = hwDefaultTimeBudget
	}
	return m, nil
}

// Name returns "holtwinters".
func (m *hwModel) Name() string { return "holtwinters" }

// MinHistory is two seasons: the initial level, trend and seasonal profile come from them.
func (m *hwModel) MinHistory() int { return 2 * m.season }

// Config returns the model's settings.
func (m *hwModel) Config() Config { return m.cfg }

// Params returns the smoothing parameters α, β, γ, for reports. Until a Fit they are the
// defaults (0.3, 0.05, 0.1), with which Predict already gives a reasonable smoother: an
// unfitted model answers rather than refuses.
func (m *hwModel) Params() (alpha, beta, gamma float64) { return m.alpha, m.beta, m.gamma }

// Clone deep-copies the model; the copy has its own scratch buffer.
func (m *hwModel) Clone() Forecaster {
	c := *m
	c.seas = make([]float64, len(m.seas))
	return &c
}

// Predict re-runs the filter over history with the fitted parameters and writes the forecasts
// for the len(dst) following steps. It allocates nothing.
func (m *hwModel) Predict(history []float64, dst []float64) error {
	if err := naivePredictCheck(m.Name(), history, dst, m.MinHistory()); err != nil {
		return err
	}
	level, trend, _ := hwFilter(history, m.alpha, m.beta, m.gamma, m.seas)
	last := len(history) - 1
	for i := range dst {
		h := i + 1
		dst[i] = level + float64(h)*trend + m.seas[(last+h)%m.season]
	}
	return nil
}

// Fit chooses α, β, γ in [0, 1] minimising the mean squared one-step-ahead error over history,
// by Nelder–Mead on the logits of the parameters (so the search is unconstrained while the
// parameters stay in range). It starts from the current parameters: retraining every few steps
// on a window that moved a little starts next to the optimum and stops after few iterations.
//
// Fit stops when the loss stalls (converged), after Config.MaxIterations iterations (default
// 200), when Config.TimeBudget runs out (default 2 s), or when ctx is done; in every case the
// model keeps the best parameters found. A canceled Fit also returns ctx's error, wrapped.
// TrainLoss is that mean squared one-step error; ValidationLoss stays zero, because three
// smoothing parameters fitted on one-step errors have little room to overfit and holding out
// the end of the history would throw away the most recent season.
func (m *hwModel) Fit(ctx context.Context, history []float64) (FitReport, error) {
	start := time.Now()
	rep := FitReport{Model: m.Name()}
	if err := ctx.Err(); err != nil {
		rep.StopReason = StopCanceled
		return rep, fmt.Errorf("holtwinters: fit canceled: %w", err)
	}
	if err := CheckHistory(history, m.MinHistory()); err != nil {
		return rep, fmt.Errorf("holtwinters: fit: %w", err)
	}

	steps := float64(len(history) - m.season) // one-step errors scored by hwFilter
	loss := func(x []float64) float64 {
		a, b, g := hwLogistic(x[0]), hwLogistic(x[1]), hwLogistic(x[2])
		_, _, sse := hwFilter(history, a, b, g, m.seas)
		return sse / steps
	}
	x0 := []float64{hwLogit(m.alpha), hwLogit(m.beta), hwLogit(m.gamma)}
	startLoss := loss(x0)
	if !hwFinite(startLoss) {
		return rep, fmt.Errorf("holtwinters: fit: loss %v at the starting parameters: history values too large", startLoss)
	}

	simplex := hwColdSimplex
	if m.fitted {
		simplex = hwWarmSimplex
	}
	problem := optimize.Problem{
		Func: loss,
		Status: func() (optimize.Status, error) {
			if err := ctx.Err(); err != nil {
				return optimize.Failure, err
			}
			return optimize.NotTerminated, nil
		},
	}
	settings := &optimize.Settings{
		MajorIterations: m.maxIter,
		Runtime:         m.budget,
		Converger:       &optimize.FunctionConverge{Relative: hwRelTol, Iterations: hwStallIterations},
	}
	res, err := optimize.Minimize(problem, x0, settings, &optimize.NelderMead{SimplexSize: simplex})
	if res == nil {
		return rep, fmt.Errorf("holtwinters: fit: %w", err)
	}

	// Keep the best point seen, if it beats the start (it always should, barring a failure
	// before the first iteration).
	if hwFinite(res.F) && res.F <= startLoss && len(res.X) == 3 {
		m.alpha, m.beta, m.gamma = hwLogistic(res.X[0]), hwLogistic(res.X[1]), hwLogistic(res.X[2])
		rep.TrainLoss = res.F
	} else {
		rep.TrainLoss = startLoss
	}
	m.fitted = true
	rep.Iterations = res.Stats.MajorIterations
	rep.Duration = time.Since(start)

	switch {
	case ctx.Err() != nil:
		rep.StopReason = StopCanceled
		return rep, fmt.Errorf("holtwinters: fit canceled after %d iterations: %w", rep.Iterations, ctx.Err())
	case res.Status == optimize.IterationLimit:
		rep.StopReason = StopMaxIterations
	case res.Status == optimize.RuntimeLimit:
		rep.StopReason = StopTimeBudget
	case err != nil:
		return rep, fmt.Errorf("holtwinters: fit: %w", err)
	case res.Status.Early():
		return rep, fmt.Errorf("holtwinters: fit: optimiser stopped with status %v", res.Status)
	default:
		rep.StopReason = StopConverged
	}
	return rep, nil
}

// hwFilter runs the Holt–Winters recursions over y (len ≥ 2m, m = len(seas)) and returns the
// final level and trend and the sum of squared one-step-ahead errors over y[m:]; the final
// seasonal profile is left in seas, indexed by time modulo m.
//
// Initialisation uses the first two seasons, which makes it exact for a noiseless additive
// series y_t = a + b·t + S_{t mod m} with ΣS = 0: the trend is the difference of the two
// seasonal means divided by m (mean₂ − mean₁ = b·m), the level at t = m−1 is
// mean₁ + b·(m−1)/2, and each seasonal index is the average over both seasons of the value
// minus the trend line through the seasonal means. The filter then starts at t = m.
func hwFilter(y []float64, alpha, beta, gamma float64, seas []float64) (level, trend, sse float64) {
	m := len(seas)
	var mean1, mean2 float64
	for i := range m {
		mean1 += y[i]
		mean2 += y[m+i]
	}
	mean1 /= float64(m)
	mean2 /= float64(m)
	trend = (mean2 - mean1) / float64(m)
	mid := float64(m-1) / 2
	for i := range m {
		off := (float64(i) - mid) * trend
		seas[i] = 0.5 * ((y[i] - mean1 - off) + (y[m+i] - mean2 - off))
	}
	level = mean1 + mid*trend

	idx := 0 // t mod m, with t starting at m
	for t := m; t < len(y); t++ {
		s := seas[idx]
		e := y[t] - (level + trend + s)
		sse += e * e
		newLevel := alpha*(y[t]-s) + (1-alpha)*(level+trend)
		trend = beta*(newLevel-level) + (1-beta)*trend
		level = newLevel
		seas[idx] = gamma*(y[t]-level) + (1-gamma)*s
		if idx++; idx == m {
			idx = 0
		}
	}
	return level, trend, sse
}

// hwLogistic maps the optimiser's unconstrained coordinate onto a parameter in [0, 1].
func hwLogistic(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// hwLogit is the inverse of hwLogistic, with p kept off the edges where it is infinite.
func hwLogit(p float64) float64 {
	p = min(max(p, hwParamEdge), 1-hwParamEdge)
	return math.Log(p / (1 - p))
}

func hwFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
