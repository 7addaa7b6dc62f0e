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

import "time"

// OraclePolicy is the name of the backtest-only policy that knows future demand (METHOD §7).
const OraclePolicy = "oracle"

// ActualPolicy is the row of what actually ran on a recorded trace (Options.Recorded): the
// workload's recorded replica count, scored like every policy, so that each one is compared
// with what happened.
const ActualPolicy = "actual"

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
	// min_replicas (one above what max_replicas serve holds max_replicas, as every policy
	// compared does); the cheapest choice of the x overloaded ticks is bounded from below. At zero
	// overload it is the oracle's own cost. A FrontierRatio target below it is out of reach on
	// this trace at this overload. The actual row, whose ready pods are recorded, gets the
	// bound without the start-up (NeedBound.Instant).
	FrontierBound float64 `json:"frontier_bound"`
	// FloorClosed is (1 − FrontierRatio)/(1 − FrontierBound): the share of the saving over the
	// fixed targets at this run's own overload that the floor no schedule can beat there shows
	// possible which this policy captures (0 = no better than the best fixed target, 1 = at the
	// floor, below 0 = dearer than the best fixed target). Its three terms are read at one
	// overload, as FrontierRatio is. Unlike GapClosed it is measured against what is possible
	// at that overload, not at the oracle's zero overload. NaN when the floor saves less than
	// 1 % or an input is missing (FloorClosed).
	FloorClosed float64 `json:"floor_closed"`
	// FloorClosedBand is (1 − FrontierRatio)/(1 − the trace's FrontierFloor): the same against
	// the lowest floor anywhere in the budget's band, read at another overload than the run's
	// where that is lower (the headline until issue 31's twelfth round; json only).
	FloorClosedBand float64 `json:"floor_closed_band"`
	// Utilization is ∫min(D, Nr·R) / ∫N·R.
	Utilization float64 `json:"utilization"`
	// OverloadFraction is the share of scored time with D > u_sla·Nr·R as Options.Overload
	// counts it: at the ticks (the demand at each tick against the pods ready then), or
	// OverloadTime.
	OverloadFraction float64 `json:"overload_fraction"`
	// OverloadTime is the share of scored time with D > u_sla·Nr·R read between the ticks:
	// over each tick's interval, the demand as the demand model lays it (linear between the
	// ticks, or the level at the interval's start under step) against the pods ready over it
	// (those of the tick before, after its decision). A pod that arrives at a tick serves from
	// that tick on, so the part of the interval before it that the demand was above the pods
	// there were is counted, which the count at the ticks does not see.
	OverloadTime float64 `json:"overload_time"`
	// OverloadEpisodes counts the runs of consecutive scored ticks with avoidable overload (as
	// Options.Overload counts it, at a tick where max_replicas would have served the demand):
	// the incidents an on-call would see. LongestOverload is the longest run's duration in
	// seconds.
	OverloadEpisodes int     `json:"overload_episodes"`
	LongestOverload  float64 `json:"longest_overload"`
	// BandMissChance is the chance that a policy whose avoidable overload equals the budget in
	// expectation, in episodes as long as this run's mean episode, arriving at random (a
	// Poisson process), lands outside 0.5–1.5× the budget over this trace's scored ticks
	// (BandMissChance): how much a miss of the band on this trace says about the policy and how
	// much is the trace's length. NaN without a budget or an episode.
	BandMissChance float64 `json:"band_miss_chance"`
	// Pages and Tickets count the firings of the burn-rate alerts debi ships for a budget
	// policy (rules/debi.alerts.yaml: the page, the burn ticket and the exhausted ticket),
	// replayed over the run's overload as Options.Overload counts it (all of it, as the
	// exporter's debi_budget_overloaded_seconds_total does) at the budget: what an on-call with
	// debi's rules would have had.
	Pages   int `json:"pages"`
	Tickets int `json:"tickets"`
	// avoidable is the avoidable overload in ticks, which BandMissChance reads.
	avoidable float64
	// Unserved is ∫max(0, D − Nr·R) dt in core-hours.
	Unserved float64 `json:"unserved"`
	// ScaleActions count changes of the spec replica count; ActionsPerDay per scored day.
	ScaleActions  int     `json:"scale_actions"`
	ActionsPerDay float64 `json:"actions_per_day"`
	// MeanReplicas is the time mean of N(t).
	MeanReplicas float64 `json:"mean_replicas"`
	// ZeroShare is the share of scored time at zero replicas, and ColdOverload the share
	// overloaded with no pod ready: at zero, or woken and starting (min_replicas 0).
	ZeroShare    float64 `json:"zero_share"`
	ColdOverload float64 `json:"cold_overload"`
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
	// Startups are the start-ups of the pods that served during the run, in the order they
	// came to serve (the pods there at the start are not among them).
	Startups []Startup `json:"-"`
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
	// Pages and Tickets are the target's burn-rate alerts at the budget (Metrics.Pages).
	Pages      int  `json:"pages"`
	Tickets    int  `json:"tickets"`
	OnEnvelope bool `json:"on_envelope"`
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
	// policy can avoid (demand beyond the max_replicas bound), counted as Options.Overload counts.
	Unavoidable float64 `json:"unavoidable_overload"`
	// UnavoidableTime is Unavoidable read between the ticks, as Run.OverloadTime reads.
	UnavoidableTime float64 `json:"unavoidable_overload_time"`
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
	// IdleHold is a what-if's configured budget policy replayed again under
	// scaling.budget.idle hold, for the recommendation (nil where it is not run).
	IdleHold *Run `json:"-"`
	// Naive is a what-if's configured budget policy replayed again with the model naive (the
	// last value), for the recommendation (nil where it is not run).
	Naive *Run `json:"-"`
	// ActualReady says where the actual row's ready pods come from: the recorded ready count
	// (and its query), or the model of the policies' rows and why ("" without an actual row).
	ActualReady string `json:"actual_ready,omitempty"`
	// Range is, for a what-if (Recorded.Asked), how much of the requested range was scored.
	Range *ScoredRange `json:"-"`
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
