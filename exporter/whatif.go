package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/config"
)

// MinCoverage is the least share of the requested range the demand must have samples in for a
// what-if: below it the replay would mostly score demand it made up.
const MinCoverage = 0.5

// ErrSparse is the error of a range mostly without demand samples.
var ErrSparse = errors.New("too little history")

// History is what Prometheus recorded of a policy's inputs over a range, on a grid: the what-if
// of `debi backtest --config.file` replays it through the backtest's simulator.
type History struct {
	// Start is the first grid time with a demand sample and Step the grid's step; Demand[i] is
	// the policy's demand query at Start + i·Step, in cores. The replayed span runs from the
	// first to the last demand sample of the requested range: the times before and after it
	// are missing (Coverage), not replayed.
	Start  time.Time
	Step   time.Duration
	Demand []float64
	// Before is the number of Demand's samples before the requested range: the warm-up history
	// DemandHistoryWithWarmup reads ahead of it (0 for DemandHistory, or when Prometheus has
	// nothing before the range). Coverage counts the requested range only.
	Before int
	// Replicas[i] is the workload's recorded spec replica count at Start + i·Step (queries.
	// replicas): what actually ran, the what-if's "actual" row. Nil when the query has no
	// sample over the replayed span.
	Replicas []float64
	// Ready[i] is the workload's recorded ready replica count at Start + i·Step (queries.
	// ready_replicas, kube-state-metrics' kube_deployment_status_replicas_ready by default): the
	// pods that served, which the actual row scores instead of modelling them. Nil when the
	// query is unset or has no sample over the replayed span (ReadyQuery says which).
	Ready []float64
	// ReadyQuery is the ready count's query read ("" when the policy has none).
	ReadyQuery string
	// Gaps is the number of grid times inside the replayed span without a demand sample, filled
	// with the last value before them: the simulator needs a demand at every step.
	Gaps int
	// Request is the CPU request per pod: policies[].request, or the median of queries.request
	// over the range.
	Request float64
	// Coverage says, per series read, how much of the range had samples and how much the
	// replay filled.
	Coverage []Coverage
	// Metrics are the policy's metrics in the several-metrics form (nil for the single-metric
	// form), on Demand's grid: Demand is then Metrics[0].Values.
	Metrics []MetricHistory
}

// MetricHistory is one metric's recorded values over a what-if range.
type MetricHistory struct {
	Name, Unit string
	// Values are the metric's query at Start + i·Step, in its unit (gaps filled as Demand's).
	Values []float64
	// Capacity is what one pod carries of it at utilization 1, in its unit (config.ScaleMetric:
	// its target over the policy's reference utilization; a request query's median over the
	// range for a Utilization target).
	Capacity float64
	// Request is, for a Utilization target, the request of one pod in its unit (0 otherwise).
	Request float64
}

// Coverage is how much of a what-if range one input series covers, in grid points of Step.
type Coverage struct {
	// Series is demand, replicas or request; Query the expression read and Fallback the one
	// that filled the times Query had no sample (config.Policy.HistoryFallback; empty: none).
	Series, Query, Fallback string
	Step                    time.Duration
	// Points is the grid points of the requested range; Covered those with a sample (of Query
	// or, FromFallback of them, of Fallback); Filled the points inside the replayed span
	// without one, carried from the last sample before them (the first ones from the first
	// sample); Missing the points outside the replayed span, not replayed.
	Points, Covered, FromFallback, Filled, Missing int
}

// Time converts a number of grid points into time.
func (c Coverage) Time(points int) time.Duration { return time.Duration(points) * c.Step }

// span is a duration in Prometheus's notation (4d10h35m).
func span(d time.Duration) string { return model.Duration(d).String() }

// DemandHistory reads a policy's demand, its recorded replicas and (when it has a request
// query) its request over [start, end] at step with the exporter's range loader (the one that
// loads the start-up history), so that a replay sees what the live exporter would have seen.
// The grid is start, start+step, …, end. Where a default query (a recording rule) has no
// sample, its raw equivalent (config.Policy.HistoryFallback) fills in, as in the warm start.
// A range whose demand covers less than MinCoverage of it is an error (ErrSparse) that says
// how much there is.
func DemandHistory(ctx context.Context, q Querier, p *config.Policy, start, end time.Time, step time.Duration) (History, error) {
	return DemandHistoryWithWarmup(ctx, q, p, start, end, step, 0)
}

