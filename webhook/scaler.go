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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Scaler is what the HTTP layer calls: decoded notifications in, outcomes or an *Error out.
type Scaler interface {
	Alerts(ctx context.Context, m *AlertmanagerMessage) ([]Outcome, error)
	Tidal(ctx context.Context, e *TidalEvent) (Outcome, error)
}

// Actuator reads and writes the cluster; see KubeActuator.
type Actuator interface {
	// GetScale reads the target's scale subresource and the annotations of the target.
	GetScale(ctx context.Context, t config.Target) (ScaleInfo, error)
	// SetReplicas writes spec.replicas of the target's scale subresource once, conditionally
	// on cur, the read the decision was based on: a conflict is returned (the caller reads and
	// decides again from the new size), never written over.
	SetReplicas(ctx context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error)
	// SetHPAFloor sets the minReplicas of the HPA that scales t to max(n, its own minimum).
	SetHPAFloor(ctx context.Context, t config.Target, n int32) (WriteResult, error)
	// ScalingHPA returns the name of a HorizontalPodAutoscaler whose scaleTargetRef is t, or "".
	ScalingHPA(ctx context.Context, t config.Target) (string, error)
	// GetTidal reads a Tidal-like object of resource r.
	GetTidal(ctx context.Context, r config.WatchResource, namespace, name string) (*unstructured.Unstructured, error)
	// MarkTidal sets the annotation debi.io/applied of a Tidal-like object of resource r to
	// value (a metadata change: the object's generation stays).
	MarkTidal(ctx context.Context, r config.WatchResource, namespace, name, value string) error
}

// AnnotationPaused on a target stops every write of the webhook to it while its value is
// "true" (decisions are still logged and exported).
const AnnotationPaused = "debi.io/paused"

// ScaleInfo is what the scale subresource says, with the target's annotations.
type ScaleInfo struct {
	Replicas int32
	UID      types.UID
	// Annotations of the target object (for debi.io/paused).
	Annotations map[string]string
	// Ready is the target's ready replica count (status.readyReplicas) when ReadyKnown; when
	// the target does not say, the decision takes it equal to the current size, as the exporter
	// does when kube-state-metrics has no ready count.
	Ready      int32
	ReadyKnown bool
	// obj is the Scale object read, when the actuator keeps it.
	obj *unstructured.Unstructured
}

// WriteResult describes one write.
type WriteResult struct {
	// Object written: the target, or the HPA in hpa-floor mode ("HorizontalPodAutoscaler/web").
	Object string
	// Before and After are the written field's values (spec.replicas or minReplicas).
	Before, After int32
	// Conflicts met (each one made the webhook read and decide again).
	Conflicts int
}

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
	// Metric is the metric whose replica count decided, for a policy with several metrics (the
	// largest count over them, as the HPA's).
	Metric string `json:"metric,omitempty"`
	// Held says why nothing was decided: an input stale, missing or ambiguous, the target
	// paused. The size is kept.
	Held string `json:"held,omitempty"`
	// Written is true when the cluster was changed.
	Written bool   `json:"written"`
	Object  string `json:"object,omitempty"`
	// Conflicts met while writing; each one was decided again from the new size.
	Conflicts int `json:"conflicts,omitempty"`
	// PausedReplicas is the count the policy is paused at (webhook.policies[].paused_replicas,
	// spec.debi.pausedReplicas): the decision was that count, not the load's.
	PausedReplicas *int32 `json:"paused_replicas,omitempty"`
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
	// observe, when set, is told of every decision (the ElasticScaler status writer).
	observe func(elasticscaler.Decision)
	// tidalMissingLogged: the watch said once that its resource is not served.
	tidalMissingLogged atomic.Bool
}

