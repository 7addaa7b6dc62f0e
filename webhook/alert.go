package webhook

// The decision of an alert: the inputs read from Prometheus, the exporter's step read back
// (policy.FromPublished), several metrics, the annotations' fallback when Prometheus fails.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// inputs are one decision's query results by input name, and what went wrong reading them.
type inputs struct {
	val map[string]float64
	// outage is Prometheus failing (unreachable, 5xx, timeout); bad lists the inputs Prometheus
	// answered with no, several or unusable series.
	outage error
	bad    []string
	// sources names the metrics-API metrics whose last read failed, with the cause, e.g.
	// `queue_depth: external metric "queue_depth" in namespace "shop": metrics API not served`
	// (for the status; the decision does not read them: the per-metric loads say missing).
	sources []string
}

// read runs the policy's queries at once.
func (c *Controller) read(ctx context.Context, ps *policyState) inputs {
	in := inputs{val: make(map[string]float64, len(ps.inputs))}
	vals := make([]float64, len(ps.inputs))
	errs := make([]error, len(ps.inputs))
	codes := make([]float64, len(ps.sources))
	var wg sync.WaitGroup
	for i, q := range ps.inputs {
		wg.Go(func() { vals[i], errs[i] = c.query(ctx, q.expr) })
	}
	for i, s := range ps.sources {
		wg.Go(func() {
			if v, err := c.query(ctx, s.expr); err == nil {
				codes[i] = v // no answer (no series yet, Prometheus failing): cause unknown, 0
			}
		})
	}
	wg.Wait()
	for i, s := range ps.sources {
		if k := int(codes[i]); k >= 1 && k <= len(config.SourceReasons) && float64(k) == codes[i] {
			in.sources = append(in.sources, fmt.Sprintf("%s: %s: %s", s.metric, s.source, config.SourceReasonText(config.SourceReasons[k-1])))
		}
	}
	var outages []error
	for i, q := range ps.inputs {
		switch err := errs[i]; {
		case err == nil:
			in.val[q.name] = vals[i]
		case isDataError(err):
			in.bad = append(in.bad, fmt.Sprintf("%s: %v", q.name, err))
		default:
			outages = append(outages, fmt.Errorf("%s: %w", q.name, err))
		}
	}
	in.outage = errors.Join(outages...)
	return in
}

// alertDecision decides on fresh inputs from Prometheus (the alert is a trigger, not the data):
//
//   - every configured input must be there, once, and usable; the exporter's values must not be
//     stale (queries.stale) nor older than webhook.max_input_age (queries.age). Otherwise the
//     size is held: never a decision on missing, ambiguous or stale data;
//   - the loads are utilizations at the size the exporter saw (queries.load_replicas), converted
//     to the current size so that a figure from before the last resize is not applied twice;
//   - the policy's stateless rule decides, and for hpa and budget the answer is clamped into
//     the bounds the exporter's stateful run published (queries.floor, queries.ceiling); while
//     the exporter has not yet seen the current size, no scale-down;
//   - when Prometheus itself fails, the alert's annotations are the fallback (if enabled): a
//     scale-up or a hold, never a scale-down.
func (c *Controller) alertDecision(ctx context.Context, ps *policyState, a *Alert, cur ScaleInfo) (decision, error) {
	d := decision{source: "prometheus", w: math.NaN()}
	in := c.freshInputs(ctx, ps)
	ps.lastRead = &in
	if in.outage != nil {
		return c.fallbackDecision(ps, a, cur, in.outage)
	}
	if d.hold = c.inputsHold(ps, in); d.hold != "" {
		return d, nil
	}
	pub := published(ps, in)
	pin, hold := policy.FromPublished(pub, decisionInput(c.now(), cur))
	if hold != "" {
		d.hold = hold
		return d, nil
	}
	sin := pin.Input
	d.w = sin.W
	notes := ruleNotes(ps, sin)
	b, note, hold := policy.PublishedBounds(pub, ps.pol.Scaling, ps.stateful, pin.Basis)
	if hold != "" {
		d.hold = hold
		return d, nil
	}
	if note != "" {
		notes = append(notes, note)
	}
	if ps.metrics != nil {
		composeMetrics(&d, ps, in, pin.Metrics, pin.Complete, b, notes)
		return d, nil
	}
	dec := scaling.Decide(ps.rule, sin, b)
	d.replicas, d.target, d.reason = dec.Replicas, dec.Target, dec.Reason
	d.note = strings.Join(notes, ", ")
	return d, nil
}

