package elasticscaler

// The status of an object: the webhook's report of a decision (Decision, MetricsRead) and the
// conditions and fields the status writer sets from it and from validation.

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
)

// Decision is one decision of an object's policy, as the webhook reports it
// (StatusWriter.Observe): the status writer writes the object's conditions, decision fields and
// Events from it alone.
type Decision struct {
	Policy    string
	Mode      string
	Algorithm string
	// Trigger is firing, resolved or tidal.
	Trigger string
	// Source of the load (prometheus, annotation, tidal or none), the load W at the current size
	// (nil when none) and the target utilization (0 when none).
	Source string
	W      *float64
	Target float64
	// Before and After are the sizes before and after the decision; Reason says why After.
	Before, After int32
	Reason        string
	// Metric is the metric whose count decided, for a policy with several metrics.
	Metric string
	// Held says why nothing was decided (the size is kept).
	Held string
	// Written is true when the cluster was changed; Object names what was written.
	Written bool
	Object  string
	// PausedReplicas is the count the policy is paused at, when it is.
	PausedReplicas *int32
	// Err is the decision's error (nil when it decided or held).
	Err error
	// Metrics is what the decision read from Prometheus; nil when it read nothing (a Tidal).
	Metrics *MetricsRead
	// Time is when the decision ended.
	Time time.Time
}

// MetricsRead summarises one decision's reads of its inputs (webhook.queries).
type MetricsRead struct {
	// Inputs is the number of queries the policy reads.
	Inputs int
	// Failed lists the inputs Prometheus answered with no, several or unusable series.
	Failed []string
	// Outage is Prometheus failing as a whole (unreachable, 5xx, not configured).
	Outage string
	// Stale says the exporter's values are stale (debi_policy_stale) or too old
	// (webhook.max_input_age).
	Stale string
	// Sources names the metrics read from a metrics API whose last read failed, each with its
	// source and cause (debi_metric_source_failed).
	Sources []string
}

// decisionInputs says what a decision saw: the load, its source and the target.
func decisionInputs(out *Decision) string {
	w := "n/a"
	if out.W != nil {
		w = formatLoad(*out.W)
	}
	return fmt.Sprintf("W=%s (source %s), target=%.3f", w, out.Source, out.Target)
}

// maxMessage bounds a condition's message (the API allows 32 KiB).
const maxMessage = 4096

func validationMessage(msgs []string) string {
	var uniq []string
	for _, m := range msgs {
		if !slices.Contains(uniq, m) {
			uniq = append(uniq, m)
		}
	}
	return truncate(strings.Join(uniq, "; "))
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage-3] + "..."
	}
	return s
}

// setValidated sets the Validated condition from the validation's reasons.
func setValidated(s *esv1.ElasticScalerStatus, msgs []string, gen int64) {
	c := metav1.Condition{Type: esv1.ConditionValidated, Status: metav1.ConditionTrue, Reason: esv1.ReasonValid, ObservedGeneration: gen,
		Message: "the spec, its policy and the cluster checks passed"}
	if len(msgs) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, esv1.ReasonValidationFailed, validationMessage(msgs)
	}
	meta.SetStatusCondition(&s.Conditions, c)
}

// withEndpoints is m with each failed input of a metric on its own endpoint naming it ("load@qps:
// no series (metric qps reads endpoint http://…)"; eps by metric name, "" for a single metric)
// and, when the policy is stale, its metrics on their own endpoints: the exporter publishes
// nothing of a metric whose endpoint does not answer, and the endpoint is where to look.
func (m MetricsRead) withEndpoints(eps map[string]string) *MetricsRead {
	if len(eps) == 0 {
		return &m
	}
	failed := make([]string, len(m.Failed))
	for i, f := range m.Failed {
		failed[i] = f
		input, _, _ := strings.Cut(f, ":")
		_, metric, _ := strings.Cut(input, "@")
		if ep, ok := eps[metric]; ok {
			failed[i] = fmt.Sprintf("%s (metric %s reads endpoint %s)", f, cmp.Or(metric, "of the policy"), ep)
		}
	}
	m.Failed = failed
	if m.Stale != "" {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(eps)) {
			parts = append(parts, fmt.Sprintf("metric %s reads endpoint %s", cmp.Or(name, "of the policy"), eps[name]))
		}
		m.Stale += "; " + strings.Join(parts, ", ")
	}
	return &m
}

