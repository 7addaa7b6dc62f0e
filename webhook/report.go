package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
		m := &elasticscaler.MetricsRead{Inputs: len(ps.inputs), Failed: in.bad, Sources: in.sources}
		if in.outage != nil {
			m.Outage = in.outage.Error()
		}
		if v, ok := in.val[inStale]; ok && v != 0 {
			m.Stale = "the exporter's values are stale (debi_policy_stale is 1: an input query of the policy fails)"
		} else if age, ok := in.val[inAge]; ok && age > c.cfg.Webhook.MaxInputAge.Seconds() {
			m.Stale = fmt.Sprintf("the exporter's last complete step is %.0fs old, above webhook.max_input_age (%v)", age, c.cfg.Webhook.MaxInputAge)
		}
		o.Metrics = m
	}
	c.observe(o)
}

// GetObject reads the object t names, through the RESTMapper: the status writer's check of an
// ElasticScaler's targetRef. A reference to nothing served is an *elasticscaler.RefError.
func (k *KubeActuator) GetObject(ctx context.Context, t config.Target) (*unstructured.Unstructured, error) {
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
