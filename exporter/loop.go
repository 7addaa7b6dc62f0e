package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// The inputs of one step, in the order they are queried. The names are the values of the
// "query" label of the query metrics and the fields of a policy's queries section.
const (
	qReplicas = iota
	qReady
	qRequest
	qDemand
	numQueries
)

var queryNames = [numQueries]string{"replicas", "ready_replicas", "request", "demand"}

// The queries of a policy are the two sizes, then two per metric: its capacity's base
// (request) and its demand, metric i's at qRequest+2i and qDemand+2i. A policy with one
// metric has exactly the four above.
func metricQuery(k int) (metric int, name string) {
	if k < qRequest {
		return -1, queryNames[k]
	}
	return (k - qRequest) / 2, queryNames[qRequest+(k-qRequest)%2]
}

// Exporter runs the policies of one shard: every interval it queries each policy's inputs,
// steps its policy.Runner and publishes the results through a Collector over an atomically
// swapped snapshot.
//
// Steps are evaluated on a fixed grid, t = k·interval since the Unix epoch, and every query of
// the step for t is evaluated at t (instant queries with an explicit time, range queries whose
// points fall on the grid). A policy's model history advances on a coarser grid, once per its
// history_step (a multiple of the interval, so that grid is part of the step grid): the runner
// takes a history point at the first step of each history step and decides at every step. The
// start-up history is loaded with range queries on the history-step grid and fed as one
// observation per history step: the points a runner stepped all along would have taken as
// history (though each point's stabilised demand sees only the history points in its metrics
// window). The runner of a policy therefore sees exactly the sequence of observations that
// instant queries at those grid times return: any step can be replayed from Prometheus's data.
type Exporter struct {
	cfg *config.Config
	// q is what the policies' steps query: the step's batched answers (servingQuerier) over
	// base, the counted queries to Prometheus.
	q        Querier
	base     Querier
	log      *slog.Logger
	interval time.Duration
	offset   time.Duration
	timeout  time.Duration
	lookback time.Duration // global.lookback_delta of instant queries
	workers  int
	policies []*policyState

	// Batched queries (batch.go): the templates of the policy set's queries, the instant
	// batches planned from them, and the current step's prefetched answers.
	batching bool
	// syncTraining trains in line (tests that compare two exporters step by step).
	syncTraining bool
	templates    map[string]exprTemplate
	batches      []*batchGroup
	pre          *prefetched

	// sources are the clients of the metrics APIs, for the metrics read from them (sources.go).
	sources *sourceClients

	snap    atomic.Pointer[snapshot]
	ready   atomic.Bool
	now     func() time.Time
	metrics selfMetrics

	// mu is held by a step, the start-up query check and a reload's swap of the policy set (and
	// of cfg, q, timeout, workers), so that a reload happens between two steps.
	mu     sync.Mutex
	closed bool // set at shutdown: no reload after it
	// status is the policy set with each policy's failed mark, for debi_policy_failed and the
	// index page, swapped with the snapshot.
	status atomic.Pointer[[]policyStatus]
}

// policyStatus is one policy's line in the status snapshot.
type policyStatus struct {
	labels []string // policy, namespace, workload_type, workload
	failed bool
}

type selfMetrics struct {
	queryDuration *prometheus.HistogramVec
	loopDuration  prometheus.Histogram
	lastLoop      prometheus.Gauge
	skipped       prometheus.Counter
	policies      prometheus.Gauge
	panics        prometheus.Counter

	interval       prometheus.Gauge
	requests       *prometheus.CounterVec
	batches        prometheus.Gauge
	batchedQueries prometheus.Gauge
	batchFallbacks prometheus.Counter
}

// policyState is the loop's state of one policy. It is touched by one worker at a time during a
// step and read by publish after the step; Collect never sees it, only snapshots.
type policyState struct {
	cfg    *config.Policy
	path   string   // policies[i] in the configuration file, for errors
	labels []string // policy, namespace, workload_type, workload
	// runner steps the policy's metrics (one runner each, one decision over them).
	runner *policy.Multi
	// metrics are the policy's metrics and their loop state, in the order of the runner's.
	metrics []*metricState
	// decision is the policy's last decision over the metrics, deciding the index of the
	// metric that made it (-1: none).
	decision scaling.Decision
	deciding int
	// histStep is the history step (the runner's Config.Step); lead the horizon h in history
	// steps; horizon the same in seconds.
	histStep time.Duration
	lead     int
	horizon  float64

	current int32
	ready   int32
	known   bool // current and ready were seen at least once

	haveLast    bool // a step with loads has been taken (the metrics' last results are set)
	floor       int32
	ceiling     int32
	recommended int32
	stale       bool
	lastSuccess time.Time
	steps       uint64

	historyPoints int
	historyLoaded bool

	lastTrain     time.Time
	trainDuration time.Duration
	trainFailures float64
	queryErrors   []float64 // by query index (metricQuery)
	failing       bool      // for logging transitions only

	// failed is the configuration problem that marks the policy failed (nil: healthy): a query
	// returned several series or Prometheus rejected it as bad data. A failed policy holds and
	// is not stepped; every step checks its queries again. Set by the step around feed, never
	// by feed itself.
	failed error
	// historyWarned: a failed history load was logged at warn level; later ones go to debug.
	historyWarned bool

	// The overload-budget policy's side (budget true): u_sla and the budget's burn, in live
	// seconds observed and overloaded (any metric above u_sla × ready × its capacity).
	budget            bool
	sla               float64
	observedSeconds   float64
	overloadedSeconds float64
}

