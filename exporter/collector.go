package exporter

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// snapshot is what one loop published: immutable once stored, so Collect needs no lock and the
// series of a policy that is gone vanish with the next snapshot.
type snapshot struct {
	policies []policySnap
}

// policySnap is one policy's published figures. NaN means "not available": the series is then
// left out rather than exported as NaN, so alerts and rules see an absent series.
type policySnap struct {
	labels            []string // policy, namespace, workload_type, workload
	algorithm, model  string
	horizon           float64
	historyStep       float64
	historyRequired   float64
	historyHave       float64
	w1, w2, w3, w, ww float64
	demand, forecast  float64
	highWater         float64
	target            float64
	request           float64
	recommended       float64
	floor, ceiling    float64
	minR, maxR        float64
	term, reason      string
	current, ready    float64
	stale             float64
	mae               float64
	evt               bool
	evtXi, evtSigma   float64
	evtThreshold      float64
	evtFallback       float64
	evtExcesses       float64
	lastSuccess       float64
	lastTrain         float64
	trainDuration     float64
	trainFailures     float64
	historyPoints     float64
	steps             float64
	queryErrors       [numQueries]float64

	// The overload-budget policy's figures (budget true): the calibrated quantiles over the
	// lead time and over the lead time plus the hold, the point forecast and margin behind the
	// first, the calibrated level α, the configured budget b, the load the scale-down gate
	// reads, and the budget's burn as counters of live seconds.
	budget                 bool
	quantile, quantileDown float64
	budgetForecast, margin float64
	level, overloadBudget  float64
	errors                 float64
	wDown                  float64
	overloaded, observed   float64
}

var policyLabels = []string{"policy", "namespace", "workload_type", "workload"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string(nil), policyLabels...), extra...), nil)
}

