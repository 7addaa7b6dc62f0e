package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Scaler is what the HTTP layer calls: decoded notifications in, outcomes or an *Error out.
type Scaler interface {
	Alerts(ctx context.Context, m *AlertmanagerMessage) ([]Outcome, error)
	Tidal(ctx context.Context, e *TidalEvent) (Outcome, error)
}

// Actuator reads and writes the cluster. Every write is an absolute count and retries
// optimistic-concurrency conflicts (retry.RetryOnConflict); see KubeActuator.
type Actuator interface {
	// GetScale reads the target's scale subresource.
	GetScale(ctx context.Context, t config.Target) (ScaleInfo, error)
	// SetReplicas writes spec.replicas of the target's scale subresource. cur is the read the
	// decision was based on: the first attempt writes conditionally on it (no second read), a
	// conflict re-reads.
	SetReplicas(ctx context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error)
	// SetHPAFloor sets the minReplicas of the HPA that scales t to max(n, its own minimum).
	SetHPAFloor(ctx context.Context, t config.Target, n int32) (WriteResult, error)
}

// ScaleInfo is what the scale subresource says.
type ScaleInfo struct {
	Replicas int32
	UID      types.UID
	// obj is the Scale object read, when the actuator keeps it.
	obj *unstructured.Unstructured
}

// WriteResult describes one write.
type WriteResult struct {
	// Object written: the target, or the HPA in hpa-floor mode ("HorizontalPodAutoscaler/web").
	Object string
	// Before and After are the written field's values (spec.replicas or minReplicas).
	Before, After int32
	// Conflicts met and retried.
	Conflicts int
}

// QueryFunc runs an instant PromQL query that must return exactly one finite sample.
type QueryFunc func(ctx context.Context, expr string) (float64, error)

// Outcome reports one policy's decision.
type Outcome struct {
	Policy string `json:"policy"`
	Mode   string `json:"mode"`
	// Trigger is firing, resolved or tidal.
	Trigger string `json:"trigger"`
	// Source of the load: prometheus, annotation (fallback), tidal or none.
	Source string `json:"source"`
	// W is the load at the current size the algorithm saw (absent for Tidal and resolved).
	W      *float64 `json:"w,omitempty"`
	Target float64  `json:"target_utilization,omitempty"`
	Before int32    `json:"before"`
	After  int32    `json:"after"`
	Reason string   `json:"reason"`
	// Written is true when the cluster was changed.
	Written bool   `json:"written"`
	Object  string `json:"object,omitempty"`
}

// Controller decides and acts for the policies of one configuration. It is safe for
// concurrent use; decisions of one policy are serialised.
type Controller struct {
	cfg      *config.Config
	policies map[string]*policyState
	act      Actuator
	query    QueryFunc
	rec      record.EventRecorder
	m        *metrics
	log      *slog.Logger
	now      func() time.Time
}

type policyState struct {
	mu   sync.Mutex
	pol  *config.Policy
	mode string
	alg  scaling.Algorithm
	// budget is an overload-budget policy: it also reads the observed load and the scale-down
	// gate's quantile (qNow, qDown).
	budget bool
	// rendered queries
	qLoad, qLoadReplicas, qWindow, qNow, qDown string
}

