// Package backtest replays workload traces through scaling policies (METHOD §7): a simulated
// deployment whose new pods become ready after a start-up delay serves the trace's demand, each
// policy's policy.Runner decides the replicas step by step from data up to that step only, and
// the run is scored on cost, utilization and overload. The runners are the very ones the live
// exporter drives, so a backtest result speaks for the live system.
package backtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// Options are the parameters of a backtest; the zero value is not usable, start from
// DefaultOptions.
type Options struct {
	// Policies to run, by policy name (see policy.Parse).
	Policies []string `json:"policies"`
	// DebiModel is the forecaster of the "debi" policy.
	DebiModel string `json:"debi_model"`
	// Request is R, the CPU request of one pod in cores.
	Request float64 `json:"request"`
	// Params are the scaling parameters shared by every policy (the HPA target is replaced
	// during the sweep).
	Params scaling.Params `json:"scaling"`
	// Metrics is the W1 stabilisation policy.
	Metrics scaling.MetricsPolicy `json:"metrics"`
	// Step is the simulated time of one trace sample.
	Step time.Duration `json:"step"`
	// PeakUtilization sets the demand scale: the trace's 99th percentile maps to this fraction of
	// MaxReplicas·Request (0.6). Scale, when positive, overrides it.
	PeakUtilization float64 `json:"peak_utilization"`
	Scale           float64 `json:"scale,omitempty"`
	// StartupDelay is the number of steps a new pod takes to become ready.
	StartupDelay int `json:"startup_delay"`
	// DecisionDelay is the number of extra steps before a decision reaches the deployment (0:
	// the next step). The closed-loop test sets it to the delay its live pipeline measured.
	DecisionDelay int `json:"decision_delay,omitempty"`
	// Warmup steps train models and are not scored.
	Warmup int `json:"warmup"`
	// SLAUtilization is u_sla: a step is overloaded when demand exceeds u_sla·Nr·R.
	SLAUtilization float64 `json:"sla_utilization"`
	// LeadSteps is the forecast horizon h.
	LeadSteps int `json:"lead_steps"`
	// History is the number of steps the models and the EVT fit see.
	History int `json:"history"`
	// Retrain is the number of steps between training runs.
	Retrain int                `json:"retrain"`
	Model   forecast.Config    `json:"model"`
	POT     forecast.POTConfig `json:"evt"`
	// SweepTargets are the HPA targets of the cost-at-equal-overload frontier.
	SweepTargets []float64 `json:"sweep_targets"`
	// MaxSteps, when positive, truncates every trace (for quick runs and tests).
	MaxSteps int `json:"max_steps,omitempty"`
	// Parallel is the number of runs at once (default GOMAXPROCS).
	Parallel int `json:"-"`
	// Progress, if set, is called after each finished run.
	Progress func(done, total int) `json:"-"`
	// KeepSeries keeps each run's per-step series for plots.
	KeepSeries bool `json:"-"`
}

// DefaultOptions are the paper's parameters (METHOD §7).
func DefaultOptions() Options {
	return Options{
		Policies:        []string{"hpa", "apa", "holtwinters-hpa", "evt-holtwinters-hpa", "debi"},
		DebiModel:       policy.DefaultDebiModel,
		Request:         5,
		Params:          scaling.DefaultParams(),
		Metrics:         scaling.DefaultMetricsPolicy(),
		Step:            time.Minute,
		PeakUtilization: 0.6,
		StartupDelay:    1,
		Warmup:          760,
		SLAUtilization:  0.9,
		LeadSteps:       1,
		History:         760,
		Retrain:         120,
		POT:             forecast.DefaultPOTConfig(),
		SweepTargets:    []float64{0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9},
	}
}

