package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// Multi steps one policy that scales on several metrics, as the Kubernetes HPA does: each
// metric has its own Runner — its own history, forecast (W2), high-water level (W3) and budget
// errors and margin, in its own unit with its own capacity per pod (Config.Request) — and the
// decision is the largest replica count over the metrics, each count composed by the one
// decision function (scaling.Decide, through scaling.DecideMax) within the bounds of one
// algorithm state: the first metric's runner's, advanced with the deciding metric's input, so
// that a stateful algorithm (HPA stabilisation and rate limits, the budget's hold) sees the
// policy's decisions, not one per metric. A policy with one metric is one Runner and decides as
// Runner.Step does.
//
// The budget is the policy's, not each metric's: a tick is overloaded when any metric is, and
// with each metric calibrating its quantile's level on its own misses a policy with k metrics
// could spend up to k times its budget. So by default the calibration is joint: every metric's
// calibrator observes the policy's miss (any metric above u_sla·ready·its capacity, as each
// metric's calibration judges its own), so that their levels move as one shared level α —
// adaptive conformal inference on the event the budget is about — while each metric reads its
// margin at that level from its own errors. SetJointCalibration(false) calibrates each metric
// on its own misses instead (measured beside it in docs/results-budget.md).
type Multi struct {
	runners []*Runner
	names   []string
	ins     []scaling.Input
	ok      []bool
	// perMetric calibrates each metric's budget on its own misses (SetJointCalibration(false)).
	perMetric bool
	// idle is how long the policy's wake metrics have been idle (min_replicas 0).
	idle idleClock
}

// SetJointCalibration chooses how a budget policy with several metrics calibrates: jointly on
// the policy's overload (true, the default) or each metric on its own (false). A policy with
// one metric decides the same either way.
func (m *Multi) SetJointCalibration(joint bool) { m.perMetric = !joint }

// MultiResult is one step of a Multi.
type MultiResult struct {
	// Results are the metrics' own results, in the order of the configuration; each one's
	// Decision is that metric's count within the shared bounds.
	Results []Result
	// Errs are the metrics' errors (wrapping ErrNoData when a metric has no usable sample).
	Errs []error
	// Decision is the policy's: the largest count over the metrics with a usable load.
	Decision scaling.Decision
	// Metric is the index of the deciding metric, -1 when none could decide.
	Metric int
	// Floor and Ceiling are the bounds the algorithm's state allowed the decision.
	Floor, Ceiling int32
}

// NewMulti builds the runners of a policy with one Config per metric, named by names (the
// metrics' names, for logs). The configurations must share the algorithm and its parameters:
// the first one's state decides.
func NewMulti(cfgs []Config, names []string) (*Multi, error) {
	if len(cfgs) == 0 || len(cfgs) != len(names) {
		return nil, errors.New("a policy needs at least one metric, each with a name")
	}
	m := &Multi{names: names, ins: make([]scaling.Input, len(cfgs)), ok: make([]bool, len(cfgs))}
	for i, c := range cfgs {
		if i > 0 && (c.Spec.Algorithm != cfgs[0].Spec.Algorithm || c.Params != cfgs[0].Params) {
			return nil, fmt.Errorf("metric %q: its algorithm and parameters differ from metric %q's: one policy has one rule", names[i], names[0])
		}
		r, err := New(c)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("metric %q: %w", names[i], err)
		}
		m.runners = append(m.runners, r)
	}
	if cfgs[0].Params.MinReplicas == 0 && !slices.ContainsFunc(cfgs, func(c Config) bool { return c.Wake }) {
		m.Close()
		return nil, errors.New("min_replicas 0 needs a metric that wakes the workload from zero (one read from outside the pods)")
	}
	return m, nil
}

// Len is the number of metrics.
func (m *Multi) Len() int { return len(m.runners) }

// Runner returns metric i's runner.
func (m *Multi) Runner(i int) *Runner { return m.runners[i] }

