package backtest

import (
	"strings"
	"time"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// PolicyOptions are o with the settings of a configured policy, for the what-if replay of
// `debi backtest --config.file`: its algorithm (and model) beside o's other policies, its
// scaling parameters (the sweep's HPA and every other policy share them, as on a trace), its
// metrics stabilisation, model, EVT and budget settings, its history and retrain in history
// steps of step, its season, its observation window, and its lead time as the start-up delay
// (the decision delay is in it). request is the CPU request per pod, the demand is in cores
// (Scale 1), and the warm-up is the policy's history, capped at half the samples.
//
// The configured policy itself is replayed with the live runner's configuration
// (config.Policy.RunnerConfig, Options.Runner): the other policies of o use the options.
//
// The configured policy comes first and is o.Configured; every other policy of o that is the
// same one under another name (budget and auto-budget) is left out, as are repeats.
func PolicyOptions(p *config.Policy, o Options, step time.Duration, request float64, samples int) (Options, string) {
	spec, err := policy.Parse(p.Algorithm, p.Model)
	name := strings.ToLower(p.Algorithm)
	if rc, err := p.RunnerConfig(); err == nil {
		o.Runner = &rc
	}
	if err == nil && spec.Model != "" && strings.EqualFold(name, "debi") {
		o.DebiModel = spec.Model
	}
	o.Policies = dedupePolicies(append([]string{name}, o.Policies...), o.DebiModel)
	o.Configured = name
	o.Params = p.Scaling
	o.Metrics = p.Metrics.MetricsPolicy
	o.Model = p.Forecast
	o.POT = p.EVT
	o.Calibration = p.Budget
	o.SLAUtilization = p.Scaling.Budget.SLAUtilization
	o.Request = request
	o.Scale = 1
	o.SamplePeriod = step
	o.History = p.History
	o.Retrain = time.Duration(p.Retrain) * p.HistoryStep
	o.Season = p.Season
	o.MetricWindow = p.ObservationWindow
	o.StartupDelay, o.DecisionDelay = p.LeadTime, 0
	o.Warmup = min(p.History, samples/2)
	return o, name
}

// dedupePolicies keeps the first of the names that are one policy: the same algorithm, model
// and load (budget is auto-budget; debi is <its model>-debi).
func dedupePolicies(names []string, debiModel string) []string {
	seen := map[policy.Spec]bool{}
	var out []string
	for _, n := range names {
		key := policy.Spec{Name: strings.ToLower(strings.TrimSpace(n))}
		if s, err := policy.Parse(n, debiModel); err == nil {
			s.Name = ""
			key = s
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, strings.ToLower(strings.TrimSpace(n)))
	}
	return out
}

// idleHoldVariant says the what-if also replays its configured policy under
// scaling.budget.idle hold (TraceResult.IdleHold): a budget policy under the priced rule with
// idle earn, whose recommendation then says what hold would have done on this history.
func (o Options) idleHoldVariant() bool {
	if !o.configuredBudget() {
		return false
	}
	b := o.Runner.Params.Budget
	return b.Rule == scaling.RulePriced && b.Idle != scaling.IdleHold
}

// naiveVariant says the what-if also replays its configured policy with the model naive, the
// last value (TraceResult.Naive): a budget policy under the priced rule with another registered
// model. Which forecaster serves a workload's budget best is not the one with the smallest
// errors, which auto reads, but the one whose policy costs least, its plan and its hold
// together (docs/results-budget.md, "The last value, and the hold"): the workload's own
// history can say.
func (o Options) naiveVariant() bool {
	if !o.configuredBudget() {
		return false
	}
	r := o.Runner
	return r.Params.Budget.Rule == scaling.RulePriced && r.Forecaster == nil && !strings.EqualFold(r.Spec.Model, "naive")
}

// configuredBudget says the what-if replays a configured policy of the budget algorithm.
func (o Options) configuredBudget() bool {
	r := o.Runner
	return o.Configured != "" && r != nil && strings.EqualFold(r.Spec.Name, o.Configured) && r.Spec.Algorithm == "budget"
}
