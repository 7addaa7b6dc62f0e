package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/exporter"
	"github.com/debi-scaler/debi/internal/promclient"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/trace"
)

// whatIf are the flags of the what-if replay: `debi backtest --config.file F --range 7d`.
type whatIf struct {
	configFile string
	policy     string
	promURL    string
	rng        time.Duration
	step       time.Duration
	end        time.Time
}

// whatIfTraces reads, for each configured policy (or the one named), the demand Prometheus
// recorded over the range with the exporter's range loader, and returns one trace per policy
// and the options that replay it (the configured policy beside o's, its parameters): what
// would debi have done on this workload last week?
func whatIfTraces(ctx context.Context, w whatIf, o backtest.Options) ([]trace.Trace, backtest.Options, error) {
	cfg, err := config.LoadFile(w.configFile)
	if err != nil {
		return nil, o, err
	}
	url := w.promURL
	if url == "" {
		url = cfg.Global.PrometheusURL
	}
	if url == "" {
		return nil, o, fmt.Errorf("--prometheus.url: required (or global.prometheus_url in %s)", w.configFile)
	}
	var hc commoncfg.HTTPClientConfig
	if cfg.Global.HTTPConfig != nil {
		hc = *cfg.Global.HTTPConfig
	}
	client, err := promclient.New(url, hc)
	if err != nil {
		return nil, o, fmt.Errorf("--prometheus.url: %w", err)
	}
	var ps []*config.Policy
	for i := range cfg.Policies {
		if w.policy == "" || cfg.Policies[i].Name == w.policy {
			ps = append(ps, &cfg.Policies[i])
		}
	}
	if len(ps) == 0 {
		return nil, o, fmt.Errorf("--policy: no policy named %q in %s", w.policy, w.configFile)
	}
	if len(ps) > 1 {
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		return nil, o, fmt.Errorf("--policy: %s has %d policies (%s); name the one to replay", w.configFile, len(ps), strings.Join(names, ", "))
	}
	p := ps[0]
	step := w.step
	if step == 0 {
		step = p.HistoryStep
	}
	end := w.end
	if end.IsZero() {
		end = time.Now()
	}
	end = end.Truncate(step)
	start := end.Add(-w.rng)
	// The policy's history is read from before the range, so that the whole range is scored
	// after the warm-up; where Prometheus has less, the rest of the warm-up comes out of the
	// range (the report says how much was scored).
	h, err := exporter.DemandHistoryWithWarmup(ctx, v1.NewAPI(client), p, start, end, step, p.History)
	if err != nil {
		return nil, o, err
	}
	tr := trace.Trace{Class: "recorded", StepMinutes: max(int(step/time.Minute), 1), Values: h.Demand}
	request := h.Request
	switch {
	case len(h.Metrics) == 1:
		// One metric in the list form: its values in its unit, its capacity the request.
		request = h.Metrics[0].Capacity
	case len(h.Metrics) > 1:
		// Several metrics: each in its unit with its capacity per pod, replayed as a trace with
		// several metrics (a tick overloaded when any is above u_sla·ready·its capacity). The
		// cost's unit R is the request of the first metric in cores with one, else one pod.
		o.Capacity, request = map[string]float64{}, 1
		for _, m := range h.Metrics {
			tr.Metrics, tr.Columns = append(tr.Metrics, m.Name), append(tr.Columns, m.Values)
			o.Capacity[m.Name] = m.Capacity
			if m.Unit == "cores" && m.Request > 0 && request == 1 {
				request = m.Request
			}
		}
	}
	o, _ = backtest.PolicyOptions(p, o, step, request, len(h.Demand))
	lt, lterr := exporter.MeasuredLeadTime(ctx, v1.NewAPI(client), p, start, end)
	leadNote := replayLeadTime(lt, lterr, p, cfg.Global.Interval, &o)
	// The history read before the range is never scored, even where the range is shorter than
	// the policy's history (PolicyOptions caps the warm-up at half the samples).
	o.Warmup = max(o.Warmup, h.Before)
	// Short enough for the summary's trace column: the policy, the range and its end.
	name := fmt.Sprintf("%s (%s to %s)", p.Name, model.Duration(w.rng), end.UTC().Format("2006-01-02 15:04"))
	rec := backtest.Recorded{Start: h.Start, Replicas: h.Replicas, Ready: h.Ready, ReadyQuery: h.ReadyQuery, RangeStart: start, Asked: w.rng,
		Notes: []string{leadNote}}
	for _, c := range h.Coverage {
		rec.Coverage = append(rec.Coverage, backtest.Coverage{Series: c.Series, Query: c.Query, Fallback: c.Fallback,
			Range: c.Time(c.Points - 1), Covered: c.Time(c.Covered), FromFallback: c.Time(c.FromFallback), Missing: c.Time(c.Missing), Filled: c.Time(c.Filled)})
	}
	o.Recorded = map[string]backtest.Recorded{name: rec}
	o.HPA = userHPA(ctx, v1.NewAPI(client), p, o, tr.Metrics, start, end, step)
	tr.Name = name
	return []trace.Trace{tr}, o, nil
}

