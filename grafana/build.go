package grafana

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// builders are the dashboards, one file each.
var builders = []struct {
	file  string
	build func() (dashboard.Dashboard, error)
}{
	{"debi-policy.json", policyDashboard},
	{"debi-fleet.json", fleetDashboard},
}

func ptr[T any](v T) *T { return &v }

// ds is the data source of every panel: the dashboard's "datasource" variable, so the same JSON
// works with any Prometheus data source (the Grafana sidecar imports it as is).
var ds = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// q is one query: a range query, or an instant one for stats and tables (table: one row per
// series, for the table panel's merge). refIDs are set by targets (the SDK leaves them empty).
// unit is set on a time-series query whose unit differs from the panel's: series draws it on
// an axis of its own on the right (a byFrameRefID override), labelled axis. One unit per axis
// side: the panel's on the left, at most one other on the right (TestOneUnitPerAxis).
type q struct {
	expr, legend   string
	instant, table bool
	unit, axis     string
}

func refID(i int) string { return string(rune('A' + i)) }

func targets(qs []q) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(qs))
	for i, x := range qs {
		b := prometheus.NewDataqueryBuilder().Datasource(ds).Expr(x.expr).RefId(refID(i))
		if x.legend != "" {
			b = b.LegendFormat(x.legend)
		}
		if x.instant {
			b = b.Instant()
			if x.table {
				b = b.Format(prometheus.PromQueryFormatTable)
			}
		} else {
			b = b.Range()
		}
		out = append(out, b)
	}
	return out
}

// panel ids are set explicitly so that regenerating keeps links to panels stable.
type ids struct{ n, x uint32 }

func (i *ids) next() uint32 { i.n++; return i.n }

// extra is the id of a panel added after the first layout: from 100 up, so that adding one
// keeps the ids (and links) of the panels after it.
func (i *ids) extra() uint32 {
	if i.x == 0 {
		i.x = 100
	}
	i.x++
	return i.x
}

// series is a time-series panel in unit; a query with a unit of its own goes on the right axis.
func series(id uint32, title, desc, unit string, w, h uint32, qs ...q) *timeseries.PanelBuilder {
	b := timeseries.NewPanelBuilder().Id(id).Title(title).Description(desc).Unit(unit).
		Datasource(ds).Span(w).Height(h).Targets(targets(qs)).
		LineWidth(1).FillOpacity(5).ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).ShowLegend(true).Calcs([]string{"lastNotNull", "max"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, x := range qs {
		if x.unit == "" {
			continue
		}
		b = b.OverrideByQuery(refID(i), []dashboard.DynamicConfigValue{
			{Id: "unit", Value: x.unit},
			{Id: "custom.axisPlacement", Value: "right"},
			{Id: "custom.axisLabel", Value: x.axis},
		})
	}
	return b
}

func singleStat(id uint32, title, desc, unit string, w uint32, qs ...q) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Id(id).Title(title).Description(desc).Unit(unit).
		Datasource(ds).Span(w).Height(4).Targets(targets(qs)).
		GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
}

func variables(withPolicy bool) []cog.Builder[dashboard.VariableModel] {
	vs := []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"),
	}
	if withPolicy {
		vs = append(vs, dashboard.NewQueryVariableBuilder("policy").Label("Policy").
			Description("debi scaling policy (one scaled workload), from debi_policy_info.").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr("label_values(debi_policy_info, policy)")}).
			Definition("label_values(debi_policy_info, policy)").
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc))
	}
	if withPolicy {
		// The forecast's horizon in seconds, to draw W2's demand at the time it is for.
		vs = append(vs, dashboard.NewQueryVariableBuilder("horizon").Label("Forecast horizon (s)").
			Description("debi_forecast_horizon_seconds of the selected policies (their largest): the forecast panel draws W2 this far ahead, at the time it is for.").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr(`query_result(max(debi_forecast_horizon_seconds{policy=~"$policy"}))`)}).
			Definition(`query_result(max(debi_forecast_horizon_seconds{policy=~"$policy"}))`).
			Regex(`/ ([0-9.e+]+) /`).
			Hide(dashboard.VariableHideHideVariable).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged))
	}
	vs = append(vs, dashboard.NewCustomVariableBuilder("sla").Label("u_sla").
		Description("Utilization of the ready replicas above which a step counts as overloaded (METHOD §7, default 0.9).").
		Values(dashboard.StringOrMap{String: ptr("0.9,0.8,0.7,1")}).
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: ptr("0.9")}, Value: dashboard.StringOrArrayOfString{String: ptr("0.9")}}))
	return vs
}

func base(uid, title, desc string, withPolicy bool) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).
		Tags([]string{"debi", "autoscaling"}).Editable().
		Refresh("30s").Time("now-6h", "now").Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Variables(variables(withPolicy)).
		Link(dashboard.NewDashboardLinkBuilder("debi").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"debi"}).AsDropdown(true).IncludeVars(true).KeepTime(true))
}

// sel is the label matcher of the policy dashboard.
const sel = `policy=~"$policy"`

// BaselineRow is the title of the policy dashboard's row that draws every policy on the
// workload of the selected one: the acting policy and its shadow baselines (a shadow hpa).
const BaselineRow = "Against the baseline on the same workload"

