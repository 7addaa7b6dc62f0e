package exporter

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/debi-scaler/debi/config"
)

// snapshot is what one loop published: immutable once stored, so Collect needs no lock and the
// series of a policy that is gone vanish with the next snapshot.
type snapshot struct {
	policies []policySnap
}

// policySnap is one policy's published figures. NaN means "not available": the series is then
// left out rather than exported as NaN, so alerts and rules see an absent series.
type policySnap struct {
	labels           []string // policy, namespace, workload_type, workload
	algorithm, model string
	horizon          float64
	historyStep      float64
	target           float64
	recommended      float64
	floor, ceiling   float64
	minR, maxR       float64
	term, reason     string
	deciding         string // the metric that decided
	current, ready   float64
	stale            float64
	// idle is, for a policy that scales to zero, Idle of its last step (NaN: none).
	idle          float64
	lastSuccess   float64
	lastTrain     float64
	trainDuration float64
	trainFailures float64
	historyPoints float64
	steps         float64
	// sizeErrors are the failed or empty queries of replicas and ready_replicas.
	sizeErrors [2]float64
	// The target's pods and size from its scale subresource (config.Target.PodsFromScale):
	// scalePods says whether it has them, targetReplicas is NaN while the read fails.
	scalePods        bool
	targetPods       []string
	targetReplicas   float64
	targetPodsErrors float64
	// leadTime is the policy's lead_time; startup the measured start-up of its workload's pods
	// and path its decision path (quantiles by leadQuantiles over startups and paths samples
	// whose sums are startupSum and pathSum; 0 samples: none measured).
	leadTime            float64
	startup, path       [3]float64
	startups, paths     float64
	startupSum, pathSum float64
	metrics             []metricSnap

	// The overload-budget policy's figures (budget true): the configured budget b and its burn
	// as counters of live seconds (overloaded: any metric above its capacity).
	budget               bool
	overloadBudget       float64
	overloaded, observed float64
}

// metricSnap is one metric's published figures, with the label metric and in its unit.
type metricSnap struct {
	name, unit        string
	activeModel       string // the model the forecast comes from ("" before the first)
	historyRequired   float64
	historyHave       float64
	w1, w2, w3, w, ww float64
	demand, forecast  float64
	highWater         float64
	request           float64
	mae               float64
	evt               bool
	evtXi, evtSigma   float64
	evtThreshold      float64
	evtFallback       float64
	evtExcesses       float64
	queryErrors       [2]float64 // request, demand

	// The overload-budget policy's figures: the calibrated quantiles over the lead time and
	// over the lead time plus the hold, the point forecast and margin behind the first, the
	// calibrated level α and the load the scale-down gate reads.
	quantile, quantileDown float64
	budgetForecast, margin float64
	level                  float64
	price                  float64 // λ of the priced rule (NaN or 0: the quantile rule)
	hold                   float64 // the priced rule's hold in seconds (NaN: the quantile rule)
	holdSettle             float64 // 1: the hold chosen also holds through the settle
	errors                 float64
	wDown                  float64

	// A metric read from a metrics API (source): the value read at the last step (NaN: the
	// read failed), the reason of the failure ("" none) and the failed reads by reason.
	source       bool
	sourceValue  float64
	sourceFailed string
	sourceErrors []float64 // by config.SourceReasons
}

var policyLabels = []string{"policy", "namespace", "workload_type", "workload"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string(nil), policyLabels...), extra...), nil)
}

// mdesc is the Desc of a per-metric series: the policy's labels and metric, the metric's name
// (cpu for a policy in the single-metric form), then extra.
func mdesc(name, help string, extra ...string) *prometheus.Desc {
	return desc(name, help, append([]string{"metric"}, extra...)...)
}

// unitDescs are the per-metric series whose name carries the metric's unit: CPU cores keep the
// names they have always had (debi_demand_cores, debi_request_cores…); the other units get the
// same series with their own suffix (debi_demand_requests_per_second…).
type unitDescs struct {
	demand, request, mae, sigma, threshold, quantile, forecast *prometheus.Desc
}

