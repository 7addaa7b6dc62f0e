package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/oklog/run"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
)

// notify tells the Observe hook of a decision, as the report the ElasticScaler status writer
// reads (elasticscaler.Decision); under ps.mu.
func (c *Controller) notify(ps *policyState, trigger string, out Outcome, err error) {
	if c.observe == nil {
		return
	}
	o := elasticscaler.Decision{Policy: ps.pol.Name, Mode: ps.mode, Algorithm: ps.algName, Trigger: trigger,
		Source: out.Source, W: out.W, Target: out.Target, Before: out.Before, After: out.After, Reason: out.Reason,
		Metric: out.Metric, Held: out.Held, Written: out.Written, Object: out.Object, PausedReplicas: out.PausedReplicas,
		Err: err, Time: c.now()}
	if in := ps.lastRead; in != nil {
		m := &elasticscaler.MetricsRead{Inputs: len(ps.inputs), Failed: ps.withEndpoints(in.bad), Sources: in.sources}
		if in.outage != nil {
			m.Outage = in.outage.Error()
		}
		if v, ok := in.val[inStale]; ok && v != 0 {
			m.Stale = "the exporter's values are stale (debi_policy_stale is 1: an input query of the policy fails)" + ps.endpointNote()
		} else if age, ok := in.val[inAge]; ok && age > c.cfg.Webhook.MaxInputAge.Seconds() {
			m.Stale = fmt.Sprintf("the exporter's last complete step is %.0fs old, above webhook.max_input_age (%v)", age, c.cfg.Webhook.MaxInputAge)
		}
		o.Metrics = m
	}
	c.observe(o)
}

// withEndpoints names, in each failed input of a metric on its own endpoint ("load@qps: no
// series"), the metric's endpoint: the exporter publishes no load of a metric whose endpoint
// does not answer.
func (ps *policyState) withEndpoints(bad []string) []string {
	if len(ps.endpoints) == 0 {
		return bad
	}
	out := make([]string, len(bad))
	for i, b := range bad {
		out[i] = b
		name, _, _ := strings.Cut(b, ":")
		_, metric, ok := strings.Cut(name, "@")
		for _, me := range ps.endpoints {
			if ok && me.metric == metric {
				out[i] = fmt.Sprintf("%s (metric %s reads endpoint %s)", b, me.metric, me.endpoint)
			}
		}
	}
	return out
}

// endpointNote names the policy's metrics on their own endpoints, for a stale policy: one of
// them may be the query that fails (the exporter's log says which).
func (ps *policyState) endpointNote() string {
	if len(ps.endpoints) == 0 {
		return ""
	}
	var parts []string
	for _, me := range ps.endpoints {
		parts = append(parts, fmt.Sprintf("metric %s reads endpoint %s", me.metric, me.endpoint))
	}
	return "; " + strings.Join(parts, ", ")
}

// getObject reads the object t names, through the RESTMapper: the status writer's check of an
// ElasticScaler's targetRef. A reference to nothing served is an *elasticscaler.RefError.
func (k *KubeActuator) getObject(ctx context.Context, t config.Target) (*unstructured.Unstructured, error) {
	r, err := k.resource(t)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == http.StatusUnprocessableEntity {
			return nil, &elasticscaler.RefError{Err: e.Err}
		}
		return nil, err
	}
	return r.Get(ctx, t.Name, metav1.GetOptions{})
}

// newServerStatus is the ElasticScaler status writer of a webhook with
// global.elastic_scalers, else nil; it reports the problems of owner (nil: none).
func (s *Server) newServerStatus(cfg *config.Config, owner *elasticscaler.Owner) *elasticscaler.StatusWriter {
	if !cfg.Global.ElasticScalers.Enabled {
		return nil
	}
	o := elasticscaler.StatusOptions{Dynamic: s.act.Dynamic(), Discovery: s.act.Kube().Discovery(), Get: s.act.getObject,
		Recorder: s.recorder, Logger: s.logger.With("component", "elasticscaler-status"), File: func() *config.Config {
			if g := s.current.Load(); g != nil {
				return g.file
			}
			return nil
		}, Namespaces: cfg.Global.ElasticScalers.Namespaces, Informers: s.informers, Recheck: discoveryRecheck}
	if owner != nil {
		o.HPAProblems = owner.Problems // reported in the objects' Validated condition
	}
	return elasticscaler.NewStatusWriter(o)
}

// startStatus adds the status writer and its Lease campaign to g (with global.elastic_scalers).
func (s *Server) startStatus(ctx context.Context, g *run.Group) {
	if s.status == nil {
		return
	}
	w := s.status
	wctx, cancel := context.WithCancel(ctx)
	g.Add(func() error { return w.Run(wctx) }, func(error) { cancel() })
	le := s.start.Webhook.LeaderElection
	if !le.IsEnabled() {
		w.SetLeader(true)
		return
	}
	le.Name += "-status" // a Lease of its own: the Tidal watch's campaign restarts on every reload
	lctx, lcancel := context.WithCancel(ctx)
	g.Add(func() error {
		return RunLeaderElected(lctx, s.act.Kube(), le, s.id, s.logger.With("component", "elasticscaler-status"), w.SetLeader,
			func(ctx context.Context) { <-ctx.Done() })
	}, func(error) { lcancel() })
}

// observeDecision is the Controllers' Observe hook.
func (s *Server) observeDecision(d elasticscaler.Decision) {
	if s.status != nil {
		s.status.Observe(d)
	}
}