// size is the replica count a policy stands for, per policy (matcher m): for the policy that
// acts on its target (debi_webhook_policy_info mode act or hpa-floor) the spec replicas it
// applied, for a shadow policy the replicas it recommended. A policy the webhook does not
// publish counts at its recommendation.
//
// Each side of the "or" is aggregated to the policy's labels: callers take it over a range in
// a subquery, where a policy that switches from shadow to act (or loses its webhook info for a
// while) would otherwise be two series, debi_current_replicas and debi_recommended_replicas,
// that are one label set once *_over_time drops their names — an error for the whole range.
func size(m string) string {
	const by = `max by (policy, namespace, workload_type, workload) `
	// In parentheses: "and" binds tighter than "or", and callers filter the result with "and".
	return `(` + by + `(debi_current_replicas{` + m + `} and on (policy) debi_webhook_policy_info{mode!="shadow"}) or ` + by + `(debi_recommended_replicas{` + m + `}))`
}

// BudgetRow is the title of the policy dashboard's row for overload-budget policies: its panels
// read series that only budget policies publish, so they are empty for other policies.
const BudgetRow = "Overload budget"

// The policy dashboard's expressions, each on the policies of $policy (sel).
const (
	// readyCapacity is the capacity of the ready replicas in cores, Nr·R; both series carry the
	// same policy labels.
	readyCapacity = `debi_ready_replicas{` + sel + `} * ignoring (metric) group_right () debi_request_cores{` + sel + `}`
	// observedDemand is the observed demand D without its load label, so it matches the replica
	// and request series.
	observedDemand = `max without (load) (debi_demand_cores{load="w1", ` + sel + `})`
	// onWorkload keeps the series of every policy on the workload(s) of $policy (the acting one
	// and its shadows), withAlgorithm adds the algorithm of debi_policy_info (max by: one series
	// per policy, however many exporters publish it).
	onWorkload    = ` and on (namespace, workload_type, workload) debi_policy_info{` + sel + `}`
	withAlgorithm = ` * on (policy, namespace, workload_type, workload) group_left (algorithm) max by (policy, namespace, workload_type, workload, algorithm) (debi_policy_info)`
)

// policyDashboard is one policy step by step: what the exporter saw and predicted, what the
// method made of it, what it costs, and what the webhook did.
func policyDashboard() (dashboard.Dashboard, error) {
	var id ids
	b := base("debi-policy", "debi / Policy",
		"One debi policy: observed demand against forecast (W2) and high-water (W3), the effective load W, the dynamic target, replicas, cost, overload, forecast error and webhook actions.",
		true).
		// Every change of the webhook's decision, marked on every panel.
		Annotation(dashboard.NewAnnotationQueryBuilder().Name("Webhook decisions").Datasource(ds).
			Enable(true).IconColor("orange").
			Expr(`changes(debi_webhook_last_decision_replicas{` + sel + `}[2m]) > 0`).
			TitleFormat("webhook decided {{policy}} ({{mode}})").
			Step("30s"))
	b = policyDemandRow(b, &id)
	b = policyReplicasRow(b, &id)
	b = policyCostRow(b, &id)
	b = policyBaselineRow(b, &id)
	b = policyForecastRow(b, &id)
	b = policyBudgetRow(b, &id)
	b = policyZeroRow(b, &id)
	b = policyWebhookRow(b, &id)
	return b.Build()
}

// policyDemandRow is the row "Demand and load": observed demand against forecast and high-water,
// the loads W1, W2, W3 and W, and the dynamic target.
func policyDemandRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, "Demand and load")).
		WithPanel(series(id.next(), "Demand: observed vs forecast vs high-water",
			"CPU demand of the workload in cores. Forecast is W2's demand over the lead-time horizon (debi_forecast_horizon_seconds), drawn both when it was made and shifted forward by the horizon, at the time it is for; high-water is the EVT level W3 (exceeded with probability q); capacity is ready replicas × request.",
			"short", 24, 9,
			q{expr: `debi_demand_cores{load="w1", ` + sel + `}`, legend: "{{policy}} observed"},
			q{expr: `debi_demand_cores{load="w2", ` + sel + `}`, legend: "{{policy}} forecast (W2), when made"},
			// The same forecast at the time it is for: the value published $horizon seconds ago,
			// drawn now (offset), where the observed demand can be held against it.
			q{expr: `debi_demand_cores{load="w2", ` + sel + `} offset ${horizon}s`, legend: "{{policy}} forecast (W2), at the time it is for"},
			q{expr: `debi_demand_cores{load="w3", ` + sel + `}`, legend: "{{policy}} high-water"},
			q{expr: readyCapacity, legend: "{{policy}} ready capacity"},
		).AxisLabel("cores").Min(0)).
		WithPanel(series(id.next(), "Load W1 / W2 / W3 / W",
			"Loads as utilization at the current size: W1 observed, W2 forecast, W3 high-water, W = max(min(W2, W3), W1) for debi (W1 for hpa, max(W2, W1) for <model>-hpa). One set per metric of the policy (label metric, cpu for one metric): every metric is held at the one target, so the largest W is the metric that decides.",
			"percentunit", 16, 9,
			q{expr: `debi_load_ratio{load="w1", ` + sel + `}`, legend: "{{policy}} {{metric}} W1 observed"},
			q{expr: `debi_load_ratio{load="w2", ` + sel + `}`, legend: "{{policy}} {{metric}} W2 forecast"},
			q{expr: `debi_load_ratio{load="w3", ` + sel + `}`, legend: "{{policy}} {{metric}} W3 high-water"},
			q{expr: `debi_load_ratio{load="w", ` + sel + `}`, legend: "{{policy}} {{metric}} W effective"},
		).Min(0)).
		WithPanel(series(id.next(), "Dynamic target utilization",
			"Target utilization of the scaling rule: it rises with the replica count for debi (between lower and upper), fixed for hpa. The window load is the mean observed load over the observation window.",
			"percentunit", 8, 9,
			q{expr: `debi_target_utilization_ratio{` + sel + `}`, legend: "{{policy}} target"},
			q{expr: `debi_load_ratio{load="window", ` + sel + `}`, legend: "{{policy}} window load"},
		).Min(0).Max(1))
}

