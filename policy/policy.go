// Package policy runs one scaling policy step by step: it keeps the demand history, stabilises
// the observed load (W1), forecasts (W2) and fits the high-water level (W3) with the models of
// package forecast, combines them into the load the policy's rule sees, and asks the scaling
// algorithm for a replica count. The backtest and the live exporter both drive this Runner, so
// an offline result speaks for the live system.
package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// Observation is what the live system or the simulator saw at one step.
type Observation struct {
	Time time.Time
	// Demand is the workload's CPU use in cores, D(t); NaN when the sample is missing.
	Demand float64
	// Current is the spec replica count N(t); Ready the ready replicas Nr(t).
	Current int32
	Ready   int32
}

// Result is one step's figures and decision. Loads are utilizations at the current size.
type Result struct {
	Time time.Time `json:"time"`
	// Demand is the stabilised observed demand in cores.
	Demand float64 `json:"demand"`
	// DemandForecast is the largest forecast of D over t+1 … t+h in cores, the demand W2 stands
	// for (NaN without a model or before training); DemandForecastEnd is the point forecast of
	// D(t+h) alone, for scoring the model against what came.
	DemandForecast    float64 `json:"demand_forecast"`
	DemandForecastEnd float64 `json:"demand_forecast_end"`
	// NewSample says this step began a new history step: the models saw a new point.
	NewSample bool `json:"new_sample"`
	// Budget is the overload-budget policy's quantile side (nil for other policies). It points
	// at the runner's own state: read it before the next Step.
	Budget *BudgetState `json:"budget,omitempty"`
	// HighWater is the EVT high-water demand z in cores (NaN unless the policy uses EVT).
	HighWater              float64 `json:"high_water"`
	W1, W2, W3, W, WindowW float64
	POT                    *forecast.POTResult `json:"pot,omitempty"`
	Decision               scaling.Decision    `json:"decision"`
	// Floor and Ceiling are the range the algorithm's state allowed this decision, computed
	// before it (scaling.Stateful; min and max replicas for a stateless algorithm): the
	// decision is the stateless rule's answer clamped into them. The exporter publishes them
	// so that the webhook decides from fresh inputs without decision state of its own.
	Floor   int32 `json:"floor"`
	Ceiling int32 `json:"ceiling"`
	// Term is the load that decided: w1 (observed), w2 (forecast), w3 (high-water), quantile
	// (the budget's calibrated quantile) or window (debi's window term); "" without a load.
	Term string `json:"term"`
	// Active says a wake metric (Config.Wake) is above its activation, observed or in the
	// largest forecast over the lead time; Idle is the rule's scaling.Input.Idle, seconds
	// without an active wake metric (a policy with min_replicas 0).
	Active bool    `json:"active,omitempty"`
	Idle   float64 `json:"-"`
	// Training holds the report of a training run that finished during this step.
	Training *forecast.FitReport `json:"training,omitempty"`
	// TrainError is the error of a training run that failed during this step.
	TrainError error `json:"-"`
	// ForecastError is why W2 is missing, when the policy has a model.
	ForecastError error `json:"-"`
}

// ErrNoData is returned (wrapped) by Step when no usable demand sample is in the window: the
// decision is then the current size, never a scale-down on missing data.
var ErrNoData = errors.New("no demand data")