// DemandHistoryWithWarmup is DemandHistory with up to warmup more grid points read before
// start: the history a replayed policy warms up on, so that the whole requested range can be
// scored. They are not part of the range: its coverage and the ErrSparse check count the range
// alone, and History.Before says how many of them Prometheus had (from the first with a demand
// sample on).
func DemandHistoryWithWarmup(ctx context.Context, q Querier, p *config.Policy, start, end time.Time, step time.Duration, warmup int) (History, error) {
	h := History{Start: start, Step: step}
	if step <= 0 || end.Before(start) || warmup < 0 {
		return h, fmt.Errorf("what-if range: need start <= end, a positive step and a warm-up of 0 or more points, got %v to %v step %v warm-up %d", start, end, step, warmup)
	}
	g := newHistoryGrid(start, end, step, warmup)
	fb := p.HistoryFallback()
	reads, metrics, err := demandReads(q, p, fb)
	if err != nil {
		return h, err
	}
	if err := g.readDemands(ctx, p, reads); err != nil {
		return h, err
	}
	h.Start = g.start.Add(time.Duration(g.first) * step)
	h.Before = max(0, warmup-g.first)
	for k := range reads {
		if err := g.addDemand(ctx, p, &h, k, &reads[k], metrics); err != nil {
			return h, err
		}
	}
	if err := g.readReplicas(ctx, q, p, &h); err != nil {
		return h, err
	}
	h.Request = p.Request
	if p.Queries.Request != "" {
		if err := g.readRequest(ctx, reads[0].q, p, fb.Request, &h); err != nil {
			return h, err
		}
	}
	return h, nil
}

// historyGrid is the grid of a what-if's history: warmup points before the requested range,
// then its n points, all in all; first and last are the first and the last point with a
// demand sample, the replayed span (readDemands).
type historyGrid struct {
	start          time.Time // the grid's first point, warmup steps before the range
	r              v1.Range
	n, all, warmup int
	first, last    int
}

func newHistoryGrid(start, end time.Time, step time.Duration, warmup int) *historyGrid {
	gridStart := start.Add(-time.Duration(warmup) * step)
	// n is the requested range's points, all the grid's points.
	n := int(end.Sub(start)/step) + 1
	return &historyGrid{start: gridStart, r: v1.Range{Start: gridStart, End: end, Step: step}, n: n, all: n + warmup, warmup: warmup, first: -1, last: -1}
}

// demandRead is one demand series of a what-if: queries.demand, or one metric's query in the
// several-metrics form, the querier of its endpoint, and what was read of it.
type demandRead struct {
	series, path, expr, fallback string
	q                            Querier
	vals                         []float64
	cov                          Coverage
}

// EndpointResolver is a Querier that answers for the metrics on their own endpoints as well
// (tests); a what-if over any other Querier builds their clients with NewEndpointQuerier.
type EndpointResolver interface {
	Querier
	Endpoint(config.Endpoint) (Querier, error)
}

// demandReads are the demand series of policy p (fb its history fallbacks), and its metrics in
// the several-metrics form (nil otherwise), one per read, each with the querier of its endpoint:
// q for global.prometheus_url, one client per distinct endpoint of the metrics.
func demandReads(q Querier, p *config.Policy, fb config.Queries) ([]demandRead, []config.ScaleMetric, error) {
	var eps []*endpointClient
	querier := func(m config.ScaleMetric) (Querier, string, error) {
		if m.Endpoint == nil {
			return q, m.QueryPath, nil
		}
		where := fmt.Sprintf("%s (metric %s, endpoint %s)", m.QueryPath, m.Name, m.Endpoint)
		for _, c := range eps {
			if reflect.DeepEqual(c.ep, *m.Endpoint) {
				return c.q, where, nil
			}
		}
		build := NewEndpointQuerier
		if r, ok := q.(EndpointResolver); ok {
			build = r.Endpoint
		}
		eq, err := build(*m.Endpoint)
		if err != nil {
			return nil, "", fmt.Errorf("policy %s: %s: %w", p.Name, m.EndpointPath, err)
		}
		eps = append(eps, &endpointClient{ep: *m.Endpoint, q: eq})
		return eq, where, nil
	}
	metrics := p.ScaleMetrics()
	single := len(p.Metrics.List) == 0
	var reads []demandRead
	for _, m := range metrics {
		mq, where, err := querier(m)
		if err != nil {
			return nil, nil, err
		}
		if single {
			reads = append(reads, demandRead{series: "demand", path: where, expr: p.Queries.Demand, fallback: fb.Demand, q: mq})
			return reads, nil, nil
		}
		reads = append(reads, demandRead{series: "metric " + m.Name, path: where, expr: m.Query, q: mq})
	}
	return reads, metrics, nil
}