// metricState is the loop's state of one metric of a policy.
type metricState struct {
	spec config.ScaleMetric
	// base is the last known base of the capacity (the request query's value, or the fixed
	// capacity; 0: none yet), capacity the capacity per pod at the last step.
	base, capacity float64
	last           *policy.Result // last result with loads
	// missing: the metric had no load at the last step while the policy stepped (no usable
	// sample in its window, or no capacity). In a policy with several metrics its loads are then not published, so
	// that the webhook sees it missing and decides on the others, never scaling down (the HPA's
	// rule); with one metric the last loads stand, marked stale.
	missing bool
	// lastWDown is the load the budget's scale-down gate read at the step of last (the quantile
	// over the lead time plus the hold, as utilization at that step's size).
	lastWDown float64
	// forecasts is a ring of the point forecasts of D(k+h) made at history step k, at k % lead:
	// at history step k+h the one made h history steps earlier is scored.
	forecasts []pastForecast
	mae       maeWindow

	// A metric read from a metrics API (spec.Source): the step's read, the reason of the
	// current failure ("" while it reads), and the failed reads by reason.
	read         sourceRead
	failedReason string
	sourceErrors map[string]float64
}

// pastForecast is the point forecast made at history step index (NaN: none).
type pastForecast struct {
	index int64
	value float64
}

// maeWindow is a rolling mean of absolute errors over the last n values.
type maeWindow struct {
	vals []float64
	next int
	full bool
	sum  float64
}

func newMAEWindow(n int) maeWindow { return maeWindow{vals: make([]float64, n)} }

func (m *maeWindow) add(x float64) {
	if m.full {
		m.sum -= m.vals[m.next]
	}
	m.vals[m.next] = x
	m.sum += x
	m.next++
	if m.next == len(m.vals) {
		m.next, m.full = 0, true
	}
}

func (m *maeWindow) value() float64 {
	n := m.next
	if m.full {
		n = len(m.vals)
	}
	if n == 0 {
		return math.NaN()
	}
	return m.sum / float64(n)
}

// New builds an exporter for the given policies of cfg (usually the shard's selection) and
// registers its metrics with reg.
func New(cfg *config.Config, policies []config.Policy, q Querier, logger *slog.Logger, reg prometheus.Registerer) (*Exporter, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{
		cfg: cfg, log: logger, batching: cfg.Exporter.Batching(),
		interval: cfg.Global.Interval, offset: cfg.Exporter.QueryOffset, timeout: cfg.Global.QueryTimeout, lookback: cfg.Global.LookbackDelta,
		workers: max(cfg.Exporter.Concurrency, 1), now: time.Now, sources: &sourceClients{},
	}
	for i := range policies {
		ps, err := e.newPolicyState(cfg, &policies[i])
		if err != nil {
			return nil, err
		}
		e.policies = append(e.policies, ps)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	e.metrics = newSelfMetrics(reg)
	e.metrics.interval.Set(e.interval.Seconds())
	e.base = countingQuerier{q, e}
	e.q = checkingQuerier{servingQuerier{e}}
	e.replan()
	e.metrics.policies.Set(float64(len(e.policies)))
	e.snap.Store(&snapshot{})
	e.publishStatus()
	if err := reg.Register(collector{e}); err != nil {
		return nil, err
	}
	if err := reg.Register(statusCollector{e}); err != nil {
		return nil, err
	}
	return e, nil
}

// newSelfMetrics registers the exporter's own metrics.
func newSelfMetrics(reg prometheus.Registerer) selfMetrics {
	f := promauto.With(reg)
	return selfMetrics{
		queryDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "debi_exporter_query_duration_seconds",
			Help:    "Duration of the PromQL queries of the exporter, by input and query type (instant or range).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"query", "type"}),
		loopDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "debi_exporter_loop_duration_seconds",
			Help:    "Duration of one loop: every policy's queries and decisions.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60},
		}),
		lastLoop: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_last_loop_timestamp_seconds",
			Help: "Evaluation time of the last completed loop.",
		}),
		skipped: f.NewCounter(prometheus.CounterOpts{
			Name: "debi_exporter_skipped_steps_total",
			Help: "Steps skipped because the loop fell more than one interval behind.",
		}),
		policies: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_policies",
			Help: "Number of policies this exporter (shard) runs.",
		}),
		panics: f.NewCounter(prometheus.CounterOpts{
			Name: "debi_exporter_policy_panics_total",
			Help: "Policy steps that panicked; the policy is marked stale and the others go on.",
		}),
		interval: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_interval_seconds",
			Help: "The loop's interval (global.interval): DebiExporterLoopStalled fires when no loop completed for 3 of them.",
		}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_exporter_prometheus_queries_total",
			Help: "Queries the exporter sent to Prometheus, by type (instant or range): batched queries count once.",
		}, []string{"type"}),
		batches: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_query_batches",
			Help: "Batched instant queries per step: one per query template shared by several policies.",
		}),
		batchedQueries: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_batched_policy_queries",
			Help: "Policy queries answered by the batches at each step (the others are queried one by one).",
		}),
		batchFallbacks: f.NewCounter(prometheus.CounterOpts{
			Name: "debi_exporter_batch_fallbacks_total",
			Help: "Batched queries Prometheus rejected as bad data; their policies were queried one by one.",
		}),
	}
}

