package backtest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Demand interpolation between samples.
const (
	DemandLinear = "linear" // linear between sample times (default)
	DemandStep   = "step"   // piecewise constant: each sample holds until the next
)

// How overload is counted (Options.Overload).
const (
	// OverloadTick reads each tick's demand against the pods ready at that tick: a schedule sized
	// for each tick's own demand is never overloaded at a tick, however long it is overloaded
	// between them.
	OverloadTick = "tick"
	// OverloadTime reads the share of each interval between ticks overloaded (Metrics.OverloadTime):
	// a pod that arrives at a tick serves from that tick on, not over the interval before it. The
	// default.
	OverloadTime = "time"
)

// Options are the parameters of a backtest; the zero value is not usable, start from
// DefaultOptions. Every span of time is a duration.
type Options struct {
	// Policies to run, by policy name (see policy.Parse), plus "oracle".
	Policies []string `json:"policies"`
	// DebiModel is the forecaster of the "debi" policy.
	DebiModel string `json:"debi_model"`
	// BudgetModel is the forecaster of the "budget" policy (policy.DefaultBudgetModel).
	BudgetModel string `json:"budget_model"`
	// Request is R, the CPU request of one pod in cores.
	Request float64 `json:"request"`
	// Activation is, with Params.MinReplicas 0, the demand at or below which a policy counts as
	// idle, in pods' worth of R (0.2: a fifth of one pod's request): the trace's metrics are the
	// policies' wake metrics, this their activation (KEDA's activationThreshold).
	Activation float64 `json:"activation,omitempty"`
	// Params are the scaling parameters shared by every policy (the HPA target is replaced
	// during the sweep).
	Params scaling.Params `json:"scaling"`
	// Metrics is the W1 stabilisation policy (not applied by hpa, which acts on the
	// metrics-server value as Kubernetes does).
	Metrics scaling.MetricsPolicy `json:"metrics"`
	// Tick is the controllers' sync period: every policy decides once per tick (15 s, the HPA
	// controller's --horizontal-pod-autoscaler-sync-period).
	Tick time.Duration `json:"tick"`
	// SamplePeriod overrides the trace's own sample period when positive.
	SamplePeriod time.Duration `json:"sample_period,omitempty"`
	// Demand is how demand runs between samples: DemandLinear or DemandStep.
	Demand string `json:"demand"`
	// Overload is the count every figure is judged on (overload, the band, the frontier, the
	// floor and the oracle): OverloadTick or OverloadTime. Metrics.OverloadTime is reported under
	// either.
	Overload string `json:"overload_count"`
	// MetricWindow is the observation lag: a policy observes the mean demand over
	// [t − MetricWindow, t] (a rate(...[1m]) or metrics-server window); 0 observes the
	// instantaneous demand.
	MetricWindow time.Duration `json:"metric_window"`
	// StartupDelay is the time a new pod takes to serve.
	StartupDelay time.Duration `json:"startup_delay"`
	// StartupSpread, when positive, makes start-ups vary: each new pod serves after StartupDelay
	// plus an exponential extra whose 0.9 quantile is StartupSpread (deterministic for each
	// creation time and pod). Policies size for the lead DecisionDelay + StartupDelay +
	// StartupSpread (the 0.9 start-up, as a team that has measured it would set lead_time);
	// the floor and the oracles keep StartupDelay, the least a start-up takes, so the floor is
	// still a bound.
	StartupSpread time.Duration `json:"startup_spread,omitempty"`
	// StartupSweep, when set, reruns every policy, the sweep and the oracle at each of these
	// start-up delays for the per-class summary.
	StartupSweep []time.Duration `json:"startup_sweep,omitempty"`
	// DecisionDelay is the time from a decision to the deployment's new size (0: at once, as
	// the HPA controller patches in its sync). The closed-loop test sets it to the delay its
	// live pipeline measured.
	DecisionDelay time.Duration `json:"decision_delay"`
	// PeakUtilization sets the demand scale: the p99 of the warm-up samples maps to this
	// fraction of MaxReplicas·Request (0.25). Scale, when positive, overrides it.
	PeakUtilization float64 `json:"peak_utilization"`
	Scale           float64 `json:"scale,omitempty"`
	// Warmup samples train models and are not scored.
	Warmup int `json:"warmup"`
	// SLAUtilization is u_sla: a tick is overloaded when demand exceeds u_sla·Nr·R.
	SLAUtilization float64 `json:"sla_utilization"`
	// Horizon is the forecast horizon h in samples; 0 derives it from the actuation delay,
	// h = ceil((DecisionDelay + StartupDelay + StartupSpread)/period) + 1 (METHOD §2).
	Horizon int `json:"horizon"`
	// History is the number of samples the models and the EVT fit see.
	History int `json:"history"`
	// Retrain is the time between training runs (0: train once).
	Retrain time.Duration `json:"retrain"`
	// Season is the seasonal models' period, converted to samples of each trace.
	Season time.Duration      `json:"season"`
	Model  forecast.Config    `json:"model"`
	POT    forecast.POTConfig `json:"evt"`
	// Calibration is the budget policy's quantile and calibration; its u_sla is SLAUtilization.
	Calibration forecast.CalibratorConfig `json:"budget"`
	// Fallback names a model that forecasts while the policy's model waits for its history
	// (policy.Config.Fallback).
	Fallback string `json:"fallback,omitempty"`
	// SweepTargets are the HPA targets of the cost-at-equal-overload frontier. The default
	// reaches down to 0.05 so that the envelope covers the budget band's lower edge on spiky
	// load, where a target of 0.3 is overloaded 1–4 % of the time: a run below the envelope's
	// least overload is compared with a cheaper target at more overload (frontier_clamped).
	SweepTargets []float64 `json:"sweep_targets"`
	// MaxSteps, when positive, truncates every trace to that many samples.
	MaxSteps int `json:"max_steps,omitempty"`
	// Parallel is the number of runs at once (default GOMAXPROCS).
	Parallel int `json:"-"`
	// Progress, if set, is called after each finished run.
	Progress func(done, total int) `json:"-"`
	// KeepSeries keeps each run's per-tick series for plots.
	KeepSeries bool `json:"-"`
	// Runner, when set, is the runner configuration of a configured policy (config.Policy's
	// RunnerConfig, the one the live exporter builds): the policy of that name is replayed with
	// it as it is — its history step, horizon, history and retrain — rather than with one built
	// from these options, so that a what-if runs the live runner whatever the replay's step.
	Runner *policy.Config `json:"-"`
	// Configured is the policy of the user's configuration in a what-if, marked in the report.
	Configured string `json:"configured,omitempty"`
	// Recorded holds, by trace name, what Prometheus recorded beside the trace's demand: an
	// actual row (ActualPolicy) is scored for each trace with recorded replicas.
	Recorded map[string]Recorded `json:"-"`
	// HPA is, in a what-if, what its hpa row replays (nil outside one): the workload's own HPA
	// when the what-if found one, whose target and bounds replace Params' for that row alone,
	// or why none was (the row is then an HPA at Params.Target). Every format labels the row
	// with it (HPALabel).
	HPA *HPARow `json:"hpa_row,omitempty"`
	// Capacity is, by metric name, the capacity of one pod in a multi-metric trace's own unit of
	// that metric (trace.Trace.Metrics): the metric is scaled so that this capacity is R. A
	// metric without one is scaled as a one-metric trace is (PeakUtilization, Scale).
	Capacity map[string]float64 `json:"trace_capacity,omitempty"`
	// MetricCalibration is how a budget policy on several metrics calibrates its quantile
	// levels: CalibrationJoint (default, "") on the policy's overload, CalibrationPerMetric each
	// metric on its own (policy.Multi.SetJointCalibration).
	MetricCalibration string `json:"metric_calibration,omitempty"`
}

