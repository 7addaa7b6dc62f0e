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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// LoadMode says which load a policy feeds to its rule (METHOD §6).
type LoadMode string

// Load modes.
const (
	LoadObserved  LoadMode = "observed"  // W1
	LoadForecast  LoadMode = "forecast"  // max(W2, W1)
	LoadEffective LoadMode = "effective" // max(min(W2, W3), W1)
	// LoadBudget feeds budget the calibrated upper quantile of the demand over the lead time
	// (METHOD §9), the observed load as its floor, and the quantile over the lead time plus
	// the hold to its scale-down gate.
	LoadBudget LoadMode = "budget"
)

// DefaultDebiModel is the forecaster of the plain "debi" policy when none is configured.
const DefaultDebiModel = "holtwinters"

// DefaultBudgetModel is the forecaster of the plain "budget" policy.
const DefaultBudgetModel = "holtwinters"

// Spec is a parsed policy name.
type Spec struct {
	Name      string   `json:"name"`
	Algorithm string   `json:"algorithm"`
	Model     string   `json:"model,omitempty"`
	Load      LoadMode `json:"load"`
	// Raw feeds the observed demand to the rule as it comes, without the metrics policy's
	// stabilisation: Kubernetes' HPA acts on the metrics-server value itself.
	Raw bool `json:"raw,omitempty"`
}

// Parse reads a policy name: "hpa", "apa", "debi" (Algorithm 2 on the effective load with
// DefaultDebiModel, or the model given by debiModel), "<model>-debi", "<model>-hpa" (HPA rule on
// max(W2, W1)) and "evt-<model>-hpa" (HPA rule on the effective load). Names are
// case-insensitive; models must be registered in package forecast.
func Parse(name, debiModel string) (Spec, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if debiModel == "" {
		debiModel = DefaultDebiModel
	}
	model := func(m string) error {
		if !forecast.Known(m) {
			return fmt.Errorf("policy %q: unknown model %q (known: %s)", name, m, strings.Join(forecast.Names(), ", "))
		}
		return nil
	}
	switch {
	case n == "hpa":
		return Spec{Name: n, Algorithm: n, Load: LoadObserved, Raw: true}, nil
	case n == "apa":
		return Spec{Name: n, Algorithm: n, Load: LoadObserved}, nil
	case n == "debi":
		return Spec{Name: n, Algorithm: "debi", Model: strings.ToLower(debiModel), Load: LoadEffective}, model(debiModel)
	case n == "budget":
		return Spec{Name: n, Algorithm: "budget", Model: DefaultBudgetModel, Load: LoadBudget}, nil
	case strings.HasSuffix(n, "-budget") && len(n) > len("-budget"):
		m := strings.TrimSuffix(n, "-budget")
		return Spec{Name: n, Algorithm: "budget", Model: m, Load: LoadBudget}, model(m)
	case strings.HasPrefix(n, "evt-") && strings.HasSuffix(n, "-hpa") && len(n) > len("evt--hpa"):
		m := strings.TrimSuffix(strings.TrimPrefix(n, "evt-"), "-hpa")
		return Spec{Name: n, Algorithm: "hpa", Model: m, Load: LoadEffective}, model(m)
	case strings.HasSuffix(n, "-hpa") && len(n) > len("-hpa"):
		m := strings.TrimSuffix(n, "-hpa")
		return Spec{Name: n, Algorithm: "hpa", Model: m, Load: LoadForecast}, model(m)
	case strings.HasSuffix(n, "-debi") && len(n) > len("-debi"):
		m := strings.TrimSuffix(n, "-debi")
		return Spec{Name: n, Algorithm: "debi", Model: m, Load: LoadEffective}, model(m)
	}
	return Spec{}, fmt.Errorf("unknown policy %q: want hpa, apa, debi, budget, <model>-debi, <model>-hpa, evt-<model>-hpa or <model>-budget with a model in %s",
		name, strings.Join(forecast.Names(), ", "))
}