// policyState is what the webhook knows of a policy: its configuration, its stateless rule and
// its rendered queries. No decision state: every decision is a function of what Prometheus and
// the API server say at that moment (see decide), so that every webhook replica, restarted or
// not, decides alike.
type policyState struct {
	// mu serialises the decisions of the policy; flights coalesces the triggers waiting for
	// one (by trigger kind).
	mu      sync.Mutex
	flights map[string]*flightGroup
	fmu     sync.Mutex
	pol     *config.Policy
	mode    string
	paused  bool
	// pin is the count the policy is paused at (webhook.policies[].paused_replicas), or nil.
	pin *int32
	// rule is the algorithm's stateless rule (scaling.RuleOf); stateful says the published
	// bounds are needed. The rule's Reads say which inputs a decision reads: the webhook knows
	// no algorithm's inputs.
	rule     scaling.Algorithm
	algName  string
	stateful bool
	// inputs are the rendered queries this policy reads, by input name.
	inputs []input
	// metrics are the names of a policy's metrics in the several-metrics form (nil for the
	// single-metric form): its load inputs are read per metric, as "<input>@<metric>".
	metrics []string
	// lastRead is what the decision in progress read from Prometheus (under mu), for observe.
	lastRead *inputs
	// sources are the policy's metrics read from a metrics API: the exporter publishes why
	// their last read failed (debi_metric_source_failed), which the status names.
	sources []sourceInput
}

// sourceInput reads why a metrics-API metric's last read failed: the code of its reason
// (config.SourceReasons[code-1]; 0 while it reads).
type sourceInput struct {
	metric, source string // the metric's name, and its source as the exporter names it
	expr           string
}

// sourceReasonQuery is the PromQL of the reason code of policy's metric: the exporter publishes
// debi_metric_source_failed 1 for the reason of the last failure and 0 for the others (all 0
// while it reads), so the weighted sum is the reason's index + 1, or 0.
func sourceReasonQuery(policy, metric string) string {
	terms := make([]string, len(config.SourceReasons))
	for i, r := range config.SourceReasons {
		terms[i] = fmt.Sprintf(`%d * max(debi_metric_source_failed{policy=%q,metric=%q,reason=%q})`, i+1, policy, metric, r)
	}
	return strings.Join(terms, " + ")
}

// input is one query a decision reads.
type input struct {
	name string // the field of webhook.queries
	expr string
}

// Input names, as in webhook.queries.
const (
	inLoad         = "load"
	inLoadReplicas = "load_replicas"
	inWindow       = "window_load"
	inNow          = "now_load"
	inDown         = "down_load"
	inStale        = "stale"
	inAge          = "age"
	inFloor        = "floor"
	inCeiling      = "ceiling"
)

// ControllerOptions are a Controller's collaborators.
type ControllerOptions struct {
	Actuator Actuator
	// Query reads Prometheus; nil means no Prometheus (annotation fallback only).
	Query QueryFunc
	// Recorder records Kubernetes Events on targets; nil records none.
	Recorder record.EventRecorder
	// Registerer receives the metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Metrics, when set, are used instead of new ones on Registerer (a reload builds a new
	// Controller on the metrics of the first).
	Metrics *metrics
	Logger  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Observe, when set, is called after each decision, under the policy's lock: it must not
	// block (see elasticscaler.StatusWriter.Observe).
	Observe func(elasticscaler.Decision)
}

