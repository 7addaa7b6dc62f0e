// Package backtest replays workload traces through scaling policies on a model of the real
// control loop (METHOD §7): time runs in ticks of the controllers' sync period (15 s), demand is
// interpolated between the trace's samples, each policy observes the mean demand over a metric
// window and decides at every tick from data up to that tick only, a decision reaches the
// deployment after a decision delay and new pods serve after a start-up delay. Runs are scored
// on cost, utilization, overload time and scaling actions, against the lower envelope of a sweep
// of fixed HPA targets (cost at equal overload) and against an oracle that knows the future.
// The policy runners are the very ones the live exporter drives, so a backtest result speaks
// for the live system.
package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// OraclePolicy is the name of the backtest-only policy that knows future demand (METHOD §7).
const OraclePolicy = "oracle"

// ActualPolicy is the row of what actually ran on a recorded trace (Options.Recorded): the
// workload's recorded replica count, scored like every policy, so that each one is compared
// with what happened.
const ActualPolicy = "actual"

// Recorded is what Prometheus recorded beside a trace's demand, for the what-if.
type Recorded struct {
	// Start is the time of the trace's first sample (the plots' x axis shows dates from it).
	Start time.Time
	// Replicas are the workload's spec replica counts at the trace's sample times (nil: no
	// actual row).
	Replicas []float64
	// Ready are the workload's recorded ready replica counts at the same times, which the
	// actual row scores as the pods that served (nil: modelled from the spec and the start-up
	// delay, as for the policies); ReadyQuery is the query they were read with ("" when none
	// was), for the report.
	Ready      []float64
	ReadyQuery string
	// Coverage says how much of the requested range each input series covered.
	Coverage []Coverage
	// RangeStart is the start of the requested range and Asked its length (--range): the trace
	// may start before it, with the warm-up history read from before the range (zero Asked: no
	// ScoredRange in the report).
	RangeStart time.Time
	Asked      time.Duration
}

// ScoredRange is how much of a what-if's requested range a replay scored, and where its
// warm-up came from: read from before the range (Before), or, when Prometheus had less history
// before it, taken out of the range (Inside), which is then not scored.
type ScoredRange struct {
	Asked, Scored, Warmup, Before, Inside time.Duration
}

// NewScoredRange is the ScoredRange of a trace of samples samples every period from traceStart
// with warmup of them unscored, for a requested range of asked from rangeStart.
func NewScoredRange(asked time.Duration, rangeStart, traceStart time.Time, samples, warmup int, period time.Duration) ScoredRange {
	w := time.Duration(warmup) * period
	end := traceStart.Add(time.Duration(samples-1) * period)
	before := min(w, max(0, rangeStart.Sub(traceStart)))
	return ScoredRange{Asked: asked, Scored: max(0, end.Sub(traceStart.Add(w))), Warmup: w, Before: before, Inside: w - before}
}

// String says it in words: "scored 7d of the 7d asked, after 2d15h of warm-up read from before
// the range", or "scored 4d9h of the 7d asked: 2d15h of warm-up came from inside the range
// (Prometheus had 3h of history before it)".
func (s ScoredRange) String() string {
	head := fmt.Sprintf("scored %s of the %s asked", humanDuration(s.Scored), humanDuration(s.Asked))
	switch {
	case s.Warmup <= 0:
		return head + ", without a warm-up"
	case s.Inside <= 0:
		return head + fmt.Sprintf(", after %s of warm-up read from before the range", humanDuration(s.Warmup))
	}
	had := "no history"
	if s.Before > 0 {
		had = humanDuration(s.Before) + " of history"
	}
	return head + fmt.Sprintf(": %s of warm-up came from inside the range (Prometheus had %s before it)", humanDuration(s.Inside), had)
}

// Coverage is how much of a what-if range one input series covered: the time with samples
// (FromFallback of it from the raw series that stand in for a recording rule without history),
// the time outside the replayed span (missing, not replayed) and the time inside it without
// samples (filled with the sample before).
type Coverage struct {
	Series       string        `json:"series"`
	Query        string        `json:"query"`
	Fallback     string        `json:"fallback,omitempty"`
	Range        time.Duration `json:"range"`
	Covered      time.Duration `json:"covered"`
	FromFallback time.Duration `json:"from_fallback"`
	Missing      time.Duration `json:"missing"`
	Filled       time.Duration `json:"filled"`
}

// Demand interpolation between samples.
const (
	DemandLinear = "linear" // linear between sample times (default)
	DemandStep   = "step"   // piecewise constant: each sample holds until the next
)

// Options are the parameters of a backtest; the zero value is not usable, start from
// DefaultOptions. Every span of time is a duration.
type Options struct {
	// Policies to run, by policy name (see policy.Parse), plus "oracle".
	Policies []string `json:"policies"`
	// DebiModel is the forecaster of the "debi" policy.
	DebiModel string `json:"debi_model"`
	// Request is R, the CPU request of one pod in cores.
	Request float64 `json:"request"`
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
	// MetricWindow is the observation lag: a policy observes the mean demand over
	// [t − MetricWindow, t] (a rate(...[1m]) or metrics-server window); 0 observes the
	// instantaneous demand.
	MetricWindow time.Duration `json:"metric_window"`
	// StartupDelay is the time a new pod takes to serve.
	StartupDelay time.Duration `json:"startup_delay"`
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
	// h = ceil((DecisionDelay + StartupDelay)/period) + 1 (METHOD §2).
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
	// SweepTargets are the HPA targets of the cost-at-equal-overload frontier.
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
		Request:         5,
		Params:          p,
		Metrics:         scaling.DefaultMetricsPolicy(),
		Tick:            15 * time.Second,
		Demand:          DemandLinear,
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
	case o.Tick <= 0:
		return fmt.Errorf("tick: must be positive, got %v", o.Tick)
	case o.SamplePeriod < 0:
		return fmt.Errorf("sample-period: must not be negative, got %v", o.SamplePeriod)
	case o.Demand != DemandLinear && o.Demand != DemandStep:
		return fmt.Errorf("demand: must be %q or %q, got %q", DemandLinear, DemandStep, o.Demand)
	case o.MetricWindow < 0:
		return fmt.Errorf("metric-window: must not be negative, got %v", o.MetricWindow)
	case o.Scale < 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0):
		return fmt.Errorf("scale: must be a non-negative number, got %v", o.Scale)
	case o.Scale == 0 && (!(o.PeakUtilization > 0) || o.PeakUtilization > 10):
		return fmt.Errorf("peak-utilization: must be in (0, 10], got %v", o.PeakUtilization)
	case o.StartupDelay < 0:
		return fmt.Errorf("startup-delay: must not be negative, got %v", o.StartupDelay)
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