var descsByUnit = func() map[string]*unitDescs {
	out := map[string]*unitDescs{}
	for _, u := range config.MetricUnits() {
		d := &unitDescs{
			demand:    mdesc("debi_demand_"+u, "Demand behind a load (label load: w1 observed, w2 largest forecast over the horizon, w3 high-water), in "+u+".", "load"),
			request:   mdesc("debi_capacity_per_pod_"+u, "Capacity of one pod the metric's loads are utilizations of, in "+u+" (its target ÷ the policy's reference utilization)."),
			mae:       mdesc("debi_forecast_mean_absolute_error_"+u, "Rolling mean absolute error, over exporter.mae_window history steps, of the point demand forecast made one horizon earlier against the demand observed at its horizon, in "+u+"."),
			sigma:     mdesc("debi_evt_scale_"+u, "Scale σ of the generalized Pareto fit of demand excesses (0 on fallback), in "+u+"."),
			threshold: mdesc("debi_evt_threshold_"+u, "Peaks-over-threshold threshold t, the empirical (1−τ) quantile of demand, in "+u+"."),
			quantile:  mdesc("debi_budget_quantile_"+u, "Calibrated upper quantile of the demand the budget policy sizes for (label window: lead, hold), in "+u+".", "window"),
			forecast:  mdesc("debi_budget_forecast_"+u, "Largest point forecast of the demand over the lead time, before the margin, in "+u+"."),
		}
		out[u] = d
	}
	out["cores"] = &unitDescs{demand: descDemand, request: descRequest, mae: descMAE, sigma: descSigma,
		threshold: descThreshold, quantile: descBudgetQuantile, forecast: descBudgetForecast}
	return out
}()

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
	descLoad        = mdesc("debi_load_ratio", "Load of the method (label load: w1 observed, w2 largest forecast over the horizon, w3 high-water, w fed to the rule, window mean, down the budget policy's quantile over the lead time plus the hold), as utilization at the current size.", "load")
	descDemand      = mdesc("debi_demand_cores", "CPU demand behind a load (label load: w1 observed, w2 largest forecast over the horizon, w3 high-water).", "load")
	descHorizon     = desc("debi_forecast_horizon_seconds", "Horizon of the forecast load w2: h history steps of debi_model_history_step_seconds, h = ceil(lead_time / history_step) + 1 (decision delay and pod start-up covered).")
	descRequest     = mdesc("debi_request_cores", "CPU request of one pod used for the loads.")
	descTarget      = desc("debi_target_utilization_ratio", "Target utilization of the scaling rule (dynamic for debi).")
	descRecommended = desc("debi_recommended_replicas", "Recommended replica count; never below the current count while inputs are missing.")
	descDecision    = desc("debi_decision_info", "Why the last decision is what it is; always 1. metric: the metric whose replica count was the largest (the HPA's rule over several metrics); term: the load that decided (w1 observed, w2 forecast, w3 high-water, quantile the budget's calibrated quantile, price the budget's priced rule, hold its priced hold, saturated its forecast above what max_replicas serve, window debi's window term); reason: the rule's branch (scale-up, scale-down, within-tolerance, stabilized, rate-limited, at-min-replicas, at-max-replicas, …).", "metric", "term", "reason")
	descMinR        = desc("debi_policy_min_replicas", "min_replicas of the policy: a recommendation there is limited by it.")
	descMaxR        = desc("debi_policy_max_replicas", "max_replicas of the policy: a recommendation there is limited by it.")
	descFloor       = desc("debi_decision_floor_replicas", "Lowest replica count the policy's state (stabilisation, rate limits, hold) allowed its last decision; the webhook's decision from fresh inputs is clamped into [floor, ceiling]. min_replicas for a stateless algorithm.")
	descCeiling     = desc("debi_decision_ceiling_replicas", "Highest replica count the policy's state allowed its last decision (rate limits); max_replicas for a stateless algorithm.")
	descCurrent     = desc("debi_current_replicas", "Spec replica count as last seen by the exporter.")
	descReady       = desc("debi_ready_replicas", "Ready replica count as last seen by the exporter.")
	descStale       = desc("debi_policy_stale", "1 when the published values are not from the latest step because an input was missing.")
	descIdle        = desc("debi_policy_idle_seconds", "For a policy that scales to zero (min_replicas 0): how long its wake metrics have been at or below their activation, observed and forecast over the lead time; 0 while one is above it. The policy goes to zero at scale_to_zero_after and wakes from zero at 0.")
	descLastSuccess = desc("debi_policy_last_success_timestamp_seconds", "Evaluation time of the last step with every input present (with several metrics: with at least one metric's, the missing ones publishing no loads).")
	descSteps       = desc("debi_policy_steps_total", "Steps fed to the policy's runner, start-up history included.")
	descHistory     = desc("debi_policy_history_points", "Points loaded from Prometheus's history at start-up, one per history step.")
	descMAE         = mdesc("debi_forecast_mean_absolute_error_cores", "Rolling mean absolute error, over exporter.mae_window history steps, of the point demand forecast made one horizon earlier against the demand observed at its horizon.")
	descQueryErrors = mdesc("debi_query_errors_total", "Failed or empty input queries of the policy.", "query")

	descXi        = mdesc("debi_evt_shape", "Shape ξ of the generalized Pareto fit of demand excesses (0 on fallback).")
	descSigma     = mdesc("debi_evt_scale_cores", "Scale σ of the generalized Pareto fit of demand excesses (0 on fallback).")
	descThreshold = mdesc("debi_evt_threshold_cores", "Peaks-over-threshold threshold t, the empirical (1−τ) quantile of demand.")
	descFallback  = mdesc("debi_evt_fallback", "1 when the high-water level fell back to the empirical quantile because the fit was skipped.")
	descExcesses  = mdesc("debi_evt_excesses", "Number of demand values above the threshold in the fit.")

	descTrainDuration = desc("debi_model_train_duration_seconds", "Duration of the last finished training run of the forecast model.")
	descLastTrain     = desc("debi_model_last_train_timestamp_seconds", "Step time at which the last training run finished.")
	descTrainFailures = desc("debi_model_train_failures_total", "Training runs of the forecast model that failed.")

	descHistoryStep     = desc("debi_model_history_step_seconds", "History step of the policy: its model history, forecast and EVT fit advance once per history step while it decides every interval.")
	descHistoryRequired = mdesc("debi_model_history_required_steps", "History steps the forecast model needs (its minimum history, at least the horizon + 1): the model forecasts nothing until debi_model_history_steps >= this.")
	descHistorySteps    = mdesc("debi_model_history_steps", "History steps the forecast model has, start-up history included: the model forecasts nothing until this is >= debi_model_history_required_steps.")
	descModelActive     = mdesc("debi_model_active", "1 for the model the latest forecast came from: the policy's model, or for model auto whichever of its models has forecast the recent history best, or a fallback while the model waits for its history.", "model")

	// The overload-budget policy (METHOD §9).
	descBudgetQuantile       = mdesc("debi_budget_quantile_cores", "Calibrated upper quantile of the demand the budget policy sizes for (label window: lead over the lead time, hold over the lead time plus the hold, which a scale-down must fit).", "window")
	descBudgetForecast       = mdesc("debi_budget_forecast_cores", "Largest point forecast of the demand over the lead time, before the margin.")
	descBudgetMargin         = mdesc("debi_budget_margin", "Calibrated factor on the forecast: debi_budget_quantile_cores{window=\"lead\"} = debi_budget_forecast_cores × this.")
	descBudgetLevel          = mdesc("debi_budget_level", "Calibrated level α: the margin is the (1 − α) quantile of the forecast's recent errors, α adapted online so that realized overload tracks the budget.")
	descBudgetOverloadBudget = desc("debi_budget_overload_budget", "Configured overload budget b: the share of time the workload may run above u_sla.")
	descBudgetPrice          = mdesc("debi_budget_price", "The priced rule's price λ of an overloaded tick, in pod-ticks (scaling.budget.rule priced only): the size minimises pods + λ·(overloaded ticks) over the lead ahead, its margin is the (1 − α) quantile of the forecast's errors at the level α (1/λ, 2/λ, 4/λ, …) where its pods plus the overload it leaves cost least, and λ rises while overload runs above the budget.")
	descBudgetHold           = mdesc("debi_budget_hold_seconds", "The priced rule's hold (scaling.budget.rule priced only): of holding its size 0, 1, 2 or 4 lead times (at most scaling.budget.hold), each alone or also through the ticks after a history point before the nowcast has read it (debi_budget_hold_settle), the one that would have cost least in pods + λ·(overloaded ticks) on the ticks served; the decision's term is \"hold\" while it keeps pods the price alone would release.")
	descBudgetHoldSettle     = mdesc("debi_budget_hold_settle", "1 when the priced rule's hold (debi_budget_hold_seconds) also holds its size through the ticks after a history point before the nowcast has read it (two ticks behind an observation window): releases decided on a path the demand now has not caught up with wait until it has; 0 when it does not (scaling.budget.rule priced only).")
	descBudgetErrorSamples   = mdesc("debi_budget_error_samples", "Recent forecast errors (samples) the margin is computed from; below the policy's budget.min_errors the margin is budget.cold_margin.")
	descBudgetOverloaded     = desc("debi_budget_overloaded_seconds_total", "Live seconds whose observed demand exceeded u_sla × ready replicas × request (at max_replicas too): the overload budget burnt.")
	descBudgetObserved       = desc("debi_budget_observed_seconds_total", "Live seconds with an observed demand: the time the overload budget is a share of.")

	// Metrics read from the metrics APIs (a metric's external, object or pods source).
	descSourceValue  = mdesc("debi_metric_source_value", "Value of a metric read from a metrics API (external.metrics.k8s.io, custom.metrics.k8s.io) at the last step, in its unit: the sum over its series or pods; absent while the read fails. The exporter loads the metric's history from this series.")
	descSourceErrors = mdesc("debi_metric_source_errors_total", "Failed reads of a metric from its metrics API, by reason (not_served, timeout, no_values, not_found, forbidden, no_pod_selector, error).", "reason")
	// A target of any kind whose pods come from its scale subresource (config.Target.PodsFromScale).
	descTargetPod      = desc("debi_target_pod_info", "A pod of the target, selected by its scale subresource's status.selector (targets other than Deployments and StatefulSets, whose pods kube-state-metrics relabels); always 1. The recording rules relabel these pods to the workload.", "pod")
	descTargetReplicas = desc("debi_target_spec_replicas", "The target's size, its scale subresource's spec.replicas (targets other than Deployments and StatefulSets); absent while the read fails.")
	descTargetErrors   = desc("debi_target_pods_errors_total", "Failed reads of the target's scale subresource and pods (targets other than Deployments and StatefulSets); the log names the reason.")

	// The lead time (leadtime.go).
	descPolicyLeadTime = desc("debi_policy_lead_time_seconds", "The lead_time of a policy that forecasts: how far ahead it sizes, the time from a decision to its pods serving (decision path and pod start-up).")
	descLeadTime       = desc("debi_lead_time_seconds", "The measured parts of the lead time, by quantile: component startup, the workload's pods' creation to Ready (kube-state-metrics, rule namespace_workload_pod:debi_pod_startup_seconds; for a policy with lead_time unset, kube_pod_created and kube_pod_status_ready_time while the rule has fewer than 5 of them) over the last 7 days; component path, the decision path of the policy's last scale-ups, from the step that first recommended more pods to the step that saw the target's size reach them (one global.interval of resolution). A summary: _count and _sum are over the same samples.", "component")
	descLeadSamples    = desc("debi_lead_time_samples", "What debi_lead_time_seconds is measured over: pod start-ups of the last 7 days (component startup), the policy's last scale-ups, at most 32 (component path).", "component")

	descSourceFailed = mdesc("debi_metric_source_failed", "1 for the reason the last read of a metric from its metrics API failed, 0 for the other reasons (all 0 while it reads): the metric is missing and the policy never scales down for the others.", "reason")
)

