package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	gridStart := start.Add(-time.Duration(warmup) * step)
	r := v1.Range{Start: gridStart, End: end, Step: step}
	// n is the requested range's points, all the grid's points.
	n := int(end.Sub(start)/step) + 1
	all := n + warmup
	fb := p.HistoryFallback()
	// The demand: queries.demand, or each metric's query in the several-metrics form.
	type demandRead struct {
		series, path, expr, fallback string
		vals                         []float64
		cov                          Coverage
	}
	reads := []demandRead{{series: "demand", path: "queries.demand", expr: p.Queries.Demand, fallback: fb.Demand}}
	var metrics []config.ScaleMetric
	if len(p.Metrics.List) > 0 {
		metrics, reads = p.ScaleMetrics(), nil
		for _, m := range metrics {
			reads = append(reads, demandRead{series: "metric " + m.Name, path: m.QueryPath, expr: m.Query})
		}
	}
	first, last := -1, -1
	for k := range reads {
		d := &reads[k]
		var err error
		if d.vals, d.cov, err = readSeries(ctx, q, d.series, d.expr, d.fallback, r, all, warmup); err != nil {
			return h, fmt.Errorf("policy %s: %s over the range: %w", p.Name, d.path, err)
		}
		seen := false
		for i, v := range d.vals {
			if !math.IsNaN(v) {
				if first < 0 || i < first {
					first = i
				}
				last, seen = max(last, i), true
			}
		}
		if !seen {
			return h, fmt.Errorf("policy %s: %s %s: %w over %v to %v", p.Name, d.path, d.expr, ErrEmpty, gridStart, end)
		}
	}
	// fill carries each sample over the grid times after it without one, over the replayed
	// span (first to last); only those inside the requested range count as filled.
	fill := func(c *Coverage, vals []float64) []float64 {
		out := slices.Clone(vals[first : last+1])
		c.Missing = c.Points - max(0, last+1-max(first, warmup))
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
				if first+i >= warmup {
					c.Filled++
				}
			}
			prev = out[i]
		}
		return out
	}
	h.Start = gridStart.Add(time.Duration(first) * step)
	h.Before = max(0, warmup-first)
	for k := range reads {
		d := &reads[k]
		vals := fill(&d.cov, d.vals)
		if k == 0 {
			h.Demand, h.Gaps = vals, d.cov.Filled
		}
		h.Coverage = append(h.Coverage, d.cov)
		dc := d.cov
		if share := float64(dc.Covered) / float64(n); share < MinCoverage {
			return h, fmt.Errorf("policy %s: %s has samples at %s of the %s range (%.0f%%), from %s to %s; a what-if needs at least %.0f%%: %w (use --range %s or less, or backfill the history: docs/getting-started.md)",
				p.Name, d.path, span(dc.Time(dc.Covered)), span(dc.Time(n-1)), 100*share, h.Start.Add(time.Duration(h.Before)*step).UTC().Format(time.RFC3339),
				gridStart.Add(time.Duration(last)*step).UTC().Format(time.RFC3339), 100*MinCoverage, ErrSparse, span(dc.Time(dc.Covered).Round(time.Hour)))
		}
		if metrics == nil {
			continue
		}
		m := metrics[k]
		if m.PerWorkload {
			return h, fmt.Errorf("policy %s: metrics[%d] (%s): a what-if cannot replay a Value target, whose capacity per pod depends on the size; use an AverageValue target", p.Name, k, m.Name)
		}
		c := m.Capacity
		if m.CapacityQuery != "" {
			med, cov, err := medianOver(ctx, q, "request of "+m.Name, m.CapacityQuery, r, all, warmup)
			if err != nil {
				return h, fmt.Errorf("policy %s: %s over the range: %w", p.Name, m.CapacityPath, err)
			}
			h.Coverage, c = append(h.Coverage, cov), med
		}
		mh := MetricHistory{Name: m.Name, Unit: m.Unit, Values: vals, Capacity: c * m.Factor}
		if m.CapacityPath != "" { // a Utilization target: c is the request
			mh.Request = c
		}
		h.Metrics = append(h.Metrics, mh)
	}
	if p.Queries.Replicas != "" {
		reps, rc, err := readSeries(ctx, q, "replicas", p.Queries.Replicas, "", r, all, warmup)
		if err != nil {
			return h, fmt.Errorf("policy %s: queries.replicas over the range: %w", p.Name, err)
		}
		h.Replicas = fill(&rc, reps)
		h.Coverage = append(h.Coverage, rc)
	}
	if p.Queries.Replicas != "" && p.Queries.ReadyReplicas != "" {
		ready, rc, err := readSeries(ctx, q, "ready", p.Queries.ReadyReplicas, "", r, all, warmup)
		if err != nil {
			return h, fmt.Errorf("policy %s: queries.ready_replicas over the range: %w", p.Name, err)
		}
		h.Ready, h.ReadyQuery = fill(&rc, ready), p.Queries.ReadyReplicas
		h.Coverage = append(h.Coverage, rc)
	}
	h.Request = p.Request
	if p.Queries.Request != "" {
		req, c, err := readSeries(ctx, q, "request", p.Queries.Request, fb.Request, r, all, warmup)
		if err != nil {
			return h, fmt.Errorf("policy %s: queries.request over the range: %w", p.Name, err)
		}
		med, ok := positiveMedian(req)
		if !ok {
			return h, errors.New("policy " + p.Name + ": queries.request returned no positive value over the range")
		}
		_ = fill(&c, req)
		h.Coverage = append(h.Coverage, c)
		h.Request = med
	}
	return h, nil
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