// policyReplicasRow is the row "Replicas": current, ready and recommended replicas, the webhook's
// decision with the bounds the state allows, and why it decided.
func policyReplicasRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, "Replicas")).
		WithPanel(series(id.next(), "Current vs recommended replicas",
			"Spec and ready replicas as the exporter saw them, the exporter's recommendation, and the webhook's last decision (also in shadow mode).",
			"short", 24, 9,
			q{expr: `debi_current_replicas{` + sel + `}`, legend: "{{policy}} current"},
			q{expr: `debi_ready_replicas{` + sel + `}`, legend: "{{policy}} ready"},
			q{expr: `debi_recommended_replicas{` + sel + `}`, legend: "{{policy}} recommended"},
			q{expr: `debi_webhook_last_decision_replicas{` + sel + `}`, legend: "{{policy}} webhook decision ({{mode}})"},
			q{expr: `debi_decision_floor_replicas{` + sel + `}`, legend: "{{policy}} floor the state allows"},
			q{expr: `debi_decision_ceiling_replicas{` + sel + `}`, legend: "{{policy}} ceiling the state allows"},
			q{expr: `debi_policy_max_replicas{` + sel + `}`, legend: "{{policy}} max_replicas"},
			q{expr: `debi_policy_min_replicas{` + sel + `}`, legend: "{{policy}} min_replicas"},
		).AxisLabel("replicas").Min(0).Decimals(0)).
		WithPanel(series(id.next(), "Why: the load that decided, and the rule's branch",
			"One line per (metric, term, reason) while it holds: metric is the metric whose count was the largest (the HPA's rule over several metrics), term the load W was taken from — w1 observed, w2 forecast, w3 high-water, quantile (budget), price (budget's priced rule), hold (its priced hold kept pods the price would release; debi_budget_hold_seconds is how long, debi_budget_hold_settle 1 when it also holds through the ticks before the nowcast has read a new history point), saturated (the forecast at the lead is above what max_replicas serve, so it holds them), window (debi's window term) — and reason the rule's branch; at-max-replicas means limited by max_replicas (raise it), stabilized or rate-limited by the algorithm's state.",
			"short", 24, 6,
			q{expr: `debi_decision_info{` + sel + `}`, legend: "{{policy}}: {{metric}} {{term}}, {{reason}}"},
		).AxisLabel("0/1").Min(0).Max(1).Decimals(0)).
		WithPanel(series(id.next(), "Lead time: measured vs configured",
			"How far ahead the policy sizes (its lead_time) against what the cluster shows: the 0.9 quantiles of the workload's pod start-ups (creation to Ready, last 7 days, kube-state-metrics) and of the policy's decision path (its last 32 scale-ups, from the recommendation to the size reaching it). Start-up and path together above lead_time: the pods arrive after the load (alert DebiLeadTimeTooShort).",
			"s", 24, 7,
			q{expr: `debi_policy_lead_time_seconds{` + sel + `}`, legend: "{{policy}} lead_time"},
			q{expr: `debi_lead_time_seconds{component="startup",quantile="0.9",` + sel + `}`, legend: "{{policy}} pod start-up (0.9)"},
			q{expr: `debi_lead_time_seconds{component="path",quantile="0.9",` + sel + `}`, legend: "{{policy}} decision path (0.9)"},
		).AxisLabel("seconds").Min(0))
}

// ZeroRow is the title of the policy dashboard's row for policies that scale to zero
// (min_replicas 0): its panels read series only they publish, so they are empty for others.
const ZeroRow = "Scale to zero"

// policyZeroRow is the row ZeroRow: how long the wake metrics have been idle.
func policyZeroRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, ZeroRow)).
		WithPanel(series(id.next(), "Idle time of the wake metrics",
			"Policies with min_replicas 0: how long their wake metrics have been at or below their activation, observed and in their largest forecast over the lead time (0 while one is above it). At scale_to_zero_after the workload goes to zero (reason idle); at zero it wakes when this drops to 0 (reason woken). No line: the policy does not scale to zero, or an input it needs is missing (the webhook then holds the size).",
			"s", 24, 6,
			q{expr: `debi_policy_idle_seconds{` + sel + `}`, legend: "{{policy}} idle"},
		).AxisLabel("seconds").Min(0))
}