// ControllerOptions are a Controller's collaborators.
type ControllerOptions struct {
	Actuator Actuator
	// Query reads Prometheus; nil means no Prometheus (annotation fallback only).
	Query QueryFunc
	// Recorder records Kubernetes Events on targets; nil records none.
	Recorder record.EventRecorder
	// Registerer receives the metrics; nil keeps them private.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewController builds the per-policy algorithms of cfg.
func NewController(cfg *config.Config, o ControllerOptions) (*Controller, error) {
	if o.Actuator == nil {
		return nil, errors.New("webhook: no actuator")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Controller{cfg: cfg, policies: map[string]*policyState{}, act: o.Actuator, query: o.Query,
		rec: o.Recorder, m: newMetrics(o.Registerer), log: o.Logger, now: o.Now}
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		spec, err := policy.Parse(p.Algorithm, p.Model)
		if err != nil {
			return nil, fmt.Errorf("policies[%d] (%s): %w", i, p.Name, err)
		}
		alg, err := scaling.New(spec.Algorithm, p.Scaling)
		if err != nil {
			return nil, fmt.Errorf("policies[%d] (%s): %w", i, p.Name, err)
		}
		ps := &policyState{pol: p, mode: cfg.Webhook.ModeFor(p.Name), alg: alg, budget: spec.Load == policy.LoadBudget}
		wq := cfg.Webhook.Queries
		for _, q := range []struct {
			dst    *string
			tmpl   string
			budget bool // read by budget policies only
		}{
			{&ps.qLoad, wq.Load, false}, {&ps.qLoadReplicas, wq.LoadReplicas, false}, {&ps.qWindow, wq.WindowLoad, false},
			{&ps.qNow, wq.NowLoad, true}, {&ps.qDown, wq.DownLoad, true},
		} {
			if q.tmpl == "" || q.tmpl == config.QueryNone || (q.budget && !ps.budget) {
				continue
			}
			if *q.dst, err = config.RenderQuery(q.tmpl, p); err != nil {
				return nil, fmt.Errorf("policies[%d] (%s): webhook query: %w", i, p.Name, err)
			}
		}
		c.policies[p.Name] = ps
	}
	return c, nil
}

// Alerts implements Scaler. Every alert must name a configured policy through the policy label,
// and any namespace or workload label it carries must agree with that policy's target: labels
// select a policy, never an object. A notification with one bad alert is refused as a whole,
// before anything is written.
func (c *Controller) Alerts(ctx context.Context, m *AlertmanagerMessage) ([]Outcome, error) {
	type job struct {
		ps     *policyState
		firing *Alert
	}
	if m.TruncatedAlerts > 0 {
		c.log.Warn("Alertmanager truncated the notification (max_alerts); deciding on the alerts received",
			"truncated", m.TruncatedAlerts, "group", m.GroupKey)
	}
	var order []string
	jobs := map[string]*job{}
	label := c.cfg.Webhook.PolicyLabel
	for i := range m.Alerts {
		a := &m.Alerts[i]
		name := a.Labels[label]
		if name == "" {
			return nil, unprocessable("alerts[%d] has no %q label: the webhook acts only on configured policies", i, label)
		}
		ps, ok := c.policies[name]
		if !ok {
			return nil, unprocessable("alerts[%d]: unknown policy %q", i, name)
		}
		if err := checkIdentity(a.Labels, ps.pol.Target); err != nil {
			return nil, unprocessable("alerts[%d] (policy %s): %v", i, name, err)
		}
		j := jobs[name]
		if j == nil {
			j = &job{ps: ps}
			jobs[name] = j
			order = append(order, name)
		}
		if a.Status == StatusFiring && (j.firing == nil || !a.StartsAt.Before(j.firing.StartsAt)) {
			j.firing = a
		}
	}
	var outs []Outcome
	var errs []error
	for _, name := range order {
		j := jobs[name]
		if j.firing == nil {
			// resolved: the recommendation is back at the current size. Not an order to scale
			// back: acknowledge, write nothing (METHOD §8).
			c.m.decisions.WithLabelValues(name, "none", "resolved").Inc()
			c.log.Info("alert resolved; nothing to do", "policy", name)
			outs = append(outs, Outcome{Policy: name, Mode: j.ps.mode, Trigger: StatusResolved, Source: "none", Reason: "resolved"})
			continue
		}
		out, err := c.decide(ctx, j.ps, StatusFiring, func(cur ScaleInfo) (decision, error) {
			return c.alertDecision(ctx, j.ps, j.firing, cur)
		})
		outs = append(outs, out)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", name, err))
		}
	}
	return outs, joinErrors(errs)
}

// Tidal implements Scaler: the Tidal's desired count, within the policy's min and max.
func (c *Controller) Tidal(ctx context.Context, e *TidalEvent) (Outcome, error) {
	ps, err := c.tidalPolicy(e)
	if err != nil {
		return Outcome{}, err
	}
	want, err := e.Desired()
	if err != nil {
		return Outcome{}, err
	}
	return c.decide(ctx, ps, "tidal", func(cur ScaleInfo) (decision, error) {
		p := ps.pol.Scaling
		d := decision{source: "tidal", w: math.NaN(), replicas: want, reason: "tidal",
			note: fmt.Sprintf("tidal %s/%s desiredReplicas=%d", e.Namespace, e.Name, want)}
		switch {
		case want < p.MinReplicas:
			d.replicas, d.reason = p.MinReplicas, scaling.ReasonMinReplicas
		case want > p.MaxReplicas:
			d.replicas, d.reason = p.MaxReplicas, scaling.ReasonMaxReplicas
		}
		return d, nil
	})
}

