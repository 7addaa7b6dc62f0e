package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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
// leadTimeRefreshSteps steps the exporter asks Prometheus for each pod's start-up over the last
// leadTimeWindow, every workload's at once (one query, whatever the number of policies), takes
// each workload's quantiles from the answer, and publishes them per policy beside the lead time
// the policy uses: the alert DebiLeadTimeTooShort fires when the workload's start-ups outgrow it.
// Between full reads of the window (every leadTimeRebase) it reads only what the rule wrote since
// the last read and keeps each pod's minimum, so Prometheus reads a week of samples four times a
// day, not every 10 minutes.

const (
	// leadTimeWindow is how far back start-ups are measured.
	leadTimeWindow = 7 * 24 * time.Hour
	// leadTimeRefreshSteps is how often they are measured again, in loop steps: 10 minutes at
	// the default global.interval of 15 s.
	leadTimeRefreshSteps = 40
	// leadTimeRebase is how often a measurement reads the whole window again. Between, each
	// reads the rule's samples since the last read that succeeded, and leadTimeOverlap before
	// it (a rule's samples are appended after its evaluation, so the last read may have missed
	// the newest; a minimum read twice is the same), and keeps each pod's minimum. So a sample
	// older than the window (a pod's last, or its first readiness where a later one is still in
	// the window) counts until the next full read, at most leadTimeRebase later.
	leadTimeRebase  = 6 * time.Hour
	leadTimeOverlap = 5 * time.Minute
	// rawLeadRefresh is how long a start-up read from kube-state-metrics' raw series stands
	// before it is read again, while the rule still has fewer than MinStartups start-ups of
	// the workload; rawLeadRetry, after a failed read.
	rawLeadRefresh = 6 * time.Hour
	rawLeadRetry   = time.Hour
	// rawLeadPerRefresh bounds the raw reads of one measurement: each reads a week of its
	// namespace's pods, so a fleet installed at once is read a few policies at a time.
	rawLeadPerRefresh = 4
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
// start-ups they are over and the start-ups' sum (a summary's); raw when read from
// kube-state-metrics' raw series (config.Policy.StartupFallback) rather than the rule.
type leadTime struct {
	q   [3]float64
	n   float64
	sum float64
	raw bool
	// bad counts the values that were no finite number of seconds, left out of the rest.
	bad int
}

// leadTimes is the exporter's last measurement, by workload (workloadKey), and the start-ups
// read from the raw series, by policy, for the policies whose workload the rule has measured
// too few of.
type leadTimes struct {
	at  time.Time // of the last attempt; zero: never
	by  map[string]leadTime
	raw map[string]rawLead
	// pods is each pod's start-up read so far (the minimum of its series), by series; through
	// is the end of the last read that succeeded, full the time of the last full read of the
	// window (pods nil: none yet).
	pods          map[model.Fingerprint]podStartup
	through, full time.Time
}

// podStartup is a pod's start-up as read so far, and its workload (workloadKey).
type podStartup struct {
	workload string
	v        float64
}

// rawLead is a policy's start-ups read from the raw series and when to read them again.
type rawLead struct {
	lt   leadTime
	next time.Time
}

// workloadKey names a workload as the rules' labels do.
func workloadKey(namespace, workloadType, workload string) string {
	return namespace + "/" + workloadType + "/" + workload
}

// leadTimeQuery is the one instant query of a measurement: each pod's first readiness over the
// range (the per-pod minimum) with its workload, rng the window (a full read) or the time since
// the last read (rounded up to the second). Prometheus reads the range once; the exporter takes
// each workload's quantiles, count and sum from the answer (startups), where asking PromQL for
// each of them would read the week's samples five times over.
func leadTimeQuery(rng time.Duration) string {
	return fmt.Sprintf("min_over_time(%s[%s])", startupSeconds, model.Duration((rng + time.Second - 1).Truncate(time.Second)))
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
	full := e.lead.pods == nil || !t.After(e.lead.through) || t.Sub(e.lead.full) >= leadTimeRebase
	rng := leadTimeWindow
	if !full {
		rng = min(t.Sub(e.lead.through)+leadTimeOverlap, leadTimeWindow)
	}
	vec, err := vectorAt(ctx, e.base, leadTimeQuery(rng), t)
	if err != nil {
		e.log.Warn("pod start-ups not measured; the last measurement stays", "rule", startupSeconds, "err", err)
		return
	}
	seen := e.lead.pods
	if full {
		seen, e.lead.full = make(map[model.Fingerprint]podStartup, len(vec)), t
	}
	for _, s := range vec {
		fp, v := s.Metric.Fingerprint(), float64(s.Value)
		p, ok := seen[fp]
		switch {
		case !ok:
			m := s.Metric
			p = podStartup{workloadKey(string(m["namespace"]), string(m["workload_type"]), string(m["workload"])), v}
		case v < p.v || math.IsNaN(p.v): // min_over_time's minimum: a NaN only where every sample is
			p.v = v
		}
		seen[fp] = p
	}
	e.lead.pods, e.lead.through = seen, t
	pods := map[string][]float64{}
	for _, p := range seen {
		pods[p.workload] = append(pods[p.workload], p.v)
	}
	by := make(map[string]leadTime, len(pods))
	bad := 0
	for k, vs := range pods {
		lt := startups(vs)
		if bad += lt.bad; lt.n > 0 {
			by[k] = lt
		}
	}
	if bad > 0 {
		e.log.Warn("pod start-ups that are no number of seconds left out of the measurement", "rule", startupSeconds, "pods", bad)
	}
	e.lead.by = by
	e.measureRawLeadTimes(ctx, t)
}

// vectorAt runs the instant query expr at t and returns its vector (empty: no series).
func vectorAt(ctx context.Context, q Querier, expr string, t time.Time) (model.Vector, error) {
	v, _, _, err := q.Query(ctx, expr, t)
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, want a vector", expr, v.Type())
	}
	return vec, nil
}