// Runner steps one policy. Step must be called from one goroutine; training may run in another.
type Runner struct {
	cfg  Config
	alg  scaling.Algorithm
	rule scaling.Algorithm // scaling.RuleOf(alg)
	log  *slog.Logger

	samples []scaling.Sample // raw samples, pruned to the longest window
	history []float64        // one stabilised demand value per step, at most keep
	keep    int              // history length: cfg.History, or more when the model needs it
	scratch []float64
	hist2   []float64 // EVT and training copy
	pred    []float64

	// The forecast and high-water level of the latest history step, in cores: between steps
	// (ticks faster than Step) they stand.
	lastIndex    int64
	lastTime     time.Time
	fcMax, fcEnd float64
	fcErr        error
	pot          *forecast.POTResult

	// The budget policy's side: one calibrator for the lead-time window and one for the
	// lead time plus the hold, and rings of the window forecasts made at past history steps.
	calUp, calDown *forecast.Calibrator
	hUp, hDown     int
	fUp, fDown     []float64 // rings indexed by history step
	budget         BudgetState
	tb             tickBudget
	pr             pricer
	// jointMiss, when set (by a Multi that calibrates jointly, for the one step it is set for),
	// is the policy's overload at this step over all its metrics: the budget calibration
	// observes it instead of this metric's own, so that every metric's level moves on the
	// policy's misses.
	jointMiss *bool
	// idle is how long the wake metric has been idle (a policy with min_replicas 0).
	idle idleClock

	model       atomic.Pointer[modelBox]
	training    atomic.Bool
	trainMu     sync.Mutex
	finished    *forecast.FitReport // set by a finished async run, read by Step
	finishErr   error
	steps       int
	lastTrainS  int
	trainWG     sync.WaitGroup
	cancelTrain context.CancelFunc
}

type modelBox struct {
	f       forecast.Forecaster
	trained bool
}

// New builds a Runner.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var warns []string
	cfg.Metrics, warns = cfg.Metrics.Normalize()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, w := range warns {
		log.Warn("metrics policy setting replaced by its default", "policy", cfg.Spec.Name, "warning", w)
	}
	alg, err := scaling.New(cfg.Spec.Algorithm, cfg.Params)
	if err != nil {
		return nil, err
	}
	if u, ok := alg.(scaling.Unapplied); ok && cfg.Unapplied {
		u.SetUnapplied(true)
	}
	r := &Runner{cfg: cfg, alg: alg, rule: scaling.RuleOf(alg), log: log, pred: make([]float64, cfg.LeadSteps), lastTrainS: -1, keep: cfg.History,
		lastIndex: math.MinInt64, fcMax: math.NaN(), fcEnd: math.NaN()}
	if cfg.Spec.Load == LoadBudget {
		r.hUp = cfg.LeadSteps
		r.hDown = cfg.LeadSteps + int((cfg.Params.Budget.Hold+cfg.Step-1)/cfg.Step)
		r.pred = make([]float64, r.hDown)
		if r.calUp, err = forecast.NewCalibrator(cfg.Calibration); err != nil {
			return nil, fmt.Errorf("budget: %w", err)
		}
		if cfg.Params.Budget.Rule != scaling.RulePriced {
			// The priced rule has no scale-down quantile: its size is both W and WDown.
			r.calDown, _ = forecast.NewCalibrator(cfg.Calibration)
		}
		r.fUp, r.fDown = make([]float64, r.hDown+1), make([]float64, r.hDown+1)
		for i := range r.fUp {
			r.fUp[i], r.fDown[i] = math.NaN(), math.NaN()
		}
		r.keep = max(r.keep, r.hDown+1)
		r.tb = tickBudget{lead: cfg.LeadTime, hold: cfg.Params.Budget.Hold, step: cfg.Step, base: math.NaN()}
		if r.tb.lead == 0 {
			r.tb.lead = time.Duration(cfg.LeadSteps-1) * cfg.Step
		}
	}
	if cfg.Spec.Model != "" {
		mc := cfg.Model
		if mc.Season == 0 {
			mc.Season = SeasonSteps(cfg.Season, cfg.Step)
		}
		r.cfg.Model = mc
		f := cfg.Forecaster
		if f == nil {
			if f, err = forecast.New(cfg.Spec.Model, mc); err != nil {
				return nil, err
			}
			if cfg.Fallback != "" {
				fb, err := forecast.New(cfg.Fallback, mc)
				if err != nil {
					return nil, fmt.Errorf("fallback: %w", err)
				}
				if f, err = forecast.NewFallback(f, fb); err != nil {
					return nil, err
				}
			}
		}
		r.model.Store(&modelBox{f: f})
		// A seasonal model needs whole seasons: keep what it needs, while the EVT fit still sees
		// the last cfg.History steps only.
		r.keep = max(r.keep, f.MinHistory()+len(r.pred))
		if k, ok := f.(forecast.HistoryKeeper); ok {
			r.keep = max(r.keep, k.Needs()+len(r.pred))
		}
		if f.MinHistory() > cfg.History {
			log.Warn("the model needs more history than the policy's history: no forecast until it has accumulated",
				"policy", cfg.Spec.Name, "model", cfg.Spec.Model, "needed_steps", f.MinHistory(), "history_steps", cfg.History,
				"needed", time.Duration(f.MinHistory())*cfg.Step)
		}
	}
	return r, nil
}