// MetricCalibration values of Options.MetricCalibration.
const (
	CalibrationJoint     = "joint"
	CalibrationPerMetric = "per-metric"
)

// DefaultOptions are the paper's parameters on the yardstick of METHOD §7.
func DefaultOptions() Options {
	p := scaling.DefaultParams()
	// The sweep and the hpa row are the HPA that `kubectl autoscale` creates: no behavior field.
	p.HPABehavior = scaling.BehaviorNone
	return Options{
		Policies:        []string{"hpa", "apa", "evt-holtwinters-hpa", "debi", "budget"},
		DebiModel:       policy.DefaultDebiModel,
		BudgetModel:     policy.DefaultBudgetModel,
		Request:         5,
		Params:          p,
		Metrics:         scaling.DefaultMetricsPolicy(),
		Tick:            15 * time.Second,
		Demand:          DemandLinear,
		Overload:        OverloadTime,
		MetricWindow:    time.Minute,
		StartupDelay:    2 * time.Minute,
		PeakUtilization: 0.25,
		Warmup:          760,
		SLAUtilization:  0.9,
		History:         760,
		Retrain:         10 * time.Hour,
		Season:          24 * time.Hour,
		POT:             forecast.DefaultPOTConfig(),
		Calibration:     forecast.DefaultCalibratorConfig(),
		SweepTargets:    []float64{0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9},
	}
}