// NewController builds the per-policy rules and queries of cfg.
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
		rec: o.Recorder, m: o.Metrics, log: o.Logger, now: o.Now, observe: o.Observe}
	if c.m == nil {
		c.m = newMetrics(o.Registerer)
	}
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		// The runner configuration the exporter and the what-if build (one builder): the
		// webhook takes the algorithm and its parameters from it.
		rc, err := p.RunnerConfig()
		if err != nil {
			return nil, fmt.Errorf("policies[%d] (%s): %w", i, p.Name, err)
		}
		alg, err := scaling.New(rc.Spec.Algorithm, rc.Params)
		if err != nil {
			return nil, fmt.Errorf("policies[%d] (%s): %w", i, p.Name, err)
		}
		ps := &policyState{pol: p, mode: cfg.Webhook.ModeFor(p.Name), paused: cfg.Webhook.PausedFor(p.Name),
			pin: cfg.Webhook.PausedReplicasFor(p.Name), rule: scaling.RuleOf(alg), algName: alg.Name(), flights: map[string]*flightGroup{}}
		if ps.pin != nil {
			c.m.pausedReplicas.WithLabelValues(p.Name).Set(float64(*ps.pin))
		} else {
			c.m.pausedReplicas.DeleteLabelValues(p.Name)
		}
		_, ps.stateful = alg.(scaling.Stateful)
		wq := cfg.Webhook.Queries
		reads := ps.rule.Reads()
		if len(p.Metrics.List) > 0 {
			for _, m := range p.ScaleMetrics() {
				ps.metrics = append(ps.metrics, m.Name)
				if m.Source != nil {
					ps.sources = append(ps.sources, sourceInput{metric: m.Name, source: m.Source.String(), expr: sourceReasonQuery(p.Name, m.Name)})
				}
			}
		}
		for _, q := range []struct {
			name, tmpl string
			read       bool
		}{
			{inLoad, wq.Load, reads.Has(scaling.InputLoad)}, {inLoadReplicas, wq.LoadReplicas, true},
			{inWindow, wq.WindowLoad, reads.Has(scaling.InputWindow)},
			{inNow, wq.NowLoad, reads.Has(scaling.InputNow)}, {inDown, wq.DownLoad, reads.Has(scaling.InputDown)},
			{inStale, wq.Stale, true}, {inAge, wq.Age, true},
			{inFloor, wq.Floor, ps.stateful}, {inCeiling, wq.Ceiling, ps.stateful},
		} {
			if !q.read || q.tmpl == "" {
				continue
			}
			if q.tmpl == config.QueryNone {
				if q.name == inFloor || q.name == inCeiling {
					return nil, fmt.Errorf("webhook.queries.%s: cannot be none while policies[%d] (%s) uses the stateful algorithm %s: its stabilisation and rate limits come from the exporter", q.name, i, p.Name, ps.algName)
				}
				continue
			}
			expr, err := config.RenderQuery(q.tmpl, p)
			if err != nil {
				return nil, fmt.Errorf("policies[%d] (%s): webhook.queries.%s: %w", i, p.Name, q.name, err)
			}
			if ps.metrics != nil && perMetricInput(q.name) {
				// One query per metric: the exporter's per-metric series carry the metric label.
				for _, m := range ps.metrics {
					mexpr, err := withMetric(expr, m)
					if err != nil {
						return nil, fmt.Errorf("policies[%d] (%s): webhook.queries.%s: %w", i, p.Name, q.name, err)
					}
					ps.inputs = append(ps.inputs, input{q.name + "@" + m, mexpr})
				}
				continue
			}
			ps.inputs = append(ps.inputs, input{q.name, expr})
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
		firing := j.firing
		out, err := c.coalesce(ctx, j.ps, "alert", func(ctx context.Context) (Outcome, error) {
			return c.decide(ctx, j.ps, StatusFiring, func(cur ScaleInfo) (decision, error) {
				return c.alertDecision(ctx, j.ps, firing, cur)
			})
		})
		outs = append(outs, out)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", name, err))
		}
	}
	return outs, joinErrors(errs)
}

// Tidal implements Scaler: the Tidal's desired count, within the policy's min and max. An event
// is a trigger: unless it comes from the watch (an object the API server sent), the webhook reads
// the named Tidal from the API server and decides on what the object says — its labels, its
// targetRef and its status — never on what the event's body claims.
//
// A Tidal is a trigger, never a level-setter: it is acted on only when its status describes its
// spec (status.observedGeneration is metadata.generation, condition Ready True) and only on a
// change — its desired count or its binding (policy, target) differs from what the annotation
// debi.io/applied on the Tidal says was last applied. Once applied the webhook writes that
// annotation, so a resync, a restart or another replica taking the Lease applies nothing new,
// and the load policy's decisions afterwards stand (see tidal.go).
func (c *Controller) Tidal(ctx context.Context, e *TidalEvent) (Outcome, error) {
	if !e.fromCluster {
		u, r, err := c.readTidal(ctx, e.Namespace, e.Name)
		if err != nil {
			return Outcome{Trigger: "tidal", Source: "tidal"}, err
		}
		e = TidalFromUnstructured(u)
		e.resource = r
	}
	ps, _, out, act, err := c.tidalCheck(e)
	if !act || err != nil {
		return out, err
	}
	return c.coalesce(ctx, ps, "tidal/"+e.Namespace+"/"+e.Name, func(ctx context.Context) (Outcome, error) {
		// Read the Tidal again: the event may predate the apply of this very change by a
		// decision that ran before this one, here or on another replica (pushed events).
		f, err := c.rereadTidal(ctx, e)
		if err != nil {
			return Outcome{Policy: ps.pol.Name, Mode: ps.mode, Trigger: "tidal", Source: "tidal"}, err
		}
		ps2, want, out, act, err := c.tidalCheck(f)
		if !act || err != nil {
			return out, err
		}
		if ps2 != ps {
			return out, &Error{http.StatusServiceUnavailable, fmt.Errorf("tidal %s/%s: bound to policy %s now, not %s; deciding again",
				e.Namespace, e.Name, ps2.pol.Name, ps.pol.Name)}
		}
		p := ps.pol.Scaling
		d := decision{source: "tidal", w: math.NaN(), replicas: want, reason: "tidal",
			note: fmt.Sprintf("tidal %s/%s desiredReplicas=%d", e.Namespace, e.Name, want)}
		switch {
		case want < p.MinReplicas:
			d.replicas, d.reason = p.MinReplicas, scaling.ReasonMinReplicas
		case want > p.MaxReplicas:
			d.replicas, d.reason = p.MaxReplicas, scaling.ReasonMaxReplicas
		}
		out, err = c.decide(ctx, ps, "tidal", func(ScaleInfo) (decision, error) { return d, nil })
		if err != nil {
			return out, err
		}
		return out, c.markTidalApplied(ctx, ps, f, want, d.replicas, out)
	})
}

