package exporter

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
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

// queryError names the field path of query k of the policy, e.g. policies[2].queries.demand or
// policies[2].metrics[1].query.
func (ps *policyState) queryError(k int, err error) error {
	if ep := ps.endpoint(k); ep != nil {
		i, _ := metricQuery(k)
		return fmt.Errorf("%s.%s (policy %q, metric %q, endpoint %s): %w", ps.path, ps.queryPath(k), ps.cfg.Name, ps.metrics[i].spec.Name, ep.name, err)
	}
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
	ep := ps.endpoint(k)
	ctx, cancel := context.WithTimeout(withEndpoint(ctx, ep), e.timeout)
	defer cancel()
	start := time.Now()
	_, batched := e.prefetchedInstant(ep, expr, t)
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