// Validate checks the options; errors name the flag-style field.
func (o Options) Validate() error {
	switch {
	case len(o.Policies) == 0:
		return errors.New("policies: at least one policy is needed")
	case !(o.Request > 0) || math.IsInf(o.Request, 0):
		return fmt.Errorf("request: must be a positive number of cores, got %v", o.Request)
	case o.Step <= 0:
		return fmt.Errorf("step: must be positive, got %v", o.Step)
	case o.Scale < 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0):
		return fmt.Errorf("scale: must be a non-negative number, got %v", o.Scale)
	case o.Scale == 0 && (!(o.PeakUtilization > 0) || o.PeakUtilization > 10):
		return fmt.Errorf("peak-utilization: must be in (0, 10], got %v", o.PeakUtilization)
	case o.StartupDelay < 0:
		return fmt.Errorf("startup-delay: must not be negative, got %d", o.StartupDelay)
	case o.DecisionDelay < 0:
		return fmt.Errorf("decision-delay: must not be negative, got %d", o.DecisionDelay)
	case o.Warmup < 0:
		return fmt.Errorf("warmup: must not be negative, got %d", o.Warmup)
	case !(o.SLAUtilization > 0) || o.SLAUtilization > 1:
		return fmt.Errorf("sla-utilization: must be in (0, 1], got %v", o.SLAUtilization)
	case o.LeadSteps < 1:
		return fmt.Errorf("lead-steps: must be at least 1, got %d", o.LeadSteps)
	case o.History < 2:
		return fmt.Errorf("history: must be at least 2, got %d", o.History)
	case o.Retrain < 0:
		return fmt.Errorf("retrain: must not be negative, got %d", o.Retrain)
	case o.MaxSteps < 0:
		return fmt.Errorf("max-steps: must not be negative, got %d", o.MaxSteps)
	}
	for _, t := range o.SweepTargets {
		if !(t > 0) || t > 1 {
			return fmt.Errorf("sweep: target %v is not in (0, 1]", t)
		}
	}
	if err := o.Params.Validate(); err != nil {
		return err
	}
	if err := o.POT.Validate(); err != nil {
		return fmt.Errorf("evt.%w", err)
	}
	for _, p := range o.Policies {
		if _, err := policy.Parse(p, o.DebiModel); err != nil {
			return fmt.Errorf("policies: %w", err)
		}
	}
	return nil
}

// Metrics are one run's scores over the scored steps.
type Metrics struct {
	Policy string `json:"policy"`
	// Cost is S = R·Σ N(t), in core-steps (eq. 19).
	Cost float64 `json:"cost"`
	// CostRatio is Cost over the hpa policy's cost on the same trace (NaN without hpa).
	CostRatio float64 `json:"cost_ratio"`
	// FrontierRatio is Cost over the cost of the HPA-target envelope at the same overload
	// fraction; below 1 beats every fixed HPA target. FrontierClamped says the overload fraction
	// lay outside the envelope and its nearest end was used.
	FrontierRatio   float64 `json:"frontier_ratio"`
	FrontierClamped bool    `json:"frontier_clamped"`
	// Utilization is Σ min(D, Nr·R) / Σ N·R.
	Utilization float64 `json:"utilization"`
	// OverloadSteps count steps with D > u_sla·Nr·R; OverloadFraction is their share.
	OverloadSteps    int     `json:"overload_steps"`
	OverloadFraction float64 `json:"overload_fraction"`
	// Unserved is Σ max(0, D − Nr·R) in core-steps.
	Unserved float64 `json:"unserved"`
	// HotSteps count steps whose utilization D/(Nr·R) exceeded U_upper.
	HotSteps int `json:"hot_steps"`
	// ScaleActions count the steps at which the replica count changed.
	ScaleActions int `json:"scale_actions"`
	// MeanReplicas is the mean of N(t).
	MeanReplicas float64 `json:"mean_replicas"`
	// TrainSeconds is the total model training time; DecideSeconds the rest of the policy's time.
	TrainSeconds  float64 `json:"train_seconds"`
	DecideSeconds float64 `json:"decide_seconds"`
	// Trainings counts training runs; TrainStops counts their stop reasons.
	Trainings  int            `json:"trainings"`
	TrainStops map[string]int `json:"train_stops,omitempty"`
	// Steps is the number of scored steps.
	Steps int `json:"steps"`
}

// Series are a run's per-step values (with Options.KeepSeries), for plots.
type Series struct {
	Demand   []float64 `json:"-"`
	Replicas []int32   `json:"-"`
}