// The per-policy series. Loads are utilizations at the current size (demand ÷ current replicas
// × request per pod); demands are in CPU cores.
var (
	descInfo = desc("debi_policy_info", "Scaling policy of a workload; always 1.", "algorithm", "model")

	// The loads of the method, one series each, told apart by the load label: w1 (observed, after
	// stabilisation), w2 (the largest forecast over the horizon), w3 (extreme-value high-water
	// level), w (fed to the scaling rule: W1, max(W2, W1) or max(min(W2, W3), W1) by algorithm)
	// and window (mean observed load over the algorithm's window).
	// Budget policies add down (the calibrated quantile over the lead time plus the hold, which
	// a scale-down must fit); their w is the calibrated quantile over the lead time and w1 the
	// observed floor.
	descLoad        = desc("debi_load_ratio", "Load of the method (label load: w1 observed, w2 largest forecast over the horizon, w3 high-water, w fed to the rule, window mean, down the budget policy's quantile over the lead time plus the hold), as utilization at the current size.", "load")
	descDemand      = desc("debi_demand_cores", "CPU demand behind a load (label load: w1 observed, w2 largest forecast over the horizon, w3 high-water).", "load")
	descHorizon     = desc("debi_forecast_horizon_seconds", "Horizon of the forecast load w2: h history steps of debi_model_history_step_seconds, h = ceil(lead_time / history_step) + 1 (decision delay and pod start-up covered).")
	descRequest     = desc("debi_request_cores", "CPU request of one pod used for the loads.")
	descTarget      = desc("debi_target_utilization_ratio", "Target utilization of the scaling rule (dynamic for debi).")
	descRecommended = desc("debi_recommended_replicas", "Recommended replica count; never below the current count while inputs are missing.")
	descDecision    = desc("debi_decision_info", "Why the last decision is what it is; always 1. term: the load that decided (w1 observed, w2 forecast, w3 high-water, quantile the budget's calibrated quantile, window debi's window term); reason: the rule's branch (scale-up, scale-down, within-tolerance, stabilized, rate-limited, at-min-replicas, at-max-replicas, …).", "term", "reason")
	descMinR        = desc("debi_policy_min_replicas", "min_replicas of the policy: a recommendation there is limited by it.")
	descMaxR        = desc("debi_policy_max_replicas", "max_replicas of the policy: a recommendation there is limited by it.")
	descFloor       = desc("debi_decision_floor_replicas", "Lowest replica count the policy's state (stabilisation, rate limits, hold) allowed its last decision; the webhook's decision from fresh inputs is clamped into [floor, ceiling]. min_replicas for a stateless algorithm.")
	descCeiling     = desc("debi_decision_ceiling_replicas", "Highest replica count the policy's state allowed its last decision (rate limits); max_replicas for a stateless algorithm.")
	descCurrent     = desc("debi_current_replicas", "Spec replica count as last seen by the exporter.")
	descReady       = desc("debi_ready_replicas", "Ready replica count as last seen by the exporter.")
	descStale       = desc("debi_policy_stale", "1 when the published values are not from the latest step because an input was missing.")
	descLastSuccess = desc("debi_policy_last_success_timestamp_seconds", "Evaluation time of the last step with every input present.")
	descSteps       = desc("debi_policy_steps_total", "Steps fed to the policy's runner, start-up history included.")
	descHistory     = desc("debi_policy_history_points", "Points loaded from Prometheus's history at start-up, one per history step.")
	descMAE         = desc("debi_forecast_mean_absolute_error_cores", "Rolling mean absolute error, over exporter.mae_window history steps, of the point demand forecast made one horizon earlier against the demand observed at its horizon.")
	descQueryErrors = desc("debi_query_errors_total", "Failed or empty input queries of the policy.", "query")

	descXi        = desc("debi_evt_shape", "Shape ξ of the generalized Pareto fit of demand excesses (0 on fallback).")
	descSigma     = desc("debi_evt_scale_cores", "Scale σ of the generalized Pareto fit of demand excesses (0 on fallback).")
	descThreshold = desc("debi_evt_threshold_cores", "Peaks-over-threshold threshold t, the empirical (1−τ) quantile of demand.")
	descFallback  = desc("debi_evt_fallback", "1 when the high-water level fell back to the empirical quantile because the fit was skipped.")
	descExcesses  = desc("debi_evt_excesses", "Number of demand values above the threshold in the fit.")

	descTrainDuration = desc("debi_model_train_duration_seconds", "Duration of the last finished training run of the forecast model.")
	descLastTrain     = desc("debi_model_last_train_timestamp_seconds", "Step time at which the last training run finished.")
	descTrainFailures = desc("debi_model_train_failures_total", "Training runs of the forecast model that failed.")

	descHistoryStep     = desc("debi_model_history_step_seconds", "History step of the policy: its model history, forecast and EVT fit advance once per history step while it decides every interval.")
	descHistoryRequired = desc("debi_model_history_required_steps", "History steps the forecast model needs (its minimum history, at least the horizon + 1): the model forecasts nothing until debi_model_history_steps >= this.")
	descHistorySteps    = desc("debi_model_history_steps", "History steps the forecast model has, start-up history included: the model forecasts nothing until this is >= debi_model_history_required_steps.")

	// The overload-budget policy (METHOD §9).
	descBudgetQuantile       = desc("debi_budget_quantile_cores", "Calibrated upper quantile of the demand the budget policy sizes for (label window: lead over the lead time, hold over the lead time plus the hold, which a scale-down must fit).", "window")
	descBudgetForecast       = desc("debi_budget_forecast_cores", "Largest point forecast of the demand over the lead time, before the margin.")
	descBudgetMargin         = desc("debi_budget_margin", "Calibrated factor on the forecast: debi_budget_quantile_cores{window=\"lead\"} = debi_budget_forecast_cores × this.")
	descBudgetLevel          = desc("debi_budget_level", "Calibrated level α: the margin is the (1 − α) quantile of the forecast's recent errors, α adapted online so that realized overload tracks the budget.")
	descBudgetOverloadBudget = desc("debi_budget_overload_budget", "Configured overload budget b: the share of time the workload may run above u_sla.")
	descBudgetErrorSamples   = desc("debi_budget_error_samples", "Recent forecast errors (samples) the margin is computed from; below the policy's budget.min_errors the margin is budget.cold_margin.")
	descBudgetOverloaded     = desc("debi_budget_overloaded_seconds_total", "Live seconds whose observed demand exceeded u_sla × ready replicas × request (at max_replicas too): the overload budget burnt.")
	descBudgetObserved       = desc("debi_budget_observed_seconds_total", "Live seconds with an observed demand: the time the overload budget is a share of.")
)

