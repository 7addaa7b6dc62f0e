package exporter

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/debi-scaler/debi/config"
)

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

	// endpoints are the clients of the endpoints the policies' metrics name besides
	// global.prometheus_url (endpoint.go); newEndpoint builds one (nil: NewEndpointQuerier).
	endpoints   []*endpointClient
	newEndpoint EndpointQuerier

	// sources are the clients of the metrics APIs, for the metrics read from them (sources.go).
	sources *sourceClients
	// lead is the last measurement of the workloads' start-ups (leadtime.go).
	lead leadTimes

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

// New builds an exporter for the given policies of cfg (usually the shard's selection) and
// registers its metrics with reg.
func New(cfg *config.Config, policies []config.Policy, q Querier, logger *slog.Logger, reg prometheus.Registerer) (*Exporter, error) {
	return newExporter(cfg, policies, q, logger, reg, nil)
}

// newExporter is New whose metrics on their own endpoints query the clients endpoint builds
// (nil: NewEndpointQuerier).
func newExporter(cfg *config.Config, policies []config.Policy, q Querier, logger *slog.Logger, reg prometheus.Registerer, endpoint EndpointQuerier) (*Exporter, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{
		cfg: cfg, log: logger, batching: cfg.Exporter.Batching(),
		interval: cfg.Global.Interval, offset: cfg.Exporter.QueryOffset, timeout: cfg.Global.QueryTimeout, lookback: cfg.Global.LookbackDelta,
		workers: max(cfg.Exporter.Concurrency, 1), now: time.Now, sources: &sourceClients{}, newEndpoint: endpoint,
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
	e.base = countingQuerier{routingQuerier{q}, e}
	e.q = checkingQuerier{servingQuerier{e}}
	if err := e.resolveEndpoints(e.policies); err != nil {
		return nil, err
	}
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

// shutdown stops every policy's background training once the loop has stopped; a reload after
// it is refused.
func (e *Exporter) shutdown() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.Close()
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
	sources.Go(func() { e.readTargetPods(ctx) })
	sources.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, e.interval)
		defer cancel()
		e.measureLeadTimes(ctx, t)
	})
	e.prefetch(ctx, t)
	sources.Wait()
	e.applyMeasuredLeadTimes()
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