// observedSizes is policy.Config.Unapplied for every policy of the exporter: a stateful
// algorithm's state (the HPA's scale events, the budget's hold) follows the observed changes of
// size, never the exporter's own recommendations. The exporter applies nothing: the webhook
// writes a recommendation after scrape, rule evaluation and Alertmanager's grouping, seconds to a
// minute later, and an acting policy whose state counted the recommendation as applied at once
// would see its own scale-up as a rate-limited scale event that had not happened, fall back to
// the current size at the next step and publish that as its ceiling before the webhook reads it
// (e2e.TestClosedLoopTwoMetrics: with a 1 s interval an hpa policy never scaled). A shadow or
// paused policy's recommendations are never applied at all; the same rule covers them.
const observedSizes = true

// newPolicyState builds the loop's state of policy p of cfg: a new runner, no history yet.
func (e *Exporter) newPolicyState(cfg *config.Config, p *config.Policy) (*policyState, error) {
	rcs, names, err := p.RunnerConfigs()
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	rc := rcs[0]
	if rc.Step < e.interval || rc.Step%e.interval != 0 {
		// config.Load guarantees it; a hand-built configuration might not.
		return nil, fmt.Errorf("policy %q: history_step %v is not a positive multiple of the interval %v", p.Name, rc.Step, e.interval)
	}
	for i := range rcs {
		rcs[i].AsyncTraining = !e.syncTraining
		rcs[i].Unapplied = observedSizes
		rcs[i].Logger = e.log.With("policy", p.Name) // the runner warns when its model needs more history than it is given
		if len(rcs) > 1 {
			rcs[i].Logger = rcs[i].Logger.With("metric", names[i])
		}
	}
	r, err := policy.NewMulti(rcs, names)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	ps := &policyState{
		cfg: p, path: configPath(cfg, p.Name), runner: r, histStep: rc.Step, lead: rc.LeadSteps,
		labels:   []string{p.Name, p.Target.Namespace, p.Target.WorkloadType(), p.Target.Name},
		horizon:  (time.Duration(rc.LeadSteps) * rc.Step).Seconds(),
		budget:   rc.Spec.Load == policy.LoadBudget,
		sla:      rc.Params.Budget.SLAUtilization,
		deciding: -1,
	}
	for _, m := range p.ScaleMetrics() {
		ms := &metricState{spec: m, base: m.Capacity, lastWDown: math.NaN(),
			forecasts: make([]pastForecast, rc.LeadSteps), mae: newMAEWindow(cfg.Exporter.MAEWindow)}
		for j := range ms.forecasts {
			ms.forecasts[j] = pastForecast{math.MinInt64, math.NaN()}
		}
		if m.Source != nil {
			ms.read = sourceRead{value: math.NaN(), err: errors.New("not read yet")}
			ms.sourceErrors = map[string]float64{}
		}
		ps.metrics = append(ps.metrics, ms)
	}
	ps.queryErrors = make([]float64, qRequest+2*len(ps.metrics))
	if need, _ := r.ModelHistory(); need > rc.History && need == rc.LeadSteps+1 {
		// The runner warns when the model's own minimum exceeds the history; the horizon can
		// as well.
		e.log.Warn("the forecast horizon needs more history than the policy's history: no forecast until it has accumulated",
			"policy", p.Name, "needed_steps", need, "history_steps", rc.History, "history_step", rc.Step,
			"needed", time.Duration(need)*rc.Step)
	}
	return ps, nil
}

// publishStatus swaps in the status snapshot of the current policy set.
func (e *Exporter) publishStatus() {
	st := make([]policyStatus, len(e.policies))
	for i, ps := range e.policies {
		st[i] = policyStatus{labels: ps.labels, failed: ps.failed != nil}
	}
	e.status.Store(&st)
}

// reloadStats counts what a reload did to the policy set.
type reloadStats struct{ kept, rebuilt, added, removed int }