// policyCostRow is the row "Cost and overload": cost, overload and utilization over the time
// range, and the utilization of the ready replicas.
func policyCostRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, "Cost and overload")).
		WithPanel(singleStat(id.next(), "Cost (replica-minutes)",
			"Replica-minutes over the dashboard's time range: mean spec replicas × range.",
			"short", 6,
			q{expr: `sum(avg_over_time(debi_current_replicas{` + sel + `}[$__range])) * $__range_s / 60`, instant: true},
		).Decimals(0)).
		WithPanel(singleStat(id.next(), "Cost (core-minutes)",
			"Requested CPU over the time range, replicas × request per pod (the backtest's cost R·ΣN).",
			"short", 6,
			q{expr: `sum(avg_over_time((debi_current_replicas{` + sel + `} * ignoring (metric) group_right () debi_request_cores{` + sel + `})[$__range:])) * $__range_s / 60`, instant: true},
		).Decimals(0)).
		WithPanel(singleStat(id.next(), "Overload (fraction of time)",
			"Share of the time range with demand above u_sla × ready replicas × request (the backtest's overload).",
			"percentunit", 6,
			q{expr: `avg(avg_over_time((` + observedDemand + ` > bool $sla * ` + readyCapacity + `)[$__range:]))`, instant: true},
		).Decimals(1)).
		WithPanel(singleStat(id.next(), "Mean utilization of requests",
			"Observed demand ÷ (ready replicas × request), averaged over the time range.",
			"percentunit", 6,
			q{expr: `avg(avg_over_time((` + observedDemand + ` / (` + readyCapacity + `))[$__range:]))`, instant: true},
		).Decimals(1)).
		WithPanel(series(id.next(), "Utilization of ready replicas",
			"Observed demand ÷ (ready replicas × request). Above u_sla the workload is overloaded.",
			"percentunit", 24, 8,
			q{expr: observedDemand + ` / (` + readyCapacity + `)`, legend: "{{policy}} utilization"},
			q{expr: `debi_target_utilization_ratio{` + sel + `}`, legend: "{{policy}} target"},
		).Min(0))
}

// policyBaselineRow is the row BaselineRow: every policy on the workload of the selected one, its
// replicas, cost and counterfactual overload, and the cost against the hpa baseline.
func policyBaselineRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		// Every policy on the workload of $policy: the acting one and its shadow baselines.
		WithRow(dashboard.NewRowBuilder(BaselineRow).Id(id.extra())).
		WithPanel(series(id.extra(), "Replicas of every policy on the workload",
			"Recommended replicas of every policy on the workload of the selected policy (same namespace, workload_type and workload: the acting policy and its shadow baselines, webhook.policies[].mode: shadow), with the algorithm from debi_policy_info, against the spec replicas applied to the workload.",
			"short", 24, 9,
			q{expr: `debi_recommended_replicas` + withAlgorithm + onWorkload, legend: "{{policy}} ({{algorithm}}) recommended"},
			q{expr: `max by (namespace, workload_type, workload) (debi_current_replicas{` + sel + `})`, legend: "{{namespace}}/{{workload}} spec replicas (applied)"},
		).AxisLabel("replicas").Min(0).Decimals(0)).
		WithPanel(singleStat(id.extra(), "Cost of every policy on the workload (replica-minutes)",
			"Replica-minutes over the time range of every policy on the workload: for the acting policy (debi_webhook_policy_info mode act or hpa-floor) the spec replicas it applied, for a shadow what it recommended (a policy the webhook does not publish counts at what it recommended).",
			"short", 8,
			q{expr: `max by (policy, algorithm) (avg_over_time(` + size("") + `[$__range:])` + withAlgorithm + onWorkload + `) * $__range_s / 60`, legend: "{{policy}} ({{algorithm}})", instant: true},
		).Decimals(0)).
		WithPanel(singleStat(id.extra(), "Counterfactual overload of every policy on the workload",
			"Share of the time range with the observed demand above u_sla × the policy's recommended replicas × request: for a shadow policy the overload it would have had, had it been applied, without start-up delay (the acting policy's own overload, at the ready replicas, is \"Overload (fraction of time)\").",
			"percentunit", 8,
			q{expr: `max by (policy, algorithm) (avg_over_time((max without (load) (debi_demand_cores{load="w1"}) > bool $sla * debi_recommended_replicas * ignoring (metric) group_right () debi_request_cores)[$__range:])` + withAlgorithm + onWorkload + `)`, legend: "{{policy}} ({{algorithm}})", instant: true},
		).Decimals(1)).
		WithPanel(singleStat(id.extra(), "Cost against the baseline",
			"The selected policy's replica-minutes over the time range ÷ those of the hpa-algorithm policy on the same workload (the cheapest, if there are several): below 100 % the selected policy costs less than the HPA would have. Empty without an hpa policy on the workload: add one in shadow (docs/exporter.md, \"A live HPA baseline\").",
			"percentunit", 8,
			q{expr: `max by (namespace, workload_type, workload) (avg_over_time(` + size(sel) + `[$__range:])) / on (namespace, workload_type, workload) min by (namespace, workload_type, workload) (avg_over_time((` + size("") + ` and on (policy, namespace, workload_type, workload) debi_policy_info{algorithm="hpa"})[$__range:]))`, instant: true},
		).Decimals(0))
}