var allDescs = []*prometheus.Desc{
	descInfo, descLoad, descDemand, descHorizon, descRequest, descTarget, descRecommended, descFloor, descCeiling, descDecision, descMinR, descMaxR,
	descCurrent, descReady, descStale, descIdle, descLastSuccess, descSteps, descHistory, descMAE, descQueryErrors,
	descXi, descSigma, descThreshold, descFallback, descExcesses, descTrainDuration, descLastTrain, descTrainFailures,
	descHistoryStep, descHistoryRequired, descHistorySteps, descModelActive,
	descBudgetQuantile, descBudgetForecast, descBudgetMargin, descBudgetLevel, descBudgetPrice, descBudgetOverloadBudget, descBudgetErrorSamples,
	descBudgetOverloaded, descBudgetObserved,
	descSourceValue, descSourceErrors, descSourceFailed,
	descTargetPod, descTargetReplicas, descTargetErrors,
	descPolicyLeadTime, descLeadTime, descLeadSamples,
}

func init() {
	for _, u := range config.MetricUnits() {
		if u == "cores" {
			continue
		}
		d := descsByUnit[u]
		allDescs = append(allDescs, d.demand, d.request, d.mae, d.sigma, d.threshold, d.quantile, d.forecast)
	}
}

// collectTarget emits the lead time (the policy's and the measured one) and, for a target of
// any kind, its pods and size.
func (p *policySnap) collectTarget(gauge, counter func(d *prometheus.Desc, v float64, extra ...string), summary func(d *prometheus.Desc, n, sum float64, q [3]float64, extra ...string)) {
	if p.model != "" { // a policy without a forecast sizes for now, whatever its lead_time
		gauge(descPolicyLeadTime, p.leadTime)
	}
	for _, c := range []struct {
		name   string
		q      *[3]float64
		n, sum float64
	}{{"startup", &p.startup, p.startups, p.startupSum}, {"path", &p.path, p.paths, p.pathSum}} {
		if c.n > 0 {
			summary(descLeadTime, c.n, c.sum, *c.q, c.name)
			gauge(descLeadSamples, c.n, c.name)
		}
	}
	if p.scalePods {
		for _, pod := range p.targetPods {
			gauge(descTargetPod, 1, pod)
		}
		gauge(descTargetReplicas, p.targetReplicas)
		counter(descTargetErrors, p.targetPodsErrors)
	}
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
		if p.model != "" {
			gauge(descHorizon, p.horizon)
		}
		gauge(descTarget, p.target)
		gauge(descRecommended, p.recommended)
		gauge(descFloor, p.floor)
		gauge(descMinR, p.minR)
		gauge(descMaxR, p.maxR)
		if p.reason != "" {
			gauge(descDecision, 1, p.deciding, p.term, p.reason)
		}
		gauge(descCeiling, p.ceiling)
		gauge(descCurrent, p.current)
		gauge(descReady, p.ready)
		gauge(descStale, p.stale)
		gauge(descIdle, p.idle)
		gauge(descLastSuccess, p.lastSuccess)
		counter(descSteps, p.steps)
		gauge(descHistory, p.historyPoints)
		counter(descQueryErrors, p.sizeErrors[0], "", queryNames[qReplicas])
		counter(descQueryErrors, p.sizeErrors[1], "", queryNames[qReady])
		p.collectTarget(gauge, counter, func(d *prometheus.Desc, n, sum float64, q [3]float64, extra ...string) {
			qs := make(map[float64]float64, len(q))
			for i, v := range q {
				if !math.IsNaN(v) {
					qs[leadQuantileValues[i]] = v
				}
			}
			ch <- prometheus.MustNewConstSummary(d, uint64(n), sum, qs, append(p.labels[:len(p.labels):len(p.labels)], extra...)...)
		})
		if p.model != "" {
			gauge(descTrainDuration, p.trainDuration)
			gauge(descLastTrain, p.lastTrain)
			counter(descTrainFailures, p.trainFailures)
			gauge(descHistoryStep, p.historyStep)
		}
		if p.budget {
			gauge(descBudgetOverloadBudget, p.overloadBudget)
			counter(descBudgetOverloaded, p.overloaded)
			counter(descBudgetObserved, p.observed)
		}
		for j := range p.metrics {
			m := &p.metrics[j]
			ud := descsByUnit[m.unit]
			if ud == nil {
				ud = descsByUnit["cores"]
			}
			gauge(descLoad, m.w1, m.name, "w1")
			gauge(descLoad, m.w2, m.name, "w2")
			gauge(descLoad, m.w3, m.name, "w3")
			gauge(descLoad, m.w, m.name, "w")
			gauge(descLoad, m.ww, m.name, "window")
			gauge(ud.demand, m.demand, m.name, "w1")
			gauge(ud.demand, m.forecast, m.name, "w2")
			gauge(ud.demand, m.highWater, m.name, "w3")
			gauge(ud.request, m.request, m.name)
			gauge(ud.mae, m.mae, m.name)
			counter(descQueryErrors, m.queryErrors[0], m.name, queryNames[qRequest])
			counter(descQueryErrors, m.queryErrors[1], m.name, queryNames[qDemand])
			if m.evt {
				gauge(descXi, m.evtXi, m.name)
				gauge(ud.sigma, m.evtSigma, m.name)
				gauge(ud.threshold, m.evtThreshold, m.name)
				gauge(descFallback, m.evtFallback, m.name)
				gauge(descExcesses, m.evtExcesses, m.name)
			}
			if p.model != "" {
				gauge(descHistoryRequired, m.historyRequired, m.name)
				gauge(descHistorySteps, m.historyHave, m.name)
				if m.activeModel != "" {
					gauge(descModelActive, 1, m.name, m.activeModel)
				}
			}
			if m.source {
				gauge(descSourceValue, m.sourceValue, m.name)
				for k, reason := range config.SourceReasons {
					counter(descSourceErrors, m.sourceErrors[k], m.name, reason)
					failed := 0.0
					if reason == m.sourceFailed {
						failed = 1
					}
					gauge(descSourceFailed, failed, m.name, reason)
				}
			}
			if p.budget {
				gauge(descLoad, m.wDown, m.name, "down")
				gauge(ud.quantile, m.quantile, m.name, "lead")
				gauge(ud.quantile, m.quantileDown, m.name, "hold")
				gauge(ud.forecast, m.budgetForecast, m.name)
				gauge(descBudgetMargin, m.margin, m.name)
				gauge(descBudgetLevel, m.level, m.name)
				if m.price > 0 {
					gauge(descBudgetPrice, m.price, m.name)
					gauge(descBudgetHold, m.hold, m.name)
					gauge(descBudgetHoldSettle, m.holdSettle, m.name)
				}
				gauge(descBudgetErrorSamples, m.errors, m.name)
			}
		}
	}
}