// apply swaps in a reloaded configuration (cfg, and policies, this shard's selection of it)
// between two steps: it waits for a running step. A policy whose configuration is unchanged
// (reflect.DeepEqual, and the same exporter.mae_window) keeps its runner, model and published
// state; a changed or new one starts afresh and loads its history at the next step; a removed
// one stops, and its series vanish with the snapshot published here. q, when not nil, replaces
// the querier (a new Prometheus URL or HTTP client configuration); query_timeout and
// concurrency apply from the next step. The step grid cannot change while the loop runs, so a
// new global.interval or exporter.query_offset is refused: nothing is applied.
func (e *Exporter) apply(cfg *config.Config, policies []config.Policy, q Querier) (reloadStats, error) {
	var st reloadStats
	if cfg.Global.Interval != e.interval {
		return st, fmt.Errorf("global.interval: changed from %v to %v; the step grid cannot change while the exporter runs: restart it to apply", e.interval, cfg.Global.Interval)
	}
	if cfg.Exporter.QueryOffset != e.offset {
		return st, fmt.Errorf("exporter.query_offset: changed from %v to %v; the step schedule cannot change while the exporter runs: restart it to apply", e.offset, cfg.Exporter.QueryOffset)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return st, errors.New("the exporter is shutting down")
	}
	old := make(map[string]*policyState, len(e.policies))
	for _, ps := range e.policies {
		old[ps.cfg.Name] = ps
	}
	sameMAE := cfg.Exporter.MAEWindow == e.cfg.Exporter.MAEWindow
	next := make([]*policyState, len(policies))
	var built []*policyState
	for i := range policies {
		p := &policies[i]
		prev, found := old[p.Name]
		if found && sameMAE && reflect.DeepEqual(*prev.cfg, *p) {
			next[i] = prev // its configuration is repointed below, once the reload cannot fail
			st.kept++
			continue
		}
		ps, err := e.newPolicyState(cfg, p)
		if err != nil {
			e.mu.Unlock()
			for _, ps := range built {
				ps.runner.Close()
			}
			return reloadStats{}, err
		}
		built = append(built, ps)
		next[i] = ps
		if found {
			st.rebuilt++
		} else {
			st.added++
		}
	}
	for i, ps := range next {
		if old[ps.cfg.Name] == ps { // kept
			ps.cfg, ps.path = &policies[i], configPath(cfg, ps.cfg.Name)
			delete(old, ps.cfg.Name)
		}
	}
	// What is left in old is stopped: the removed policies and the previous states of the
	// rebuilt ones.
	st.removed = len(old) - st.rebuilt
	e.cfg, e.policies = cfg, next
	e.timeout, e.workers, e.lookback = cfg.Global.QueryTimeout, max(cfg.Exporter.Concurrency, 1), cfg.Global.LookbackDelta
	e.batching = cfg.Exporter.Batching()
	if q != nil {
		e.base = countingQuerier{q, e}
	}
	e.replan()
	e.metrics.policies.Set(float64(len(next)))
	e.publish()
	e.publishStatus()
	e.mu.Unlock()
	// Outside the lock: the next step may start meanwhile, on the new set only.
	for _, ps := range old {
		ps.runner.Close()
	}
	return st, nil
}

// shutdown stops every policy's background training once the loop has stopped; a reload after
// it is refused.
func (e *Exporter) shutdown() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.Close()
}

// configPath is the field path of the named policy in the configuration file.
func configPath(cfg *config.Config, name string) string {
	for i := range cfg.Policies {
		if cfg.Policies[i].Name == name {
			return fmt.Sprintf("policies[%d]", i)
		}
	}
	return fmt.Sprintf("policy %q", name)
}

// gridTime is the latest step time at or before t: a multiple of the interval since the Unix
// epoch.
func (e *Exporter) gridTime(t time.Time) time.Time { return gridTime(t, e.interval) }

// gridTime is the latest multiple of step since the Unix epoch at or before t.
func gridTime(t time.Time, step time.Duration) time.Time {
	iv := step.Milliseconds()
	if iv <= 0 {
		return t
	}
	ms := t.UnixMilli()
	return time.UnixMilli(ms - ((ms%iv)+iv)%iv)
}

// CheckQueries runs every query of every policy once at t. A query that returns several series
// where one is expected, or that Prometheus rejects as bad data, is a configuration error: its
// policy is marked failed (logged, debi_policy_failed 1) and holds while the others run, and
// the errors are returned, each naming its field path. An unreachable Prometheus or an empty
// result is only logged, since data may come later.
func (e *Exporter) CheckQueries(ctx context.Context, t time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	var mu sync.Mutex
	e.prefetch(ctx, t)
	defer func() { e.pre = nil }()
	e.forEach(ctx, func(ctx context.Context, ps *policyState) {
		cfgErr, unanswered := e.checkPolicy(ctx, ps, t)
		for _, err := range unanswered {
			e.log.Warn("start-up query check failed; the policy will be stale until it succeeds", "policy", ps.cfg.Name, "err", err)
		}
		if cfgErr != nil {
			e.setFailed(ps, cfgErr)
			mu.Lock()
			errs = append(errs, cfgErr)
			mu.Unlock()
		}
	})
	e.publishStatus()
	return errors.Join(errs...)
}

// checkPolicy runs the policy's instant queries once at t. cfgErr joins the configuration errors
// (isConfigError), each naming its field path; unanswered lists the queries that failed
// otherwise (Prometheus unreachable, a timeout), after which nothing can be said of them. An
// empty result is an answer: data may come later.
func (e *Exporter) checkPolicy(ctx context.Context, ps *policyState, t time.Time) (cfgErr error, unanswered []error) {
	var errs []error
	for k, expr := range ps.queries() {
		if expr == "" {
			continue
		}
		_, err := e.instant(ctx, ps, k, expr, t)
		switch {
		case err == nil, errors.Is(err, ErrEmpty):
		case isConfigError(err):
			errs = append(errs, ps.queryError(k, err))
		default:
			unanswered = append(unanswered, ps.queryError(k, err))
		}
	}
	return errors.Join(errs...), unanswered
}

// queryError names the field path of query k of the policy, e.g. policies[2].queries.demand or
// policies[2].metrics[1].query.
func (ps *policyState) queryError(k int, err error) error {
	return fmt.Errorf("%s.%s (policy %q): %w", ps.path, ps.queryPath(k), ps.cfg.Name, err)
}

// queryPath is the field path of query k relative to the policy.
func (ps *policyState) queryPath(k int) string {
	i, name := metricQuery(k)
	switch {
	case i < 0:
		return "queries." + name
	case name == "demand":
		return ps.metrics[i].spec.QueryPath
	}
	return ps.metrics[i].spec.CapacityPath
}