// readDemands reads every demand series over the grid and sets the replayed span, from the
// first to the last point with a sample of any of them. A series without a sample is an error
// (ErrEmpty).
func (g *historyGrid) readDemands(ctx context.Context, p *config.Policy, reads []demandRead) error {
	for k := range reads {
		d := &reads[k]
		var err error
		if d.vals, d.cov, err = readSeries(ctx, d.q, d.series, d.expr, d.fallback, g.r, g.all, g.warmup); err != nil {
			return fmt.Errorf("policy %s: %s over the range: %w", p.Name, d.path, err)
		}
		seen := false
		for i, v := range d.vals {
			if !math.IsNaN(v) {
				if g.first < 0 || i < g.first {
					g.first = i
				}
				g.last, seen = max(g.last, i), true
			}
		}
		if !seen {
			return fmt.Errorf("policy %s: %s %s: %w over %v to %v", p.Name, d.path, d.expr, ErrEmpty, g.start, g.r.End)
		}
	}
	return nil
}

// fill carries each sample over the grid times after it without one, over the replayed
// span (first to last); only those inside the requested range count as filled.
func (g *historyGrid) fill(c *Coverage, vals []float64) []float64 {
	out := slices.Clone(vals[g.first : g.last+1])
	c.Missing = c.Points - max(0, g.last+1-max(g.first, g.warmup))
	firstSeen := math.NaN()
	for _, v := range out {
		if !math.IsNaN(v) {
			firstSeen = v
			break
		}
	}
	if math.IsNaN(firstSeen) {
		c.Filled = c.Points - c.Missing
		return nil
	}
	prev := firstSeen
	for i, v := range out {
		if math.IsNaN(v) {
			out[i] = prev
			if g.first+i >= g.warmup {
				c.Filled++
			}
		}
		prev = out[i]
	}
	return out
}

// addDemand adds the k-th demand series d to h, filled over the replayed span: the demand
// itself (k = 0) and, in the several-metrics form, metric metrics[k] with its capacity. A
// series with samples at less than MinCoverage of the range is an error (ErrSparse), and so is
// a Value target, whose capacity per pod depends on the size.
func (g *historyGrid) addDemand(ctx context.Context, p *config.Policy, h *History, k int, d *demandRead, metrics []config.ScaleMetric) error {
	step := g.r.Step
	vals := g.fill(&d.cov, d.vals)
	if k == 0 {
		h.Demand, h.Gaps = vals, d.cov.Filled
	}
	h.Coverage = append(h.Coverage, d.cov)
	dc := d.cov
	if share := float64(dc.Covered) / float64(g.n); share < MinCoverage {
		return fmt.Errorf("policy %s: %s has samples at %s of the %s range (%.0f%%), from %s to %s; a what-if needs at least %.0f%%: %w (use --range %s or less, or backfill the history: docs/getting-started.md)",
			p.Name, d.path, span(dc.Time(dc.Covered)), span(dc.Time(g.n-1)), 100*share, h.Start.Add(time.Duration(h.Before)*step).UTC().Format(time.RFC3339),
			g.start.Add(time.Duration(g.last)*step).UTC().Format(time.RFC3339), 100*MinCoverage, ErrSparse, span(dc.Time(dc.Covered).Round(time.Hour)))
	}
	if metrics == nil {
		return nil
	}
	m := metrics[k]
	if m.PerWorkload {
		return fmt.Errorf("policy %s: metrics[%d] (%s): a what-if cannot replay a Value target, whose capacity per pod depends on the size; use an AverageValue target", p.Name, k, m.Name)
	}
	c := m.Capacity
	if m.CapacityQuery != "" {
		med, cov, err := medianOver(ctx, d.q, "request of "+m.Name, m.CapacityQuery, g.r, g.all, g.warmup)
		if err != nil {
			return fmt.Errorf("policy %s: %s over the range: %w", p.Name, m.CapacityPath, err)
		}
		h.Coverage, c = append(h.Coverage, cov), med
	}
	mh := MetricHistory{Name: m.Name, Unit: m.Unit, Values: vals, Capacity: c * m.Factor}
	if m.CapacityPath != "" { // a Utilization target: c is the request
		mh.Request = c
	}
	h.Metrics = append(h.Metrics, mh)
	return nil
}