// policyForecastRow is the row "Forecast quality": the forecast's error, the EVT fit and the
// exporter's inputs.
func policyForecastRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, "Forecast quality")).
		WithPanel(series(id.next(), "Forecast error (rolling MAE)",
			"Rolling mean absolute error of the demand forecast against the demand observed at its horizon, in cores (left axis) and relative to the observed demand (right axis).",
			"short", 12, 8,
			q{expr: `debi_forecast_mean_absolute_error_cores{` + sel + `}`, legend: "{{policy}} MAE (cores)"},
			q{expr: `debi_forecast_mean_absolute_error_cores{` + sel + `} / ` + observedDemand, legend: "{{policy}} MAE ÷ demand", unit: "percentunit", axis: "of the observed demand"},
		).AxisLabel("cores").Min(0)).
		WithPanel(series(id.next(), "High-water fit (EVT)",
			"Peaks-over-threshold fit behind W3: threshold t in cores (left axis) and shape ξ of the generalized Pareto fit (right axis, dimensionless). Whether it fell back to the empirical quantile is in \"Exporter inputs: stale, EVT fallback\".",
			"short", 12, 8,
			q{expr: `debi_evt_threshold_cores{` + sel + `}`, legend: "{{policy}} threshold (cores)"},
			q{expr: `debi_evt_shape{` + sel + `}`, legend: "{{policy}} shape ξ", unit: "none", axis: "shape ξ"},
		).AxisLabel("cores")).
		WithPanel(series(id.extra(), "Exporter inputs: stale, EVT fallback",
			"1 while the published values are stale because an input was missing; 1 while the high-water level fell back to the empirical quantile because the EVT fit was skipped.",
			"short", 12, 7,
			q{expr: `debi_policy_stale{` + sel + `}`, legend: "{{policy}} stale"},
			q{expr: `debi_evt_fallback{` + sel + `}`, legend: "{{policy}} EVT fallback"},
		).AxisLabel("0/1").Min(0).Max(1).Decimals(0)).
		WithPanel(series(id.next(), "Exporter inputs",
			"Seconds since the last step with every input (left axis); failed input queries per minute, by query (right axis).",
			"s", 12, 7,
			q{expr: `time() - debi_policy_last_success_timestamp_seconds{` + sel + `}`, legend: "{{policy}} since last success"},
			q{expr: `sum by (policy, query) (rate(debi_query_errors_total{` + sel + `}[$__rate_interval])) * 60`, legend: "{{policy}} {{query}} errors/min", unit: "short", axis: "errors/min"},
		).AxisLabel("since last success").Min(0)).
		WithPanel(modelTimeline(id.extra()))
}

// modelTimeline is the panel "Forecast model": which model each policy's forecast came from over
// time (debi_model_active; for model auto, the one whose recent forecasts were closest).
func modelTimeline(id uint32) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().Id(id).Title("Forecast model").
		Description("The model the latest forecast came from, one row per policy, metric and model: the policy's model, or for model auto (budget's default) whichever of Holt-Winters, ARIMA and the last value has forecast the recent history best; with a fallback_model, the fallback while the model waits for its history. Empty before the first forecast.").
		Datasource(ds).Span(24).Height(6).
		Targets(targets([]q{{expr: `max by (policy, metric, model) (debi_model_active{` + sel + `})`, legend: "{{policy}} {{metric}}: {{model}}"}})).
		ShowValue(common.VisibilityModeNever).MergeValues(true)
}