// setFailed records the configuration problem found at a step or check (nil: none), logs the
// transitions, and makes a failed policy hold: stale, its recommendation the current size.
func (e *Exporter) setFailed(ps *policyState, err error) {
	switch {
	case err != nil && (ps.failed == nil || ps.failed.Error() != err.Error()):
		e.log.Error("policy failed: fix its query; it holds (stale, no scale-down) and is checked again at every step, the others run",
			"policy", ps.cfg.Name, "err", err)
	case err == nil && ps.failed != nil:
		e.log.Info("policy queries fixed; the policy runs again", "policy", ps.cfg.Name)
	}
	ps.failed = err
	if err != nil {
		ps.stale = true
		if ps.known {
			ps.recommended = ps.current
		}
	}
}

// queries are the policy's instant queries by query index ("": none). A metric read from a
// metrics API has no demand query: its value is the step's read.
func (ps *policyState) queries() []string {
	q := ps.cfg.Queries
	out := make([]string, 0, qRequest+2*len(ps.metrics))
	out = append(out, q.Replicas, q.ReadyReplicas)
	for _, m := range ps.metrics {
		d := m.spec.Query
		if m.spec.Source != nil {
			d = ""
		}
		out = append(out, m.spec.CapacityQuery, d)
	}
	return out
}

// rangeQueries are the policy's history queries by query index: its instant queries, and for a
// metric read from a metrics API the series the exporter published of it
// (config.SourceHistoryQuery).
func (ps *policyState) rangeQueries() []string {
	out := ps.queries()
	for i, m := range ps.metrics {
		if m.spec.Source != nil {
			out[qDemand+2*i] = m.spec.Query
		}
	}
	return out
}

// instant runs one input query, timing it and counting its errors (empty results included).
func (e *Exporter) instant(ctx context.Context, ps *policyState, k int, expr string, t time.Time) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	start := time.Now()
	_, batched := e.prefetchedInstant(expr, t)
	// global.lookback_delta: a sample older than that is no data (after a Prometheus outage,
	// the samples from before it are not current).
	v, err := instantValue(ctx, e.q, expr, t, v1.WithLookbackDelta(e.lookback))
	if !batched { // the batch's own query was timed
		_, name := metricQuery(k)
		e.metrics.queryDuration.WithLabelValues(name, "instant").Observe(time.Since(start).Seconds())
	}
	if err != nil {
		ps.queryErrors[k]++
	}
	return v, err
}

// forEach runs f for every policy on the exporter's workers and waits. A panic in one policy
// is recovered, logged and counted: policies are independent.
func (e *Exporter) forEach(ctx context.Context, f func(context.Context, *policyState)) {
	work := make(chan *policyState)
	var wg sync.WaitGroup
	for range min(e.workers, len(e.policies)) {
		wg.Go(func() {
			for ps := range work {
				func() {
					defer func() {
						if r := recover(); r != nil {
							e.metrics.panics.Inc()
							ps.stale = true
							e.log.Error("policy step panicked", "policy", ps.cfg.Name, "panic", r)
						}
					}()
					f(ctx, ps)
				}()
			}
		})
	}
	for _, ps := range e.policies {
		if ctx.Err() != nil {
			break
		}
		work <- ps
	}
	close(work)
	wg.Wait()
}

// Loop runs a step at every grid time until ctx is done. The step for t starts at t+offset;
// when the loop falls more than one interval behind it skips to the present and counts the
// skipped steps.
func (e *Exporter) Loop(ctx context.Context) error {
	t := e.gridTime(e.now().Add(-e.offset))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if d := t.Add(e.offset).Sub(e.now()); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		e.Step(ctx, t)
		next := t.Add(e.interval)
		if late := e.gridTime(e.now().Add(-e.offset)); late.After(next) {
			n := late.Sub(next) / e.interval
			e.metrics.skipped.Add(float64(n))
			e.log.Warn("loop fell behind; skipping steps", "skipped", int(n), "interval", e.interval)
			next = late
		}
		t = next
	}
}

// Step runs one step at grid time t for every policy and publishes the results. Until a
// policy's history is loaded, its step loads it first; a failed policy is checked instead of
// stepped (see stepChecked).
func (e *Exporter) Step(ctx context.Context, t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	// The metrics APIs are read while the batched PromQL runs.
	var sources sync.WaitGroup
	sources.Go(func() { e.readSources(ctx) })
	e.prefetch(ctx, t)
	sources.Wait()
	e.forEach(ctx, func(ctx context.Context, ps *policyState) {
		// A policy's step may run until the next step is due, so one slow policy cannot hold
		// the loop back by more than an interval.
		ctx, cancel := context.WithTimeout(ctx, e.interval)
		defer cancel()
		e.setFailed(ps, e.stepChecked(ctx, ps, t))
	})
	e.pre = nil
	e.publish()
	e.publishStatus()
	e.ready.Store(true)
	e.metrics.loopDuration.Observe(time.Since(start).Seconds())
	e.metrics.lastLoop.Set(float64(t.UnixMilli()) / 1e3)
}

// inputs are one step's query results, by query index; a nil error means the value is usable.
type inputs struct {
	val []float64
	err []error
}

func newInputs(n int) inputs { return inputs{val: make([]float64, n), err: make([]error, n)} }

