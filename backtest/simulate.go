package backtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Simulate runs one policy over one world and scores it. Every policy starts at the size the
// HPA target gives the first demand, all pods ready.
func Simulate(ctx context.Context, w *World, policyName string, o Options) (Run, error) {
	return SimulateFrom(ctx, w, policyName, o, initialReplicas(w.peak()[0], o))
}

// runnerConfig is the runner of a policy on a trace: the configured policy's own (Options.Runner,
// the what-if), or one built from the options with the trace's sample period as its step.
func runnerConfig(spec policy.Spec, w *World, o Options) policy.Config {
	if r := o.Runner; r != nil && strings.EqualFold(r.Spec.Name, spec.Name) {
		cfg := *r
		cfg.Request = o.Request
		cfg.AsyncTraining, cfg.Unapplied, cfg.Logger = false, false, nil
		return cfg
	}
	cfg := policy.DefaultConfig(spec)
	cfg.Params, cfg.Metrics, cfg.Request, cfg.Step = o.Params, o.Metrics, o.Request, w.Period
	cfg.History, cfg.Model, cfg.POT, cfg.Season, cfg.Calibration = o.History, o.Model, o.POT, o.Season, o.Calibration
	cfg.Params.Budget.SLAUtilization = o.SLAUtilization
	cfg.LeadTime, cfg.ObservationWindow = o.lead(), o.MetricWindow
	cfg.LeadSteps = o.Horizon
	if cfg.LeadSteps == 0 {
		cfg.LeadSteps = policy.Horizon(o.lead(), w.Period)
	}
	cfg.Retrain = 0
	if o.Retrain > 0 {
		cfg.Retrain = max(1, int(o.Retrain/w.Period))
	}
	if spec.Model != "" {
		cfg.Fallback = o.Fallback
	}
	// At min_replicas 0 the trace's metrics wake the workload: a trace is a request rate or a
	// queue measured outside the pods.
	cfg.Wake, cfg.Activation = o.Params.MinReplicas == 0, o.Activation*o.Request
	return cfg
}

// decider is one tick's decision: a policy runner, or the oracle.
type decider func(ctx context.Context, i int, obs policy.Observation) (policy.Result, error)

// SimulateFrom is Simulate from a given initial size (the closed-loop test starts where its
// live deployment started).
func SimulateFrom(ctx context.Context, w *World, policyName string, o Options, initial int32) (Run, error) {
	run := Run{Metrics: Metrics{Policy: strings.ToLower(policyName), ForecastCoverage: math.NaN(), BudgetHeadroom: math.NaN(), BudgetLevel: math.NaN()}}
	var decide decider
	hasModel := false
	var now time.Duration // the simulated time, for a clairvoyant forecaster
	switch {
	case strings.EqualFold(policyName, OraclePolicy):
		decide = oracle(w, o)
	case strings.EqualFold(policyName, PricedOraclePolicy):
		var err error
		if decide, err = pricedOracle(w, o, o.Calibration.Budget); err != nil {
			return Run{}, err
		}
	default:
		var spec policy.Spec
		var fc forecast.Forecaster
		d, clair, err := ParseClairvoyant(policyName)
		switch {
		case err != nil:
			return Run{}, err
		case clair && w.multi():
			err = fmt.Errorf("policy %s: a clairvoyant forecaster runs on one-metric traces only", policyName)
		case clair:
			spec, fc, err = clairvoyantConfig(policyName, d, w, &now)
		default:
			spec, err = o.parse(policyName)
		}
		if err != nil {
			return Run{}, err
		}
		run.Policy = spec.Name
		if w.multi() {
			decide, err = multiDecider(spec, w, o)
			if err != nil {
				return Run{}, err
			}
			return simulate(ctx, w, run.Policy, o, initial, decide, spec.Model != "", 0, nil)
		}
		cfg := runnerConfig(spec, w, o)
		cfg.Forecaster = fc
		runner, err := policy.New(cfg)
		if err != nil {
			return Run{}, err
		}
		defer runner.Close()
		if spec.Model != "" {
			hasModel = true
			run.ModelHistory, _ = runner.ModelHistory()
		}
		decide = func(ctx context.Context, i int, obs policy.Observation) (policy.Result, error) {
			now = time.Duration(i) * w.Tick // a clairvoyant forecaster's clock
			return runner.Step(ctx, obs)
		}
	}
	return simulate(ctx, w, run.Policy, o, initial, decide, hasModel, run.ModelHistory, nil)
}

