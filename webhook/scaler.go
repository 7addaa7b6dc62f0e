package webhook

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/debi-scaler/debi/config"
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