// policyBudgetRow is the row BudgetRow of overload-budget policies: quantile, margin, calibrated
// level, burn rate and the budget spent.
func policyBudgetRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, BudgetRow)).
		WithPanel(series(id.next(), "Budget: quantile vs capacity vs demand",
			"Budget policies (METHOD §9). The calibrated upper quantile of the demand the policy sizes for over the lead time, and over the lead time plus the hold (a scale-down must still fit it), the point forecast under the margin, the observed demand, and the capacity of the ready replicas at u_sla (ready × request × u_sla, the budget's target). Demand above that capacity burns the overload budget.",
			"short", 24, 9,
			q{expr: `debi_budget_quantile_cores{window="lead", ` + sel + `}`, legend: "{{policy}} quantile over the lead time"},
			q{expr: `debi_budget_quantile_cores{window="hold", ` + sel + `}`, legend: "{{policy}} quantile over lead time + hold"},
			q{expr: `debi_budget_forecast_cores{` + sel + `}`, legend: "{{policy}} forecast"},
			q{expr: `debi_demand_cores{load="w1", ` + sel + `} and ignoring (load, metric) debi_budget_overload_budget{` + sel + `}`, legend: "{{policy}} observed"},
			q{expr: readyCapacity + ` * ignoring (metric) group_left () debi_target_utilization_ratio{` + sel + `} and ignoring (metric) debi_budget_overload_budget{` + sel + `}`, legend: "{{policy}} ready capacity at u_sla"},
		).AxisLabel("cores").Min(0)).
		WithPanel(series(id.next(), "Budget: margin",
			"The calibrated factor on the forecast (quantile = forecast × margin, left axis): the (1 − α) quantile of the forecast's own recent errors, cold_margin until min_errors errors are in. The number of errors it comes from is on the right axis.",
			"suffix:×", 8, 8,
			q{expr: `debi_budget_margin{` + sel + `}`, legend: "{{policy}} margin"},
			q{expr: `debi_budget_error_samples{` + sel + `}`, legend: "{{policy}} errors kept", unit: "short", axis: "errors kept"},
		).AxisLabel("margin (× forecast)").Min(0).Decimals(2)).
		WithPanel(series(id.next(), "Budget: calibrated level vs budget",
			"The calibrated level α (adaptive conformal inference, α ← α + γ(b − overloaded)) against the configured budget b. α below b: the policy overloaded more often than b and widened its margin; above b: it narrowed it.",
			"percentunit", 8, 8,
			q{expr: `debi_budget_level{` + sel + `}`, legend: "{{policy}} level α"},
			q{expr: `debi_budget_overload_budget{` + sel + `}`, legend: "{{policy}} budget b"},
		).Min(0).Decimals(2)).
		WithPanel(series(id.next(), "Budget: price of an overloaded tick (priced rule)",
			"λ of scaling.budget.rule priced, in pod-ticks per overloaded tick: the size minimises pods + λ·(overloaded ticks) over the lead ahead and the margin is read at the level λ prices (1/λ, or a multiple of it where covering the tail costs more pods than its overload). It rises about 2 % per overloaded tick and falls 0.02·b per served one: rising, the policy spent above its budget and now covers more; at its floor (1) it covers only what costs less than a pod-tick. Empty under the quantile rule.",
			"short", 8, 8,
			q{expr: `debi_budget_price{` + sel + `}`, legend: "{{policy}} λ"},
		).AxisLabel("pod-ticks").Min(0).Decimals(1)).
		WithPanel(series(id.next(), "Budget: burn rate",
			"Share of the observed time above u_sla, in units of the budget b (rules/debi.rules.yaml), over 1 h and over the last day. 1 spends a day's budget in a day; the ticket fires above 3 over 6 h (and 30 m), the page above 14.4 over 1 h (and 5 m): docs/exporter.md, runbook.",
			"short", 8, 8,
			q{expr: `policy:debi_budget_burn_rate:ratio_rate1h{` + sel + `}`, legend: "{{policy}} burn 1h"},
			q{expr: `policy:debi_budget_burn_rate:ratio_rate1d{` + sel + `}`, legend: "{{policy}} burn 1d"},
		).AxisLabel("× budget").Min(0).Decimals(1).
			Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
				{Value: nil, Color: "green"}, {Value: ptr(1.0), Color: "#EAB839"}, {Value: ptr(3.0), Color: "orange"}, {Value: ptr(14.4), Color: "red"},
			})).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))).
		WithPanel(singleStat(id.next(), "Budget: overload over the range",
			"Share of the observed time above u_sla over the dashboard's time range (the burn counters), against the budget b: what the calibration aims at.",
			"percentunit", 8,
			q{expr: `sum(increase(debi_budget_overloaded_seconds_total{` + sel + `}[$__range])) / sum(increase(debi_budget_observed_seconds_total{` + sel + `}[$__range]))`, instant: true},
		).Decimals(2)).
		WithPanel(singleStat(id.next(), "Budget: the day's budget spent",
			"Overload in the last 24 hours as a share of a day's budget (b × 24 h); above 200 % DebiOverloadBudgetExhausted fires once the last six hours overspend too (and the day holds more than 8 lead times of overload).",
			"percentunit", 8,
			q{expr: `sum(increase(debi_budget_overloaded_seconds_total{` + sel + `}[1d])) / sum(86400 * debi_budget_overload_budget{` + sel + `})`, instant: true},
		).Decimals(0)).
		WithPanel(singleStat(id.next(), "Budget: overload budget b",
			"The configured overload budget: the share of time the workload may run above u_sla (policies[].budget.overload_budget).",
			"percentunit", 8,
			q{expr: `max(debi_budget_overload_budget{` + sel + `})`, instant: true},
		).Decimals(2))
}

