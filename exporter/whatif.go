package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/debi-scaler/debi/config"
)

// History is what Prometheus recorded of a policy's inputs over a range, on a grid: the what-if
// of `debi backtest --prometheus.url` replays it through the backtest's simulator.
type History struct {
	// Start is the first grid time and Step the grid's step; Demand[i] is the policy's demand
	// query at Start + i·Step, in cores.
	Start  time.Time
	Step   time.Duration
	Demand []float64
	// Gaps is the number of grid times without a sample, filled with the last value before them
	// (the first ones with the first value): the simulator needs a demand at every step.
	Gaps int
	// Request is the CPU request per pod: policies[].request, or the median of queries.request
	// over the range.
	Request float64
}

// DemandHistory reads a policy's demand (and request, when it has a request query) over
// [start, end] at step with the exporter's own range loader (the one that loads the start-up
// history), so that a replay sees what the live exporter would have seen. The grid is
// start, start+step, …, end; a range without any demand sample is an error.
func DemandHistory(ctx context.Context, q Querier, p *config.Policy, start, end time.Time, step time.Duration) (History, error) {
	h := History{Start: start, Step: step}
	if step <= 0 || end.Before(start) {
		return h, fmt.Errorf("what-if range: need start <= end and a positive step, got %v to %v step %v", start, end, step)
	}
	r := v1.Range{Start: start, End: end, Step: step}
	demand, err := rangeValues(ctx, q, p.Queries.Demand, r)
	if err != nil {
		return h, fmt.Errorf("policy %s: queries.demand over the range: %w", p.Name, err)
	}
	n := int(end.Sub(start)/step) + 1
	h.Demand = make([]float64, n)
	first := -1
	for i := range n {
		ts := start.Add(time.Duration(i) * step).UnixMilli()
		v, ok := demand[ts]
		switch {
		case ok:
			if first < 0 {
				first = i
			}
		case i > 0:
			v = h.Demand[i-1]
			h.Gaps++
		default:
			v = math.NaN()
			h.Gaps++
		}
		h.Demand[i] = v
	}
	if first < 0 {
		return h, fmt.Errorf("policy %s: queries.demand %s: %w over %v to %v", p.Name, p.Queries.Demand, ErrEmpty, start, end)
	}
	for i := range first { // leading gaps: the first value seen
		h.Demand[i] = h.Demand[first]
	}
	h.Request = p.Request
	if p.Queries.Request != "" {
		req, err := rangeValues(ctx, q, p.Queries.Request, r)
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
		slices.Sort(vals)
		h.Request = vals[len(vals)/2]
	}
	return h, nil
}