// Config is everything a Runner needs.
type Config struct {
	Spec    Spec
	Params  scaling.Params
	Metrics scaling.MetricsPolicy
	// Request is the CPU request of one pod, R, in cores.
	Request float64
	// Step is the sample period of the history: one history point per step. Step may be called
	// more often (every controller tick); a new history point, and a new forecast, is taken
	// when a new step begins, and between them the latest forecast stands.
	Step time.Duration
	// LeadSteps is the forecast horizon h in steps (at least 1): W2 is the largest forecast over
	// t+1 … t+h (METHOD §2). Horizon computes it from the actuation delay.
	LeadSteps int
	// History is how many steps of demand the models and the EVT fit see (760).
	History int
	// Retrain is the number of steps between training runs (0: train once).
	Retrain int
	// Season is the seasonal period of the seasonal models as a duration (default one day),
	// converted to steps of Step unless Model.Season is set.
	Season time.Duration
	// LeadTime is the actuation delay (decision delay + pod start-up) the budget policy sizes
	// for; 0 takes (LeadSteps − 1)·Step.
	LeadTime time.Duration
	// ObservationWindow is the window the observed demand is a mean over (a rate(...[1m]));
	// the budget policy recovers the demand now from the observation by inverting that mean
	// (tickBudget.deconvolve; 0: the observation is the demand now).
	ObservationWindow time.Duration
	Model             forecast.Config
	POT               forecast.POTConfig
	// Calibration is the budget policy's quantile and its online calibration (METHOD §9).
	Calibration forecast.CalibratorConfig
	// AsyncTraining trains a clone of the model in the background and swaps it in when done
	// (live); otherwise training runs inside Step (backtest, deterministic).
	AsyncTraining bool
	// Unapplied says that nothing applies the recommendations (a shadow-mode or paused policy):
	// a stateful algorithm then takes its state from the observed changes of size
	// (scaling.Unapplied).
	Unapplied bool
	// Forecaster, when set, is the model instead of Spec.Model's registry entry (Spec.Model
	// then only names it): the backtest's diagnostic forecasters that know the future are not
	// in the registry, so that no configuration can pick them.
	Forecaster forecast.Forecaster
	// Fallback, when set, names a model that forecasts while Spec.Model waits for the history
	// it needs (forecast.Fallback): Holt-Winters waits two seasons, ARIMA a few dozen points.
	// Measured out of sample (docs/results-budget.md).
	Fallback string
	Logger   *slog.Logger
}

// DefaultConfig returns the paper's settings for the policy spec.
func DefaultConfig(spec Spec) Config {
	return Config{
		Spec:      spec,
		Params:    scaling.DefaultParams(),
		Metrics:   scaling.DefaultMetricsPolicy(),
		Request:   5,
		Step:      time.Minute,
		LeadSteps: 1,
		History:   760,
		Retrain:   120,
		Season:    24 * time.Hour,
		POT:       forecast.DefaultPOTConfig(),

		Calibration: forecast.DefaultCalibratorConfig(),
	}
}

// Horizon is the forecast horizon h in steps that covers an actuation delay (decision delay +
// pod start-up, METHOD §2 [fix]): capacity ordered now serves only after lead, so the forecast
// must reach past it, h = ceil(lead/step) + 1.
func Horizon(lead, step time.Duration) int {
	if step <= 0 || lead <= 0 {
		return 1
	}
	return int((lead+step-1)/step) + 1
}

// SeasonSteps converts a seasonal period to steps of step (at least 1).
func SeasonSteps(season, step time.Duration) int {
	if season <= 0 || step <= 0 {
		return 0
	}
	return max(1, int((season+step/2)/step))
}