// startups is the leadTime of the start-ups vs (seconds, one per pod; vs is sorted in place):
// their count and sum, and their quantiles by leadQuantiles as PromQL's quantile computes them.
// A value that is not a finite number of seconds is no start-up: it is counted in bad, not in
// the rest (n is 0 when none is).
func startups(vs []float64) leadTime {
	all := len(vs)
	vs = slices.DeleteFunc(vs, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
	lt := leadTime{q: [3]float64{math.NaN(), math.NaN(), math.NaN()}, n: float64(len(vs)), sum: math.NaN(), bad: all - len(vs)}
	if len(vs) == 0 {
		return lt
	}
	slices.Sort(vs)
	lt.sum = 0
	for _, v := range vs {
		lt.sum += v
	}
	for i, q := range leadQuantileValues {
		lt.q[i] = quantileSorted(vs, q)
	}
	return lt
}

// measureRawLeadTimes reads, for the policies that size for the measured lead time
// (lead_time unset) and whose workload the rule has fewer than MinStartups start-ups of, the
// start-ups of the last leadTimeWindow from the raw series the rule is computed from
// (config.Policy.StartupFallback): on the day debi is installed the rule has no history, while
// kube-state-metrics' kube_pod_created and kube_pod_status_ready_time go back as far as
// Prometheus keeps them. Each is read again after rawLeadRefresh while the rule still has too
// few, at most rawLeadPerRefresh policies a measurement, the longest waiting first.
func (e *Exporter) measureRawLeadTimes(ctx context.Context, t time.Time) {
	old, raw := e.lead.raw, map[string]rawLead{}
	window := model.Duration(leadTimeWindow).String()
	var due []*policyState
	for _, ps := range e.policies {
		if !ps.cfg.LeadTimeMeasured || ps.cfg.Model == "" || len(ps.labels) < 4 {
			continue
		}
		if lt, ok := e.lead.by[workloadKey(ps.labels[1], ps.labels[2], ps.labels[3])]; ok && lt.n >= MinStartups {
			continue // the rule has measured it: the raw read is no longer needed
		}
		r, ok := old[ps.cfg.Name]
		if ok {
			raw[ps.cfg.Name] = r
		}
		if (!ok || !t.Before(r.next)) && ps.cfg.StartupFallback(window) != "" {
			due = append(due, ps)
		}
	}
	slices.SortStableFunc(due, func(a, b *policyState) int {
		return raw[a.cfg.Name].next.Compare(raw[b.cfg.Name].next)
	})
	for _, ps := range due[:min(len(due), rawLeadPerRefresh)] {
		if ctx.Err() != nil {
			break // out of the step's time: the others are read at the next measurement
		}
		lt, err := startupsOf(ctx, e.base, "("+ps.cfg.StartupFallback(window)+")", t)
		r := raw[ps.cfg.Name]
		switch {
		case errors.Is(err, ErrEmpty): // no pod started over the window
			r = rawLead{lt: leadTime{raw: true}, next: t.Add(rawLeadRefresh)}
		case err != nil:
			r.next = t.Add(rawLeadRetry)
			e.log.Warn("pod start-ups not read from kube-state-metrics; read again later", "policy", ps.cfg.Name, "err", err)
		default:
			lt.raw = true
			r = rawLead{lt: lt, next: t.Add(rawLeadRefresh)}
		}
		if lt.bad > 0 {
			e.log.Warn("pod start-ups that are no number of seconds left out of the raw read", "policy", ps.cfg.Name, "pods", lt.bad)
		}
		raw[ps.cfg.Name] = r
	}
	e.lead.raw = raw
}

// startupsOf is the start-ups of the instant vector in (one per pod, in seconds) at t, read in
// one query: their count, sum and quantiles by leadQuantiles. ErrEmpty: none.
func startupsOf(ctx context.Context, q Querier, in string, t time.Time) (leadTime, error) {
	vec, err := vectorAt(ctx, q, in, t)
	if err != nil {
		return leadTime{}, err
	}
	vs := make([]float64, len(vec))
	for i, s := range vec {
		vs[i] = float64(s.Value)
	}
	lt := startups(vs)
	if lt.n == 0 {
		return lt, ErrEmpty
	}
	return lt, nil
}

// leadTimeOf is the measured start-up of a policy's workload (ok false: none measured): the
// rule's, or, while the rule has fewer than MinStartups start-ups of it, the raw series' where
// they have more.
func (e *Exporter) leadTimeOf(ps *policyState) (leadTime, bool) {
	if len(ps.labels) < 4 {
		return leadTime{}, false
	}
	lt, ok := e.lead.by[workloadKey(ps.labels[1], ps.labels[2], ps.labels[3])]
	if !ok || lt.n < MinStartups {
		if r, rok := e.lead.raw[ps.cfg.Name]; rok && r.lt.n > lt.n {
			return r.lt, true
		}
	}
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
	Raw bool
	// Unreadable is the pods whose start-up was no finite number of seconds (NaN, or infinite),
	// left out of the figures.
	Unreadable int
	// PathMedian and Path90 are the decision path's quantiles over Paths scale-ups.
	PathMedian, Path90 time.Duration
	Paths              int
	PathOK             bool
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
	lt, err := startupsOf(ctx, q, in, end)
	m.Unreadable = lt.bad
	if raw := p.StartupFallback(rng.String()); errors.Is(err, ErrEmpty) && raw != "" {
		m.Raw = true
		lt, err = startupsOf(ctx, q, "("+raw+")", end)
		m.Unreadable += lt.bad
	}
	if errors.Is(err, ErrEmpty) {
		// No start-up to measure: say only how many were left out.
		return LeadTimeMeasure{Unreadable: m.Unreadable}, nil
	}
	if err != nil {
		return m, err
	}
	m.Startups, m.StartupMedian, m.Startup90 = int(lt.n), seconds(lt.q[0]), seconds(lt.q[1])
	last := func(series string) (float64, bool, error) {
		v, err := instantValue(ctx, q, fmt.Sprintf(`max(last_over_time(%s[%s]))`, series, rng), end)
		if errors.Is(err, ErrEmpty) {
			return 0, false, nil
		}
		return v, err == nil, err
	}
	path := fmt.Sprintf(`debi_lead_time_seconds{policy=%q,component="path",quantile=%%q}`, p.Name)
	v, ok, err := last(fmt.Sprintf(path, "0.5"))
	if err != nil || !ok {
		return m, err
	}
	m.PathMedian, m.PathOK = seconds(v), true
	if v, ok, err = last(fmt.Sprintf(path, "0.9")); err != nil {
		return m, err
	} else if ok {
		m.Path90 = seconds(v)
	}
	v, _, err = last(fmt.Sprintf(`debi_lead_time_samples{policy=%q,component="path"}`, p.Name))
	m.Paths = int(v)
	return m, err
}

// seconds is a measured time in seconds as a duration, to the second.
func seconds(v float64) time.Duration {
	return time.Duration(v * float64(time.Second)).Round(time.Second)
}

// MinPaths is the fewest scale-ups whose decision path a measured lead time counts; until then
// it counts DefaultPaths intervals (the exporter's step, the scrape, the rule, Alertmanager).
const (
	MinPaths     = 3
	DefaultPaths = 4
)

// SizedLead is the lead time a forecasting policy that left lead_time unset sizes for: the 0.9
// quantile of its workload's start-ups plus the 0.9 quantile of its decision path, rounded up
// to the interval (global.interval).
func SizedLead(startup90, path90, interval time.Duration) time.Duration {
	d := startup90 + path90
	if interval <= 0 {
		return d
	}
	return (d + interval - 1) / interval * interval
}

// measuredLead is the lead time a policy whose lead_time is unset sizes for: the 0.9 quantile
// of its workload's pod start-ups plus the 0.9 quantile of its decision path (4 intervals — the
// exporter's step, the scrape, the rule, Alertmanager — until 3 scale-ups are measured),
// rounded up to the interval; 0 while fewer than MinStartups start-ups are measured (the
// default lead_time stands).
func (e *Exporter) measuredLead(ps *policyState) time.Duration {
	lt, ok := e.leadTimeOf(ps)
	if !ok || lt.n < MinStartups || !(lt.q[1] >= 0) { // NaN, or Ready before created (a skewed clock)
		return 0
	}
	path := DefaultPaths * e.interval
	if len(ps.decisionPath.samples) >= MinPaths {
		path = time.Duration(ps.decisionPath.quantiles()[1] * float64(time.Second))
	}
	return SizedLead(time.Duration(lt.q[1]*float64(time.Second)), path, e.interval)
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
		lt, _ := e.leadTimeOf(ps)
		source := startupSeconds
		if lt.raw {
			source = "kube_pod_created, kube_pod_status_ready_time"
		}
		e.log.Info("lead_time unset: sizing for the measured lead time", "policy", ps.cfg.Name, "from", from, "to", to,
			"startup_p90", time.Duration(lt.q[1]*float64(time.Second)), "startups", lt.n, "startups_from", source,
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