// ModelHistory returns how many history steps the policy's model needs before it can forecast
// and how many it has (0, 0 without a model). A model whose need exceeds Config.History says
// so here and in a warning at New: it forecasts nothing until then.
func (r *Runner) ModelHistory() (needed, have int) {
	box := r.model.Load()
	if box == nil {
		return 0, 0
	}
	return max(box.f.MinHistory(), r.cfg.LeadSteps+1), len(r.history)
}

// ActiveModel names the model the latest forecast came from: the model's own name, or what it
// reports as active (forecast.Auto: the model it chose; forecast.Fallback: the fallback while the
// model waits); "" before the model is trained or without one. Like ModelHistory, it must not
// run concurrently with Step.
func (r *Runner) ActiveModel() string {
	box := r.model.Load()
	if box == nil || !box.trained {
		return ""
	}
	if a, ok := box.f.(interface{ Active() string }); ok {
		return a.Active()
	}
	return box.f.Name()
}

// Config returns the runner's configuration (after normalisation).
func (r *Runner) Config() Config { return r.cfg }

// SetRequest changes the CPU request of one pod, R, from the next Step on. The live exporter
// reads the request from kube-state-metrics at every step, and a rollout may change it; the
// demand history is in cores, so it stays valid. Step and SetRequest must be called from the
// same goroutine.
func (r *Runner) SetRequest(cores float64) error {
	if !(cores > 0) || math.IsInf(cores, 0) {
		return fmt.Errorf("request must be a positive number of cores, got %v", cores)
	}
	r.cfg.Request = cores
	return nil
}

// Wait blocks until a background training run, if any, has finished.
func (r *Runner) Wait() { r.trainWG.Wait() }

// History returns a copy of the demand history the models see.
func (r *Runner) History() []float64 { return append([]float64(nil), r.history...) }

// Step records the observation and decides. A missing observation keeps the current size and
// returns an error wrapping ErrNoData with the result. Step may be called at every controller
// tick: the history (and so the forecast and the high-water fit) advances once per Config.Step,
// at the first call of each step, and between steps the latest forecast stands.
func (r *Runner) Step(ctx context.Context, obs Observation) (Result, error) {
	res, in, err := r.prepare(ctx, obs)
	if err != nil {
		return res, err
	}
	r.decide(&res, in, scaling.BoundsOf(r.alg, r.cfg.Params, in.Time, in.Current))
	return res, nil
}

