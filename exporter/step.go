package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

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
	missing := ps.capacityBases(in)
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
				demandErr = fmt.Errorf("%s: %w", ps.queryWhere(k), in.err[k])
			}
		}
		if m.base <= 0 {
			// No capacity for this metric yet: it is missing, the others decide.
			demands[i] = math.NaN()
			if demandErr == nil {
				demandErr = fmt.Errorf("%s: %w", ps.queryWhere(k-1), in.err[k-1])
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
		e.burn(ps, demands, capacities)
	}
	ps.recordResults(t, mr, err)
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
	if !history && ps.measurePath && ps.known {
		ps.decisionPath.note(t, ps.current, ps.recommended)
	}
	return true
}

// capacityBases updates each metric's capacity base from the step's request query and returns
// why the runner cannot be stepped (replicas unknown, or no capacity known for any metric), nil
// when it can.
func (ps *policyState) capacityBases(in *inputs) error {
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
	return missing
}

// burn is the budget's burn, live steps only (the start-up history is one point per history
// step, not time the exporter observed): the step's interval is observed when a metric
// has a demand, and overloaded when any metric's demand exceeded u_sla·Nr·its capacity,
// the runners' test, at max_replicas too.
func (e *Exporter) burn(ps *policyState, demands, capacities []float64) {
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

// recordResults keeps each metric's result of the step at t (mr, err from the runner): its
// last loads, the training marks and the rolling forecast error.
func (ps *policyState) recordResults(t time.Time, mr policy.MultiResult, err error) {
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
			k := t.UnixNano() / int64(ps.histStep)                            // the runner's history-step index
			slot := int((k%int64(ps.lead) + int64(ps.lead)) % int64(ps.lead)) // ≥ 0 before 1970 too
			if f := m.forecasts[slot]; f.index == k-int64(ps.lead) && !math.IsNaN(f.value) && !math.IsNaN(res.Demand) {
				m.mae.add(math.Abs(res.Demand - f.value))
			}
			m.forecasts[slot] = pastForecast{k, res.DemandForecastEnd}
		}
	}
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