// Metrics are one run's scores over the scored time (after the warm-up).
type Metrics struct {
	Policy string `json:"policy"`
	// Cost is S = R·∫N dt in core-hours (eq. 19 in time).
	Cost float64 `json:"cost"`
	// CostRatio is Cost over the hpa policy's cost on the same trace (NaN without hpa).
	CostRatio float64 `json:"cost_ratio"`
	// ActualRatio is Cost over the actual row's cost (what ran, ActualPolicy) on the same trace
	// (NaN without it).
	ActualRatio float64 `json:"actual_ratio"`
	// FrontierRatio is Cost over the cost of the HPA-target envelope at the same overload
	// fraction; below 1 beats every fixed HPA target. FrontierClamped says the overload fraction
	// lay outside the envelope and its nearest end was used.
	FrontierRatio   float64 `json:"frontier_ratio"`
	FrontierClamped bool    `json:"frontier_clamped"`
	// GapClosed is (1 − FrontierRatio)/(1 − oracle's FrontierRatio): the share of the saving
	// at equal overload that the oracle shows possible which this policy captures.
	GapClosed float64 `json:"gap_closed"`
	// GapAtOverload is (E(x) − cost)/(E(x) − oracle's cost) with E(x) the envelope's cost at
	// this policy's own overload x: the share of the saving over the best fixed target at the
	// same overload that reaching the oracle's cost would bring. GapClosed measures the oracle
	// at its own zero overload, where the envelope is dearest, so it understates a policy that
	// spends an overload budget; this column does not.
	GapAtOverload float64 `json:"gap_at_overload"`
	// FrontierBound is the lowest frontier ratio any schedule of sizes within the replica
	// bounds can have at this run's overload fraction x, with hindsight (NeedBound): a tick that
	// is not overloaded has at least its need n*(t) ready, a pod is paid for from its creation
	// and serves a start-up delay later, so each tick's spec holds the need of every tick of the
	// start-up window ahead that is not overloaded, and an overloaded tick costs at least
	// min_replicas; the cheapest choice of the x overloaded ticks is bounded from below. At zero
	// overload it is the oracle's own cost. A FrontierRatio target below it is out of reach on
	// this trace at this overload. The actual row, whose ready pods are recorded, gets the
	// bound without the start-up (NeedBound.Instant).
	FrontierBound float64 `json:"frontier_bound"`
	// FloorClosed is (1 − FrontierRatio)/(1 − the trace's FrontierFloor): the share of the
	// saving over the fixed targets that the floor no schedule can beat shows possible which this
	// policy captures (0 = no better than the best fixed target, 1 = at the floor, below 0 =
	// dearer than the best fixed target). Unlike GapClosed it is measured against what is
	// possible inside the overload budget's band, not at the oracle's zero overload. NaN when
	// the floor saves less than 1 % or an input is missing (FloorClosed).
	FloorClosed float64 `json:"floor_closed"`
	// Utilization is ∫min(D, Nr·R) / ∫N·R.
	Utilization float64 `json:"utilization"`
	// OverloadFraction is the share of scored time with D > u_sla·Nr·R.
	OverloadFraction float64 `json:"overload_fraction"`
	// Unserved is ∫max(0, D − Nr·R) dt in core-hours.
	Unserved float64 `json:"unserved"`
	// ScaleActions count changes of the spec replica count; ActionsPerDay per scored day.
	ScaleActions  int     `json:"scale_actions"`
	ActionsPerDay float64 `json:"actions_per_day"`
	// MeanReplicas is the time mean of N(t).
	MeanReplicas float64 `json:"mean_replicas"`
	// SPEC RG elasticity figures against the oracle's need n*(t) = ceil(D(t)/(u_sla·R))
	// clamped to the bounds: the share of time under-provisioned (ready pods below the need)
	// and the mean shortfall in pods over all scored time; likewise over-provisioned (paid
	// pods above the need) and the mean excess.
	UnderShare float64 `json:"under_share"`
	UnderPods  float64 `json:"under_pods"`
	OverShare  float64 `json:"over_share"`
	OverPods   float64 `json:"over_pods"`
	// ForecastCoverage is the share of scored time the policy had a forecast W2 (NaN for a
	// policy without a model): below 1 when the model waited for the history it needs.
	ForecastCoverage float64 `json:"forecast_coverage"`
	// BudgetHeadroom is the budget policy's mean calibrated headroom over the scored time in
	// pods, (quantile − forecast)/(u_sla·R), and BudgetLevel its mean calibrated level α (NaN
	// for other policies): how much of the cost is the forecast's uncertainty at the lead time.
	BudgetHeadroom float64 `json:"budget_headroom"`
	BudgetLevel    float64 `json:"budget_level"`
	// ModelHistory is the number of samples the model needs before its first forecast.
	ModelHistory int `json:"model_history,omitempty"`
	// TrainSeconds is the total model training time; DecideSeconds the rest of the policy's time.
	TrainSeconds  float64 `json:"train_seconds"`
	DecideSeconds float64 `json:"decide_seconds"`
	// Trainings counts training runs; TrainStops counts their stop reasons.
	Trainings  int            `json:"trainings"`
	TrainStops map[string]int `json:"train_stops,omitempty"`
	// Ticks is the number of scored ticks; Seconds the scored time.
	Ticks   int     `json:"ticks"`
	Seconds float64 `json:"seconds"`
	// MetricOverload is, on a trace with several metrics, each metric's share of the overload:
	// the ticks it was above u_sla·Nr·its capacity per pod (nil on a one-metric trace).
	MetricOverload []MetricOverload `json:"metric_overload,omitempty"`
}