// prepare records the observation and computes the step's loads and the rule's input, without
// deciding: Step decides on it alone, Multi over several metrics. An error wraps ErrNoData.
func (r *Runner) prepare(ctx context.Context, obs Observation) (Result, scaling.Input, error) {
	res := Result{Time: obs.Time, DemandForecast: math.NaN(), DemandForecastEnd: math.NaN(), HighWater: math.NaN(),
		W2: math.NaN(), W3: math.NaN(), WindowW: math.NaN()}
	r.samples = append(r.samples, scaling.Sample{Time: obs.Time, Value: obs.Demand})
	keep := max(r.cfg.Metrics.Window, r.cfg.Params.Window)
	r.samples = pruneSamples(r.samples, obs.Time.Add(-keep))

	var demand float64
	var err error
	if r.cfg.Spec.Raw {
		demand = obs.Demand
		if math.IsNaN(demand) || math.IsInf(demand, 0) || demand < 0 {
			err = fmt.Errorf("%w: the latest sample is %v", scaling.ErrMissingData, demand)
		}
	} else {
		demand, err = r.cfg.Metrics.Stabilize(r.samples, obs.Time, r.scratch[:0])
		if cap(r.scratch) < len(r.samples) {
			r.scratch = make([]float64, 0, 2*len(r.samples))
		}
	}
	if err != nil {
		res.Demand, res.W1, res.W = math.NaN(), math.NaN(), math.NaN()
		res.Decision = scaling.Decision{Replicas: obs.Current, Reason: scaling.ReasonNoLoad}
		r.collectTraining(&res)
		return res, scaling.Input{}, fmt.Errorf("%w: %w", ErrNoData, err)
	}
	res.Demand = demand
	r.lastTime = obs.Time
	if idx := obs.Time.UnixNano() / int64(r.cfg.Step); idx > r.lastIndex {
		r.lastIndex = idx
		res.NewSample = true
		r.advance(ctx, demand, &res)
	}

	capacity := float64(max(obs.Current, 1)) * r.cfg.Request
	res.W1 = demand / capacity
	if r.cfg.Params.Window > 0 {
		res.WindowW = meanSince(r.samples, obs.Time.Add(-r.cfg.Params.Window)) / capacity
	}
	if r.model.Load() != nil {
		res.DemandForecast, res.DemandForecastEnd, res.ForecastError = r.fcMax, r.fcEnd, r.fcErr
		res.W2 = r.fcMax / capacity
	}
	if r.pot != nil {
		res.POT = r.pot
		res.HighWater = r.pot.Z
		res.W3 = r.pot.Z / capacity
	}
	in := scaling.Input{Time: obs.Time, Current: obs.Current, Ready: obs.Ready, WindowW: res.WindowW, WNow: res.W1}
	switch r.cfg.Spec.Load {
	case LoadObserved:
		res.W = res.W1
	case LoadForecast:
		res.W = scaling.ForecastLoad(res.W1, res.W2)
	case LoadBudget:
		if r.cfg.Calibration.Scoring == forecast.ScoringTick {
			r.tickBudget(obs)
		} else {
			r.observeBudget(obs)
		}
		b := &r.budget
		res.Budget = b // the runner's own: valid until the next Step
		res.W = b.Quantile / capacity
		in.WDown = b.QuantileDown / capacity
	default:
		res.W = scaling.EffectiveLoad(res.W1, res.W2, res.W3)
	}
	in.W = res.W
	if r.cfg.Wake {
		// Active: the demand observed, or the largest forecast of it over the lead time (a
		// policy with a model), above the activation. (Not W: budget's is a size to hold.)
		res.Active = res.Demand > r.cfg.Activation || res.DemandForecast > r.cfg.Activation
	}
	res.Idle = r.idle.idle(obs.Time, res.Active, r.cfg.Wake) // NaN without a wake metric: never to zero
	in.Idle = res.Idle
	return res, in, nil
}

// decide takes the step's decision on in within the bounds b of the algorithm's state and
// advances that state.
//
// The decision is the one composition the webhook runs too (scaling.Decide); the stateful
// algorithm's own Recommend only advances its state, and equals it by construction
// (scaling.TestStatefulSplit). A disagreement is a bug, logged, and the composition stands.
func (r *Runner) decide(res *Result, in scaling.Input, b scaling.Bounds) {
	res.Floor, res.Ceiling = b.Lo, b.Hi
	res.Decision = scaling.Decide(r.rule, in, b)
	r.advanceState(in, res.Decision)
	res.Term = decidingTerm(res)
}

// advanceState runs the stateful algorithm on in, the input of the decision d, so that its
// state records d.
func (r *Runner) advanceState(in scaling.Input, d scaling.Decision) {
	if in.Current == 0 && r.cfg.Params.MinReplicas == 0 {
		return // at zero the algorithm does not act: the wake is the composition's (scaling.Decide)
	}
	if _, ok := r.alg.(scaling.Stateful); ok {
		if adv := r.alg.Recommend(in); adv.Replicas != d.Replicas && d.Reason != scaling.ReasonIdle {
			r.log.Error("the algorithm's state disagrees with its rule clamped into its bounds; using the composition",
				"policy", r.cfg.Spec.Name, "state", adv.Replicas, "composition", d.Replicas)
		}
	}
}