var allDescs = []*prometheus.Desc{
	descInfo, descLoad, descDemand, descHorizon, descRequest, descTarget, descRecommended, descFloor, descCeiling, descDecision, descMinR, descMaxR,
	descCurrent, descReady, descStale, descLastSuccess, descSteps, descHistory, descMAE, descQueryErrors,
	descXi, descSigma, descThreshold, descFallback, descExcesses, descTrainDuration, descLastTrain, descTrainFailures,
	descHistoryStep, descHistoryRequired, descHistorySteps,
	descBudgetQuantile, descBudgetForecast, descBudgetMargin, descBudgetLevel, descBudgetOverloadBudget, descBudgetErrorSamples,
	descBudgetOverloaded, descBudgetObserved,
}

// collector emits the latest snapshot.
type collector struct{ e *Exporter }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.e.snap.Load()
	for i := range s.policies {
		p := &s.policies[i]
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			if math.IsNaN(v) {
				return
			}
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(p.labels[:len(p.labels):len(p.labels)], extra...)...)
		}
		counter := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(p.labels[:len(p.labels):len(p.labels)], extra...)...)
		}
		gauge(descInfo, 1, p.algorithm, p.model)
		gauge(descLoad, p.w1, "w1")
		gauge(descLoad, p.w2, "w2")
		gauge(descLoad, p.w3, "w3")
		gauge(descLoad, p.w, "w")
		gauge(descLoad, p.ww, "window")
		gauge(descDemand, p.demand, "w1")
		gauge(descDemand, p.forecast, "w2")
		gauge(descDemand, p.highWater, "w3")
		if p.model != "" {
			gauge(descHorizon, p.horizon)
		}
		gauge(descRequest, p.request)
		gauge(descTarget, p.target)
		gauge(descRecommended, p.recommended)
		gauge(descFloor, p.floor)
		gauge(descMinR, p.minR)
		gauge(descMaxR, p.maxR)
		if p.reason != "" {
			gauge(descDecision, 1, p.term, p.reason)
		}
		gauge(descCeiling, p.ceiling)
		gauge(descCurrent, p.current)
		gauge(descReady, p.ready)
		gauge(descStale, p.stale)
		gauge(descLastSuccess, p.lastSuccess)
		counter(descSteps, p.steps)
		gauge(descHistory, p.historyPoints)
		gauge(descMAE, p.mae)
		for k, n := range p.queryErrors {
			counter(descQueryErrors, n, queryNames[k])
		}
		if p.evt {
			gauge(descXi, p.evtXi)
			gauge(descSigma, p.evtSigma)
			gauge(descThreshold, p.evtThreshold)
			gauge(descFallback, p.evtFallback)
			gauge(descExcesses, p.evtExcesses)
		}
		if p.model != "" {
			gauge(descTrainDuration, p.trainDuration)
			gauge(descLastTrain, p.lastTrain)
			counter(descTrainFailures, p.trainFailures)
			gauge(descHistoryStep, p.historyStep)
			gauge(descHistoryRequired, p.historyRequired)
			gauge(descHistorySteps, p.historyHave)
		}
		if p.budget {
			gauge(descLoad, p.wDown, "down")
			gauge(descBudgetQuantile, p.quantile, "lead")
			gauge(descBudgetQuantile, p.quantileDown, "hold")
			gauge(descBudgetForecast, p.budgetForecast)
			gauge(descBudgetMargin, p.margin)
			gauge(descBudgetLevel, p.level)
			gauge(descBudgetOverloadBudget, p.overloadBudget)
			gauge(descBudgetErrorSamples, p.errors)
			counter(descBudgetOverloaded, p.overloaded)
			counter(descBudgetObserved, p.observed)
		}
	}
}