// MetricOverload is one metric's overload in a run on a trace with several metrics: a tick is
// overloaded when any metric is, so the metrics' ticks add up to at least the run's.
type MetricOverload struct {
	Metric string `json:"metric"`
	// Ticks are the scored ticks this metric was overloaded, Fraction their share of the scored
	// ticks, Alone the ticks it was the only overloaded metric.
	Ticks    int     `json:"ticks"`
	Fraction float64 `json:"fraction"`
	Alone    int     `json:"alone"`
}

// MetricScale is how one metric of a trace with several became demand in cores of R.
type MetricScale struct {
	Metric string `json:"metric"`
	// Scale is the factor from the trace's values to cores; Capacity the capacity of one pod in
	// the trace's unit, R/Scale (given by Options.Capacity, or what the demand scale implies).
	Scale    float64 `json:"scale"`
	Capacity float64 `json:"capacity"`
}

// Series are a run's per-tick values over the whole trace, warm-up included (with
// Options.KeepSeries), for plots.
type Series struct {
	// Tick is the time between points; point 0 is the start of the trace.
	Tick time.Duration `json:"-"`
	// Demand is the instantaneous demand in cores.
	Demand []float64 `json:"-"`
	// Replicas and Ready are the spec and ready replica counts in force after each tick's
	// decision.
	Replicas []int32 `json:"-"`
	Ready    []int32 `json:"-"`
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
	ActionsPerDay    float64 `json:"actions_per_day"`
	OnEnvelope       bool    `json:"on_envelope"`
}

// TraceResult holds every policy's run on one trace.
type TraceResult struct {
	Trace string `json:"trace"`
	Class string `json:"class,omitempty"`
	// Samples is the number of trace samples used; SamplePeriod their spacing.
	Samples      int           `json:"samples"`
	SamplePeriod time.Duration `json:"sample_period"`
	// Scale is the factor from trace values to cores (the first metric's, on a trace with
	// several; Metrics has each one's).
	Scale   float64       `json:"scale"`
	Metrics []MetricScale `json:"metrics,omitempty"`
	// Start is the time of the first sample of a recorded trace (zero for others).
	Start time.Time `json:"start,omitempty"`
	// WarmupTime is the unscored start; Ticks the whole run's ticks.
	WarmupTime time.Duration `json:"warmup_time"`
	Ticks      int           `json:"ticks"`
	// Unavoidable is the share of scored time whose demand exceeds u_sla·N_max·R: overload no
	// policy can avoid (demand beyond the max_replicas bound).
	Unavoidable float64 `json:"unavoidable_overload"`
	// OracleFrontierRatio is the oracle's frontier ratio: the limit of what any policy can save
	// at equal overload (NaN without the oracle).
	OracleFrontierRatio float64 `json:"oracle_frontier_ratio"`
	// FrontierFloor is the lowest FrontierBound over the overloads inside 0.5–1.5× the
	// budget (the unavoidable share added): no schedule that keeps its avoidable overload in that
	// band, hindsight included, has a lower frontier ratio on this trace (NaN without a sweep).
	FrontierFloor float64 `json:"frontier_floor"`
	// bound is the trace's NeedBound (scored ticks), for the runs' FrontierBound.
	bound       *NeedBound
	Runs        []Run           `json:"runs"`
	Frontier    []FrontierPoint `json:"frontier"`
	SweepFailed string          `json:"sweep_error,omitempty"`
	// ActualReady says where the actual row's ready pods come from: the recorded ready count
	// (and its query), or the model of the policies' rows and why ("" without an actual row).
	ActualReady string `json:"actual_ready,omitempty"`
	// Range is, for a what-if (Recorded.Asked), how much of the requested range was scored.
	Range *ScoredRange `json:"-"`
}

// actualReady is TraceResult.ActualReady for a recording.
func actualReady(rec Recorded) string {
	switch {
	case rec.Replicas == nil:
		return ""
	case rec.Ready != nil:
		return "recorded (" + rec.ReadyQuery + ")"
	case rec.ReadyQuery != "":
		return "modelled from the start-up delay: " + rec.ReadyQuery + " has no samples"
	}
	return "modelled from the start-up delay: the policy has no queries.ready_replicas"
}

// StartupResult is the per-class summary at one start-up delay of Options.StartupSweep.
type StartupResult struct {
	Delay  time.Duration `json:"startup_delay"`
	Traces []TraceResult `json:"traces"`
}