// MetricsCondition is the MetricsPipeline condition of what a decision read.
func MetricsCondition(m *MetricsRead, gen int64) metav1.Condition {
	c := metav1.Condition{Type: esv1.ConditionMetricsPipeline, ObservedGeneration: gen, Status: metav1.ConditionFalse}
	sources := ""
	if len(m.Sources) > 0 {
		sources = "metrics not read from their metrics API: " + strings.Join(m.Sources, "; ")
	}
	switch {
	case m.Outage != "":
		c.Reason, c.Message = esv1.ReasonMetricsUnavailable, "no input could be read: "+m.Outage
	case m.Inputs > 0 && len(m.Failed) >= m.Inputs:
		c.Reason, c.Message = esv1.ReasonMetricsUnavailable, fmt.Sprintf("none of the %d inputs has a usable series: %s", m.Inputs, strings.Join(m.Failed, "; "))
	case len(m.Failed) > 0:
		c.Reason, c.Message = esv1.ReasonMetricsPartialSuccess, fmt.Sprintf("%d of %d inputs missing or ambiguous: %s", len(m.Failed), m.Inputs, strings.Join(m.Failed, "; "))
		if m.Stale != "" {
			c.Message += "; " + m.Stale
		}
	case sources != "":
		c.Reason, c.Message = esv1.ReasonMetricsPartialSuccess, sources
		if m.Stale != "" {
			c.Message += "; " + m.Stale
		}
		sources = ""
	case m.Stale != "":
		c.Reason, c.Message = esv1.ReasonMetricsPartialSuccess, m.Stale
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, esv1.ReasonMetricsAvailable, fmt.Sprintf("all %d inputs read and fresh", m.Inputs)
	}
	if sources != "" && m.Outage == "" {
		c.Message += "; " + sources
	}
	c.Message = truncate(c.Message)
	return c
}

// applyDecision sets MetricsPipeline (when the decision read metrics), ScalingCalculated and
// the decision's fields.
func applyDecision(s *esv1.ElasticScalerStatus, o *Decision, gen int64, endpoints map[string]string) {
	if o.Metrics != nil {
		meta.SetStatusCondition(&s.Conditions, MetricsCondition(o.Metrics.withEndpoints(endpoints), gen))
	}
	out := o
	c := metav1.Condition{Type: esv1.ConditionScalingCalculated, ObservedGeneration: gen}
	i32 := func(v int32) *int32 { return &v }
	switch {
	case o.Err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, esv1.ReasonScaleFailed, o.Err.Error()
	case out.Held != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, esv1.ReasonScalingHeld, fmt.Sprintf("size kept at %d: %s", out.Before, out.Held)
		s.CurrentReplicas = i32(out.Before)
		s.PausedReplicas = nil
	default:
		s.PausedReplicas = out.PausedReplicas
		c.Status, c.Reason = metav1.ConditionTrue, esv1.ReasonScalingCalculated
		reason := out.Reason
		if out.Metric != "" {
			reason += ", deciding metric " + out.Metric
		}
		c.Message = fmt.Sprintf("%s (mode %s, trigger %s): desired %d from current %d (%s); %s", o.Algorithm, o.Mode, o.Trigger,
			out.After, out.Before, reason, decisionInputs(out))
		s.DesiredReplicas = i32(out.After)
		s.CurrentReplicas = i32(out.Before)
		if out.Written && o.Mode == config.ModeAct {
			s.CurrentReplicas = i32(out.After)
		}
		if out.Written {
			t := metav1.NewTime(o.Time.UTC().Truncate(time.Second))
			s.LastScaleTime = &t
		}
		if out.W != nil && !math.IsNaN(*out.W) && !math.IsInf(*out.W, 0) {
			s.LastLoad = decimal(*out.W)
		}
		if out.Target != 0 && !math.IsNaN(out.Target) && !math.IsInf(out.Target, 0) {
			s.LastTarget = decimal(out.Target)
		}
	}
	c.Message = truncate(c.Message)
	meta.SetStatusCondition(&s.Conditions, c)
	if gen > s.ObservedGeneration {
		s.ObservedGeneration = gen
	}
}

// formatLoad formats a load as the webhook's decisions do ("n/a" for NaN).
func formatLoad(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

// decimal formats x as the status' decimal strings (no NaN, no Inf; exponent when large).
func decimal(x float64) string {
	return strconv.FormatFloat(x, 'g', 6, 64)
}