// readTidal reads the named Tidal from the API server, trying the configured resources in
// order: 404 when none has it. It returns the resource it was found in.
func (c *Controller) readTidal(ctx context.Context, ns, name string) (*unstructured.Unstructured, config.WatchResource, error) {
	var errs []error
	for _, r := range c.cfg.Webhook.Tidal.Resources {
		u, err := c.act.GetTidal(ctx, r, ns, name)
		if err == nil {
			return u, r, nil
		}
		var e *Error
		if !apierrors.IsNotFound(err) && !(errors.As(err, &e) && e.Code == http.StatusNotFound) {
			return nil, r, kubeError(fmt.Sprintf("read tidal %s/%s (%s)", ns, name, r), err)
		}
		errs = append(errs, err)
	}
	return nil, config.WatchResource{}, &Error{http.StatusNotFound, fmt.Errorf("tidal %s/%s: not found in %d configured resources (webhook.tidal.resources): %w",
		ns, name, len(c.cfg.Webhook.Tidal.Resources), errors.Join(errs...))}
}

// tidalPolicy binds an event to a policy: by the elasticscaler.io labels when present, else by
// targetRef. The Tidal must live in the policy's namespace and point at the policy's target.
func (c *Controller) tidalPolicy(e *TidalEvent) (*policyState, error) {
	var ps *policyState
	if name := e.Labels[LabelScalerName]; name != "" {
		var ok bool
		byObject := false
		if ps, ok = c.policies[name]; !ok {
			// The policy of an ElasticScaler object is <namespace>.<name> (elasticscaler.PolicyName):
			// the labels name the object, in the Tidal's namespace unless they say another.
			ns := e.Labels[LabelScalerNamespace]
			if ns == "" {
				ns = e.Namespace
			}
			if ps, ok = c.policies[elasticscaler.PolicyName(ns, name)]; !ok {
				return nil, unprocessable("tidal %s/%s: unknown policy %q in label %s (nor %q, the policy of an ElasticScaler)",
					e.Namespace, e.Name, name, LabelScalerName, elasticscaler.PolicyName(ns, name))
			}
			byObject = true
		}
		if ns := e.Labels[LabelScalerNamespace]; !byObject && ns != "" && ns != ps.pol.Target.Namespace {
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

// TriggerPause is the trigger of the decisions Pin makes.
const TriggerPause = "pause"

// Pin scales every policy paused at a count (webhook.policies[].paused_replicas,
// spec.debi.pausedReplicas) to that count, as KEDA scales a ScaledObject's target when
// autoscaling.keda.sh/paused-replicas appears: the webhook calls it when a configuration comes
// into force, so that a pause takes effect without waiting for an alert. Each is a decision like
// a trigger's (serialised with them, one Event when it writes); later triggers hold the count.
func (c *Controller) Pin(ctx context.Context) ([]Outcome, error) {
	var outs []Outcome
	var errs []error
	for _, ps := range c.sortedPolicies() {
		if ps.pin == nil {
			continue
		}
		out, err := c.coalesce(ctx, ps, TriggerPause, func(ctx context.Context) (Outcome, error) {
			return c.decide(ctx, ps, TriggerPause, func(ScaleInfo) (decision, error) {
				// Reached only when the annotation debi.io/paused holds the target: no write.
				return decision{source: "none", w: math.NaN(), hold: "paused by the annotation " + AnnotationPaused + " on the target"}, nil
			})
		})
		outs = append(outs, out)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", ps.pol.Name, err))
		}
	}
	return outs, joinErrors(errs)
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
//
// The workload's namespace is exported_namespace where the alert has one: Prometheus renames a
// scraped namespace label so when the target's own namespace label wins (honor_labels false),
// and the Prometheus Operator's enforcedNamespaceLabel then overwrites namespace on every series
// and every rule's output with the namespace of the ServiceMonitor and the PrometheusRule
// (docs/getting-started.md). There namespace names where debi runs, not what it scales.
func checkIdentity(labels map[string]string, t config.Target) error {
	nsLabel := "namespace"
	if _, ok := labels["exported_namespace"]; ok {
		nsLabel = "exported_namespace"
	}
	if ns, ok := labels[nsLabel]; ok && ns != t.Namespace {
		return fmt.Errorf("label %s=%q does not match the policy's target namespace %q", nsLabel, ns, t.Namespace)
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

// decision is what a trigger decided, before the mode acts on it. hold, when set, says why
// nothing may be decided: the size is kept and nothing written.
type decision struct {
	source   string
	w        float64
	target   float64
	replicas int32
	reason   string
	metric   string // the deciding metric of a policy with several metrics
	note     string
	hold     string
}

// maxDecideAttempts bounds the read–decide–write rounds of one decision: a conflict means
// someone changed the target between the read and the write, so the webhook reads the new size
// and decides again rather than writing a count computed from the old one.
const maxDecideAttempts = 5

// decide serialises one policy's decision: read the scale subresource (the authoritative current
// size), let the trigger decide, then write according to the mode and record an Event. A
// conflict on the write starts over from the read.
func (c *Controller) decide(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	start := time.Now()
	name := ps.pol.Name
	defer func() { c.m.decisionDuration.WithLabelValues(name).Observe(time.Since(start).Seconds()) }()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.lastRead = nil
	out, err := c.decideRetrying(ctx, ps, trigger, f)
	c.notify(ps, trigger, out, err)
	return out, err
}

// decideRetrying is decide's read–decide–write loop, under the policy's lock.
func (c *Controller) decideRetrying(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	name := ps.pol.Name
	conflicts := 0
	backoff := retry.DefaultRetry
	for attempt := 1; ; attempt++ {
		out, err := c.decideOnce(ctx, ps, trigger, f)
		if errors.Is(err, errConflict) {
			conflicts++
			c.m.conflicts.WithLabelValues(name).Inc()
		}
		out.Conflicts += conflicts
		if !errors.Is(err, errConflict) || attempt == maxDecideAttempts {
			if errors.Is(err, errConflict) {
				c.m.decisions.WithLabelValues(name, out.Source, "error").Inc()
				c.m.patches.WithLabelValues(name, ps.mode, "error").Inc()
				err = &Error{http.StatusServiceUnavailable, fmt.Errorf("write for %s: %d conflicts in a row: %w", ps.pol.Target, conflicts, err)}
			}
			return out, err
		}
		c.log.Info("conflict while writing; reading and deciding again", "policy", name, "attempt", attempt)
		select {
		case <-ctx.Done():
			return out, kubeError("write for "+ps.pol.Target.String(), ctx.Err())
		case <-time.After(backoff.Step()):
		}
	}
}

// errConflict marks a write that met an optimistic-concurrency conflict.
var errConflict = errors.New("conflict")

// ReasonPausedReplicas is the reason of a decision that is the count a policy is paused at.
const ReasonPausedReplicas = "paused-replicas"

// pausedWhy says why writes to the target are paused, or "". The annotation on the target comes
// first: it stops every write, a pin's too.
func pausedWhy(ps *policyState, cur ScaleInfo) string {
	switch {
	case annotatedPaused(cur):
		return "paused by the annotation " + AnnotationPaused + " on the target"
	case ps.pin != nil:
		return fmt.Sprintf("paused at %d replicas by the configuration (webhook.policies[].paused_replicas)", *ps.pin)
	case ps.paused:
		return "paused by the configuration (webhook.policies[].paused)"
	case cur.Replicas == 0:
		// The HPA's convention: a workload at zero was stopped on purpose.
		return "paused: the target is at 0 replicas (scaled to zero on purpose)"
	}
	return ""
}

// annotatedPaused reports whether the target carries debi.io/paused: "true".
func annotatedPaused(cur ScaleInfo) bool {
	return strings.EqualFold(strings.TrimSpace(cur.Annotations[AnnotationPaused]), "true")
}

func (c *Controller) decideOnce(ctx context.Context, ps *policyState, trigger string, f func(ScaleInfo) (decision, error)) (Outcome, error) {
	name := ps.pol.Name
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
	out.Before, out.After = cur.Replicas, cur.Replicas
	paused := pausedWhy(ps, cur)
	c.m.paused.WithLabelValues(name).Set(map[bool]float64{true: 1}[paused != ""])
	var d decision
	if pin := ps.pin; pin != nil && !annotatedPaused(cur) {
		// Paused at a count (KEDA's paused-replicas): that count is the decision, whatever the
		// trigger says; no input is read and no load decision is made.
		d = decision{source: "none", w: math.NaN(), replicas: *pin, reason: ReasonPausedReplicas}
		n := *pin
		out.PausedReplicas = &n
	} else {
		if d, err = f(cur); err != nil {
			return fail(d.source, err)
		}
		if d.hold == "" && paused != "" && d.replicas != cur.Replicas {
			d.hold = paused
		}
	}
	out.Source, out.Reason, out.Target, out.Metric = d.source, d.reason, d.target, d.metric
	if !math.IsNaN(d.w) && !math.IsInf(d.w, 0) {
		w := d.w
		out.W = &w
		c.m.lastLoad.WithLabelValues(name).Set(w)
	}
	logArgs := []any{"policy", name, "mode", ps.mode, "trigger", trigger, "source", d.source, "w", d.w,
		"target_utilization", d.target, "before", cur.Replicas, "after", d.replicas, "reason", d.reason}
	if d.metric != "" {
		logArgs = append(logArgs, "metric", d.metric)
	}
	if d.note != "" {
		logArgs = append(logArgs, "note", d.note)
	}
	if d.hold != "" {
		out.Held, out.Reason = d.hold, "held"
		c.m.decisions.WithLabelValues(name, d.source, "held").Inc()
		c.log.Warn("holding the size", append(logArgs, "held", d.hold)...)
		return out, nil
	}
	out.After = d.replicas
	now := c.now()
	c.m.lastReplicas.WithLabelValues(name, ps.mode).Set(float64(d.replicas))
	if out.PausedReplicas == nil {
		c.m.lastTarget.WithLabelValues(name).Set(d.target)
	}
	c.m.lastTimestamp.WithLabelValues(name).Set(float64(now.UnixNano()) / 1e9)

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
		if ps.mode == config.ModeAct {
			// An HPA on the same target would undo every write, and be undone: refuse.
			hpa, err := c.act.ScalingHPA(ctx, ps.pol.Target)
			if err != nil {
				return fail(d.source, kubeError("list HorizontalPodAutoscalers in "+ps.pol.Target.Namespace, err))
			}
			if hpa != "" {
				return fail(d.source, &Error{http.StatusConflict, fmt.Errorf(
					"mode act refused: HorizontalPodAutoscaler %s/%s already scales %s; set webhook.policies[].mode: hpa-floor for policy %s to raise its minReplicas instead",
					ps.pol.Target.Namespace, hpa, ps.pol.Target, name)})
			}
		}
		ws := time.Now()
		if ps.mode == config.ModeAct {
			res, err = c.act.SetReplicas(ctx, ps.pol.Target, d.replicas, cur)
		} else {
			res, err = c.act.SetHPAFloor(ctx, ps.pol.Target, d.replicas)
		}
		c.m.patchDuration.WithLabelValues(ps.mode).Observe(time.Since(ws).Seconds())
		if err != nil {
			if apierrors.IsConflict(err) {
				return out, fmt.Errorf("%w: %w", errConflict, err)
			}
			c.m.patches.WithLabelValues(name, ps.mode, "error").Inc()
			return fail(d.source, kubeError("write "+ps.mode+" for "+ps.pol.Target.String(), err))
		}
		c.m.conflicts.WithLabelValues(name).Add(float64(res.Conflicts)) // hpa-floor's own retries
		out.Conflicts += res.Conflicts
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
		c.log.Info("scaled", append(logArgs, "object", res.Object, "written_before", res.Before, "written_after", res.After)...)
		c.event(ps, cur, d, res)
	}
	return out, nil
}

// flightGroup coalesces the triggers of one policy and kind: a trigger that arrives while a
// decision runs waits for the next one, which starts after it arrived and so reads at least as
// fresh a state; every trigger waiting gets that decision's outcome. Thousands of repeats of
// one alert make a handful of decisions, none lost, none out of order.
type flightGroup struct {
	running bool
	next    *flight
}

type flight struct {
	done chan struct{}
	run  func(context.Context) (Outcome, error)
	out  Outcome
	err  error
}

// coalesce runs run, or joins the next pending decision of the same policy and key. The
// decision runs under the webhook's decision timeout, detached from the caller (a caller that
// gives up does not cancel the decision others wait for).
func (c *Controller) coalesce(ctx context.Context, ps *policyState, key string, run func(context.Context) (Outcome, error)) (Outcome, error) {
	ps.fmu.Lock()
	g := ps.flights[key]
	if g == nil {
		g = &flightGroup{}
		ps.flights[key] = g
	}
	if g.next == nil {
		g.next = &flight{done: make(chan struct{})}
	}
	fl := g.next
	fl.run = run // the latest trigger's view (its annotations, for the fallback)
	if !g.running {
		g.running = true
		go c.fly(ps, key, g)
	}
	ps.fmu.Unlock()
	select {
	case <-fl.done:
		return fl.out, fl.err
	case <-ctx.Done():
		return Outcome{Policy: ps.pol.Name, Mode: ps.mode}, &Error{http.StatusGatewayTimeout,
			fmt.Errorf("policy %s: decision still running after the timeout: %w", ps.pol.Name, ctx.Err())}
	}
}

func (c *Controller) fly(ps *policyState, key string, g *flightGroup) {
	for {
		ps.fmu.Lock()
		fl := g.next
		if fl == nil {
			g.running = false
			delete(ps.flights, key)
			ps.fmu.Unlock()
			return
		}
		g.next = nil
		run := fl.run
		ps.fmu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Webhook.DecisionTimeout)
		fl.out, fl.err = run(ctx)
		cancel()
		close(fl.done)
	}
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
			ps.pol.Name, ps.algName, res.Object, res.Before, res.After, d.replicas, cur.Replicas, d.reason, in)
		return
	}
	c.rec.Eventf(ref, corev1.EventTypeNormal, "DebiScaled", "policy %s (%s): replicas %d -> %d (%s); %s",
		ps.pol.Name, ps.algName, res.Before, res.After, d.reason, in)
}

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
	pin, hold := policy.FromPublished(published(ps, in), decisionInput(c.now(), cur))
	if hold != "" {
		d.hold = hold
		return d, nil
	}
	sin := pin.Input
	d.w = sin.W
	notes := ruleNotes(ps, sin)
	b, note, hold := policy.PublishedBounds(published(ps, in), ps.pol.Scaling, ps.stateful, pin.Basis)
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
// size they are at and the range of a stateful algorithm (0 when not read).
func published(ps *policyState, in inputs) policy.Published {
	get := func(name string) float64 {
		if v, ok := in.val[name]; ok {
			return v
		}
		return math.NaN()
	}
	p := policy.Published{Replicas: get(inLoadReplicas), W: get(inLoad), WindowW: get(inWindow), WNow: get(inNow), WDown: get(inDown),
		Floor: in.val[inFloor], Ceiling: in.val[inCeiling]}
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

// perMetricInput says whether input name is read per metric: the loads.
func perMetricInput(name string) bool {
	switch name {
	case inLoad, inWindow, inNow, inDown:
		return true
	}
	return false
}

// reads says whether the policy reads input key.
func (ps *policyState) reads(key string) bool {
	for _, q := range ps.inputs {
		if q.name == key {
			return true
		}
	}
	return false
}

// onlyMetricsBad says that every bad input is a metric's load (a policy with several metrics
// then decides on the others, never scaling down).
func (ps *policyState) onlyMetricsBad(bad []string) bool {
	if ps.metrics == nil {
		return false
	}
	for _, b := range bad {
		name, _, _ := strings.Cut(b, ":")
		if !strings.Contains(name, "@") {
			return false
		}
	}
	return true
}

// withMetric adds the matcher metric="m" to every selector of the exporter's series (debi_…)
// in expr: the per-metric series of a policy with several metrics carry it.
func withMetric(expr, m string) (string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return "", err
	}
	matcher, err := promlabels.NewMatcher(promlabels.MatchEqual, "metric", m)
	if err != nil {
		return "", err
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && strings.HasPrefix(vs.Name, "debi_") {
			vs.LabelMatchers = append(vs.LabelMatchers, matcher)
		}
		return nil
	})
	return e.String(), nil
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