// advance takes a new history point: trains when due, forecasts the next LeadSteps steps and
// refits the high-water level.
func (r *Runner) advance(ctx context.Context, demand float64, res *Result) {
	r.steps++
	if cap(r.history) < r.keep+1 {
		// Room for the history and the point that comes before the oldest leaves, exactly (append's
		// growth would overshoot by a fifth).
		r.history = append(make([]float64, 0, r.keep+1), r.history...)
	}
	r.history = append(r.history, demand)
	if len(r.history) > r.keep {
		r.history = append(r.history[:0], r.history[len(r.history)-r.keep:]...)
	}
	if box := r.model.Load(); box != nil {
		r.maybeTrain(ctx)
		r.collectTraining(res)
		r.fcMax, r.fcEnd, r.fcErr = math.NaN(), math.NaN(), nil
		if box = r.model.Load(); box.trained {
			if err := box.f.Predict(r.history, r.pred); err != nil {
				r.fcErr = err
			} else {
				// W2 is the largest forecast over the horizon (METHOD §2 [fix]): a spike the model
				// sees coming inside the actuation delay must be ordered now. A negative demand
				// forecast means none.
				hi := math.Inf(-1)
				for _, f := range r.pred {
					if !math.IsNaN(f) {
						hi = math.Max(hi, f)
					}
				}
				end := r.pred[len(r.pred)-1]
				if !math.IsInf(hi, 0) {
					r.fcMax = math.Max(0, hi)
				}
				if !math.IsInf(end, 0) && !math.IsNaN(end) {
					r.fcEnd = math.Max(0, end)
				}
			}
		} else {
			need, have := r.ModelHistory()
			r.fcErr = fmt.Errorf("model not trained yet (%d of the %d history steps it needs)", have, need)
		}
	}
	if r.cfg.Spec.Load == LoadBudget {
		if r.cfg.Calibration.Scoring == forecast.ScoringTick {
			if r.cfg.Params.Budget.Rule == scaling.RulePriced {
				r.pr.newPath(&r.tb, r.lastTime)
			}
			r.tb.newPath(r.lastTime, demand, r.pred, !math.IsNaN(r.fcMax))
		} else {
			r.recordBudget(demand)
		}
	}
	if r.cfg.Spec.Load == LoadEffective {
		evtHist := r.history
		if len(evtHist) > r.cfg.History {
			evtHist = evtHist[len(evtHist)-r.cfg.History:]
		}
		r.pot = nil
		if pot, err := forecast.HighWater(evtHist, r.cfg.POT); err == nil {
			r.pot = &pot
		}
	}
}

func pruneSamples(s []scaling.Sample, cutoff time.Time) []scaling.Sample {
	i := 0
	for i < len(s)-1 && !s[i].Time.After(cutoff) {
		i++
	}
	if i == 0 {
		return s
	}
	return append(s[:0], s[i:]...)
}

// meanSince is the mean of the finite samples after cutoff (NaN when none).
func meanSince(s []scaling.Sample, cutoff time.Time) float64 {
	sum, n := 0.0, 0
	for _, x := range s {
		if x.Time.After(cutoff) && !math.IsNaN(x.Value) && !math.IsInf(x.Value, 0) {
			sum += x.Value
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// decidingTerm is the load that made res.W, or the window term when it decided (for the
// dashboards' "why"): W equals one of the loads it is the max or min of.
func decidingTerm(res *Result) string {
	switch {
	case res.Decision.Reason == scaling.ReasonWindow:
		return "window"
	case math.IsNaN(res.W):
		return ""
	case res.Budget != nil:
		if res.Budget.Saturated {
			return "saturated" // the priced rule held max_replicas: the forecast is above what they serve
		}
		if res.Budget.Held {
			return "hold" // the priced hold kept pods the price would have released
		}
		if res.Budget.Lambda > 0 {
			return "price" // the priced rule: the load now is one of its terms, not a floor
		}
		if res.W >= res.W1 {
			return "quantile"
		}
		return "w1"
	case res.W == res.W1:
		return "w1"
	case res.W == res.W2:
		return "w2"
	case res.W == res.W3:
		return "w3"
	}
	return ""
}