// Validate checks the configuration; errors name the field.
func (c Config) Validate() error {
	switch {
	case !(c.Request > 0) || math.IsInf(c.Request, 0):
		return fmt.Errorf("request must be a positive number of cores, got %v", c.Request)
	case c.Step <= 0:
		return fmt.Errorf("step must be positive, got %v", c.Step)
	case c.LeadSteps < 1:
		return fmt.Errorf("lead_steps must be at least 1, got %d", c.LeadSteps)
	case c.History < 2:
		return fmt.Errorf("history must be at least 2 steps, got %d", c.History)
	case c.Retrain < 0:
		return fmt.Errorf("retrain must not be negative, got %d", c.Retrain)
	case c.Season < 0:
		return fmt.Errorf("season must not be negative, got %v", c.Season)
	}
	if err := c.Params.Validate(); err != nil {
		return err
	}
	if c.Params.Budget.Rule == scaling.RulePriced && c.Spec.Load == LoadBudget && c.Calibration.Scoring != forecast.ScoringTick {
		return fmt.Errorf("budget.rule %q prices every tick: it needs budget.scoring %q, got %q", scaling.RulePriced, forecast.ScoringTick, c.Calibration.Scoring)
	}
	if c.Spec.Load == LoadEffective {
		if err := c.POT.Validate(); err != nil {
			return scaling.PrefixErrors("evt: ", err)
		}
	}
	if c.Spec.Load == LoadBudget {
		if err := c.Calibration.Validate(); err != nil {
			return scaling.PrefixErrors("budget: ", err)
		}
	}
	if c.Fallback != "" {
		if c.Spec.Model == "" {
			return fmt.Errorf("fallback: policy %s has no model to fall back from", c.Spec.Name)
		}
		if !forecast.Known(c.Fallback) {
			return fmt.Errorf("fallback: unknown model %q (known: %s)", c.Fallback, strings.Join(forecast.Names(), ", "))
		}
	}
	if !scaling.Known(c.Spec.Algorithm) {
		return fmt.Errorf("unknown algorithm %q", c.Spec.Algorithm)
	}
	return nil
}

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
	// Training holds the report of a training run that finished during this step.
	Training *forecast.FitReport `json:"training,omitempty"`
	// TrainError is the error of a training run that failed during this step.
	TrainError error `json:"-"`
	// ForecastError is why W2 is missing, when the policy has a model.
	ForecastError error `json:"-"`
}

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
		r.calDown, _ = forecast.NewCalibrator(cfg.Calibration)
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
	if _, ok := r.alg.(scaling.Stateful); ok {
		if adv := r.alg.Recommend(in); adv.Replicas != d.Replicas {
			r.log.Error("the algorithm's state disagrees with its rule clamped into its bounds; using the composition",
				"policy", r.cfg.Spec.Name, "state", adv.Replicas, "composition", d.Replicas)
		}
	}
}