// replayLeadTime sets the what-if's simulated pods from the lead time the cluster showed over
// the range (exporter.MeasuredLeadTime): they start in times drawn with the measured median and
// 0.9 quantile (backtest.StartupFit: the least start-up plus an exponential extra), after
// the median decision path the exporter measured (0 when none); with fewer than
// exporter.MinStartups start-ups recorded they start in lead_time, as configured. The policy
// sizes for its own lead_time, or, where lead_time is unset and the policy forecasts, for the
// lead time the exporter would measure from the same start-ups (exporter.SizedLead: the 0.9
// start-up plus the 0.9 decision path, DefaultPaths intervals of global.interval until MinPaths
// are measured). It says which, for the report's notes.
func replayLeadTime(m exporter.LeadTimeMeasure, err error, p *config.Policy, interval time.Duration, o *backtest.Options) string {
	unset := ""
	if p.LeadTimeMeasured && p.Model != "" {
		unset = fmt.Sprintf(" (lead_time unset: the exporter sizes for it until %d start-ups are measured)", exporter.MinStartups)
	}
	left := "" // start-ups left out of the figures are said, not dropped unsaid
	if m.Unreadable > 0 {
		left = fmt.Sprintf("; %d more recorded as no number of seconds (NaN or infinite), left out", m.Unreadable)
	}
	switch {
	case err != nil:
		return fmt.Sprintf("lead time not measured (%v): pods replayed with a start-up of the policy's lead_time %s%s", err, model.Duration(p.LeadTime), unset)
	case m.Startups < exporter.MinStartups:
		return fmt.Sprintf("lead time not measured: %d pod start-ups recorded over the range (%d needed%s): pods replayed with a start-up of the policy's lead_time %s%s",
			m.Startups, exporter.MinStartups, left, model.Duration(p.LeadTime), unset)
	}
	o.StartupDelay, o.StartupSpread = backtest.StartupFit(m.StartupMedian, m.Startup90)
	o.DecisionDelay = 0
	from := ""
	if m.Raw {
		from = ", read from kube_pod_created and kube_pod_status_ready_time: debi's start-up rule has no samples over the range"
	}
	s := fmt.Sprintf("lead time measured: pods replayed with start-ups as the cluster's vary, median start-up %s (0.9: %s, over %d start-ups%s%s; %s)",
		model.Duration(m.StartupMedian), model.Duration(m.Startup90), m.Startups, from, left, startupShape(o.StartupDelay, o.StartupSpread))
	if m.PathOK {
		o.DecisionDelay = m.PathMedian
		s += fmt.Sprintf(" after the median decision path %s", model.Duration(m.PathMedian))
	} else {
		s += " at once (no decision path measured)"
	}
	if unset != "" && o.Runner != nil {
		path, said := exporter.DefaultPaths*interval, fmt.Sprintf("%d intervals of %s until %d scale-ups are measured", exporter.DefaultPaths, model.Duration(interval), exporter.MinPaths)
		if m.PathOK && m.Paths >= exporter.MinPaths {
			path, said = m.Path90, "its 0.9 quantile"
		}
		lead := exporter.SizedLead(m.Startup90, path, interval)
		o.Runner.LeadTime, o.Runner.LeadSteps = lead, policy.Horizon(lead, p.HistoryStep)
		return s + fmt.Sprintf("; lead_time unset: the policy sizes for the lead time the exporter measures from these start-ups, %s (the 0.9 start-up %s plus the decision path %s, %s, rounded up to global.interval)",
			model.Duration(lead), model.Duration(m.Startup90), model.Duration(path), said)
	}
	if need := m.Startup90 + o.DecisionDelay; p.LeadTime < need {
		return s + fmt.Sprintf("; the policy sizes for lead_time %s, less than the 0.9 start-up and the path (%s): expect overload at rises",
			model.Duration(p.LeadTime), model.Duration(need))
	}
	return s + fmt.Sprintf("; the policy sizes for lead_time %s", model.Duration(p.LeadTime))
}