// lead is the lead time the policies size for: the decision delay and the 0.9 start-up.
func (o Options) lead() time.Duration { return o.DecisionDelay + o.StartupDelay + o.StartupSpread }

// Validate checks the options; errors name the flag-style field.
func (o Options) Validate() error {
	switch {
	case len(o.Policies) == 0:
		return errors.New("policies: at least one policy is needed")
	case !(o.Request > 0) || math.IsInf(o.Request, 0):
		return fmt.Errorf("request: must be a positive number of cores, got %v", o.Request)
	case o.Tick <= 0:
		return fmt.Errorf("tick: must be positive, got %v", o.Tick)
	case !(o.Activation >= 0) || math.IsInf(o.Activation, 0):
		return fmt.Errorf("activation: must be a number of pods, not negative, got %v", o.Activation)
	case o.SamplePeriod < 0:
		return fmt.Errorf("sample-period: must not be negative, got %v", o.SamplePeriod)
	case o.Demand != DemandLinear && o.Demand != DemandStep:
		return fmt.Errorf("demand: must be %q or %q, got %q", DemandLinear, DemandStep, o.Demand)
	case o.Overload != OverloadTick && o.Overload != OverloadTime:
		return fmt.Errorf("overload-count: must be %q or %q, got %q", OverloadTick, OverloadTime, o.Overload)
	case o.MetricWindow < 0:
		return fmt.Errorf("metric-window: must not be negative, got %v", o.MetricWindow)
	case o.Scale < 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0):
		return fmt.Errorf("scale: must be a non-negative number, got %v", o.Scale)
	case o.Scale == 0 && (!(o.PeakUtilization > 0) || o.PeakUtilization > 10):
		return fmt.Errorf("peak-utilization: must be in (0, 10], got %v", o.PeakUtilization)
	case o.StartupDelay < 0:
		return fmt.Errorf("startup-delay: must not be negative, got %v", o.StartupDelay)
	case o.StartupSpread < 0:
		return fmt.Errorf("startup-spread: must not be negative, got %v", o.StartupSpread)
	case o.DecisionDelay < 0:
		return fmt.Errorf("decision-delay: must not be negative, got %v", o.DecisionDelay)
	case o.Warmup < 0:
		return fmt.Errorf("warmup: must not be negative, got %d", o.Warmup)
	case !(o.SLAUtilization > 0) || o.SLAUtilization > 1:
		return fmt.Errorf("sla-utilization: must be in (0, 1], got %v", o.SLAUtilization)
	case o.Horizon < 0:
		return fmt.Errorf("horizon: must not be negative, got %d", o.Horizon)
	case o.History < 2:
		return fmt.Errorf("history: must be at least 2, got %d", o.History)
	case o.Retrain < 0:
		return fmt.Errorf("retrain: must not be negative, got %v", o.Retrain)
	case o.Season < 0:
		return fmt.Errorf("season: must not be negative, got %v", o.Season)
	case o.MaxSteps < 0:
		return fmt.Errorf("max-steps: must not be negative, got %d", o.MaxSteps)
	}
	for _, d := range o.StartupSweep {
		if d < 0 {
			return fmt.Errorf("startup-sweep: delay %v is negative", d)
		}
	}
	for _, t := range o.SweepTargets {
		if !(t > 0) || t > 1 {
			return fmt.Errorf("sweep: target %v is not in (0, 1]", t)
		}
	}
	if err := o.Params.Validate(); err != nil {
		return err
	}
	if err := o.HPA.Check(o.Params); err != nil {
		return fmt.Errorf("the hpa row, %s's HPA %s: %w", o.HPA.Workload, o.HPA.Name, err)
	}
	if err := o.POT.Validate(); err != nil {
		return scaling.PrefixErrors("evt.", err)
	}
	if err := o.Calibration.Validate(); err != nil {
		return scaling.PrefixErrors("budget.", err)
	}
	for _, p := range o.Policies {
		if strings.EqualFold(p, OraclePolicy) || strings.EqualFold(p, PricedOraclePolicy) {
			continue
		}
		if _, ok, err := ParseClairvoyant(p); ok {
			if err != nil {
				return fmt.Errorf("policies: %w", err)
			}
			continue
		}
		if _, err := policy.Parse(p, o.DebiModel); err != nil {
			return fmt.Errorf("policies: %w", err)
		}
	}
	if o.BudgetModel != "" && !forecast.Known(o.BudgetModel) {
		return fmt.Errorf("budget.model: unknown model %q (known: %s)", o.BudgetModel, strings.Join(forecast.Names(), ", "))
	}
	if c := o.MetricCalibration; c != "" && c != CalibrationJoint && c != CalibrationPerMetric {
		return fmt.Errorf("budget.metric-calibration: must be %q or %q, got %q", CalibrationJoint, CalibrationPerMetric, c)
	}
	for name, c := range o.Capacity {
		if !(c > 0) || math.IsInf(c, 0) {
			return fmt.Errorf("trace.capacity: %s: must be a positive number, got %v", name, c)
		}
	}
	if o.Fallback != "" && !forecast.Known(o.Fallback) {
		return fmt.Errorf("model.fallback: unknown model %q (known: %s)", o.Fallback, strings.Join(forecast.Names(), ", "))
	}
	return nil
}