// multiDecider runs the policy spec on every metric of w with policy.Multi: one runner per
// metric, each on its own demand in cores of R (so each with the request R), the decision the
// largest count, the budget calibrated jointly unless Options.MetricCalibration says per metric.
// Its result is the deciding metric's (the first metric's when none decided) with the
// policy's decision, the training runs of every metric.
func multiDecider(spec policy.Spec, w *World, o Options) (decider, error) {
	cfgs := make([]policy.Config, len(w.Metrics))
	for k := range cfgs {
		cfgs[k] = runnerConfig(spec, w, o)
	}
	m, err := policy.NewMulti(cfgs, w.Metrics)
	if err != nil {
		return nil, err
	}
	m.SetJointCalibration(o.MetricCalibration != CalibrationPerMetric)
	demands := make([]float64, len(w.Metrics))
	return func(ctx context.Context, i int, obs policy.Observation) (policy.Result, error) {
		for k := range demands {
			demands[k] = w.MObs[k][i]
		}
		mr, err := m.Step(ctx, obs.Time, demands, obs.Current, obs.Ready)
		at := max(mr.Metric, 0)
		res := mr.Results[at]
		res.Decision = mr.Decision
		res.Training, res.TrainError = nil, nil
		for _, r := range mr.Results {
			if r.TrainError != nil && res.TrainError == nil {
				res.TrainError = r.TrainError
			}
			if r.Training == nil {
				continue
			}
			if res.Training == nil {
				t := *r.Training
				res.Training = &t
				continue
			}
			res.Training.Duration += r.Training.Duration
		}
		return res, err
	}, nil
}

// simulate runs decide over w from the initial size and scores it. ready, when set, gives the
// pods serving at each tick instead of the cluster's model (the actual row's recorded ready
// counts).
func simulate(ctx context.Context, w *World, name string, o Options, initial int32, decide decider, hasModel bool, modelHistory int, ready func(int) int32) (Run, error) {
	run := Run{Metrics: Metrics{Policy: name, ForecastCoverage: math.NaN(), BudgetHeadroom: math.NaN(), BudgetLevel: math.NaN(), BandMissChance: math.NaN(), ModelHistory: modelHistory}}
	n := len(w.Inst)
	if o.KeepSeries {
		run.Series = &Series{Tick: w.Tick, Demand: w.peak(), Replicas: make([]int32, n), Ready: make([]int32, n)}
	}
	m := &run.Metrics
	s := newTally(w, o, hasModel, m)
	r := &rollout{c: newCluster(initial, o.StartupDelay, o.StartupSpread), delay: o.DecisionDelay}
	start := time.Unix(0, 0).UTC()
	var train, total time.Duration
	for i := range n {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return Run{}, err
			}
		}
		t := time.Duration(i) * w.Tick
		scored := i >= w.Warm
		if k := r.arrive(t); scored {
			m.ScaleActions += k
		}
		t0 := time.Now()
		res, err := decide(ctx, i, policy.Observation{Time: start.Add(t), Demand: w.Obs[i], Current: r.c.spec, Ready: r.c.ready(t)})
		total += time.Since(t0)
		if err != nil && !errors.Is(err, policy.ErrNoData) {
			return Run{}, err
		}
		train += countTraining(m, res)
		if res.TrainError != nil {
			return Run{}, fmt.Errorf("at %v: training: %w", t, res.TrainError)
		}
		if k := r.send(t, res.Decision.Replicas); scored {
			m.ScaleActions += k
		}
		nSpec, nr := r.c.spec, r.c.ready(t)
		if ready != nil {
			nr = ready(i)
		}
		if run.Series != nil {
			run.Series.Replicas[i], run.Series.Ready[i] = nSpec, nr
			run.Series.Startups = r.c.startups(run.Series.Startups, t)
		}
		if scored {
			s.add(i, nSpec, nr, res)
		}
		s.lastNr = nr
	}
	s.score()
	m.TrainSeconds = train.Seconds()
	m.DecideSeconds = (total - train).Seconds()
	return run, nil
}

// countTraining counts the training run of res, if it made one, in m (Trainings, TrainStops)
// and returns its duration.
func countTraining(m *Metrics, res policy.Result) time.Duration {
	if res.Training == nil {
		return 0
	}
	m.Trainings++
	if m.TrainStops == nil {
		m.TrainStops = map[string]int{}
	}
	m.TrainStops[res.Training.StopReason]++
	return res.Training.Duration
}