func (e *Exporter) stepPolicy(ctx context.Context, ps *policyState, t time.Time) {
	qs := ps.queries()
	in := newInputs(len(qs))
	for k, expr := range qs {
		if expr == "" {
			in.err[k] = ErrEmpty
			continue
		}
		in.val[k], in.err[k] = e.instant(ctx, ps, k, expr, t)
	}
	for i, m := range ps.metrics {
		if m.spec.Source != nil { // read by readSources, fed as a PromQL demand is
			k := qDemand + 2*i
			in.val[k], in.err[k] = m.read.value, m.read.err
			if m.read.err != nil {
				ps.queryErrors[k]++
			}
		}
	}
	e.feed(ctx, ps, t, &in, false)
}

// stepChecked is one policy's step at t; it returns the configuration problem that marks the
// policy failed (nil: none).
//
// A failed policy is not stepped: its queries are checked again, and it runs again (from this
// step on) once they all answer without a configuration error. While its history is not
// loaded, the step loads it first (every step tries again). The live step then reads its
// inputs through a queryCheck, so that a query turning ambiguous at any step fails the policy
// as the start-up check would.
func (e *Exporter) stepChecked(ctx context.Context, ps *policyState, t time.Time) error {
	if ps.failed != nil {
		cfgErr, unanswered := e.checkPolicy(ctx, ps, t)
		if cfgErr != nil {
			return cfgErr
		}
		if len(unanswered) > 0 {
			// Prometheus did not answer: the queries may still be wrong.
			e.log.Debug("failed policy not checked: a query got no answer", "policy", ps.cfg.Name, "err", errors.Join(unanswered...))
			return ps.failed
		}
	}
	if !ps.historyLoaded {
		loaded, err := e.loadHistory(ctx, ps, t)
		if err != nil {
			return err
		}
		ps.historyLoaded = loaded
	}
	check := &queryCheck{ps: ps}
	e.stepPolicy(withQueryCheck(ctx, check), ps, t)
	return check.err()
}

// loadHistory loads the policy's history with range queries on the history-step grid and feeds
// it through the same path as live steps, one observation per history step, so that models
// start warm and the published state is the one at the last history point. It reports whether
// the queries succeeded (an empty history is a success: there is nothing to load), and returns
// the configuration error of a query that returned several series or was rejected as bad data.
//
// The runner needs its observations in time order, so a history that arrives after live steps
// were fed (its range queries failed while the instant ones worked) cannot be fed into the same
// runner: the policy starts again with a new runner fed the history, which covers the period of
// those live steps at the history step, as a restart of the exporter at t would. The counters
// and the budget's live burn carry over.
func (e *Exporter) loadHistory(ctx context.Context, ps *policyState, t time.Time) (bool, error) {
	start, end, ok := historyRange(t, ps.histStep, ps.cfg.History, e.cfg.Exporter.HistoryLookback)
	if !ok {
		return true, nil
	}
	r := v1.Range{Start: start, End: end, Step: ps.histStep}
	qs := ps.rangeQueries()
	series := make([]map[int64]float64, len(qs))
	for k, expr := range qs {
		if expr == "" {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, e.timeout)
		t0 := time.Now()
		_, batched := e.pre.rangeAnswer(expr, r)
		m, err := rangeValues(qctx, e.q, expr, r)
		cancel()
		if !batched { // the batch's own queries were timed
			_, name := metricQuery(k)
			e.metrics.queryDuration.WithLabelValues(name, "range").Observe(time.Since(t0).Seconds())
		}
		if err != nil {
			ps.queryErrors[k]++
			if isConfigError(err) {
				return false, ps.queryError(k, err)
			}
			log := e.log.Warn
			if ps.historyWarned {
				log = e.log.Debug
			}
			ps.historyWarned = true
			log("history not loaded; trying again at the next step", "policy", ps.cfg.Name, "query", ps.queryPath(k), "err", err)
			return false, nil
		}
		series[k] = m
	}
	// Day one: the default demand and request queries read recording rules that have no
	// history before debi was installed; the raw series they are computed from fill the times
	// the rules have no sample (config.Policy.HistoryFallback). Only a rule without the range's
	// first point is read again so: the raw series are in the same Prometheus, so a hole later
	// in the rule (an outage) is in them too, and a fleet with holes asks nothing more.
	fb := ps.cfg.HistoryFallback()
	for k, expr := range map[int]string{qDemand: fb.Demand, qRequest: fb.Request} {
		if _, ok := series[k][start.UnixMilli()]; expr == "" || series[k] == nil || ok {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, e.timeout)
		m, err := rangeValues(qctx, e.q, expr, r)
		cancel()
		if err != nil {
			e.log.Debug("history fallback not read", "policy", ps.cfg.Name, "query", queryNames[k], "err", err)
			continue
		}
		filled := 0
		for ts, v := range m {
			if _, ok := series[k][ts]; !ok {
				series[k][ts] = v
				filled++
			}
		}
		if filled > 0 {
			e.log.Info("history filled from the raw series where the recording rule has none", "policy", ps.cfg.Name, "query", queryNames[k], "points", filled)
		}
	}
	live := ps.steps > 0
	lastSuccess := ps.lastSuccess
	if live {
		if err := e.restartPolicy(ps); err != nil {
			e.log.Error("history loaded but the policy's runner could not be rebuilt; trying again at the next step", "policy", ps.cfg.Name, "err", err)
			return false, nil
		}
	}
	n := 0
	for ts := start; !ts.After(end); ts = ts.Add(ps.histStep) {
		in := newInputs(len(qs))
		for k := range qs {
			v, ok := series[k][ts.UnixMilli()]
			in.val[k] = v
			if !ok {
				in.val[k], in.err[k] = math.NaN(), ErrEmpty
			}
		}
		if e.feed(ctx, ps, ts, &in, true) {
			n++
		}
	}
	ps.historyPoints = n
	if lastSuccess.After(ps.lastSuccess) {
		ps.lastSuccess = lastSuccess // a live step's, later than the history's
	}
	if live || ps.historyWarned {
		e.log.Info("history loaded after failing", "policy", ps.cfg.Name, "points", n, "runner_rebuilt", live)
	}
	e.log.Debug("history loaded", "policy", ps.cfg.Name, "points", n, "from", start, "to", end, "history_step", ps.histStep)
	return true, nil
}