// publish builds a snapshot from every policy's state and swaps it in.
func (e *Exporter) publish() {
	s := &snapshot{policies: make([]policySnap, 0, len(e.policies))}
	for _, ps := range e.policies {
		p := ps.snap()
		if lt, ok := e.leadTimeOf(ps); ok {
			p.startup, p.startups, p.startupSum = lt.q, lt.n, lt.sum
		}
		s.policies = append(s.policies, p)
	}
	e.snap.Store(s)
}

func (ps *policyState) snap() policySnap {
	nan := math.NaN()
	p := policySnap{
		labels: ps.labels, algorithm: ps.cfg.Algorithm, model: ps.cfg.Model, horizon: ps.horizon,
		historyStep: ps.histStep.Seconds(), target: nan,
		recommended: nan, current: nan, ready: nan, floor: nan, ceiling: nan, idle: nan,
		minR: float64(ps.cfg.Scaling.MinReplicas), maxR: float64(ps.cfg.Scaling.MaxReplicas),
		lastSuccess: nan, lastTrain: nan, trainDuration: nan,
		trainFailures: ps.trainFailures, historyPoints: float64(ps.historyPoints), steps: float64(ps.steps),
		sizeErrors: [2]float64{ps.queryErrors[qReplicas], ps.queryErrors[qReady]}, stale: 0,
		budget: ps.budget, overloadBudget: ps.cfg.Budget.Budget,
		overloaded: ps.overloadedSeconds, observed: ps.observedSeconds,
		scalePods: ps.cfg.Target.PodsFromScale(), targetPods: ps.targetPods.pods, targetReplicas: nan,
		targetPodsErrors: ps.targetPodsErrors, leadTime: ps.leadTime().Seconds(),
		path: ps.decisionPath.quantiles(), paths: float64(len(ps.decisionPath.samples)), pathSum: ps.decisionPath.sum(),
	}
	if ps.targetPods.ok {
		p.targetReplicas = ps.targetPods.replicas
	}
	if ps.stale || !ps.haveLast {
		p.stale = 1
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
	if ps.haveLast && ps.deciding >= 0 {
		p.target = ps.decision.Target
		if ps.ceiling > 0 {
			p.floor, p.ceiling = float64(ps.floor), float64(ps.ceiling)
		}
		p.reason, p.deciding = ps.decision.Reason, ps.metrics[ps.deciding].spec.Name
		if r := ps.metrics[ps.deciding].last; r != nil {
			p.term = r.Term
			if ps.cfg.Scaling.MinReplicas == 0 {
				p.idle = r.Idle
			}
		}
	}
	p.metrics = make([]metricSnap, len(ps.metrics))
	for i, m := range ps.metrics {
		need, have := ps.runner.Runner(i).ModelHistory()
		k := qRequest + 2*i
		ms := metricSnap{name: m.spec.Name, unit: m.spec.Unit, historyRequired: float64(need), historyHave: float64(have), activeModel: ps.runner.Runner(i).ActiveModel(),
			w1: nan, w2: nan, w3: nan, w: nan, ww: nan, demand: nan, forecast: nan, highWater: nan, request: nan,
			mae: m.mae.value(), queryErrors: [2]float64{ps.queryErrors[k], ps.queryErrors[k+1]},
			quantile: nan, quantileDown: nan, budgetForecast: nan, margin: nan, level: nan, price: nan, hold: nan, errors: nan, wDown: nan}
		if m.spec.Source != nil {
			ms.source, ms.sourceValue, ms.sourceFailed = true, m.read.value, m.failedReason
			ms.sourceErrors = make([]float64, len(config.SourceReasons))
			for k, reason := range config.SourceReasons {
				ms.sourceErrors[k] = m.sourceErrors[reason]
			}
		}
		if m.capacity > 0 {
			ms.request = m.capacity
		} else if m.base > 0 {
			ms.request = m.spec.CapacityPerPod(m.base, ps.current)
		}
		if r := m.last; r != nil && !(m.missing && len(ps.metrics) > 1) {
			ms.w1, ms.w2, ms.w3, ms.w, ms.ww = r.W1, r.W2, r.W3, r.W, r.WindowW
			ms.demand, ms.forecast, ms.highWater = r.Demand, r.DemandForecast, r.HighWater
			if b := r.Budget; b != nil {
				ms.quantile, ms.quantileDown, ms.budgetForecast, ms.margin = b.Quantile, b.QuantileDown, b.Forecast, b.Margin
				ms.level, ms.errors, ms.wDown = b.Alpha, float64(b.Errors), m.lastWDown
				ms.price, ms.hold, ms.holdSettle = b.Lambda, b.Hold.Seconds(), 0
				if b.HoldSettle {
					ms.holdSettle = 1
				}
			}
			if pot := r.POT; pot != nil {
				ms.evt = true
				ms.evtXi, ms.evtSigma, ms.evtThreshold = pot.Xi, pot.Sigma, pot.Threshold
				ms.evtExcesses = float64(pot.Excesses)
				if pot.Fallback {
					ms.evtFallback = 1
				}
			}
		}
		p.metrics[i] = ms
	}
	return p
}
