package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
)

// The lead time measured, not guessed. A policy's lead_time is the time from a decision to the
// pods serving; too short is silent overload, too long is cost. Its larger part, a pod's
// start-up (image pull, weights into GPU memory, warm-up), is in kube-state-metrics: the
// recording rule namespace_workload_pod:debi_pod_startup_seconds is each pod's creation to
// Ready (kube_pod_status_ready_time − kube_pod_created) with its workload. Every
// leadTimeRefreshSteps steps the exporter asks Prometheus for the quantiles, over the pods started in the
// last leadTimeWindow, of every workload at once (one query per quantile and one count,
// whatever the number of policies), and publishes them per policy beside the lead time the
// policy uses: the alert DebiLeadTimeTooShort fires when the workload's start-ups outgrow it.

const (
	// leadTimeWindow is how far back start-ups are measured.
	leadTimeWindow = 7 * 24 * time.Hour
	// leadTimeRefreshSteps is how often they are measured again, in loop steps: 10 minutes at
	// the default global.interval of 15 s.
	leadTimeRefreshSteps = 40
)

// leadQuantiles are the published quantiles of the start-up, as debi_lead_time_seconds'
// quantile label says them.
var (
	leadQuantiles      = []string{"0.5", "0.9", "0.99"}
	leadQuantileValues = []float64{0.5, 0.9, 0.99}
)

// startupSeconds is the recording rule of each pod's start-up.
const startupSeconds = "namespace_workload_pod:debi_pod_startup_seconds"

// leadTime is one workload's measured start-up: its quantiles by leadQuantiles, the number of
// start-ups they are over and the start-ups' sum (a summary's).
type leadTime struct {
	q   [3]float64
	n   float64
	sum float64
}

// leadTimes is the exporter's last measurement, by workload (workloadKey).
type leadTimes struct {
	at time.Time // of the last attempt; zero: never
	by map[string]leadTime
}

// workloadKey names a workload as the rules' labels do.
func workloadKey(namespace, workloadType, workload string) string {
	return namespace + "/" + workloadType + "/" + workload
}

// leadTimeQueries are the instant queries of one measurement: the quantiles, then the count and
// the sum.
func leadTimeQueries() []string {
	in := fmt.Sprintf("min_over_time(%s[%s])", startupSeconds, model.Duration(leadTimeWindow))
	var qs []string
	for _, q := range leadQuantiles {
		qs = append(qs, fmt.Sprintf("quantile by (namespace, workload_type, workload) (%s, %s)", q, in))
	}
	return append(qs, fmt.Sprintf("count by (namespace, workload_type, workload) (%s)", in),
		fmt.Sprintf("sum by (namespace, workload_type, workload) (%s)", in))
}

// measureLeadTimes measures every workload's start-up when leadTimeRefreshSteps steps have
// passed since the last attempt (at start-up first). The per-pod minimum over the window is the pod's first
// readiness: a pod that turns unready and Ready again later does not count its second wait. A
// failed measurement keeps the last one and is logged; it decides nothing.
func (e *Exporter) measureLeadTimes(ctx context.Context, t time.Time) {
	if !e.lead.at.IsZero() && t.Sub(e.lead.at) < leadTimeRefreshSteps*e.interval {
		return
	}
	e.lead.at = t
	by := map[string]leadTime{}
	get := func(i int, expr string) error {
		v, _, _, err := e.base.Query(ctx, expr, t)
		if err != nil {
			return err
		}
		vec, ok := v.(model.Vector)
		if !ok {
			return fmt.Errorf("%s: a %s, want a vector", expr, v.Type())
		}
		for _, s := range vec {
			m := s.Metric
			k := workloadKey(string(m["namespace"]), string(m["workload_type"]), string(m["workload"]))
			lt, ok := by[k]
			if !ok {
				lt = leadTime{q: [3]float64{math.NaN(), math.NaN(), math.NaN()}, sum: math.NaN()}
			}
			switch i - len(leadQuantiles) {
			case 0:
				lt.n = float64(s.Value)
			case 1:
				lt.sum = float64(s.Value)
			default:
				lt.q[i] = float64(s.Value)
			}
			by[k] = lt
		}
		return nil
	}
	var errs []error
	for i, expr := range leadTimeQueries() {
		if err := get(i, expr); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		e.log.Warn("pod start-ups not measured; the last measurement stays", "rule", startupSeconds, "err", err)
		return
	}
	e.lead.by = by
}

// leadTimeOf is the measured start-up of a policy's workload (ok false: none measured).
func (e *Exporter) leadTimeOf(ps *policyState) (leadTime, bool) {
	if len(ps.labels) < 4 {
		return leadTime{}, false
	}
	lt, ok := e.lead.by[workloadKey(ps.labels[1], ps.labels[2], ps.labels[3])]
	return lt, ok && lt.n > 0
}

// MinStartups is the fewest start-ups a measured start-up is trusted on: the alert
// DebiLeadTimeTooShort and the what-if's replay ask for as many.
const MinStartups = 5

// LeadTimeMeasure is the lead time Prometheus recorded for a policy over a range: its
// workload's pod start-ups (StartupMedian, Startup90 over Startups start-ups; 0 start-ups:
// none recorded) and the decision path the exporter measured last (PathMedian; PathOK false:
// none published).
type LeadTimeMeasure struct {
	StartupMedian, Startup90 time.Duration
	Startups                 int
	// Raw says the start-ups were read from kube-state-metrics' raw series
	// (config.Policy.StartupFallback): the recording rule had no samples over the range.
	Raw        bool
	PathMedian time.Duration
	PathOK     bool
}