// freshInputs reads the policy's inputs from Prometheus: an outage when none is configured.
func (c *Controller) freshInputs(ctx context.Context, ps *policyState) inputs {
	var in inputs
	if c.query == nil {
		in.outage = errors.New("no Prometheus configured (global.prometheus_url)")
	} else {
		in = c.read(ctx, ps)
	}
	return in
}

// inputsHold is why the size is held on inputs that are missing, ambiguous, stale or too old,
// or "" when they can be decided on.
func (c *Controller) inputsHold(ps *policyState, in inputs) string {
	if len(in.bad) > 0 && !ps.onlyMetricsBad(in.bad) {
		return "inputs missing or ambiguous: " + strings.Join(in.bad, "; ")
	}
	// Stale: hold, unless the policy has several metrics and what is missing is some metrics'
	// loads (the exporter publishes none for a metric without a reading): the others then
	// decide, never scaling down (below), as the HPA does with a metric it cannot read.
	metricsMissing := ps.metrics != nil && len(in.bad) > 0 && ps.onlyMetricsBad(in.bad)
	if v, ok := in.val[inStale]; ok && v != 0 && !metricsMissing {
		hold := "the exporter's values are stale (an input query of the policy fails: see debi_query_errors_total)"
		if len(in.sources) > 0 {
			hold += "; metrics not read from their metrics API: " + strings.Join(in.sources, "; ")
		}
		return hold
	}
	if age, ok := in.val[inAge]; ok && age > c.cfg.Webhook.MaxInputAge.Seconds() {
		return fmt.Sprintf("the exporter's last complete step is %.0fs old, above webhook.max_input_age (%v)", age, c.cfg.Webhook.MaxInputAge)
	}
	return ""
}

// published is what the policy's step published, as read: the loads (per metric for a policy
// with several metrics: a load it reads but that is missing is 0, the metric incomplete), the
// size they are at, the range of a stateful algorithm (0 when not read) and the idle time.
func published(ps *policyState, in inputs) policy.Published {
	get := func(name string) float64 {
		if v, ok := in.val[name]; ok {
			return v
		}
		return math.NaN()
	}
	p := policy.Published{Replicas: get(inLoadReplicas), W: get(inLoad), WindowW: get(inWindow), WNow: get(inNow), WDown: get(inDown),
		Floor: in.val[inFloor], Ceiling: in.val[inCeiling], Idle: get(inIdle)}
	for _, m := range ps.metrics {
		ml := policy.MetricLoads{W: math.NaN(), WindowW: math.NaN(), WNow: math.NaN(), WDown: math.NaN(), Complete: true}
		for _, f := range []struct {
			name string
			dst  *float64
		}{{inLoad, &ml.W}, {inWindow, &ml.WindowW}, {inNow, &ml.WNow}, {inDown, &ml.WDown}} {
			key := f.name + "@" + m
			if !ps.reads(key) {
				continue
			}
			v, have := in.val[key]
			if !have {
				ml.Complete = false
			}
			*f.dst = v
		}
		p.Metrics = append(p.Metrics, ml)
	}
	return p
}

// ruleNotes are the decision's notes on the inputs the policy's rule reads: the observed loads,
// the pods not ready.
func ruleNotes(ps *policyState, sin scaling.Input) []string {
	var notes []string
	reads := ps.rule.Reads()
	if reads.Has(scaling.InputNow | scaling.InputDown) {
		notes = append(notes, fmt.Sprintf("observed W1=%s, quantile over lead time + hold=%s", fmtLoad(sin.WNow), fmtLoad(sin.WDown)))
	}
	if reads.Has(scaling.InputReady) && sin.Ready != sin.Current {
		notes = append(notes, fmt.Sprintf("%d of %d ready", sin.Ready, sin.Current))
	}
	return notes
}

// composeMetrics completes d for a policy with several metrics: the largest count over the
// metrics, each through the one composition (scaling.Decide); a missing metric never lets the
// others scale down (the HPA's rule). The note says which metric decided and what each asked.
func composeMetrics(d *decision, ps *policyState, in inputs, ins []scaling.Input, oks []bool, b scaling.Bounds, notes []string) {
	dec, at := scaling.DecideMax(ps.rule, ins, oks, b)
	d.replicas, d.target, d.reason = dec.Replicas, dec.Target, dec.Reason
	var per []string
	for j, m := range ps.metrics {
		if !oks[j] {
			per = append(per, m+": missing")
			continue
		}
		per = append(per, fmt.Sprintf("%s: %d", m, scaling.Decide(ps.rule, ins[j], b).Replicas))
	}
	if len(in.sources) > 0 {
		notes = append(notes, "metrics not read from their metrics API: "+strings.Join(in.sources, "; "))
	}
	if at >= 0 {
		d.metric, d.w = ps.metrics[at], ins[at].W
		notes = append(notes, "metric "+d.metric+" decided ("+strings.Join(per, ", ")+")")
	} else {
		d.hold = "no metric has its inputs: " + strings.Join(in.bad, "; ")
	}
	d.note = strings.Join(notes, ", ")
}

