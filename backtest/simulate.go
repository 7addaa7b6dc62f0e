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
	cfg.LeadTime, cfg.ObservationWindow = o.DecisionDelay+o.StartupDelay, o.MetricWindow
	cfg.LeadSteps = o.Horizon
	if cfg.LeadSteps == 0 {
		cfg.LeadSteps = policy.Horizon(o.DecisionDelay+o.StartupDelay, w.Period)
	}
	cfg.Retrain = 0
	if o.Retrain > 0 {
		cfg.Retrain = max(1, int(o.Retrain/w.Period))
	}
	if spec.Model != "" {
		cfg.Fallback = o.Fallback
	}
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
			spec, err = policy.Parse(policyName, o.DebiModel)
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
	run := Run{Metrics: Metrics{Policy: name, ForecastCoverage: math.NaN(), BudgetHeadroom: math.NaN(), BudgetLevel: math.NaN(), ModelHistory: modelHistory}}
	n := len(w.Inst)
	if o.KeepSeries {
		run.Series = &Series{Tick: w.Tick, Demand: w.peak(), Replicas: make([]int32, n), Ready: make([]int32, n)}
	}
	peak := w.peak()
	var metricTicks, metricAlone []int
	if w.multi() {
		metricTicks, metricAlone = make([]int, len(w.Metrics)), make([]int, len(w.Metrics))
	}
	c := newCluster(initial, o.StartupDelay)
	start := time.Unix(0, 0).UTC()
	var train, total time.Duration
	m := &run.Metrics
	var served, capacity, replicaSum, overTicks, forecastTicks float64
	var under, over, underPods, overPods float64
	var marginSum, levelSum float64
	marginN := 0
	type order struct {
		at time.Duration
		n  int32
	}
	var pending []order // decisions on their way to the deployment
	tick := w.Tick.Seconds()
	for i := range n {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return Run{}, err
			}
		}
		t := time.Duration(i) * w.Tick
		scored := i >= w.Warm
		for len(pending) > 0 && pending[0].at <= t {
			if c.scale(t, pending[0].n) && scored {
				m.ScaleActions++
			}
			pending = pending[1:]
		}
		t0 := time.Now()
		res, err := decide(ctx, i, policy.Observation{Time: start.Add(t), Demand: w.Obs[i], Current: c.spec, Ready: c.ready(t)})
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
			return Run{}, fmt.Errorf("at %v: training: %w", t, res.TrainError)
		}
		if o.DecisionDelay == 0 {
			if c.scale(t, res.Decision.Replicas) && scored {
				m.ScaleActions++
			}
		} else {
			pending = append(pending, order{t + o.DecisionDelay, res.Decision.Replicas})
		}
		nSpec, nr := c.spec, c.ready(t)
		if ready != nil {
			nr = ready(i)
		}
		if run.Series != nil {
			run.Series.Replicas[i], run.Series.Ready[i] = nSpec, nr
		}
		if !scored {
			continue
		}
		d := peak[i] // every metric's capacity is R: the largest demand decides overload and need
		m.Ticks++
		cp := float64(nr) * o.Request
		replicaSum += float64(nSpec)
		served += math.Min(d, cp)
		capacity += float64(nSpec) * o.Request
		if scaling.Overloaded(d, o.SLAUtilization, nr, o.Request) {
			overTicks++
		}
		if metricTicks != nil {
			over, last := 0, 0
			for k := range w.MInst {
				if scaling.Overloaded(w.MInst[k][i], o.SLAUtilization, nr, o.Request) {
					metricTicks[k]++
					over, last = over+1, k
				}
			}
			if over == 1 {
				metricAlone[last]++
			}
		}
		m.Unserved += math.Max(0, d-cp) * tick
		if hasModel && !math.IsNaN(res.W2) {
			forecastTicks++
		}
		if b := res.Budget; b != nil && !math.IsNaN(b.Quantile) && !math.IsNaN(b.Forecast) {
			marginSum += (b.Quantile - b.Forecast) / (o.SLAUtilization * o.Request)
			levelSum += b.Alpha
			marginN++
		}
		need := float64(needAt(d, o))
		if float64(nr) < need {
			under++
			underPods += need - float64(nr)
		}
		if float64(nSpec) > need {
			over++
			overPods += float64(nSpec) - need
		}
	}
	if m.Ticks > 0 {
		k := float64(m.Ticks)
		m.Seconds = k * tick
		m.Cost = o.Request * replicaSum * tick / 3600
		m.Unserved /= 3600
		m.OverloadFraction = overTicks / k
		m.MeanReplicas = replicaSum / k
		m.ActionsPerDay = float64(m.ScaleActions) / (m.Seconds / 86400)
		m.UnderShare, m.UnderPods, m.OverShare, m.OverPods = under/k, underPods/k, over/k, overPods/k
		if hasModel {
			m.ForecastCoverage = forecastTicks / k
		}
		if marginN > 0 {
			m.BudgetHeadroom, m.BudgetLevel = marginSum/float64(marginN), levelSum/float64(marginN)
		}
		for j := range metricTicks {
			m.MetricOverload = append(m.MetricOverload, MetricOverload{Metric: w.Metrics[j], Ticks: metricTicks[j],
				Fraction: float64(metricTicks[j]) / k, Alone: metricAlone[j]})
		}
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