// tidalPolicy binds an event to a policy: by the elasticscaler.io labels when present, else by
// targetRef. The Tidal must live in the policy's namespace and point at the policy's target.
func (c *Controller) tidalPolicy(e *TidalEvent) (*policyState, error) {
	var ps *policyState
	if name := e.Labels[LabelScalerName]; name != "" {
		var ok bool
		if ps, ok = c.policies[name]; !ok {
			return nil, unprocessable("tidal %s/%s: unknown policy %q in label %s", e.Namespace, e.Name, name, LabelScalerName)
		}
		if ns := e.Labels[LabelScalerNamespace]; ns != "" && ns != ps.pol.Target.Namespace {
			return nil, unprocessable("tidal %s/%s: label %s=%q does not match policy %s (namespace %q)",
				e.Namespace, e.Name, LabelScalerNamespace, ns, name, ps.pol.Target.Namespace)
		}
	} else if e.TargetRef != nil {
		ns := e.TargetRef.Namespace
		if ns == "" {
			ns = e.Namespace
		}
		for _, p := range c.sortedPolicies() {
			t := p.pol.Target
			if t.Namespace == ns && t.Name == e.TargetRef.Name && strings.EqualFold(t.Kind, e.TargetRef.Kind) {
				ps = p
				break
			}
		}
		if ps == nil {
			return nil, unprocessable("tidal %s/%s: no policy scales %s %s/%s", e.Namespace, e.Name, e.TargetRef.Kind, ns, e.TargetRef.Name)
		}
	} else {
		return nil, unprocessable("tidal %s/%s names no policy: set label %s or targetRef", e.Namespace, e.Name, LabelScalerName)
	}
	t := ps.pol.Target
	if e.Namespace != t.Namespace {
		return nil, unprocessable("tidal %s/%s: a Tidal may only drive a policy of its own namespace; policy %s scales namespace %q",
			e.Namespace, e.Name, ps.pol.Name, t.Namespace)
	}
	if r := e.TargetRef; r != nil {
		ns := r.Namespace
		if ns == "" {
			ns = e.Namespace
		}
		if ns != t.Namespace || r.Name != t.Name || !strings.EqualFold(r.Kind, t.Kind) ||
			(r.APIVersion != "" && r.APIVersion != t.APIVersion) {
			return nil, unprocessable("tidal %s/%s: targetRef %s %s/%s is not the target of policy %s (%s)",
				e.Namespace, e.Name, r.Kind, ns, r.Name, ps.pol.Name, t)
		}
	}
	return ps, nil
}

func (c *Controller) sortedPolicies() []*policyState {
	out := make([]*policyState, 0, len(c.policies))
	for _, p := range c.policies {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pol.Name < out[j].pol.Name })
	return out
}

// checkIdentity refuses an alert whose labels name another object than the policy's target:
// a namespace label, a label named after the target's kind (deployment="..."), workload or
// workload_type (the labels the exporter's series and alerts carry).
func checkIdentity(labels map[string]string, t config.Target) error {
	if ns, ok := labels["namespace"]; ok && ns != t.Namespace {
		return fmt.Errorf("label namespace=%q does not match the policy's target namespace %q", ns, t.Namespace)
	}
	if wt, ok := labels["workload_type"]; ok && !strings.EqualFold(wt, t.Kind) {
		return fmt.Errorf("label workload_type=%q does not match the policy's target kind %q", wt, t.Kind)
	}
	for _, l := range []string{strings.ToLower(t.Kind), "workload"} {
		if v, ok := labels[l]; ok && v != t.Name {
			return fmt.Errorf("label %s=%q does not match the policy's target %q", l, v, t.Name)
		}
	}
	return nil
}

// decision is what a trigger decided, before the mode acts on it.
type decision struct {
	source   string
	w        float64
	target   float64
	replicas int32
	reason   string
	note     string
}