// Report is a whole backtest.
type Report struct {
	Options Options         `json:"parameters"`
	Traces  []TraceResult   `json:"traces"`
	Startup []StartupResult `json:"startup_sweep,omitempty"`
	// Notes are what the reader must know (models that waited for history, clamped ratios).
	Notes []string `json:"notes,omitempty"`
	// Coverage is, for a what-if, how much of the range each input series covered.
	Coverage []Coverage `json:"coverage,omitempty"`
	// Recommendation is, for a what-if (Options.Configured set), what to run on its trace:
	// every format prints it first.
	Recommendation *Recommendation `json:"-"`
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

// World is one trace laid on the tick grid: the demand every policy faces, shared read-only
// by all runs on that trace.
type World struct {
	Period time.Duration // sample period
	Tick   time.Duration
	// Inst is the demand at each tick; Obs the mean over the metric window before it (cores).
	// On a trace with several metrics they are the first metric's.
	Inst, Obs []float64
	// Metrics names the metrics of a trace with several (nil: one); MInst and MObs hold each
	// metric's Inst and Obs, in cores of the one request R (each metric is scaled so that its
	// capacity per pod is R), MInst[0] being Inst. Peak is the largest of the metrics' demands
	// at each tick (Inst itself for one metric): since every metric's capacity is R, a tick is
	// overloaded when Peak is above u_sla·Nr·R — when any metric is — and Peak is what the
	// unserved demand, the oracle and the need are scored on.
	Metrics     []string
	MInst, MObs [][]float64
	Peak        []float64
	// Warm is the first scored tick.
	Warm int
	// Recorded are the recorded spec replica counts per sample (nil: none), which the actual
	// row replays; RecordedReady the recorded ready counts (nil: modelled).
	Recorded, RecordedReady []float64
}

// Unavoidable is the share of scored ticks whose demand exceeds u_sla·N_max·R.
func (w *World) Unavoidable(o Options) float64 {
	n, k := 0, 0
	for _, d := range w.peak()[w.Warm:] {
		k++
		if d > o.SLAUtilization*float64(o.Params.MaxReplicas)*o.Request {
			n++
		}
	}
	if k == 0 {
		return 0
	}
	return float64(n) / float64(k)
}

// NeedBound is the cheapest cost of any schedule of sizes within the replica bounds at a given
// overload fraction over the scored ticks of a World, hindsight included. A tick that is not
// overloaded has at least its need n*(t) ready (needAt, the scorer's own comparison), and a pod
// ready is a pod paid for; an overloaded tick at least min_replicas. So at overload x the
// cheapest overloads the x·K ticks of largest need, the ones above u_sla·N_max·R (no size
// avoids them) first: the instant bound, which lets pods serve the moment they are created.
// With a start-up delay a pod is paid for from its creation, so the spec at each tick holds the
// ready pods of the whole start-up window ahead: the start-up bound (startBound), never below the
// instant one, which Cost takes.
type NeedBound struct {
	total float64   // Σ need over the scored ticks, in pods
	saved []float64 // saved[k]: Σ (need − min_replicas) over the k ticks of largest need
	unit  float64   // core-hours per pod-tick
	start *startBound
}

// NeedBound is the world's bound under o (its request, u_sla, replica bounds and start-up delay),
// refined up to the overload fraction xmax.
func (w *World) NeedBound(o Options, xmax float64) *NeedBound {
	peak := w.peak()[min(w.Warm, len(w.peak())):]
	need := make([]float64, len(peak))
	pods := make([]int32, len(peak))
	b := &NeedBound{saved: make([]float64, len(peak)+1), unit: o.Request * w.Tick.Seconds() / 3600}
	for i, d := range peak {
		pods[i] = needAt(d, o)
		need[i] = float64(pods[i])
		b.total += need[i]
		if d > o.SLAUtilization*float64(o.Params.MaxReplicas)*o.Request {
			pods[i] = -1 // overloaded at every size
		}
	}
	slices.SortFunc(need, func(x, y float64) int { return cmp.Compare(y, x) })
	for k, n := range need {
		b.saved[k+1] = b.saved[k] + n - float64(o.Params.MinReplicas)
	}
	if w.Tick > 0 {
		d := int((o.StartupDelay + w.Tick - 1) / w.Tick)
		b.start = newStartBound(pods, o.Params.MinReplicas, d, int(w.Period/w.Tick), int(math.Ceil(min(1, xmax)*float64(len(peak)))))
	}
	return b
}

// Cost is the bound in core-hours at overload fraction x (a share of the scored ticks).
func (b *NeedBound) Cost(x float64) float64 {
	c := b.Instant(x)
	if b.start != nil {
		k := float64(len(b.saved) - 1)
		c = max(c, b.start.lower(math.Floor(min(1, max(0, x))*k+1e-9))*b.unit)
	}
	return c
}

// Instant is the instant bound at x: pods that serve the moment they are created. It is the
// bound of a run whose ready pods are recorded rather than modelled (the actual row).
func (b *NeedBound) Instant(x float64) float64 {
	k := len(b.saved) - 1
	over := min(k, max(0, int(math.Floor(x*float64(k)+1e-9))))
	return (b.total - b.saved[over]) * b.unit
}

// Floor is the lowest bound ÷ the envelope's cost over the overload fractions in [lo, hi]
// that a whole number of scored ticks can make (NaN when none can).
func (b *NeedBound) Floor(env []FrontierPoint, lo, hi float64) float64 {
	k := float64(len(b.saved) - 1)
	floor := math.NaN()
	for n := int(math.Ceil(lo*k - 1e-9)); n <= int(math.Floor(hi*k+1e-9)) && n < len(b.saved); n++ {
		x := float64(n) / k
		c, _ := EnvelopeCost(env, x)
		if v := b.Cost(x) / c; !(v >= floor) {
			floor = v
		}
	}
	return floor
}

// boundReach is the overload fraction up to which a trace's NeedBound is refined: past the
// budget's band (the unavoidable share added), where the floor is read, and past what a run
// near it overloads; beyond it the bound holds but is looser.
func boundReach(unavoidable float64, o Options) float64 {
	return unavoidable + max(0.05, 3*o.Calibration.Budget)
}

// peak is Peak, or Inst for a World built without it.
func (w *World) peak() []float64 {
	if w.Peak != nil {
		return w.Peak
	}
	return w.Inst
}

// multi says whether the world has several metrics.
func (w *World) multi() bool { return len(w.Metrics) > 1 }

// NewWorldMetrics lays the samples of several metrics (cores of R each, columns[k] metric
// names[k]'s) with one sample period on the tick grid of o. One metric is NewWorld.
func NewWorldMetrics(names []string, columns [][]float64, period time.Duration, o Options) (*World, error) {
	if len(columns) == 0 || len(names) != len(columns) {
		return nil, fmt.Errorf("%d metric names for %d columns", len(names), len(columns))
	}
	w, err := NewWorld(columns[0], period, o)
	if err != nil || len(columns) == 1 {
		return w, err
	}
	w.Metrics = names
	w.MInst, w.MObs = [][]float64{w.Inst}, [][]float64{w.Obs}
	w.Peak = slices.Clone(w.Inst)
	for k, c := range columns[1:] {
		if len(c) != len(columns[0]) {
			return nil, fmt.Errorf("metric %s: %d samples, metric %s has %d", names[k+1], len(c), names[0], len(columns[0]))
		}
		wk, err := NewWorld(c, period, o)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", names[k+1], err)
		}
		w.MInst, w.MObs = append(w.MInst, wk.Inst), append(w.MObs, wk.Obs)
		for i, d := range wk.Inst {
			w.Peak[i] = math.Max(w.Peak[i], d)
		}
	}
	return w, nil
}