// Run is one trace × policy result.
type Run struct {
	Metrics
	Series *Series `json:"-"`
}

// FrontierPoint is one HPA target of the sweep.
type FrontierPoint struct {
	Target           float64 `json:"target"`
	Cost             float64 `json:"cost"`
	OverloadFraction float64 `json:"overload_fraction"`
	OnEnvelope       bool    `json:"on_envelope"`
}

// TraceResult holds every policy's run on one trace.
type TraceResult struct {
	Trace       string          `json:"trace"`
	Class       string          `json:"class,omitempty"`
	Steps       int             `json:"steps"`
	Scale       float64         `json:"scale"`
	Runs        []Run           `json:"runs"`
	Frontier    []FrontierPoint `json:"frontier"`
	SweepFailed string          `json:"sweep_error,omitempty"`
}

// Report is a whole backtest.
type Report struct {
	Options Options       `json:"parameters"`
	Traces  []TraceResult `json:"traces"`
}

// Scale returns the demand scale for a trace: its 99th percentile maps to
// PeakUtilization·MaxReplicas·Request, unless Options.Scale is set.
func (o Options) ScaleFor(values []float64) (float64, error) {
	if o.Scale > 0 {
		return o.Scale, nil
	}
	s := slices.Clone(values)
	slices.Sort(s)
	p99 := s[int(math.Ceil(0.99*float64(len(s))))-1]
	if !(p99 > 0) {
		return 0, errors.New("the 99th percentile is 0: cannot scale an all-idle trace (set --scale)")
	}
	return o.PeakUtilization * float64(o.Params.MaxReplicas) * o.Request / p99, nil
}

type job struct {
	trace  int
	policy string
	target float64 // for sweep runs: the HPA target; 0 otherwise
}

// RunTraces backtests every policy on every trace, plus the HPA target sweep.
func RunTraces(ctx context.Context, traces []trace.Trace, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Options: o, Traces: make([]TraceResult, len(traces))}
	demands := make([][]float64, len(traces))
	for i, t := range traces {
		vals := t.Values
		if o.MaxSteps > 0 && len(vals) > o.MaxSteps {
			vals = vals[:o.MaxSteps]
		}
		if len(vals) < o.Warmup+10 {
			return nil, fmt.Errorf("trace %s: %d steps; need more than warmup (%d) + 10 to score anything", t.Name, len(vals), o.Warmup)
		}
		scale, err := o.ScaleFor(vals)
		if err != nil {
			return nil, fmt.Errorf("trace %s: %w", t.Name, err)
		}
		d := make([]float64, len(vals))
		for j, v := range vals {
			d[j] = v * scale
		}
		demands[i] = d
		rep.Traces[i] = TraceResult{Trace: t.Name, Class: t.Class, Steps: len(vals), Scale: scale}
	}
	var jobs []job
	for i := range traces {
		for _, p := range o.Policies {
			jobs = append(jobs, job{trace: i, policy: p})
		}
		for _, tg := range o.SweepTargets {
			jobs = append(jobs, job{trace: i, policy: "hpa", target: tg})
		}
	}
	results := make([]Run, len(jobs))
	errs := make([]error, len(jobs))
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	var (
		wg   sync.WaitGroup
		next = make(chan int)
		mu   sync.Mutex
		done int
	)
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				j := jobs[k]
				po := o
				if j.target > 0 {
					po.Params.Target = j.target
					po.KeepSeries = false
				}
				if po.Model.Season == 0 {
					// One day at the trace's resolution (288 five-minute or 1,440 one-minute steps).
					po.Model.Season = 1440 / max(traces[j.trace].StepMinutes, 1)
				}
				results[k], errs[k] = Simulate(ctx, demands[j.trace], j.policy, po)
				mu.Lock()
				done++
				if o.Progress != nil {
					o.Progress(done, len(jobs))
				}
				mu.Unlock()
			}
		}()
	}
	for k := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- k
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for k, j := range jobs {
		tr := &rep.Traces[j.trace]
		if errs[k] != nil {
			if j.target > 0 {
				tr.SweepFailed = errs[k].Error()
				continue
			}
			return nil, fmt.Errorf("trace %s, policy %s: %w", tr.Trace, j.policy, errs[k])
		}
		if j.target > 0 {
			tr.Frontier = append(tr.Frontier, FrontierPoint{Target: j.target, Cost: results[k].Cost, OverloadFraction: results[k].OverloadFraction})
			continue
		}
		tr.Runs = append(tr.Runs, results[k])
	}
	for i := range rep.Traces {
		finishTrace(&rep.Traces[i])
	}
	return rep, nil
}