// rollout is the way from a decision to the deployment: the cluster and the decisions on their
// way to it for the decision delay.
type rollout struct {
	c       *cluster
	delay   time.Duration
	pending []delayedOrder
}

// delayedOrder is a decision for n replicas that reaches the deployment at at.
type delayedOrder struct {
	at time.Duration
	n  int32
}

// arrive applies the decisions that reach the deployment by t and returns how many of them
// changed its size.
func (r *rollout) arrive(t time.Duration) int {
	changed := 0
	for len(r.pending) > 0 && r.pending[0].at <= t {
		if r.c.scale(t, r.pending[0].n) {
			changed++
		}
		r.pending = r.pending[1:]
	}
	return changed
}

// send sends a decision for n replicas made at t: without a decision delay it is applied at
// once, and send returns 1 when it changed the size (else 0); with one it is on its way.
func (r *rollout) send(t time.Duration, n int32) int {
	if r.delay != 0 {
		r.pending = append(r.pending, delayedOrder{t + r.delay, n})
		return 0
	}
	if r.c.scale(t, n) {
		return 1
	}
	return 0
}

// tally adds up a run's figures over the scored ticks (add) and turns them into its Metrics
// (score).
type tally struct {
	w        *World
	o        Options
	hasModel bool
	m        *Metrics
	peak     []float64
	tick     float64 // seconds
	// served is ∫min(D, Nr·R), capacity ∫N·R; replicaSum Σ N; overTicks and forecastTicks the
	// ticks overloaded and with a forecast W2.
	served, capacity, replicaSum, overTicks, forecastTicks float64
	// under and over count the ticks under- and over-provisioned against the need,
	// underPods and overPods add up the pods short and in excess.
	under, over, underPods, overPods float64
	// zero and cold count the ticks at zero replicas and those overloaded with no pod ready.
	zero, cold float64
	// overTime adds up the share of each scored tick's interval overloaded (Metrics.OverloadTime),
	// read against lastNr, the pods ready after the tick before's decision (-1: none yet).
	overTime float64
	lastNr   int32
	// marginSum and levelSum add up the budget's headroom in pods and its level α over the
	// marginN ticks that had a budget quantile.
	marginSum, levelSum float64
	marginN             int
	// avoidable adds up the scored ticks' avoidable overload (a tick's count, or its interval's
	// share beyond max_replicas'); run is the current episode's ticks, episodes and longest the
	// episodes ended and the longest of them (Metrics.OverloadEpisodes).
	avoidable              float64
	run, episodes, longest int
	// alerts replays debi's burn-rate alerts (nil without a budget).
	alerts *burnReplay
	// metricTicks and metricAlone count, on a world with several metrics, each metric's
	// overloaded ticks and those it was the only overloaded metric at (nil for one metric).
	metricTicks, metricAlone []int
}

func newTally(w *World, o Options, hasModel bool, m *Metrics) *tally {
	s := &tally{w: w, o: o, hasModel: hasModel, m: m, peak: w.peak(), tick: w.Tick.Seconds(), lastNr: -1,
		alerts: newBurnReplay(o.Calibration.Budget, w.Tick, o.lead())}
	if w.multi() {
		s.metricTicks, s.metricAlone = make([]int, len(w.Metrics)), make([]int, len(w.Metrics))
	}
	return s
}

// add scores scored tick i with nSpec pods paid for, nr serving, and the policy's result res.
func (s *tally) add(i int, nSpec, nr int32, res policy.Result) {
	o, m := &s.o, s.m
	d := s.peak[i] // every metric's capacity is R: the largest demand decides overload and need
	m.Ticks++
	cp := float64(nr) * o.Request
	s.replicaSum += float64(nSpec)
	s.served += math.Min(d, cp)
	s.capacity += float64(nSpec) * o.Request
	over := scaling.Overloaded(d, o.SLAUtilization, nr, o.Request)
	if over {
		s.overTicks++
		if nr == 0 {
			s.cold++
		}
	}
	if nSpec == 0 {
		s.zero++
	}
	share := s.w.overShare(i, s.lastNr, nr, o.SLAUtilization*o.Request, o.Demand == DemandStep)
	s.overTime += share
	s.episode(i, d, nr, share)
	if s.alerts != nil {
		x := share
		if o.Overload != OverloadTime {
			x = 0
			if over {
				x = 1
			}
		}
		s.alerts.add(x)
	}
	if s.metricTicks != nil {
		over, last := 0, 0
		for k := range s.w.MInst {
			if scaling.Overloaded(s.w.MInst[k][i], o.SLAUtilization, nr, o.Request) {
				s.metricTicks[k]++
				over, last = over+1, k
			}
		}
		if over == 1 {
			s.metricAlone[last]++
		}
	}
	m.Unserved += math.Max(0, d-cp) * s.tick
	if s.hasModel && !math.IsNaN(res.W2) {
		s.forecastTicks++
	}
	if b := res.Budget; b != nil && !math.IsNaN(b.Quantile) && !math.IsNaN(b.Forecast) {
		s.marginSum += (b.Quantile - b.Forecast) / (o.SLAUtilization * o.Request)
		s.levelSum += b.Alpha
		s.marginN++
	}
	need := float64(needAt(d, *o))
	if float64(nr) < need {
		s.under++
		s.underPods += need - float64(nr)
	}
	if float64(nSpec) > need {
		s.over++
		s.overPods += float64(nSpec) - need
	}
}