// NewWorld lays samples (cores) with the given sample period on the tick grid of o.
func NewWorld(samples []float64, period time.Duration, o Options) (*World, error) {
	if len(samples) == 0 {
		return nil, errors.New("empty demand series")
	}
	if period <= 0 {
		return nil, fmt.Errorf("sample period must be positive, got %v", period)
	}
	if o.Tick <= 0 {
		return nil, fmt.Errorf("tick must be positive, got %v", o.Tick)
	}
	total := time.Duration(len(samples)-1) * period
	n := int(total/o.Tick) + 1
	w := &World{Period: period, Tick: o.Tick, Inst: make([]float64, n), Obs: make([]float64, n)}
	linear := o.Demand != DemandStep
	// cum[k] = ∫ demand over [0, k·period].
	cum := make([]float64, len(samples))
	P := period.Seconds()
	for k := 1; k < len(samples); k++ {
		if linear {
			cum[k] = cum[k-1] + P*(samples[k-1]+samples[k])/2
		} else {
			cum[k] = cum[k-1] + P*samples[k-1]
		}
	}
	at := func(t time.Duration) float64 { // instantaneous demand
		k := int(t / period)
		if k >= len(samples)-1 {
			return samples[len(samples)-1]
		}
		if !linear {
			return samples[k]
		}
		f := float64(t-time.Duration(k)*period) / float64(period)
		return samples[k] + f*(samples[k+1]-samples[k])
	}
	integral := func(t time.Duration) float64 { // ∫ demand over [0, t]
		k := int(t / period)
		if k >= len(samples)-1 {
			return cum[len(samples)-1] + (t-time.Duration(len(samples)-1)*period).Seconds()*samples[len(samples)-1]
		}
		dt := (t - time.Duration(k)*period).Seconds()
		if linear {
			return cum[k] + dt*(samples[k]+at(t))/2
		}
		return cum[k] + dt*samples[k]
	}
	warmTime := time.Duration(o.Warmup) * period
	w.Warm = n
	for i := range n {
		t := time.Duration(i) * o.Tick
		w.Inst[i] = at(t)
		from := max(0, t-o.MetricWindow)
		if o.MetricWindow <= 0 || t == 0 {
			w.Obs[i] = w.Inst[i]
		} else {
			w.Obs[i] = (integral(t) - integral(from)) / (t - from).Seconds()
		}
		if t >= warmTime && w.Warm == n {
			w.Warm = i
		}
	}
	return w, nil
}

type job struct {
	trace   int
	policy  string
	target  float64 // for sweep runs: the HPA target; 0 otherwise
	startup int     // index into the start-up delays; 0 is Options.StartupDelay
}