// finishTrace fills the ratios to hpa and to the frontier.
func finishTrace(tr *TraceResult) {
	hpaCost := math.NaN()
	for _, r := range tr.Runs {
		if r.Policy == "hpa" {
			hpaCost = r.Cost
		}
	}
	env := Envelope(tr.Frontier)
	for i := range tr.Frontier {
		for _, e := range env {
			if e == tr.Frontier[i] {
				tr.Frontier[i].OnEnvelope = true
			}
		}
	}
	for i := range tr.Runs {
		r := &tr.Runs[i]
		r.CostRatio = r.Cost / hpaCost
		if len(env) > 0 {
			c, clamped := EnvelopeCost(env, r.OverloadFraction)
			r.FrontierRatio, r.FrontierClamped = r.Cost/c, clamped
		} else {
			r.FrontierRatio = math.NaN()
		}
	}
}

// Envelope returns the lower envelope of (overload fraction, cost) of the sweep: the points that
// no other point beats on both, sorted by overload fraction (cost then falls along it).
func Envelope(pts []FrontierPoint) []FrontierPoint {
	s := slices.Clone(pts)
	sort.Slice(s, func(i, j int) bool {
		if s[i].OverloadFraction != s[j].OverloadFraction {
			return s[i].OverloadFraction < s[j].OverloadFraction
		}
		return s[i].Cost < s[j].Cost
	})
	var env []FrontierPoint
	best := math.Inf(1)
	for _, p := range s {
		if p.Cost < best {
			env = append(env, p)
			best = p.Cost
		}
	}
	return env
}

// EnvelopeCost interpolates the envelope's cost linearly at overload fraction x. Outside the
// envelope it returns the cost of the nearest end and clamped=true.
func EnvelopeCost(env []FrontierPoint, x float64) (cost float64, clamped bool) {
	if x < env[0].OverloadFraction {
		return env[0].Cost, true
	}
	last := env[len(env)-1]
	if x > last.OverloadFraction {
		return last.Cost, true
	}
	for i := 1; i < len(env); i++ {
		a, b := env[i-1], env[i]
		if x <= b.OverloadFraction {
			if b.OverloadFraction == a.OverloadFraction {
				return math.Min(a.Cost, b.Cost), false
			}
			f := (x - a.OverloadFraction) / (b.OverloadFraction - a.OverloadFraction)
			return a.Cost + f*(b.Cost-a.Cost), false
		}
	}
	return env[0].Cost, false
}

// Simulate runs one policy over one demand series (cores per step) and scores it. Every policy
// starts at the size the HPA target gives the first demand, all pods ready.
func Simulate(ctx context.Context, demand []float64, policyName string, o Options) (Run, error) {
	if len(demand) == 0 {
		return Run{}, errors.New("empty demand series")
	}
	return SimulateFrom(ctx, demand, policyName, o, initialReplicas(demand[0], o))
}

