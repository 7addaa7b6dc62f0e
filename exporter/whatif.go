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
	h := History{Start: start, Step: step}
	if step <= 0 || end.Before(start) {
		return h, fmt.Errorf("what-if range: need start <= end and a positive step, got %v to %v step %v", start, end, step)
	}
	r := v1.Range{Start: start, End: end, Step: step}
	n := int(end.Sub(start)/step) + 1
	fb := p.HistoryFallback()
	demand, dc, err := readSeries(ctx, q, "demand", p.Queries.Demand, fb.Demand, r, n)
	if err != nil {
		return h, fmt.Errorf("policy %s: queries.demand over the range: %w", p.Name, err)
	}
	first, last := -1, -1
	for i, v := range demand {
		if !math.IsNaN(v) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return h, fmt.Errorf("policy %s: queries.demand %s: %w over %v to %v", p.Name, p.Queries.Demand, ErrEmpty, start, end)
	}
	fill := func(c *Coverage, vals []float64) []float64 {
		out := slices.Clone(vals[first : last+1])
		c.Missing = c.Points - len(out)
		firstSeen := math.NaN()
		for _, v := range out {
			if !math.IsNaN(v) {
				firstSeen = v
				break
			}
		}
		if math.IsNaN(firstSeen) {
			c.Filled = len(out)
			return nil
		}
		prev := firstSeen
		for i, v := range out {
			if math.IsNaN(v) {
				out[i] = prev
				c.Filled++
			}
			prev = out[i]
		}
		return out
	}
	h.Start = start.Add(time.Duration(first) * step)
	h.Demand = fill(&dc, demand)
	h.Gaps = dc.Filled
	h.Coverage = append(h.Coverage, dc)
	if share := float64(dc.Covered) / float64(n); share < MinCoverage {
		return h, fmt.Errorf("policy %s: queries.demand has samples at %s of the %s range (%.0f%%), from %s to %s; a what-if needs at least %.0f%%: %w (use --range %s or less, or backfill the history: docs/getting-started.md)",
			p.Name, span(dc.Time(dc.Covered)), span(dc.Time(n-1)), 100*share, h.Start.UTC().Format(time.RFC3339),
			start.Add(time.Duration(last)*step).UTC().Format(time.RFC3339), 100*MinCoverage, ErrSparse, span(dc.Time(dc.Covered).Round(time.Hour)))
	}
	if p.Queries.Replicas != "" {
		reps, rc, err := readSeries(ctx, q, "replicas", p.Queries.Replicas, "", r, n)
		if err != nil {
			return h, fmt.Errorf("policy %s: queries.replicas over the range: %w", p.Name, err)
		}
		h.Replicas = fill(&rc, reps)
		h.Coverage = append(h.Coverage, rc)
	}
	if p.Queries.Replicas != "" && p.Queries.ReadyReplicas != "" {
		ready, rc, err := readSeries(ctx, q, "ready", p.Queries.ReadyReplicas, "", r, n)
		if err != nil {
			return h, fmt.Errorf("policy %s: queries.ready_replicas over the range: %w", p.Name, err)
		}
		h.Ready, h.ReadyQuery = fill(&rc, ready), p.Queries.ReadyReplicas
		h.Coverage = append(h.Coverage, rc)
	}
	h.Request = p.Request
	if p.Queries.Request != "" {
		req, c, err := readSeries(ctx, q, "request", p.Queries.Request, fb.Request, r, n)
		if err != nil {
			return h, fmt.Errorf("policy %s: queries.request over the range: %w", p.Name, err)
		}
		var vals []float64
		for _, v := range req {
			if v > 0 {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			return h, errors.New("policy " + p.Name + ": queries.request returned no positive value over the range")
		}
		_ = fill(&c, req)
		h.Coverage = append(h.Coverage, c)
		slices.Sort(vals)
		h.Request = vals[len(vals)/2]
	}
	return h, nil
}

// readSeries reads expr over the n points of r, NaN where it has no sample, and fills those
// from fallback when there is one.
func readSeries(ctx context.Context, q Querier, series, expr, fallback string, r v1.Range, n int) ([]float64, Coverage, error) {
	c := Coverage{Series: series, Query: expr, Step: r.Step, Points: n}
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
		if !ok {
			if v, ok = fm[ts]; ok {
				c.FromFallback++
			}
		}
		if !ok {
			v = math.NaN()
		} else {
			c.Covered++
		}
		out[i] = v
	}
	return out, c, nil
}