// decide serialises one policy's decision: read the scale subresource (the authoritative current
// size), let the trigger decide, then write according to the mode and record an Event.
func (c *Controller) decide(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	start := time.Now()
	name := ps.pol.Name
	defer func() { c.m.decisionDuration.WithLabelValues(name).Observe(time.Since(start).Seconds()) }()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := Outcome{Policy: name, Mode: ps.mode, Trigger: trigger, Source: "none"}
	fail := func(source string, err error) (Outcome, error) {
		c.m.decisions.WithLabelValues(name, source, "error").Inc()
		c.log.Warn("decision failed", "policy", name, "trigger", trigger, "err", err)
		return out, err
	}
	cur, err := c.act.GetScale(ctx, ps.pol.Target)
	if err != nil {
		return fail("none", kubeError("read scale of "+ps.pol.Target.String(), err))
	}
	d, err := f(cur)
	if err != nil {
		return fail(d.source, err)
	}
	out.Source, out.Before, out.After, out.Reason, out.Target = d.source, cur.Replicas, d.replicas, d.reason, d.target
	if !math.IsNaN(d.w) {
		w := d.w
		out.W = &w
		c.m.lastLoad.WithLabelValues(name).Set(w)
	}
	now := c.now()
	c.m.lastReplicas.WithLabelValues(name, ps.mode).Set(float64(d.replicas))
	c.m.lastTarget.WithLabelValues(name).Set(d.target)
	c.m.lastTimestamp.WithLabelValues(name).Set(float64(now.UnixNano()) / 1e9)
	logArgs := []any{"policy", name, "mode", ps.mode, "trigger", trigger, "source", d.source, "w", d.w,
		"target_utilization", d.target, "before", cur.Replicas, "after", d.replicas, "reason", d.reason}
	if d.note != "" {
		logArgs = append(logArgs, "note", d.note)
	}

	var res WriteResult
	written := false
	switch ps.mode {
	case config.ModeShadow:
		c.log.Info("shadow decision", logArgs...)
	case config.ModeAct, config.ModeHPAFloor:
		if ps.mode == config.ModeAct && d.replicas == cur.Replicas {
			c.m.patches.WithLabelValues(name, ps.mode, "unchanged").Inc()
			break
		}
		ws := time.Now()
		if ps.mode == config.ModeAct {
			res, err = c.act.SetReplicas(ctx, ps.pol.Target, d.replicas, cur)
		} else {
			res, err = c.act.SetHPAFloor(ctx, ps.pol.Target, d.replicas)
		}
		c.m.patchDuration.WithLabelValues(ps.mode).Observe(time.Since(ws).Seconds())
		c.m.conflicts.WithLabelValues(name).Add(float64(res.Conflicts))
		if err != nil {
			c.m.patches.WithLabelValues(name, ps.mode, "error").Inc()
			return fail(d.source, kubeError("write "+ps.mode+" for "+ps.pol.Target.String(), err))
		}
		written = res.Before != res.After
		result := "unchanged"
		if written {
			result = "success"
		}
		c.m.patches.WithLabelValues(name, ps.mode, result).Inc()
		out.Object = res.Object
	}
	out.Written = written
	result := "no_change"
	if d.replicas != cur.Replicas || written {
		result = "change"
	}
	c.m.decisions.WithLabelValues(name, d.source, result).Inc()
	if written {
		c.log.Info("scaled", append(logArgs, "object", res.Object, "written_before", res.Before, "written_after", res.After, "conflicts", res.Conflicts)...)
		c.event(ps, cur, d, res)
	}
	return out, nil
}

// event records a Kubernetes Event on the target with the decision's inputs.
func (c *Controller) event(ps *policyState, cur ScaleInfo, d decision, res WriteResult) {
	if c.rec == nil {
		return
	}
	t := ps.pol.Target
	ref := &corev1.ObjectReference{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, UID: cur.UID}
	in := fmt.Sprintf("W=%s (source %s), target utilization=%.3f", fmtLoad(d.w), d.source, d.target)
	if d.note != "" {
		in += ", " + d.note
	}
	if ps.mode == config.ModeHPAFloor {
		c.rec.Eventf(ref, corev1.EventTypeNormal, "DebiRaisedHPAFloor",
			"policy %s (%s): %s minReplicas %d -> %d for %d recommended replicas (current %d, %s); %s",
			ps.pol.Name, ps.alg.Name(), res.Object, res.Before, res.After, d.replicas, cur.Replicas, d.reason, in)
		return
	}
	c.rec.Eventf(ref, corev1.EventTypeNormal, "DebiScaled", "policy %s (%s): replicas %d -> %d (%s); %s",
		ps.pol.Name, ps.alg.Name(), res.Before, res.After, d.reason, in)
}