// Names are the metrics' names.
func (m *Multi) Names() []string { return m.names }

// Step records one observation per metric at t — demands[i] is metric i's value in its unit
// (NaN: missing), current and ready the workload's sizes — and decides. It returns an error
// wrapping ErrNoData, and the current size, when no metric has a usable sample; a metric
// without one never lets the others scale down (scaling.DecideMax).
func (m *Multi) Step(ctx context.Context, t time.Time, demands []float64, current, ready int32) (MultiResult, error) {
	out := MultiResult{Results: make([]Result, len(m.runners)), Errs: make([]error, len(m.runners)), Metric: -1}
	var errs []error
	obs := func(i int) Observation {
		d := math.NaN()
		if i < len(demands) {
			d = demands[i]
		}
		return Observation{Time: t, Demand: d, Current: current, Ready: ready}
	}
	if !m.perMetric && len(m.runners) > 1 {
		// The policy's miss at t, judged before any metric steps (budgetMiss changes nothing):
		// every metric's calibration observes it.
		miss := false
		for i, r := range m.runners {
			miss = r.budgetMiss(obs(i)) || miss
		}
		for _, r := range m.runners {
			r.jointMiss = &miss
		}
		defer func() {
			for _, r := range m.runners {
				r.jointMiss = nil
			}
		}()
	}
	for i, r := range m.runners {
		out.Results[i], m.ins[i], out.Errs[i] = r.prepare(ctx, obs(i))
		m.ok[i] = out.Errs[i] == nil
		if out.Errs[i] != nil {
			errs = append(errs, fmt.Errorf("metric %q: %w", m.names[i], out.Errs[i]))
		}
	}
	m.wake(t, current, &out)
	r0 := m.runners[0]
	b := scaling.BoundsOf(r0.alg, r0.cfg.Params, t, current)
	out.Floor, out.Ceiling = b.Lo, b.Hi
	out.Decision, out.Metric = scaling.DecideMax(r0.rule, m.ins, m.ok, b)
	if out.Metric < 0 {
		return out, errors.Join(errs...)
	}
	for i := range m.runners {
		if !m.ok[i] {
			continue
		}
		res := &out.Results[i]
		res.Floor, res.Ceiling = b.Lo, b.Hi
		res.Decision = scaling.Decide(r0.rule, m.ins[i], b)
		res.Term = decidingTerm(res)
	}
	r0.advanceState(m.ins[out.Metric], out.Results[out.Metric].Decision)
	return out, nil
}

// wake sets the policy's Idle on every metric's input: idle while no wake metric is active; not
// known while one is missing and none is active, unless the workload is at zero, where a metric
// that reads nothing asks for no pod either way (scaling.Input.Idle).
func (m *Multi) wake(t time.Time, current int32, out *MultiResult) {
	active, known, wakes := false, true, false
	for i, r := range m.runners {
		if !r.cfg.Wake {
			continue
		}
		wakes = true
		if !m.ok[i] {
			known = known && current == 0
			continue
		}
		active = active || out.Results[i].Active
	}
	if !wakes {
		return
	}
	idle := m.idle.idle(t, active, known)
	for i := range m.ins {
		m.ins[i].Idle, out.Results[i].Idle = idle, idle
	}
}

// ModelHistory is the largest need and the smallest history over the metrics' models.
func (m *Multi) ModelHistory() (needed, have int) {
	for i, r := range m.runners {
		n, h := r.ModelHistory()
		if i == 0 || n > needed {
			needed = n
		}
		if i == 0 || h < have {
			have = h
		}
	}
	return needed, have
}

// Wait waits for every metric's background training.
func (m *Multi) Wait() {
	for _, r := range m.runners {
		r.Wait()
	}
}

// Close stops every metric's background training.
func (m *Multi) Close() {
	for _, r := range m.runners {
		r.Close()
	}
}