// MeasuredLeadTime reads p's LeadTimeMeasure over [start, end] from Prometheus: the what-if
// replays its pods with the start-up the cluster showed rather than the lead_time it sizes for.
// Where the recording rule has no samples over the range (before debi's rules were installed)
// the start-ups are read from the raw series it is computed from.
func MeasuredLeadTime(ctx context.Context, q Querier, p *config.Policy, start, end time.Time) (LeadTimeMeasure, error) {
	rng := model.Duration(max(end.Sub(start), time.Minute))
	sel := fmt.Sprintf(`namespace=%q,workload_type=%q,workload=%q`, p.Target.Namespace, p.Target.WorkloadType(), p.Target.Name)
	in := fmt.Sprintf("min_over_time(%s{%s}[%s])", startupSeconds, sel, rng)
	var m LeadTimeMeasure
	n, err := instantValue(ctx, q, "count("+in+")", end)
	if raw := p.StartupFallback(rng.String()); errors.Is(err, ErrEmpty) && raw != "" {
		in, m.Raw = "("+raw+")", true
		n, err = instantValue(ctx, q, "count("+in+")", end)
	}
	if errors.Is(err, ErrEmpty) {
		return LeadTimeMeasure{}, nil
	}
	if err != nil {
		return m, err
	}
	m.Startups = int(n)
	for _, x := range []struct {
		q   string
		out *time.Duration
	}{{"0.5", &m.StartupMedian}, {"0.9", &m.Startup90}} {
		v, err := instantValue(ctx, q, fmt.Sprintf("quantile(%s, %s)", x.q, in), end)
		if err != nil {
			return m, err
		}
		*x.out = time.Duration(v * float64(time.Second)).Round(time.Second)
	}
	path := fmt.Sprintf(`max(last_over_time(debi_lead_time_seconds{policy=%q,component="path",quantile="0.5"}[%s]))`, p.Name, rng)
	switch v, err := instantValue(ctx, q, path, end); {
	case errors.Is(err, ErrEmpty):
	case err != nil:
		return m, err
	default:
		m.PathMedian, m.PathOK = time.Duration(v*float64(time.Second)).Round(time.Second), true
	}
	return m, nil
}

// measuredLead is the lead time a policy whose lead_time is unset sizes for: the 0.9 quantile
// of its workload's pod start-ups plus the 0.9 quantile of its decision path (4 intervals — the
// exporter's step, the scrape, the rule, Alertmanager — until 3 scale-ups are measured),
// rounded up to the interval; 0 while fewer than MinStartups start-ups are measured (the
// default lead_time stands).
func (e *Exporter) measuredLead(ps *policyState) time.Duration {
	lt, ok := e.leadTimeOf(ps)
	if !ok || lt.n < MinStartups || math.IsNaN(lt.q[1]) {
		return 0
	}
	path := 4 * e.interval
	if len(ps.decisionPath.samples) >= 3 {
		path = time.Duration(ps.decisionPath.quantiles()[1] * float64(time.Second))
	}
	d := time.Duration(lt.q[1]*float64(time.Second)) + path
	return (d + e.interval - 1) / e.interval * e.interval
}

// applyMeasuredLeadTimes puts the measured lead time in force for the policies that forecast
// and left lead_time unset (config.Policy.LeadTimeMeasured), when it moves their horizon or
// moves their lead by a fifth or more: the policy starts again with the new horizon and loads
// its history at its step, as after a reload; the configured lead_time of the others is never
// touched. It runs between the reads and the policies' steps.
func (e *Exporter) applyMeasuredLeadTimes() {
	for _, ps := range e.policies {
		if !ps.cfg.LeadTimeMeasured || ps.cfg.Model == "" {
			continue
		}
		want := e.measuredLead(ps)
		if want == ps.measuredLead {
			continue
		}
		eff := func(d time.Duration) time.Duration {
			if d == 0 {
				return ps.cfg.LeadTime
			}
			return d
		}
		from, to := eff(ps.measuredLead), eff(want)
		if policy.Horizon(from, ps.histStep) == policy.Horizon(to, ps.histStep) && math.Abs(float64(to-from)) < 0.2*float64(from) {
			continue
		}
		prev := ps.measuredLead
		ps.measuredLead = want
		if err := e.restartPolicy(ps); err != nil {
			ps.measuredLead = prev
			e.log.Error("measured lead time not applied; the policy keeps its lead", "policy", ps.cfg.Name, "lead_time", to, "err", err)
			continue
		}
		ps.historyLoaded = false
		e.log.Info("lead_time unset: sizing for the measured lead time", "policy", ps.cfg.Name, "from", from, "to", to,
			"startup_p90", time.Duration(e.lead.by[workloadKey(ps.labels[1], ps.labels[2], ps.labels[3])].q[1]*float64(time.Second)),
			"path_samples", len(ps.decisionPath.samples))
	}
}

// leadTime is the lead time the policy sizes for: the measured one in force, else lead_time.
func (ps *policyState) leadTime() time.Duration {
	if ps.measuredLead > 0 {
		return ps.measuredLead
	}
	return ps.cfg.LeadTime
}