// restartPolicy replaces the policy's runner and model state with new ones, for a history that
// arrives after live steps. What is not the model's carries over: the counters (steps, query
// errors, training failures, the budget's live seconds), the last request, training times and
// the failure marks.
func (e *Exporter) restartPolicy(ps *policyState) error {
	fresh, err := e.newPolicyState(e.cfg, ps.cfg)
	if err != nil {
		return err
	}
	ps.runner.Close()
	old := *ps
	*ps = *fresh
	ps.path = old.path
	ps.steps, ps.queryErrors, ps.trainFailures = old.steps, old.queryErrors, old.trainFailures
	ps.observedSeconds, ps.overloadedSeconds = old.observedSeconds, old.overloadedSeconds
	ps.lastTrain, ps.trainDuration = old.lastTrain, old.trainDuration
	ps.failing, ps.failed, ps.historyWarned = old.failing, old.failed, old.historyWarned
	for i, m := range old.metrics {
		if i >= len(ps.metrics) {
			break
		}
		if m.base > 0 {
			ps.metrics[i].base = m.base
		}
		ps.metrics[i].read, ps.metrics[i].failedReason, ps.metrics[i].sourceErrors = m.read, m.failedReason, m.sourceErrors
	}
	return nil
}

// historyRange is the start-up history of a policy whose first live step is at t: the
// history-step grid times in (t − lookback, t), lookback = history × histStep (capped by
// maxLookback when positive). With the point the live step takes when t is on that grid, or
// the one at the start of t's history step otherwise, the runner holds history points. ok is
// false when the range is empty.
func historyRange(t time.Time, histStep time.Duration, history int, maxLookback time.Duration) (start, end time.Time, ok bool) {
	lookback := time.Duration(history) * histStep
	if maxLookback > 0 && maxLookback < lookback {
		lookback = maxLookback
	}
	from := t.Add(-lookback)
	start = gridTime(from, histStep)
	if !start.After(from) {
		start = start.Add(histStep)
	}
	end = gridTime(t.Add(-time.Millisecond), histStep)
	return start, end, !end.Before(start)
}