// RunTraces backtests every policy on every trace, plus the HPA target sweep and the oracle,
// at Options.StartupDelay and at each delay of Options.StartupSweep.
func RunTraces(ctx context.Context, traces []trace.Trace, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Options: o, Traces: make([]TraceResult, len(traces))}
	worlds := make([]*World, len(traces))
	for i, t := range traces {
		vals := t.Values
		if o.MaxSteps > 0 && len(vals) > o.MaxSteps {
			vals = vals[:o.MaxSteps]
		}
		if len(vals) < o.Warmup+10 {
			return nil, fmt.Errorf("trace %s: %d samples; need more than warmup (%d) + 10 to score anything", t.Name, len(vals), o.Warmup)
		}
		period := o.SamplePeriod
		if period == 0 {
			period = time.Duration(max(t.StepMinutes, 1)) * time.Minute
		}
		var (
			scale  float64
			scales []MetricScale
			err    error
		)
		if len(t.Metrics) > 1 {
			if scales, worlds[i], err = metricWorld(t, period, o); err != nil {
				return nil, fmt.Errorf("trace %s: %w", t.Name, err)
			}
			scale = scales[0].Scale
		} else {
			if scale, err = o.ScaleFor(vals); err != nil {
				return nil, fmt.Errorf("trace %s: %w", t.Name, err)
			}
			d := make([]float64, len(vals))
			for j, v := range vals {
				d[j] = v * scale
			}
			if worlds[i], err = NewWorld(d, period, o); err != nil {
				return nil, fmt.Errorf("trace %s: %w", t.Name, err)
			}
		}
		rec := o.Recorded[t.Name]
		if rec.Replicas != nil {
			if len(rec.Replicas) < len(vals) {
				return nil, fmt.Errorf("trace %s: %d recorded replica counts for %d samples", t.Name, len(rec.Replicas), len(vals))
			}
			worlds[i].Recorded = rec.Replicas[:len(vals)]
			if rec.Ready != nil {
				if len(rec.Ready) < len(vals) {
					return nil, fmt.Errorf("trace %s: %d recorded ready counts for %d samples", t.Name, len(rec.Ready), len(vals))
				}
				worlds[i].RecordedReady = rec.Ready[:len(vals)]
			}
		}
		rep.Traces[i] = TraceResult{Trace: t.Name, Class: t.Class, Samples: len(vals), SamplePeriod: period, Scale: scale, Metrics: scales,
			Start: rec.Start, WarmupTime: time.Duration(o.Warmup) * period, Ticks: len(worlds[i].Inst), OracleFrontierRatio: math.NaN(),
			Unavoidable: worlds[i].Unavoidable(o), ActualReady: actualReady(rec)}
		rep.Traces[i].bound = worlds[i].NeedBound(o, boundReach(rep.Traces[i].Unavoidable, o))
		if rec.Asked > 0 {
			sr := NewScoredRange(rec.Asked, rec.RangeStart, rec.Start, len(vals), o.Warmup, period)
			rep.Traces[i].Range = &sr
		}
		rep.Coverage = append(rep.Coverage, rec.Coverage...)
	}
	delays := append([]time.Duration{o.StartupDelay}, o.StartupSweep...)
	delays = slices.DeleteFunc(slices.Clone(delays[1:]), func(d time.Duration) bool { return d == o.StartupDelay })
	delays = append([]time.Duration{o.StartupDelay}, delays...)
	var jobs []job
	for s := range delays {
		for i := range traces {
			if worlds[i].Recorded != nil {
				jobs = append(jobs, job{trace: i, policy: ActualPolicy, startup: s})
			}
			for _, p := range o.Policies {
				jobs = append(jobs, job{trace: i, policy: p, startup: s})
			}
			if !slices.ContainsFunc(o.Policies, func(p string) bool { return strings.EqualFold(p, OraclePolicy) }) {
				jobs = append(jobs, job{trace: i, policy: OraclePolicy, startup: s})
			}
			for _, tg := range o.SweepTargets {
				jobs = append(jobs, job{trace: i, policy: "hpa", target: tg, startup: s})
			}
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
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				j := jobs[k]
				po := o
				po.StartupDelay = delays[j.startup]
				if j.target > 0 || j.startup > 0 {
					po.KeepSeries = false
				}
				switch {
				case j.target > 0:
					po.Params.Target = j.target
				case strings.EqualFold(j.policy, "hpa"):
					po.Params = o.hpaParams() // the workload's HPA, where the what-if found it
				}
				if j.policy == ActualPolicy {
					results[k], errs[k] = simulateActual(ctx, worlds[j.trace], po)
				} else {
					results[k], errs[k] = Simulate(ctx, worlds[j.trace], j.policy, po)
				}
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
	for s := range delays[1:] {
		rep.Startup = append(rep.Startup, StartupResult{Delay: delays[s+1], Traces: make([]TraceResult, len(traces))})
		for i := range traces {
			tr := rep.Traces[i]
			tr.Runs, tr.Frontier = nil, nil
			so := o
			so.StartupDelay = delays[s+1]
			tr.bound = worlds[i].NeedBound(so, boundReach(tr.Unavoidable, so))
			rep.Startup[s].Traces[i] = tr
		}
	}
	for k, j := range jobs {
		tr := &rep.Traces[j.trace]
		if j.startup > 0 {
			tr = &rep.Startup[j.startup-1].Traces[j.trace]
		}
		if errs[k] != nil {
			if j.target > 0 {
				tr.SweepFailed = errs[k].Error()
				continue
			}
			return nil, fmt.Errorf("trace %s, policy %s: %w", tr.Trace, j.policy, errs[k])
		}
		if j.target > 0 {
			r := results[k]
			tr.Frontier = append(tr.Frontier, FrontierPoint{Target: j.target, Cost: r.Cost, OverloadFraction: r.OverloadFraction, ActionsPerDay: r.ActionsPerDay})
			continue
		}
		tr.Runs = append(tr.Runs, results[k])
	}
	for i := range rep.Traces {
		finishTrace(&rep.Traces[i], o.Calibration.Budget)
		rep.notes(&rep.Traces[i])
		rep.metricNotes(&rep.Traces[i])
	}
	for s := range rep.Startup {
		for i := range rep.Startup[s].Traces {
			finishTrace(&rep.Startup[s].Traces[i], o.Calibration.Budget)
		}
	}
	if o.Configured != "" && len(rep.Traces) > 0 {
		rep.Recommendation = Recommend(rep.Traces[0], o)
	}
	return rep, nil
}

// HistoryWarnings lists, before a run, every policy whose model needs more samples than the
// warm-up gives on a trace (a daily Holt-Winters on one-minute samples needs two days): it
// forecasts nothing until then, and the report's forecast_coverage column says how much of the
// scored time it missed.
func HistoryWarnings(traces []trace.Trace, o Options) []string {
	var out []string
	for _, t := range traces {
		period := o.SamplePeriod
		if period == 0 {
			period = time.Duration(max(t.StepMinutes, 1)) * time.Minute
		}
		for _, p := range o.Policies {
			if _, ok, _ := ParseClairvoyant(p); ok {
				continue
			}
			spec, err := policy.Parse(p, o.DebiModel)
			if err != nil || spec.Model == "" {
				continue
			}
			mc := o.Model
			if mc.Season == 0 {
				mc.Season = policy.SeasonSteps(o.Season, period)
			}
			f, err := forecast.New(spec.Model, mc)
			if err != nil {
				continue
			}
			if need := f.MinHistory(); need > o.Warmup {
				out = append(out, fmt.Sprintf("%s/%s: %s needs %d samples (%v) before its first forecast; the warm-up is %d samples",
					t.Name, spec.Name, spec.Model, need, time.Duration(need)*period, o.Warmup))
			}
		}
	}
	return out
}

// metricWorld scales each metric of t (truncated to Options.MaxSteps) to cores of R — by its
// capacity per pod where Options.Capacity gives one, else as a one-metric trace is — and lays
// them on the tick grid.
func metricWorld(t trace.Trace, period time.Duration, o Options) ([]MetricScale, *World, error) {
	for name := range o.Capacity {
		if !slices.Contains(t.Metrics, name) {
			return nil, nil, fmt.Errorf("trace.capacity: no metric %q (the trace's: %s)", name, strings.Join(t.Metrics, ", "))
		}
	}
	scales := make([]MetricScale, len(t.Metrics))
	cols := make([][]float64, len(t.Metrics))
	for k, name := range t.Metrics {
		vals := t.Columns[k]
		if o.MaxSteps > 0 && len(vals) > o.MaxSteps {
			vals = vals[:o.MaxSteps]
		}
		scale := o.Request / o.Capacity[name]
		if _, ok := o.Capacity[name]; !ok {
			var err error
			if scale, err = o.ScaleFor(vals); err != nil {
				return nil, nil, fmt.Errorf("metric %s: %w", name, err)
			}
		}
		scales[k] = MetricScale{Metric: name, Scale: scale, Capacity: o.Request / scale}
		cols[k] = make([]float64, len(vals))
		for j, v := range vals {
			cols[k][j] = v * scale
		}
	}
	w, err := NewWorldMetrics(t.Metrics, cols, period, o)
	return scales, w, err
}

// metricNotes names, on a trace with several metrics, how many overloaded ticks each metric
// caused in each policy's run.
func (rep *Report) metricNotes(tr *TraceResult) {
	for _, r := range tr.Runs {
		if r.MetricOverload == nil {
			continue
		}
		parts := make([]string, len(r.MetricOverload))
		for k, m := range r.MetricOverload {
			parts[k] = fmt.Sprintf("%s %.2f%% (%d ticks, %d alone)", m.Metric, 100*m.Fraction, m.Ticks, m.Alone)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s/%s: overloaded %.2f%% of the scored ticks (any metric); by metric: %s",
			tr.Trace, r.Policy, 100*r.OverloadFraction, strings.Join(parts, ", ")))
	}
}