// observeBudget counts this step against the budget (was the observed demand above u_sla·Nr·R?),
// adapts the calibration and sizes the quantiles with the current margins.
func (r *Runner) observeBudget(obs Observation) {
	exceeded := scaling.Overloaded(obs.Demand, r.cfg.Params.Budget.SLAUtilization, obs.Ready, r.cfg.Request)
	if r.jointMiss != nil {
		exceeded = *r.jointMiss
	}
	// An overload at max_replicas is no miss of the quantile: no size could have avoided it,
	// and counting it would only drive the level down until every other hour pays for it.
	if !(exceeded && obs.Current >= r.cfg.Params.MaxReplicas) {
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

// advance takes a new history point: trains when due, forecasts the next LeadSteps steps and
// refits the high-water level.
func (r *Runner) advance(ctx context.Context, demand float64, res *Result) {
	r.steps++
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

// maybeTrain starts a training run when the model has never been trained and enough history
// exists, or when Retrain steps have passed since the last run.
func (r *Runner) maybeTrain(ctx context.Context) {
	box := r.model.Load()
	need := max(box.f.MinHistory(), r.cfg.LeadSteps+1)
	if len(r.history) < need || r.training.Load() {
		return
	}
	due := !box.trained || (r.cfg.Retrain > 0 && r.steps-r.lastTrainS >= r.cfg.Retrain)
	if s, ok := box.f.(forecast.FitScheduler); ok && s.WantsFit(len(r.history)) {
		due = true
	}
	if !due {
		return
	}
	r.lastTrainS = r.steps
	hist := append([]float64(nil), r.history...)
	clone := box.f.Clone()
	r.training.Store(true)
	run := func(ctx context.Context) {
		defer r.training.Store(false)
		rep, err := clone.Fit(ctx, hist)
		r.trainMu.Lock()
		defer r.trainMu.Unlock()
		if err != nil {
			r.finishErr = err
			return
		}
		r.model.Store(&modelBox{f: clone, trained: true})
		r.finished = &rep
	}
	if !r.cfg.AsyncTraining {
		run(ctx)
		return
	}
	// A background run outlives the step that started it: it must not stop when the step's
	// context ends, only on Close or when its own time budget runs out.
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.trainMu.Lock()
	r.cancelTrain = cancel
	r.trainMu.Unlock()
	r.trainWG.Add(1)
	go func() { defer r.trainWG.Done(); defer cancel(); run(tctx) }()
}

// Close stops a background training run, if any, and waits for it.
func (r *Runner) Close() {
	r.trainMu.Lock()
	if r.cancelTrain != nil {
		r.cancelTrain()
	}
	r.trainMu.Unlock()
	r.trainWG.Wait()
}

func (r *Runner) collectTraining(res *Result) {
	r.trainMu.Lock()
	defer r.trainMu.Unlock()
	if r.finished != nil {
		res.Training, r.finished = r.finished, nil
	}
	if r.finishErr != nil {
		res.TrainError, r.finishErr = r.finishErr, nil
		r.log.Warn("model training failed", "policy", r.cfg.Spec.Name, "model", r.cfg.Spec.Model, "err", res.TrainError)
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

// tickBudget is the budget policy scored at every decision rather than at every history step:
// the forecast path of the last history step, anchored at the load observed now, gives the
// demand expected at t + lead (what capacity ordered now will meet) and the largest over
// [t, t + lead + hold] (what a scale-down must still fit); each is scored against what was
// observed when its time came.
type tickBudget struct {
	lead, hold, step time.Duration
	// The path: base at t0, then path[j] at t0 + (j+1)·step.
	t0   time.Time
	base float64
	path []float64
	ok   bool // path holds a model forecast (else the path is flat at base)
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
	seen     float64 // down: the largest observation since the forecast was made
	// The priced rule's up forecasts in each shape of the path between samples (pricer.shape).
	shaped [shapes]float64
}

func (tb *tickBudget) newPath(t time.Time, base float64, pred []float64, ok bool) {
	tb.t0, tb.base, tb.ok = t, base, ok
	tb.path = append(tb.path[:0], pred...)
}

// at is the path's value at τ: linear between its points, flat past its ends.
func (tb *tickBudget) at(tau time.Time) float64 {
	if !tb.ok || len(tb.path) == 0 || !tau.After(tb.t0) {
		return tb.base
	}
	x := float64(tau.Sub(tb.t0)) / float64(tb.step)
	j := int(x) // between point j−1 (base for j = 0) and point j
	if j >= len(tb.path) {
		return tb.path[len(tb.path)-1]
	}
	lo := tb.base
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
// plus (w/dt)·(m(t) − m(t−dt)). Both it and the demand now (that mean plus half its change since
// the last tick) are clipped between the observation and the trend's nowcast; with no tick
// means a window back yet (start-up, a gap), the trend's nowcast stands.
func (tb *tickBudget) deconvolve(obs Observation, dt time.Duration, trend float64, w time.Duration) (now, tickMean float64) {
	lo, hi := math.Min(obs.Demand, trend), math.Max(obs.Demand, trend)
	clip := func(v float64) float64 { return math.Min(hi, math.Max(lo, v)) }
	past, ok := tb.tickMeanAt(obs.Time.Add(-w))
	if !ok || len(tb.tickMeans) == 0 {
		return trend, clip(trend)
	}
	tickMean = clip(past + (obs.Demand-tb.prevObs)*float64(w)/float64(dt))
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
	tb.prev, tb.prevObs, tb.prevReady = obs.Time, obs.Demand, obs.Ready
	if math.IsNaN(tickMean) {
		tickMean = d
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
	if !(exceeded && obs.Current >= r.cfg.Params.MaxReplicas) {
		r.calUp.Observe(exceeded)
		r.calDown.Observe(exceeded)
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
		_ = r.calUp.AddError(d, p.forecast)
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
		// The priced rule's forecast of the lead is read from the path between samples in the
		// shape the ticks have followed (pricer.shape), and its margin from the errors of that.
		r.pr.shaped(tb, &pf, obs.Time, d, off, upAt, upAt.Add(dt))
		fu = pf.shaped[r.pr.shape()]
		pf.forecast = fu
	}
	tb.up = append(tb.up, pf)
	tb.down = append(tb.down, pendingForecast{due: obs.Time.Add(tb.lead + tb.hold), from: obs.Time, forecast: fd, seen: math.Inf(-1)})
	b := &r.budget
	b.Exceeded, b.Observed = r.calUp.Exceeded()
	b.Alpha = r.calUp.Alpha()
	b.Errors = r.calUp.Errors()
	b.Forecast = fu
	if priced {
		r.price(obs, dt, d, off, fu, exceeded)
		return
	}
	b.Quantile = r.calUp.Upper(fu)
	b.QuantileDown = math.Max(r.calDown.Upper(fd), b.Quantile)
	b.Margin, b.Lambda = math.NaN(), math.NaN()
	if fu > 0 {
		b.Margin = b.Quantile / fu
	}
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
