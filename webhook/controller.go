// Package webhook is debi's actuator: it decides and writes. The Controller decides the replica
// count of the policy an Alertmanager notification or a Tidal names — Algorithm 2 for debi
// policies, the policy's own algorithm otherwise, a Tidal's desiredReplicas within the policy's
// bounds — and the KubeActuator writes it: the scale subresource (mode act), an HPA's
// minReplicas (hpa-floor) or nowhere (shadow). Around them: the Tidal watch
// (Controller.WatchTidals), the HTTP handlers (NewRouter) on the Endpoints of the configuration
// in force, and the Metrics. A notification is a trigger, not the data (METHOD §8): the replicas
// come from the scale subresource and the load from Prometheus at decision time, an alert's
// annotations are only a fallback; every write is an absolute count. It acts only on the targets
// of its configuration, and imports nothing of package exporter. It runs no process: cmd/debi
// (`debi webhook`) composes these parts into one.
package webhook

// The Controller and its policies: each policy's stateless rule and the queries its decisions
// read, built once per configuration (NewController).

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/client-go/tools/record"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/scaling"
)

// Controller decides and acts for the policies of one configuration. It is safe for
// concurrent use; decisions of one policy are serialised.
type Controller struct {
	cfg      *config.Config
	policies map[string]*policyState
	act      Actuator
	query    QueryFunc
	rec      record.EventRecorder
	m        *Metrics
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
	inIdle         = "idle"
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
	Metrics *Metrics
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
		c.m = NewMetrics(o.Registerer)
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
			{inStale, wq.Stale, true}, {inAge, wq.Age, true}, {inIdle, wq.Idle, p.Scaling.MinReplicas == 0},
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