// ScaleFor returns the demand scale for a trace: the 99th percentile of its warm-up samples
// (no look-ahead) maps to PeakUtilization·MaxReplicas·Request, unless Options.Scale is set.
func (o Options) ScaleFor(values []float64) (float64, error) {
	if o.Scale > 0 {
		return o.Scale, nil
	}
	if len(values) == 0 {
		return 0, errors.New("no samples")
	}
	w := values
	if o.Warmup > 0 && o.Warmup < len(values) {
		w = values[:o.Warmup]
	}
	s := slices.Clone(w)
	slices.Sort(s)
	p99 := s[int(math.Ceil(0.99*float64(len(s))))-1]
	if !(p99 > 0) {
		return 0, errors.New("the 99th percentile of the warm-up is 0: cannot scale an idle trace (set --scale)")
	}
	return o.PeakUtilization * float64(o.Params.MaxReplicas) * o.Request / p99, nil
}

// parse is policy.Parse with the options' models: DebiModel for "debi", BudgetModel for "budget".
func (o Options) parse(name string) (policy.Spec, error) {
	spec, err := policy.Parse(name, o.DebiModel)
	if err == nil && spec.Name == "budget" && o.BudgetModel != "" {
		spec.Model = strings.ToLower(o.BudgetModel)
	}
	return spec, err
}