// startupShape says how the replay draws a start-up.
func startupShape(delay, spread time.Duration) string {
	if spread <= 0 {
		return "each exactly that"
	}
	return fmt.Sprintf("each at least %s plus an exponential extra", model.Duration(delay.Round(time.Second)))
}

// userHPA is what the what-if's hpa row replays: the workload's own HPA, read from
// kube-state-metrics over the range, when it scales on CPU utilization alone and the simulator
// takes its target and bounds; else an HPA at the policy's scaling.target, and why. A policy
// replayed on several metrics (metrics) has its hpa row scale on all of them, which a CPU
// HPA does not: it is not replayed there.
func userHPA(ctx context.Context, q exporter.Querier, p *config.Policy, o backtest.Options, metrics []string, start, end time.Time, step time.Duration) *backtest.HPARow {
	workload := p.Target.Namespace + "/" + p.Target.Name
	h, found, err := exporter.FindHPA(ctx, q, p.Target, start, end, step)
	switch {
	case err != nil:
		return backtest.NoHPA(workload, "kube-state-metrics could not be read for an HPA of "+workload+": "+err.Error())
	case !found:
		return backtest.NoHPA(workload, "no HPA of yours found for "+workload+" in kube-state-metrics")
	}
	name := h.Namespace + "/" + h.Name
	if len(h.Metrics) == 0 {
		return backtest.NoHPA(workload, "your HPA "+name+" has no metric target in kube-state-metrics (it exports none for a ContainerResource metric): not replayed")
	}
	if !h.CPUUtilization() {
		return backtest.NoHPA(workload, fmt.Sprintf("your HPA %s scales on %s, not CPU utilization alone: not replayed", name, strings.Join(h.Metrics, ", ")))
	}
	if len(metrics) > 1 {
		return backtest.NoHPA(workload, fmt.Sprintf("your HPA %s scales on CPU utilization alone, the what-if's rows on the policy's metrics (%s): not replayed", name, strings.Join(metrics, ", ")))
	}
	row := &backtest.HPARow{Workload: workload, Yours: true, Name: name, Target: h.Target, MinReplicas: h.MinReplicas, MaxReplicas: h.MaxReplicas,
		Source: "kube-state-metrics", Changes: h.Changes}
	if len(h.Others) > 0 {
		row.Source += fmt.Sprintf(" (the one seen last of %d HPAs on %s; also %s)", len(h.Others)+1, workload, strings.Join(h.Others, ", "))
	}
	if err := row.Check(o.Params); err != nil {
		return backtest.NoHPA(workload, fmt.Sprintf("your HPA %s (target %g %%, %d–%d replicas) is not one the simulator takes: %v", name, 100*h.Target, h.MinReplicas, h.MaxReplicas, err))
	}
	return row
}
