package exporter

import (
	"context"
	"math"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

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
		qctx, cancel := context.WithTimeout(withEndpoint(ctx, ps.endpoint(k)), e.timeout)
		t0 := time.Now()
		_, batched := e.pre.rangeAnswer(ps.endpoint(k), expr, r)
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
			log("history not loaded; trying again at the next step", "policy", ps.cfg.Name, "query", ps.queryWhere(k), "err", err)
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
		qctx, cancel := context.WithTimeout(withEndpoint(ctx, ps.endpoint(k)), e.timeout)
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
	p := ps.cfg
	if ps.measuredLead > 0 { // the runner sizes for the measured lead time; the configuration stays
		c := *ps.cfg
		c.LeadTime = ps.measuredLead
		p = &c
	}
	fresh, err := e.newPolicyState(e.cfg, p)
	if err != nil {
		return err
	}
	ps.runner.Close()
	old := *ps
	*ps = *fresh
	ps.cfg, ps.measuredLead = old.cfg, old.measuredLead
	ps.targetPods, ps.targetPodsErrors, ps.decisionPath = old.targetPods, old.targetPodsErrors, old.decisionPath
	ps.path, ps.endpoints = old.path, old.endpoints
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