// readReplicas reads the recorded spec replicas (queries.replicas) and, with them, the ready
// replicas (queries.ready_replicas) into h, filled over the replayed span.
func (g *historyGrid) readReplicas(ctx context.Context, q Querier, p *config.Policy, h *History) error {
	if p.Queries.Replicas != "" {
		reps, rc, err := readSeries(ctx, q, "replicas", p.Queries.Replicas, "", g.r, g.all, g.warmup)
		if err != nil {
			return fmt.Errorf("policy %s: queries.replicas over the range: %w", p.Name, err)
		}
		h.Replicas = g.fill(&rc, reps)
		h.Coverage = append(h.Coverage, rc)
	}
	if p.Queries.Replicas != "" && p.Queries.ReadyReplicas != "" {
		ready, rc, err := readSeries(ctx, q, "ready", p.Queries.ReadyReplicas, "", g.r, g.all, g.warmup)
		if err != nil {
			return fmt.Errorf("policy %s: queries.ready_replicas over the range: %w", p.Name, err)
		}
		h.Ready, h.ReadyQuery = g.fill(&rc, ready), p.Queries.ReadyReplicas
		h.Coverage = append(h.Coverage, rc)
	}
	return nil
}

// readRequest sets h's request to the median of queries.request over the range (fallback its
// history fallback), which must have a positive value.
func (g *historyGrid) readRequest(ctx context.Context, q Querier, p *config.Policy, fallback string, h *History) error {
	req, c, err := readSeries(ctx, q, "request", p.Queries.Request, fallback, g.r, g.all, g.warmup)
	if err != nil {
		return fmt.Errorf("policy %s: queries.request over the range: %w", p.Name, err)
	}
	med, ok := positiveMedian(req)
	if !ok {
		return errors.New("policy " + p.Name + ": queries.request returned no positive value over the range")
	}
	_ = g.fill(&c, req)
	h.Coverage = append(h.Coverage, c)
	h.Request = med
	return nil
}

// medianOver is the median of expr's positive values over the range (a request per pod).
func medianOver(ctx context.Context, q Querier, series, expr string, r v1.Range, n, before int) (float64, Coverage, error) {
	vals, c, err := readSeries(ctx, q, series, expr, "", r, n, before)
	if err != nil {
		return 0, c, err
	}
	med, ok := positiveMedian(vals)
	if !ok {
		return 0, c, errors.New("no positive value")
	}
	return med, c, nil
}

// positiveMedian is the median of the positive values of vals (false when there is none).
func positiveMedian(vals []float64) (float64, bool) {
	var pos []float64
	for _, v := range vals {
		if v > 0 {
			pos = append(pos, v)
		}
	}
	if len(pos) == 0 {
		return 0, false
	}
	slices.Sort(pos)
	return pos[len(pos)/2], true
}

// readSeries reads expr over the n points of r, NaN where it has no sample, and fills those
// from fallback when there is one. The coverage counts the points from before on: the first
// before points are warm-up history ahead of the requested range.
func readSeries(ctx context.Context, q Querier, series, expr, fallback string, r v1.Range, n, before int) ([]float64, Coverage, error) {
	c := Coverage{Series: series, Query: expr, Step: r.Step, Points: n - before}
	m, err := rangeValues(ctx, q, expr, r)
	if err != nil {
		return nil, c, err
	}
	var fm map[int64]float64
	if fallback != "" && len(m) < n {
		if fm, err = rangeValues(ctx, q, fallback, r); err != nil {
			return nil, c, fmt.Errorf("the fallback %s: %w", fallback, err)
		}
		c.Fallback = fallback
	}
	out := make([]float64, n)
	for i := range n {
		ts := r.Start.Add(time.Duration(i) * r.Step).UnixMilli()
		v, ok := m[ts]
		fromFallback := false
		if !ok {
			v, ok = fm[ts]
			fromFallback = ok
		}
		switch {
		case !ok:
			v = math.NaN()
		case i >= before:
			c.Covered++
			if fromFallback {
				c.FromFallback++
			}
		}
		out[i] = v
	}
	return out, c, nil
}