// episode counts scored tick i, demand d, nr pods ready and share of its interval overloaded,
// in the episodes of avoidable overload.
func (s *tally) episode(i int, d float64, nr int32, share float64) {
	o, nmax := &s.o, s.o.Params.MaxReplicas
	var x float64
	if o.Overload == OverloadTime {
		if share > 0 { // at most the pods' share where max_replicas are at least as many
			x = share - s.w.overShare(i, nmax, nmax, o.SLAUtilization*o.Request, o.Demand == DemandStep)
		}
	} else if scaling.Overloaded(d, o.SLAUtilization, nr, o.Request) && !scaling.Overloaded(d, o.SLAUtilization, nmax, o.Request) {
		x = 1
	}
	s.avoidable += x
	if x > 0 {
		s.run++
		s.longest = max(s.longest, s.run)
		return
	}
	if s.run > 0 {
		s.episodes++
	}
	s.run = 0
}

// score fills the run's Metrics from the figures added up.
func (s *tally) score() {
	o, m, tick := &s.o, s.m, s.tick
	if s.run > 0 {
		s.episodes++ // the run the trace ended in
		s.run = 0
	}
	m.OverloadEpisodes, m.LongestOverload = s.episodes, float64(s.longest)*tick
	if a := s.alerts; a != nil {
		m.Pages, m.Tickets = a.fired[0], a.fired[1]+a.fired[2]
	}
	m.avoidable = s.avoidable
	if m.Ticks > 0 {
		k := float64(m.Ticks)
		m.Seconds = k * tick
		m.Cost = o.Request * s.replicaSum * tick / 3600
		m.Unserved /= 3600
		m.OverloadFraction = s.overTicks / k
		m.OverloadTime = s.overTime / k
		if o.Overload == OverloadTime {
			m.OverloadFraction = m.OverloadTime
		}
		m.MeanReplicas = s.replicaSum / k
		m.ZeroShare, m.ColdOverload = s.zero/k, s.cold/k
		m.ActionsPerDay = float64(m.ScaleActions) / (m.Seconds / 86400)
		m.UnderShare, m.UnderPods, m.OverShare, m.OverPods = s.under/k, s.underPods/k, s.over/k, s.overPods/k
		if s.hasModel {
			m.ForecastCoverage = s.forecastTicks / k
		}
		if s.marginN > 0 {
			m.BudgetHeadroom, m.BudgetLevel = s.marginSum/float64(s.marginN), s.levelSum/float64(s.marginN)
		}
		for j := range s.metricTicks {
			m.MetricOverload = append(m.MetricOverload, MetricOverload{Metric: s.w.Metrics[j], Ticks: s.metricTicks[j],
				Fraction: float64(s.metricTicks[j]) / k, Alone: s.metricAlone[j]})
		}
	}
	if s.capacity > 0 {
		m.Utilization = s.served / s.capacity
	}
}

// initialReplicas starts every policy at the size the HPA target would give the first demand,
// all pods ready, so no policy starts out of breath.
func initialReplicas(d0 float64, o Options) int32 {
	n := ceilInt32(d0 / (o.Params.Target * o.Request))
	return min(max(n, o.Params.MinReplicas), o.Params.MaxReplicas)
}

func ceilInt32(x float64) int32 {
	c := math.Ceil(x)
	if c >= math.MaxInt32 {
		return math.MaxInt32
	}
	if c <= 0 || math.IsNaN(c) {
		return 0
	}
	return int32(c)
}
