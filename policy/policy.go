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
)

// DefaultDebiModel is the forecaster of the plain "debi" policy when none is configured.
const DefaultDebiModel = "holtwinters"

// Spec is a parsed policy name.
type Spec struct {
	Name      string   `json:"name"`
	Algorithm string   `json:"algorithm"`
	Model     string   `json:"model,omitempty"`
	Load      LoadMode `json:"load"`
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
	case n == "hpa" || n == "apa":
		return Spec{Name: n, Algorithm: n, Load: LoadObserved}, nil
	case n == "debi":
		return Spec{Name: n, Algorithm: "debi", Model: strings.ToLower(debiModel), Load: LoadEffective}, model(debiModel)
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
	return Spec{}, fmt.Errorf("unknown policy %q: want hpa, apa, debi, <model>-debi, <model>-hpa or evt-<model>-hpa with a model in %s",
		name, strings.Join(forecast.Names(), ", "))
}

// Config is everything a Runner needs.
type Config struct {
	Spec    Spec
	Params  scaling.Params
	Metrics scaling.MetricsPolicy
	// Request is the CPU request of one pod, R, in cores.
	Request float64
	// Step is the control interval: one history point per step.
	Step time.Duration
	// LeadSteps is the forecast horizon h in steps (at least 1).
	LeadSteps int
	// History is how many steps of demand the models and the EVT fit see (760).
	History int
	// Retrain is the number of steps between training runs (0: train once).
	Retrain int
	Model   forecast.Config
	POT     forecast.POTConfig
	// AsyncTraining trains a clone of the model in the background and swaps it in when done
	// (live); otherwise training runs inside Step (backtest, deterministic).
	AsyncTraining bool
	Logger        *slog.Logger
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
		POT:       forecast.DefaultPOTConfig(),
	}
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
	}
	if err := c.Params.Validate(); err != nil {
		return err
	}
	if c.Spec.Load == LoadEffective {
		if err := c.POT.Validate(); err != nil {
			return fmt.Errorf("evt: %w", err)
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
	// DemandForecast is the forecast of D(t+h) in cores (NaN without a model or before training).
	DemandForecast float64 `json:"demand_forecast"`
	// HighWater is the EVT high-water demand z in cores (NaN unless the policy uses EVT).
	HighWater              float64 `json:"high_water"`
	W1, W2, W3, W, WindowW float64
	POT                    *forecast.POTResult `json:"pot,omitempty"`
	Decision               scaling.Decision    `json:"decision"`
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
	cfg Config
	alg scaling.Algorithm
	log *slog.Logger

	samples []scaling.Sample // raw samples, pruned to the longest window
	history []float64        // one stabilised demand value per step, at most keep
	keep    int              // history length: cfg.History, or more when the model needs it
	scratch []float64
	hist2   []float64 // EVT and training copy
	pred    []float64

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
	r := &Runner{cfg: cfg, alg: alg, log: log, pred: make([]float64, cfg.LeadSteps), lastTrainS: -1, keep: cfg.History}
	if cfg.Spec.Model != "" {
		f, err := forecast.New(cfg.Spec.Model, cfg.Model)
		if err != nil {
			return nil, err
		}
		r.model.Store(&modelBox{f: f})
		// A seasonal model needs whole seasons: keep what it needs, while the EVT fit still sees
		// the last cfg.History steps only.
		r.keep = max(r.keep, f.MinHistory()+cfg.LeadSteps)
	}
	return r, nil
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
// returns an error wrapping ErrNoData with the result.
func (r *Runner) Step(ctx context.Context, obs Observation) (Result, error) {
	r.steps++
	res := Result{Time: obs.Time, DemandForecast: math.NaN(), HighWater: math.NaN(),
		W2: math.NaN(), W3: math.NaN(), WindowW: math.NaN()}
	r.samples = append(r.samples, scaling.Sample{Time: obs.Time, Value: obs.Demand})
	keep := max(r.cfg.Metrics.Window, r.cfg.Params.Window)
	r.samples = pruneSamples(r.samples, obs.Time.Add(-keep))

	demand, err := r.cfg.Metrics.Stabilize(r.samples, obs.Time, r.scratch[:0])
	if cap(r.scratch) < len(r.samples) {
		r.scratch = make([]float64, 0, 2*len(r.samples))
	}
	if err != nil {
		res.Demand, res.W1, res.W = math.NaN(), math.NaN(), math.NaN()
		res.Decision = scaling.Decision{Replicas: obs.Current, Reason: scaling.ReasonNoLoad}
		r.collectTraining(&res)
		return res, fmt.Errorf("%w: %w", ErrNoData, err)
	}
	res.Demand = demand
	r.history = append(r.history, demand)
	if len(r.history) > r.keep {
		r.history = append(r.history[:0], r.history[len(r.history)-r.keep:]...)
	}

	capacity := float64(max(obs.Current, 1)) * r.cfg.Request
	res.W1 = demand / capacity
	if r.cfg.Params.Window > 0 {
		res.WindowW = meanSince(r.samples, obs.Time.Add(-r.cfg.Params.Window)) / capacity
	}

	if box := r.model.Load(); box != nil {
		r.maybeTrain(ctx)
		r.collectTraining(&res)
		if box = r.model.Load(); box.trained {
			if err := box.f.Predict(r.history, r.pred); err != nil {
				res.ForecastError = err
			} else {
				f := r.pred[len(r.pred)-1]
				if f < 0 || math.IsNaN(f) {
					f = math.Max(0, f) // a negative demand forecast means "none"
				}
				if !math.IsInf(f, 0) && !math.IsNaN(f) {
					res.DemandForecast = f
					res.W2 = f / capacity
				}
			}
		} else {
			res.ForecastError = errors.New("model not trained yet")
		}
	}
	if r.cfg.Spec.Load == LoadEffective {
		evtHist := r.history
		if len(evtHist) > r.cfg.History {
			evtHist = evtHist[len(evtHist)-r.cfg.History:]
		}
		pot, err := forecast.HighWater(evtHist, r.cfg.POT)
		if err == nil {
			res.POT = &pot
			res.HighWater = pot.Z
			res.W3 = pot.Z / capacity
		}
	}
	switch r.cfg.Spec.Load {
	case LoadObserved:
		res.W = res.W1
	case LoadForecast:
		res.W = scaling.ForecastLoad(res.W1, res.W2)
	default:
		res.W = scaling.EffectiveLoad(res.W1, res.W2, res.W3)
	}
	res.Decision = r.alg.Recommend(scaling.Input{Time: obs.Time, Current: obs.Current, Ready: obs.Ready, W: res.W, WindowW: res.WindowW})
	return res, nil
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