// decisionInput is the part of a decision's input the target itself says: the time, the
// current size and the ready count (equal to the current size when the target does not say,
// as the exporter takes it without kube-state-metrics' ready count).
func decisionInput(now time.Time, cur ScaleInfo) scaling.Input {
	in := scaling.Input{Time: now, Current: cur.Replicas, Ready: cur.Replicas}
	if cur.ReadyKnown {
		in.Ready = min(cur.Ready, cur.Replicas)
	}
	return in
}

// fallbackDecision decides on the alert's annotations when Prometheus cannot be read: the load
// and the replica count it refers to, both validated. It may scale up or hold, never down: the
// annotations are as old as the alert, and a budget policy, which needs the observed load they do
// not carry, holds.
func (c *Controller) fallbackDecision(ps *policyState, a *Alert, cur ScaleInfo, promErr error) (decision, error) {
	d := decision{source: "annotation", w: math.NaN()}
	fb := c.cfg.Webhook.Fallback
	retryable := func(err error) error {
		if c.query != nil { // Prometheus may come back: let Alertmanager retry
			return &Error{http.StatusServiceUnavailable, fmt.Errorf("no fresh load: Prometheus: %v; fallback: %w", promErr, err)}
		}
		return &Error{http.StatusUnprocessableEntity, fmt.Errorf("no load: %v; fallback: %w", promErr, err)}
	}
	if fb.Disabled {
		d.source = "prometheus"
		return d, &Error{http.StatusServiceUnavailable, fmt.Errorf("no fresh load: %w (annotation fallback disabled)", promErr)}
	}
	w, err := annotationFloat(a.Annotations, fb.LoadAnnotation)
	if err != nil {
		return d, retryable(err)
	}
	basis, err := annotationReplicas(a.Annotations, fb.ReplicasAnnotation)
	if err != nil {
		return d, retryable(err)
	}
	d.w = w * float64(basis) / float64(max(cur.Replicas, 1))
	c.log.Warn("using the alert's annotations as fallback load: scale-up or hold only", "policy", ps.pol.Name, "err", promErr)
	nan := math.NaN()
	sin := decisionInput(c.now(), cur)
	sin.W, sin.WindowW, sin.WNow, sin.WDown = d.w, nan, nan, nan
	dec := ps.rule.Recommend(sin)
	d.target, d.reason = dec.Target, dec.Reason
	d.replicas = min(scaling.NoScaleDown(dec.Replicas, cur.Replicas), ps.pol.Scaling.MaxReplicas)
	switch {
	case ps.rule.Reads().Has(scaling.InputNow):
		d.hold = "fallback (Prometheus unreachable): the annotations carry no observed load; a budget policy holds"
	case dec.Replicas < cur.Replicas:
		d.hold = fmt.Sprintf("fallback (Prometheus unreachable): the annotations ask for %d, below the current size; the fallback never scales down", dec.Replicas)
	}
	return d, nil
}

// fmtLoad formats a load for Events and logs ("n/a" when missing).
func fmtLoad(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

func annotationFloat(ann map[string]string, key string) (float64, error) {
	s, ok := ann[key]
	if !ok {
		return 0, fmt.Errorf("annotation %q missing", key)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxQueryValue {
		return 0, fmt.Errorf("annotation %s=%q is not a load in [0, %g]", key, s, float64(maxQueryValue))
	}
	return v, nil
}

func annotationReplicas(ann map[string]string, key string) (int32, error) {
	s, ok := ann[key]
	if !ok {
		return 0, fmt.Errorf("annotation %q missing: the load cannot be converted to the current size", key)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v != math.Trunc(v) || v < 1 || v > maxQueryValue {
		return 0, fmt.Errorf("annotation %s=%q is not a whole replica count of at least 1", key, s)
	}
	return int32(v), nil
}

// joinErrors answers for a notification with several policies: retry when any failure is
// retryable (redoing the others is idempotent), else the first permanent code.
func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	code := 0
	for _, err := range errs {
		c := errorCode(err)
		if c >= 500 {
			code = c
			break
		}
		if code == 0 {
			code = c
		}
	}
	return &Error{code, errors.Join(errs...)}
}
