package exporter

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// policyState is the loop's state of one policy. It is touched by one worker at a time during a
// step and read by publish after the step; Collect never sees it, only snapshots.
type policyState struct {
	cfg    *config.Policy
	path   string   // policies[i] in the configuration file, for errors
	labels []string // policy, namespace, workload_type, workload
	// endpoints are the endpoints of the queries by query index (nil: global.prometheus_url),
	// set by Exporter.resolveEndpoints.
	endpoints []*endpointClient
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
	// targetPods is the last read of the target's pods and size from its scale subresource
	// (config.Target.PodsFromScale only), targetPodsErrors the failed reads.
	targetPods       targetPodsRead
	targetPodsErrors float64
	// decisionPath measures the decision path of the policy's scale-ups (acting policies only).
	decisionPath pathDelay
	// measurePath: the policy acts (webhook mode act or hpa-floor), so its path is measured.
	measurePath bool
	// measuredLead is the measured lead time in force (leadtime.go; lead_time unset), 0: none.
	measuredLead time.Duration
	failing      bool // for logging transitions only

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
		// A shadow policy's recommendations are applied by none: their waits are not a path.
		measurePath: cfg.Webhook.ModeFor(p.Name) != config.ModeShadow,
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