// publish builds a snapshot from every policy's state and swaps it in.
func (e *Exporter) publish() {
	s := &snapshot{policies: make([]policySnap, 0, len(e.policies))}
	for _, ps := range e.policies {
		s.policies = append(s.policies, ps.snap())
	}
	e.snap.Store(s)
}

func (ps *policyState) snap() policySnap {
	nan := math.NaN()
	p := policySnap{
		labels: ps.labels, algorithm: ps.cfg.Algorithm, model: ps.cfg.Model, horizon: ps.horizon,
		historyStep: ps.histStep.Seconds(),
		w1:          nan, w2: nan, w3: nan, w: nan, ww: nan, demand: nan, forecast: nan, highWater: nan, target: nan,
		request: nan, recommended: nan, current: nan, ready: nan, floor: nan, ceiling: nan,
		minR: float64(ps.cfg.Scaling.MinReplicas), maxR: float64(ps.cfg.Scaling.MaxReplicas),
		mae: ps.mae.value(), lastSuccess: nan, lastTrain: nan, trainDuration: nan,
		trainFailures: ps.trainFailures, historyPoints: float64(ps.historyPoints), steps: float64(ps.steps),
		queryErrors: ps.queryErrors, stale: 0,
		budget: ps.budget, quantile: nan, quantileDown: nan, budgetForecast: nan, margin: nan, level: nan,
		overloadBudget: ps.cfg.Budget.Budget, errors: nan, wDown: nan,
		overloaded: ps.overloadedSeconds, observed: ps.observedSeconds,
	}
	if ps.stale || ps.last == nil {
		p.stale = 1
	}
	need, have := ps.runner.ModelHistory()
	p.historyRequired, p.historyHave = float64(need), float64(have)
	if ps.request > 0 {
		p.request = ps.request
	}
	if ps.known {
		p.current, p.ready, p.recommended = float64(ps.current), float64(ps.ready), float64(ps.recommended)
	}
	if !ps.lastSuccess.IsZero() {
		p.lastSuccess = float64(ps.lastSuccess.UnixMilli()) / 1e3
	}
	if !ps.lastTrain.IsZero() {
		p.lastTrain = float64(ps.lastTrain.UnixMilli()) / 1e3
		p.trainDuration = ps.trainDuration.Seconds()
	}
	if r := ps.last; r != nil {
		p.w1, p.w2, p.w3, p.w, p.ww = r.W1, r.W2, r.W3, r.W, r.WindowW
		p.demand, p.forecast, p.highWater = r.Demand, r.DemandForecast, r.HighWater
		p.target = r.Decision.Target
		if r.Ceiling > 0 {
			p.floor, p.ceiling = float64(r.Floor), float64(r.Ceiling)
		}
		p.term, p.reason = r.Term, r.Decision.Reason
		if b := r.Budget; b != nil {
			p.quantile, p.quantileDown, p.budgetForecast, p.margin = b.Quantile, b.QuantileDown, b.Forecast, b.Margin
			p.level, p.errors, p.wDown = b.Alpha, float64(b.Errors), ps.lastWDown
		}
		if pot := r.POT; pot != nil {
			p.evt = true
			p.evtXi, p.evtSigma, p.evtThreshold = pot.Xi, pot.Sigma, pot.Threshold
			p.evtExcesses = float64(pot.Excesses)
			if pot.Fallback {
				p.evtFallback = 1
			}
		}
	}
	return p
}