// alertDecision reads fresh W from Prometheus (the alert is a trigger, not the data) and falls
// back to the alert's annotations, labelled as such, when Prometheus cannot answer. A budget
// policy also reads the observed load and the quantile over the lead time plus the hold; without
// either (missing, ambiguous, or the annotation fallback, which carries neither) it holds the
// size, as the algorithm does without an observation: never a scale-down on missing data.
func (c *Controller) alertDecision(ctx context.Context, ps *policyState, a *Alert, cur ScaleInfo) (decision, error) {
	d := decision{source: "prometheus", w: math.NaN()}
	w, basis, window := math.NaN(), 0.0, math.NaN()
	wNow, wDown := math.NaN(), math.NaN()
	var promErr error
	if c.query == nil {
		promErr = errors.New("no Prometheus configured (global.prometheus_url)")
	} else if w, promErr = c.query(ctx, ps.qLoad); promErr == nil {
		if ps.qLoadReplicas != "" {
			if b, err := c.query(ctx, ps.qLoadReplicas); err == nil {
				basis = b
			} else {
				c.log.Warn("load_replicas query failed; taking W to refer to the current size", "policy", ps.pol.Name, "err", err)
			}
		}
		if ps.qWindow != "" {
			if x, err := c.query(ctx, ps.qWindow); err == nil {
				window = x
			} else {
				c.log.Warn("window_load query failed; no window term", "policy", ps.pol.Name, "err", err)
			}
		}
		if ps.budget {
			now, errNow := c.query(ctx, ps.qNow)
			down, errDown := c.query(ctx, ps.qDown)
			if errNow == nil && errDown == nil {
				wNow, wDown = now, down
			} else {
				c.log.Warn("budget inputs missing; holding the size", "policy", ps.pol.Name, "now_load_err", errNow, "down_load_err", errDown)
			}
		}
	}
	if promErr != nil {
		fb := c.cfg.Webhook.Fallback
		if fb.Disabled {
			return d, &Error{http.StatusServiceUnavailable, fmt.Errorf("no fresh load: %w (annotation fallback disabled)", promErr)}
		}
		d.source = "annotation"
		var err error
		w, err = annotationFloat(a.Annotations, fb.LoadAnnotation)
		if err != nil {
			if c.query != nil { // Prometheus may come back: let Alertmanager retry
				return d, &Error{http.StatusServiceUnavailable, fmt.Errorf("no fresh load: Prometheus: %v; fallback: %v", promErr, err)}
			}
			return d, &Error{http.StatusUnprocessableEntity, fmt.Errorf("no load: %v and %v", promErr, err)}
		}
		if b, err := annotationFloat(a.Annotations, fb.ReplicasAnnotation); err == nil {
			basis = b
		}
		c.log.Warn("using the alert's annotations as fallback load", "policy", ps.pol.Name, "err", promErr)
		if ps.budget {
			c.log.Warn("the annotations carry no observed load for a budget policy; holding the size", "policy", ps.pol.Name)
		}
	}
	// W is a utilization at `basis` replicas; convert it to the current size so that a figure
	// computed before the last scale-up is not applied twice.
	div := float64(max(cur.Replicas, 1))
	if basis > 0 && !math.IsInf(basis, 0) {
		w = w * basis / div
		window = window * basis / div
		wNow = wNow * basis / div
		wDown = wDown * basis / div
	}
	d.w = w
	if ps.budget {
		d.note = fmt.Sprintf("observed W1=%s, quantile over lead time + hold=%s", fmtLoad(wNow), fmtLoad(wDown))
	}
	in := scaling.Input{Time: c.now(), Current: cur.Replicas, Ready: cur.Replicas, W: w, WindowW: window, WNow: wNow, WDown: wDown}
	dec := ps.alg.Recommend(in)
	d.replicas, d.target, d.reason = dec.Replicas, dec.Target, dec.Reason
	if ps.pol.Scaling.MaxReplicas < d.replicas {
		d.replicas = ps.pol.Scaling.MaxReplicas
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
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("annotation %s=%q is not a non-negative number", key, s)
	}
	return v, nil
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