// policyWebhookRow is the row "Webhook actions": decisions, writes, held and fallback decisions,
// and the decision latency.
func policyWebhookRow(b *dashboard.DashboardBuilder, id *ids) *dashboard.DashboardBuilder {
	return b.
		WithRow(row(id, "Webhook actions")).
		WithPanel(series(id.next(), "Webhook decisions",
			"Decisions per minute by load source (prometheus: fresh inputs; annotation: the alert's fallback; tidal) and result.",
			"short", 8, 8,
			q{expr: `sum by (source, result) (rate(debi_webhook_decisions_total{` + sel + `}[$__rate_interval])) * 60`, legend: "{{source}} {{result}}"},
		).AxisLabel("decisions/min").Min(0)).
		WithPanel(series(id.next(), "Webhook writes",
			"Writes to the API server per minute by mode (act: scale subresource; hpa-floor: HPA minReplicas) and result.",
			"short", 8, 8,
			q{expr: `sum by (mode, result) (rate(debi_webhook_patches_total{` + sel + `}[$__rate_interval])) * 60`, legend: "{{mode}} {{result}}"},
		).AxisLabel("writes/min").Min(0)).
		WithPanel(series(id.next(), "Webhook: held, fallback, paused",
			"Decisions per minute the webhook held (an input stale, missing or ambiguous, the target paused, a fallback that would scale down) and decided on the alert's annotations because Prometheus was unreachable (left axis); paused (right axis) while the policy is paused (configuration, debi.io/paused, or at 0 replicas). docs/runbooks.md: DebiWebhookDecisionsHeld, DebiWebhookFallbackInUse.",
			"short", 8, 8,
			// "or 0 × every decision": a line at 0 while nothing is held, not an empty panel.
			q{expr: `(sum by (policy) (rate(debi_webhook_decisions_total{result="held", ` + sel + `}[$__rate_interval])) or 0 * sum by (policy) (rate(debi_webhook_decisions_total{` + sel + `}[$__rate_interval]))) * 60`, legend: "{{policy}} held/min"},
			q{expr: `(sum by (policy) (rate(debi_webhook_decisions_total{source="annotation", ` + sel + `}[$__rate_interval])) or 0 * sum by (policy) (rate(debi_webhook_decisions_total{` + sel + `}[$__rate_interval]))) * 60`, legend: "{{policy}} fallback/min"},
			q{expr: `max by (policy) (debi_webhook_policy_paused{` + sel + `})`, legend: "{{policy}} paused", unit: "bool_yes_no", axis: "paused"},
		).AxisLabel("decisions/min").Min(0)).
		WithPanel(series(id.next(), "Webhook decision latency",
			"99th and 50th percentile time to decide: reading the scale subresource and Prometheus, running the algorithm, patching.",
			"s", 8, 8,
			q{expr: `histogram_quantile(0.99, sum by (le) (rate(debi_webhook_decision_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, legend: "p99"},
			q{expr: `histogram_quantile(0.5, sum by (le) (rate(debi_webhook_decision_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, legend: "p50"},
		).Min(0))
}

// fleetDashboard is every policy at a glance.
func fleetDashboard() (dashboard.Dashboard, error) {
	var id ids
	return base("debi-fleet", "debi / Fleet overview",
		"Every debi policy at a glance: how many there are, which are stale or overloaded, replicas against recommendations, cost, and the health of the exporter and the webhook.",
		false).
		WithRow(row(&id, "Overview")).
		WithPanel(singleStat(id.next(), "Policies", "Policies published by the exporters.", "short", 4,
			q{expr: `count(debi_policy_info) or vector(0)`, instant: true})).
		WithPanel(singleStat(id.next(), "Stale policies", "Policies whose last step missed an input.", "short", 4,
			q{expr: `sum(debi_policy_stale) or vector(0)`, instant: true})).
		WithPanel(singleStat(id.next(), "Scale alerts firing", "DebiScaleRecommended alerts firing: policies whose recommendation differs from the current size.", "short", 4,
			q{expr: `count(ALERTS{alertname="DebiScaleRecommended", alertstate="firing"}) or vector(0)`, instant: true})).
		WithPanel(singleStat(id.next(), "Overloaded policies", "Policies whose demand is above u_sla × ready replicas × request now.", "short", 4,
			q{expr: `count(max without (load) (debi_demand_cores{load="w1"}) > $sla * debi_ready_replicas * ignoring (metric) group_right () debi_request_cores) or vector(0)`, instant: true})).
		WithPanel(singleStat(id.next(), "Fleet cost (replica-minutes)", "Replica-minutes of every policy's workload over the dashboard's time range, each workload once (its shadow baselines publish the same spec replicas).", "short", 4,
			q{expr: `sum(max by (namespace, workload_type, workload) (avg_over_time(debi_current_replicas[$__range]))) * $__range_s / 60`, instant: true}).Decimals(0)).
		WithPanel(singleStat(id.next(), "Fleet overload (fraction of time)", "Share of policy-steps over the time range with demand above u_sla × ready capacity.", "percentunit", 4,
			q{expr: `avg(avg_over_time((max without (load) (debi_demand_cores{load="w1"}) > bool $sla * debi_ready_replicas * ignoring (metric) group_right () debi_request_cores)[$__range:]))`, instant: true}).Decimals(1)).
		WithPanel(policyTable(id.next())).
		WithPanel(baselineTable(id.extra())).
		WithRow(row(&id, "Replicas and load")).
		WithPanel(series(id.next(), "Total replicas: current vs recommended",
			"Sum over every workload of the spec and ready replicas (each workload once, however many policies watch it), and of the recommendations of the policies that act (shadow baselines left out: debi_webhook_policy_info mode shadow).", "short", 12, 8,
			q{expr: `sum(max by (namespace, workload_type, workload) (debi_current_replicas))`, legend: "current"},
			q{expr: `sum(debi_recommended_replicas unless on (policy) debi_webhook_policy_info{mode="shadow"})`, legend: "recommended"},
			q{expr: `sum(max by (namespace, workload_type, workload) (debi_ready_replicas))`, legend: "ready"},
		).AxisLabel("replicas").Min(0)).
		WithPanel(series(id.next(), "Recommended − current replicas",
			"Positive: the policy wants to scale up; negative: down. A line away from zero for long means the webhook is not acting (shadow mode, errors, or Alertmanager not routing).", "short", 12, 8,
			q{expr: `policy:debi_replicas_delta:diff`, legend: "{{policy}}"},
		).AxisLabel("replicas")).
		WithPanel(series(id.next(), "Effective load W by policy",
			"W as utilization at the current size; compare with each policy's target.", "percentunit", 12, 8,
			q{expr: `debi_load_ratio{load="w"}`, legend: "{{policy}}"},
		).Min(0)).
		WithPanel(series(id.next(), "Overload budget burn rate by policy (1h)",
			"Budget policies: the share of the last hour above u_sla, in units of each policy's budget b. The page fires above 14.4 (with the 5 m window agreeing), the ticket above 3 over 6 h.", "short", 12, 8,
			q{expr: `policy:debi_budget_burn_rate:ratio_rate1h`, legend: "{{policy}}"},
		).AxisLabel("× budget").Min(0).
			Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
				{Value: nil, Color: "green"}, {Value: ptr(3.0), Color: "orange"}, {Value: ptr(14.4), Color: "red"},
			})).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))).
		WithPanel(series(id.next(), "Forecast error by policy (MAE ÷ demand)",
			"Rolling mean absolute error of the demand forecast relative to the observed demand.", "percentunit", 12, 8,
			q{expr: `debi_forecast_mean_absolute_error_cores / ignoring (load) debi_demand_cores{load="w1"}`, legend: "{{policy}}"},
		).Min(0)).
		WithRow(row(&id, "Components")).
		WithPanel(series(id.next(), "Exporter loop duration",
			"99th percentile duration of one exporter loop (every policy's queries and decisions) against the control interval (left axis); skipped steps per minute (right axis).", "s", 8, 8,
			q{expr: `histogram_quantile(0.99, sum by (le, instance) (rate(debi_exporter_loop_duration_seconds_bucket[$__rate_interval])))`, legend: "{{instance}} p99"},
			q{expr: `sum by (instance) (rate(debi_exporter_skipped_steps_total[$__rate_interval])) * 60`, legend: "{{instance}} skipped/min", unit: "short", axis: "skipped steps/min"},
		).AxisLabel("loop duration").Min(0)).
		WithPanel(series(id.next(), "Webhook notifications",
			"Notifications per minute by endpoint (alertmanager, tidal, watch) and answer code: 4xx are permanent, 5xx make Alertmanager retry.", "short", 8, 8,
			q{expr: `sum by (endpoint, code) (rate(debi_webhook_notifications_total[$__rate_interval])) * 60`, legend: "{{endpoint}} {{code}}"},
		).AxisLabel("notifications/min").Min(0)).
		WithPanel(series(id.next(), "Webhook writes by policy",
			"Writes to the API server per minute by policy, mode and result.", "short", 8, 8,
			q{expr: `sum by (policy, mode, result) (rate(debi_webhook_patches_total[$__rate_interval])) * 60`, legend: "{{policy}} {{mode}} {{result}}"},
		).AxisLabel("writes/min").Min(0)).
		Build()
}