// feed turns one step's inputs into an observation, steps the runner and updates the policy's
// published state. It reports whether the runner was stepped.
//
// Degradation (HPA's rule: never scale down on missing data):
//   - replicas unknown (query failed or empty): the runner is not stepped; the last values are
//     kept, marked stale, and the recommendation is the last known current size;
//   - request unknown: the last known request is used; none yet is like unknown replicas;
//   - ready replicas unknown: taken equal to the current size;
//   - demand missing or NaN: the runner is stepped with a missing sample (its metrics policy
//     decides what that means); the result is marked stale and may recommend scaling up but
//     never below the current size. Without any usable sample in the window the last values
//     are kept and the recommendation is the current size.
func (e *Exporter) feed(ctx context.Context, ps *policyState, t time.Time, in *inputs, history bool) bool {
	// The capacities' bases: a request query's last positive value, or the fixed capacity.
	var noCapacity error
	capacityKnown := 0
	for i, m := range ps.metrics {
		k := qRequest + 2*i
		if in.err[k] == nil {
			if in.val[k] > 0 {
				m.base = in.val[k]
			} else {
				in.err[k] = fmt.Errorf("%w: request is %v", ErrEmpty, in.val[k])
			}
		}
		if m.base > 0 {
			capacityKnown++
		} else if noCapacity == nil {
			noCapacity = fmt.Errorf("%s: %w", ps.queryPath(k), in.err[k])
		}
	}
	var missing error
	switch {
	case in.err[qReplicas] != nil:
		missing = fmt.Errorf("replicas: %w", in.err[qReplicas])
	case in.val[qReplicas] < 0 || in.val[qReplicas] > math.MaxInt32:
		missing = fmt.Errorf("replicas: %w: %v is not a replica count", ErrEmpty, in.val[qReplicas])
	case capacityKnown == 0:
		if len(ps.metrics) == 1 {
			missing = fmt.Errorf("request: %w", in.err[qRequest])
		} else {
			missing = noCapacity
		}
	}
	if missing != nil {
		ps.stale = true
		if ps.known {
			ps.recommended = ps.current
		}
		if !history {
			e.logFailure(ps, missing)
		}
		return false
	}
	ps.current = int32(math.Round(in.val[qReplicas]))
	ps.ready = ps.current
	if in.err[qReady] == nil && in.val[qReady] >= 0 && in.val[qReady] <= math.MaxInt32 {
		ps.ready = int32(math.Round(in.val[qReady]))
	}
	ps.known = true
	demands := make([]float64, len(ps.metrics))
	capacities := make([]float64, len(ps.metrics))
	var demandErr error // the first metric whose demand is missing: no scale-down
	for i, m := range ps.metrics {
		k := qDemand + 2*i
		demands[i] = in.val[k]
		if in.err[k] != nil {
			demands[i] = math.NaN()
			if demandErr == nil {
				demandErr = fmt.Errorf("%s: %w", m.spec.QueryPath, in.err[k])
			}
		}
		if m.base <= 0 {
			// No capacity for this metric yet: it is missing, the others decide.
			demands[i] = math.NaN()
			if demandErr == nil {
				demandErr = fmt.Errorf("%s: %w", ps.queryPath(k-1), in.err[k-1])
			}
			continue
		}
		m.capacity = m.spec.CapacityPerPod(m.base, ps.current)
		capacities[i] = m.capacity
		if err := ps.runner.Runner(i).SetRequest(m.capacity); err != nil {
			ps.stale = true
			return false
		}
	}
	mr, err := ps.runner.Step(ctx, t, demands, ps.current, ps.ready)
	ps.steps++
	if ps.budget && !history {
		// The budget's burn, live steps only (the start-up history is one point per history
		// step, not time the exporter observed): the step's interval is observed when a metric
		// has a demand, and overloaded when any metric's demand exceeded u_sla·Nr·its capacity,
		// the runners' test, at max_replicas too.
		observed := false
		for _, d := range demands {
			observed = observed || (!math.IsNaN(d) && !math.IsInf(d, 0) && d >= 0)
		}
		if observed {
			ps.observedSeconds += e.interval.Seconds()
			if scaling.OverloadedAny(ps.sla, ps.ready, demands, capacities) {
				ps.overloadedSeconds += e.interval.Seconds()
			}
		}
	}
	for i, m := range ps.metrics {
		res := &mr.Results[i]
		if res.Training != nil {
			ps.lastTrain, ps.trainDuration = t, res.Training.Duration
		}
		if res.TrainError != nil {
			ps.trainFailures++
		}
		// Missing to the decision: no usable sample in its window (a NaN sample inside a window
		// that still has others is the stabilisation's to handle, and its loads stand).
		m.missing = err == nil && mr.Errs[i] != nil
		if err != nil || mr.Errs[i] != nil {
			continue // this metric has no loads this step: its last ones stand
		}
		wDown := math.NaN()
		if res.Budget != nil {
			// The runner's own state, valid until its next step: last must keep this step's.
			b := *res.Budget
			res.Budget = &b
			// The load the budget's scale-down gate read, with the runner's own arithmetic (the
			// quantile over the capacity at the current size), so that the webhook, which reads
			// it back as load="down", decides exactly as the runner did.
			wDown = res.Budget.QuantileDown / (float64(max(ps.current, 1)) * m.capacity)
		}
		m.last, m.lastWDown = res, wDown
		// Rolling forecast error, once per history step: the point forecast of D(k) made h
		// history steps earlier against the demand the history took at k. Between history
		// steps the forecast stands and nothing is scored.
		if res.NewSample {
			k := t.UnixNano() / int64(ps.histStep) // the runner's history-step index
			slot := int(k % int64(ps.lead))
			if f := m.forecasts[slot]; f.index == k-int64(ps.lead) && !math.IsNaN(f.value) && !math.IsNaN(res.Demand) {
				m.mae.add(math.Abs(res.Demand - f.value))
			}
			m.forecasts[slot] = pastForecast{k, res.DemandForecastEnd}
		}
	}
	switch {
	case err != nil:
		// No usable sample in any metric's window: keep the last values, do not move.
		ps.stale = true
		ps.recommended = ps.current
		if !history {
			e.logFailure(ps, err)
		}
	case demandErr != nil:
		ps.stale = true
		ps.haveLast, ps.decision, ps.deciding = true, mr.Decision, mr.Metric
		ps.floor, ps.ceiling = mr.Floor, mr.Ceiling
		ps.recommended = scaling.NoScaleDown(mr.Decision.Replicas, ps.current)
		if len(ps.metrics) > 1 && mr.Metric >= 0 {
			// Several metrics, some of them decided: a complete step for the webhook's age check,
			// which then decides on the metrics it can read, never scaling down (the missing
			// ones publish no loads); debi_policy_stale still says an input is missing.
			ps.lastSuccess = t
		}
		if !history {
			e.logFailure(ps, fmt.Errorf("demand: %w", demandErr))
		}
	default:
		ps.stale = false
		ps.haveLast, ps.decision, ps.deciding = true, mr.Decision, mr.Metric
		ps.floor, ps.ceiling = mr.Floor, mr.Ceiling
		ps.recommended = mr.Decision.Replicas
		ps.lastSuccess = t
		if ps.failing && !history {
			e.log.Info("policy inputs are back", "policy", ps.cfg.Name)
		}
		ps.failing = false
	}
	return true
}

// logFailure logs a policy's input problem once when it starts failing, then at debug level.
func (e *Exporter) logFailure(ps *policyState, err error) {
	if !ps.failing {
		ps.failing = true
		e.log.Warn("policy inputs missing; serving the last values as stale, no scale-down", "policy", ps.cfg.Name, "err", err)
		return
	}
	e.log.Debug("policy inputs still missing", "policy", ps.cfg.Name, "err", err)
}

// Wait blocks until every policy's background training has finished.
func (e *Exporter) Wait() {
	for _, ps := range e.policies {
		ps.runner.Wait()
	}
}

// Close stops every policy's background training and waits for it.
func (e *Exporter) Close() {
	for _, ps := range e.policies {
		ps.runner.Close()
	}
}