// SimulateFrom is Simulate from a given initial size (the closed-loop test starts where its
// live deployment started).
func SimulateFrom(ctx context.Context, demand []float64, policyName string, o Options, initial int32) (Run, error) {
	spec, err := policy.Parse(policyName, o.DebiModel)
	if err != nil {
		return Run{}, err
	}
	cfg := policy.DefaultConfig(spec)
	cfg.Params, cfg.Metrics, cfg.Request, cfg.Step = o.Params, o.Metrics, o.Request, o.Step
	cfg.LeadSteps, cfg.History, cfg.Retrain, cfg.Model, cfg.POT = o.LeadSteps, o.History, o.Retrain, o.Model, o.POT
	runner, err := policy.New(cfg)
	if err != nil {
		return Run{}, err
	}
	run := Run{Metrics: Metrics{Policy: spec.Name}}
	if o.KeepSeries {
		run.Series = &Series{Demand: demand, Replicas: make([]int32, len(demand))}
	}
	c := newCluster(initial, o.StartupDelay)
	start := time.Unix(0, 0).UTC()
	var train time.Duration
	var total time.Duration
	m := &run.Metrics
	var served, capacity, replicaSum float64
	pending := make([]int32, 0, o.DecisionDelay+1) // decisions on their way to the deployment
	for t, d := range demand {
		if err := ctx.Err(); err != nil {
			return Run{}, err
		}
		n, nr := c.spec, c.ready(t)
		if run.Series != nil {
			run.Series.Replicas[t] = n
		}
		if t >= o.Warmup {
			m.Steps++
			cap := float64(nr) * o.Request
			m.Cost += o.Request * float64(n)
			replicaSum += float64(n)
			served += math.Min(d, cap)
			capacity += float64(n) * o.Request
			if d > o.SLAUtilization*cap {
				m.OverloadSteps++
			}
			m.Unserved += math.Max(0, d-cap)
			if nr == 0 || d/cap > o.Params.Upper {
				m.HotSteps++
			}
		}
		t0 := time.Now()
		res, err := runner.Step(ctx, policy.Observation{Time: start.Add(time.Duration(t) * o.Step), Demand: d, Current: n, Ready: nr})
		total += time.Since(t0)
		if err != nil && !errors.Is(err, policy.ErrNoData) {
			return Run{}, err
		}
		if res.Training != nil {
			train += res.Training.Duration
			m.Trainings++
			if m.TrainStops == nil {
				m.TrainStops = map[string]int{}
			}
			m.TrainStops[res.Training.StopReason]++
		}
		if res.TrainError != nil {
			return Run{}, fmt.Errorf("step %d: training %s: %w", t, spec.Model, res.TrainError)
		}
		pending = append(pending, res.Decision.Replicas)
		if len(pending) <= o.DecisionDelay {
			continue // nothing has arrived yet: the size stays
		}
		next := pending[0]
		pending = append(pending[:0], pending[1:]...)
		if next != n && t >= o.Warmup {
			m.ScaleActions++
		}
		c.scale(t, next)
	}
	if m.Steps > 0 {
		m.OverloadFraction = float64(m.OverloadSteps) / float64(m.Steps)
		m.MeanReplicas = replicaSum / float64(m.Steps)
	}
	if capacity > 0 {
		m.Utilization = served / capacity
	}
	m.TrainSeconds = train.Seconds()
	m.DecideSeconds = (total - train).Seconds()
	return run, nil
}

// initialReplicas starts every policy at the size the HPA target would give the first demand,
// all pods ready, so no policy starts out of breath.
func initialReplicas(d0 float64, o Options) int32 {
	n := int32(math.Ceil(d0 / (o.Params.Target * o.Request)))
	return min(max(n, o.Params.MinReplicas), o.Params.MaxReplicas)
}

// cluster simulates a deployment: pods added at step t become ready at t+1+delay (they are paid
// for from t+1); removed pods go at once, newest (not yet ready) first.
type cluster struct {
	spec    int32
	readyAt []int // ready step of each pod, in creation order
	delay   int
}

func newCluster(n int32, delay int) *cluster {
	return &cluster{spec: n, readyAt: make([]int, n), delay: delay}
}

func (c *cluster) ready(t int) int32 {
	var n int32
	for _, r := range c.readyAt {
		if r <= t {
			n++
		}
	}
	return n
}

func (c *cluster) scale(t int, n int32) {
	if n < 0 {
		n = 0
	}
	for int32(len(c.readyAt)) < n {
		c.readyAt = append(c.readyAt, t+1+c.delay)
	}
	if int32(len(c.readyAt)) > n {
		c.readyAt = c.readyAt[:n]
	}
	c.spec = n
}