// notes says what a reader of the trace's figures must know.
func (rep *Report) notes(tr *TraceResult) {
	for _, r := range tr.Runs {
		if r.ModelHistory > rep.Options.Warmup && !math.IsNaN(r.ForecastCoverage) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s/%s: the model needs %d samples (%v), the warm-up gives %d: it forecast %.0f%% of the scored time",
				tr.Trace, r.Policy, r.ModelHistory, time.Duration(r.ModelHistory)*tr.SamplePeriod, rep.Options.Warmup, 100*r.ForecastCoverage))
		}
	}
}

// finishTrace fills the ratios to hpa, to the frontier and to the oracle, the frontier floor of
// the overload budget b, and each run's share of the floor's saving (FloorClosed).
func finishTrace(tr *TraceResult, b float64) {
	hpaCost, actualCost := math.NaN(), math.NaN()
	for _, r := range tr.Runs {
		switch r.Policy {
		case "hpa":
			hpaCost = r.Cost
		case ActualPolicy:
			actualCost = r.Cost
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
		r.ActualRatio = r.Cost / actualCost
		r.FrontierRatio = math.NaN()
		if len(env) > 0 {
			c, clamped := EnvelopeCost(env, r.OverloadFraction)
			r.FrontierRatio, r.FrontierClamped = r.Cost/c, clamped
		}
		if r.Policy == OraclePolicy {
			tr.OracleFrontierRatio = r.FrontierRatio
		}
		r.FrontierBound = math.NaN()
		if len(env) > 0 && tr.bound != nil {
			c, _ := EnvelopeCost(env, r.OverloadFraction)
			bound := tr.bound.Cost
			if r.Policy == ActualPolicy && strings.HasPrefix(tr.ActualReady, "recorded") {
				bound = tr.bound.Instant // recorded pods did not start as the model's do
			}
			r.FrontierBound = bound(r.OverloadFraction) / c
		}
	}
	tr.FrontierFloor = math.NaN()
	if len(env) > 0 && tr.bound != nil {
		tr.FrontierFloor = tr.bound.Floor(env, tr.Unavoidable+0.5*b, tr.Unavoidable+1.5*b)
	}
	oracleCost := math.NaN()
	for _, r := range tr.Runs {
		if r.Policy == OraclePolicy {
			oracleCost = r.Cost
		}
	}
	for i := range tr.Runs {
		r := &tr.Runs[i]
		r.GapClosed = GapClosed(r.FrontierRatio, tr.OracleFrontierRatio)
		r.FloorClosed = FloorClosed(r.FrontierRatio, tr.FrontierFloor)
		r.GapAtOverload = math.NaN()
		if len(env) > 0 && !math.IsNaN(oracleCost) {
			if e, _ := EnvelopeCost(env, r.OverloadFraction); e-oracleCost >= MinFloorSaving*e {
				r.GapAtOverload = (e - r.Cost) / (e - oracleCost)
			}
		}
	}
}

// GapClosed is (1 − fr)/(1 − oracle): 0 for no better than the best fixed HPA target at the
// same overload, 1 for the oracle. NaN (undefined) when the oracle saves less than
// MinFloorSaving over the envelope: the ratio would divide by about zero (−41.6 for a policy
// 0.4 % dearer than the envelope when the oracle saves 0.01 %).
func GapClosed(fr, oracle float64) float64 {
	if math.IsNaN(fr) || math.IsNaN(oracle) || !(1-oracle >= MinFloorSaving) {
		return math.NaN()
	}
	return (1 - fr) / (1 - oracle)
}

// MinFloorSaving is the least saving 1 − frontier_floor for which FloorClosed is defined: below
// it the floor is as dear as the best fixed target (or dearer), and the ratio would divide by
// about zero. GapClosed and GapAtOverload ask the same of the oracle's saving.
const MinFloorSaving = 0.01

// FloorClosed is (1 − fr)/(1 − floor), the share of the saving at equal overload that the
// floor shows possible which a frontier ratio fr captures: 0 for no better than the best
// fixed HPA target, 1 at the floor, negative for a policy dearer than the best fixed target.
// NaN (undefined) when either input is NaN or infinite, or when the floor saves less than
// MinFloorSaving (a floor at or above 1 leaves nothing to close).
func FloorClosed(fr, floor float64) float64 {
	if math.IsNaN(fr) || math.IsInf(fr, 0) || math.IsNaN(floor) || math.IsInf(floor, 0) || !(1-floor >= MinFloorSaving) {
		return math.NaN()
	}
	return (1 - fr) / (1 - floor)
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

// simulateActual replays the recorded replica counts of w: the spec follows the recording
// (each count holds until the next sample) without decision delay, and the run is scored like
// every policy's. The pods that served are the recorded ready counts where w has them (pods
// that crashed, failed their probes or waited for a node count as they did), else new pods
// serve after the start-up delay, as in the policies' rows.
func simulateActual(ctx context.Context, w *World, o Options) (Run, error) {
	if len(w.Recorded) == 0 {
		return Run{}, errors.New("no recorded replicas")
	}
	o.DecisionDelay = 0
	sample := func(i int, vals []float64) int32 {
		return ceilInt32(math.Round(vals[min(int(time.Duration(i)*w.Tick/w.Period), len(vals)-1)]))
	}
	var ready func(int) int32
	if len(w.RecordedReady) > 0 {
		ready = func(i int) int32 { return max(sample(i, w.RecordedReady), 0) }
	}
	return simulate(ctx, w, ActualPolicy, o, ceilInt32(w.Recorded[0]), func(_ context.Context, i int, _ policy.Observation) (policy.Result, error) {
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: sample(i, w.Recorded), Reason: "recorded"}}, nil
	}, false, 0, ready)
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

// needAt is the fewest pods that serve demand d at u_sla, clamped to the bounds: n*(t), the
// oracle's size and the SPEC RG reference. It uses the scorer's own comparison, so a size of
// needAt is never counted as overloaded.
func needAt(d float64, o Options) int32 {
	per := o.SLAUtilization * o.Request
	n := ceilInt32(d / per)
	for d > o.SLAUtilization*float64(n)*o.Request && n < math.MaxInt32 {
		n++
	}
	return min(max(n, o.Params.MinReplicas), o.Params.MaxReplicas)
}

// oracle knows future demand (METHOD §7): at tick i it orders the largest need over the ticks
// until the pods it orders now can serve (decision delay and start-up delay, each rounded up
// to whole ticks): every tick's demand is covered at u_sla although new pods arrive late.
func oracle(w *World, o Options) decider {
	ticks := func(d time.Duration) int { return int((d + w.Tick - 1) / w.Tick) }
	k := ticks(o.DecisionDelay) + ticks(o.StartupDelay)
	return func(_ context.Context, i int, obs policy.Observation) (policy.Result, error) {
		var n int32
		peak := w.peak()
		for j := i; j <= min(i+k, len(peak)-1); j++ {
			n = max(n, needAt(peak[j], o)) // the smallest count that carries every metric
		}
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: n, Reason: "oracle"}}, nil
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

// cluster simulates a deployment: a pod added at t serves from t + delay (it is paid for from
// t); removed pods go at once, newest (not yet ready) first.
type cluster struct {
	spec    int32
	readyAt []time.Duration // ready time of each pod, in creation order (so non-decreasing)
	delay   time.Duration
}

func newCluster(n int32, delay time.Duration) *cluster {
	return &cluster{spec: n, readyAt: make([]time.Duration, n), delay: delay}
}

// ready counts the pods serving at t.
func (c *cluster) ready(t time.Duration) int32 {
	// readyAt is non-decreasing: the ready pods are a prefix.
	return int32(sort.Search(len(c.readyAt), func(i int) bool { return c.readyAt[i] > t }))
}

// scale sets the spec to n at t and reports whether it changed.
func (c *cluster) scale(t time.Duration, n int32) bool {
	n = max(n, 0)
	if n == c.spec {
		return false
	}
	for int32(len(c.readyAt)) < n {
		c.readyAt = append(c.readyAt, t+c.delay)
	}
	c.readyAt = c.readyAt[:n]
	c.spec = n
	return true
}