// policyTable lists every policy at the last evaluation, one row each (instant queries merged
// on their labels).
func policyTable(id uint32) *table.PanelBuilder {
	return table.NewPanelBuilder().Id(id).Title("Policies at the last evaluation").
		Description("Every policy at the last evaluation: algorithm and model, replicas, effective load, target, forecast error.").
		Datasource(ds).Span(24).Height(9).
		Targets(targets([]q{
			{expr: `debi_policy_info`, instant: true, table: true},
			{expr: `debi_current_replicas`, instant: true, table: true},
			{expr: `debi_recommended_replicas`, instant: true, table: true},
			{expr: `max without (load) (debi_load_ratio{load="w"})`, instant: true, table: true},
			{expr: `debi_target_utilization_ratio`, instant: true, table: true},
			{expr: `debi_forecast_mean_absolute_error_cores`, instant: true, table: true},
			{expr: `debi_policy_stale`, instant: true, table: true},
		})).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true, "Value #A": true, "__name__": true, "instance": true, "job": true, "pod": true, "container": true, "endpoint": true, "service": true},
			"renameByName": map[string]any{
				"Value #B": "current", "Value #C": "recommended", "Value #D": "W", "Value #E": "target",
				"Value #F": "MAE (cores)", "Value #G": "stale",
			},
		}})
}

// baselineTable is, per workload with an hpa policy (a shadow baseline, usually), the
// replica-minutes applied over the time range against those the hpa recommended.
func baselineTable(id uint32) *table.PanelBuilder {
	// applied: the workload's spec replicas; hpa: the cheapest hpa-algorithm policy on it.
	applied := `max by (namespace, workload_type, workload) (avg_over_time(debi_current_replicas[$__range]))`
	hpa := `min by (namespace, workload_type, workload) (avg_over_time((debi_recommended_replicas and on (policy, namespace, workload_type, workload) debi_policy_info{algorithm="hpa"})[$__range:]))`
	return table.NewPanelBuilder().Id(id).Title("Cost against the hpa baseline, per workload").
		Description("Per workload with an hpa-algorithm policy (a shadow baseline: webhook.policies[].mode shadow, docs/exporter.md): the replica-minutes applied over the time range (spec replicas, whatever policy acts) against those the hpa policy recommended, and their ratio: below 100 % the acting policy costs less than the HPA would have.").
		Datasource(ds).Span(24).Height(7).
		Targets(targets([]q{
			{expr: applied + ` * $__range_s / 60 and on (namespace, workload_type, workload) ` + hpa, instant: true, table: true},
			{expr: hpa + ` * $__range_s / 60`, instant: true, table: true},
			{expr: applied + ` / on (namespace, workload_type, workload) ` + hpa, instant: true, table: true},
		})).
		Decimals(0).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true},
			"renameByName": map[string]any{
				"Value #A": "applied (replica-minutes)", "Value #B": "hpa baseline (replica-minutes)", "Value #C": "applied ÷ baseline",
			},
		}}).
		OverrideByName("applied ÷ baseline", []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}})
}

func row(id *ids, title string) *dashboard.RowBuilder {
	return dashboard.NewRowBuilder(title).Id(id.next())
}
