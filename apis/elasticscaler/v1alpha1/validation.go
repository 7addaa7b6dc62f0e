package v1alpha1

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Algorithm is the scaling algorithm's canonical name: upper case, APA when ScalingAlgorithm is
// empty (the guide: "scalingAlgorithm留空时默认使用APA").
func (m *MetricsTrigger) Algorithm() string {
	if m == nil {
		return ""
	}
	a := strings.ToUpper(strings.TrimSpace(m.ScalingAlgorithm))
	if a == "" {
		return AlgorithmAPA
	}
	return a
}

// IsHPA reports whether the algorithm is HPA (a Kubernetes HPA does the scaling).
func (m *MetricsTrigger) IsHPA() bool { return m.Algorithm() == AlgorithmHPA }

// DefaultMinReplicas is the lower bound of a MetricsTrigger without minReplicas.
const DefaultMinReplicas int32 = 1

var algorithmName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$`)

// Validate is the admission check of the Elastic Scaler guide's AdmissionWebhook sections: it
// looks at the object alone (the cluster checks — the target exists, one ElasticScaler per
// target, the algorithm is registered, a StateTrigger's target has status.replicas or
// status.desiredReplicas — are the controller's, reported as Validated=False). Every error has
// the path of the field at fault; a metric's errors have the metric's path
// (spec.trigger.metricsTrigger.metrics[N]) and a detail starting "invalid metric at index N:".
//
// An empty scalingAlgorithm is accepted and means APA: the guide's admission section says it
// "cannot be empty", but its algorithm section and FAQ say empty means APA, and rejecting it
// would refuse manifests the guide documents as valid.
func (s *ElasticScaler) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, validateTargetRef(s.Spec.TargetRef, spec.Child("targetRef"))...)

	minP, maxP := spec.Child("minReplicas"), spec.Child("maxReplicas")
	if m := s.Spec.MinReplicas; m != nil && *m < 0 {
		errs = append(errs, field.Invalid(minP, *m, "must be greater than or equal to 0"))
	}
	if m := s.Spec.MaxReplicas; m != nil && *m < 1 {
		errs = append(errs, field.Invalid(maxP, *m, "must be greater than or equal to 1"))
	}
	if lo, hi := s.Spec.MinReplicas, s.Spec.MaxReplicas; lo != nil && hi != nil && *lo >= 0 && *hi >= 1 && *hi < *lo {
		errs = append(errs, field.Invalid(maxP, *hi, fmt.Sprintf("must be greater than or equal to minReplicas (%d)", *lo)))
	}

	tr := spec.Child("trigger")
	t := s.Spec.Trigger
	switch t.Type {
	case MetricsTriggerType:
		if t.StateTrigger != nil {
			errs = append(errs, field.Forbidden(tr.Child("stateTrigger"), "only metricsTrigger may be set when spec.trigger.type is MetricsTrigger"))
		}
		if t.MetricsTrigger == nil {
			errs = append(errs, field.Required(tr.Child("metricsTrigger"), "required when spec.trigger.type is MetricsTrigger"))
			break
		}
		if s.Spec.MaxReplicas == nil {
			errs = append(errs, field.Required(maxP, "required when spec.trigger.type is MetricsTrigger"))
		}
		errs = append(errs, s.validateMetricsTrigger(tr.Child("metricsTrigger"))...)
	case StateTriggerType:
		if t.MetricsTrigger != nil {
			errs = append(errs, field.Forbidden(tr.Child("metricsTrigger"), "only stateTrigger may be set when spec.trigger.type is StateTrigger"))
		}
		if t.StateTrigger == nil {
			errs = append(errs, field.Required(tr.Child("stateTrigger"), "required when spec.trigger.type is StateTrigger (stateTrigger: {} is enough)"))
		}
	case "":
		errs = append(errs, field.Required(tr.Child("type"), "must be MetricsTrigger or StateTrigger"))
	default:
		errs = append(errs, field.NotSupported(tr.Child("type"), t.Type, []TriggerType{MetricsTriggerType, StateTriggerType}))
	}

	if d := s.Spec.Debi; d != nil {
		dp := spec.Child("debi")
		switch d.Mode {
		case "", DebiModeAct, DebiModeHPAFloor, DebiModeShadow:
		default:
			errs = append(errs, field.NotSupported(dp.Child("mode"), d.Mode, []DebiMode{DebiModeAct, DebiModeHPAFloor, DebiModeShadow}))
		}
		if d.PausedReplicas != nil {
			switch {
			case *d.PausedReplicas < 0:
				errs = append(errs, field.Invalid(dp.Child("pausedReplicas"), *d.PausedReplicas, "must not be negative"))
			case d.Mode == DebiModeHPAFloor:
				errs = append(errs, field.Invalid(dp.Child("pausedReplicas"), *d.PausedReplicas,
					"not with mode hpa-floor: the HPA scales the target, and a floor does not hold it at a count"))
			}
		}
		if d.LeadTime != nil && d.LeadTime.Duration < 0 {
			errs = append(errs, field.Invalid(dp.Child("leadTime"), d.LeadTime.Duration.String(), "must not be negative"))
		}
		if d.HistoryStep != nil && d.HistoryStep.Duration <= 0 {
			errs = append(errs, field.Invalid(dp.Child("historyStep"), d.HistoryStep.Duration.String(), "must be positive"))
		}
		decimal := func(p *field.Path, v string) {
			if v == "" {
				return
			}
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				errs = append(errs, field.Invalid(p, v, "must be a decimal number"))
			}
		}
		if e := d.EVT; e != nil {
			ep := dp.Child("evt")
			decimal(ep.Child("tau"), e.Tau)
			decimal(ep.Child("q"), e.Q)
			if e.MinExcesses != nil && *e.MinExcesses < 1 {
				errs = append(errs, field.Invalid(ep.Child("minExcesses"), *e.MinExcesses, "must be at least 1"))
			}
		}
		if b := d.Budget; b != nil {
			bp := dp.Child("budget")
			decimal(bp.Child("overloadBudget"), b.OverloadBudget)
			decimal(bp.Child("slaUtilization"), b.SLAUtilization)
			if b.Hold != nil && b.Hold.Duration < 0 {
				errs = append(errs, field.Invalid(bp.Child("hold"), b.Hold.Duration.String(), "must not be negative"))
			}
		}
	}
	return errs
}

func validateTargetRef(r TargetRef, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.APIVersion == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), ""))
	} else if _, err := schema.ParseGroupVersion(r.APIVersion); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), r.APIVersion, err.Error()))
	}
	if r.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	}
	if r.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if r.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(r.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), r.Namespace, msg))
		}
	}
	return errs
}

func (s *ElasticScaler) validateMetricsTrigger(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	m := s.Spec.Trigger.MetricsTrigger
	if a := m.ScalingAlgorithm; a != "" && !algorithmName.MatchString(a) {
		errs = append(errs, field.Invalid(p.Child("scalingAlgorithm"), a,
			"must be an algorithm name (letters, digits, '.', '_', '-', at most 63 characters), or empty for APA"))
	}
	for k := range m.AlgorithmConfig {
		if strings.TrimSpace(k) == "" {
			errs = append(errs, field.Invalid(p.Child("algorithmConfig"), k, "keys must not be empty"))
		}
	}
	hpa := m.IsHPA()
	if hpa {
		if lo := s.Spec.MinReplicas; lo != nil && *lo < 1 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "minReplicas"), *lo, "must be at least 1 with the HPA algorithm"))
		}
		if ns := s.Spec.TargetRef.Namespace; ns != "" && s.Namespace != "" && ns != s.Namespace {
			errs = append(errs, field.Invalid(field.NewPath("spec", "targetRef", "namespace"), ns,
				"with the HPA algorithm the target must be in the ElasticScaler's namespace ("+s.Namespace+")"))
		}
	}
	mp := p.Child("metrics")
	if len(m.Metrics) == 0 {
		errs = append(errs, field.Required(mp, "at least one metric is required"))
	}
	for i, ms := range m.Metrics {
		for _, d := range validateMetric(ms, hpa) {
			errs = append(errs, field.Invalid(mp.Index(i), field.OmitValueType{}, fmt.Sprintf("invalid metric at index %d: %s", i, d)))
		}
	}
	return errs
}

// validateMetric returns what is wrong with one metric, each as a sentence naming the field
// relative to the metric.
func validateMetric(m MetricSpec, hpa bool) []string {
	var bad []string
	set := map[MetricSourceType]bool{
		ResourceMetricSourceType:       m.Resource != nil,
		ExternalMetricSourceType:       m.External != nil,
		ExternalServerMetricSourceType: m.ExternalServer != nil,
		CustomMetricSourceType:         m.Custom != nil,
	}
	switch m.Type {
	case "":
		return []string{"type is required (Resource, External, ExternalServer or Custom)"}
	case ResourceMetricSourceType, ExternalMetricSourceType, ExternalServerMetricSourceType, CustomMetricSourceType:
	default:
		return []string{fmt.Sprintf("type must be Resource, External, ExternalServer or Custom, got %q", m.Type)}
	}
	for _, t := range []MetricSourceType{ResourceMetricSourceType, ExternalMetricSourceType, ExternalServerMetricSourceType, CustomMetricSourceType} {
		if t != m.Type && set[t] {
			bad = append(bad, fmt.Sprintf("only %s may be set for type %s, %s is set too", subField(m.Type), m.Type, subField(t)))
		}
	}
	if !set[m.Type] {
		return append(bad, fmt.Sprintf("%s is required for type %s", subField(m.Type), m.Type))
	}
	switch m.Type {
	case ResourceMetricSourceType:
		r := m.Resource
		if r.MetricsName == "" {
			bad = append(bad, "resource.metricsName is required")
		}
		bad = append(bad, validateTarget(r.Target, "resource.target", UtilizationMetricType, AverageValueMetricType)...)
	case ExternalMetricSourceType:
		e := m.External
		if e.Metric.Name == "" {
			bad = append(bad, "external.metric.name is required")
		}
		bad = append(bad, validateTarget(e.Target, "external.target", ValueMetricType, AverageValueMetricType)...)
	case CustomMetricSourceType:
		c := m.Custom
		if c.Metric.Name == "" {
			bad = append(bad, "custom.metric.name is required")
		}
		if o := c.DescribedObject; o != nil {
			if o.Kind == "" {
				bad = append(bad, "custom.describedObject.kind is required")
			}
			if o.Name == "" {
				bad = append(bad, "custom.describedObject.name is required")
			}
			bad = append(bad, validateTarget(c.Target, "custom.target", ValueMetricType, AverageValueMetricType)...)
		} else {
			bad = append(bad, validateTarget(c.Target, "custom.target", AverageValueMetricType)...)
		}
	case ExternalServerMetricSourceType:
		if hpa {
			bad = append(bad, "type ExternalServer is not supported with scalingAlgorithm HPA (use Resource, External or Custom, or another algorithm)")
		}
		e := m.ExternalServer
		if e.MetricsName == "" {
			bad = append(bad, "externalServer.metricsName is required")
		}
		if e.Target == "" {
			bad = append(bad, "externalServer.target is required")
		} else if v, err := strconv.ParseFloat(strings.TrimSpace(e.Target), 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			bad = append(bad, fmt.Sprintf("externalServer.target must be a positive number, got %q", e.Target))
		}
		var scheme string
		if e.Endpoint == "" {
			bad = append(bad, "externalServer.endpoint is required")
		} else if u, err := url.Parse(e.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad = append(bad, fmt.Sprintf("externalServer.endpoint must be an http:// or https:// URL, got %q", e.Endpoint))
		} else {
			scheme = u.Scheme
		}
		if strings.TrimSpace(e.Query) == "" {
			bad = append(bad, "externalServer.query is required")
		}
		switch pr := strings.ToLower(e.Protocol); {
		case pr == "":
		case pr != "http" && pr != "https":
			bad = append(bad, fmt.Sprintf("externalServer.protocol must be http or https, got %q", e.Protocol))
		case scheme != "" && pr != scheme:
			bad = append(bad, fmt.Sprintf("externalServer.protocol %q does not match the endpoint's scheme %q", e.Protocol, scheme))
		}
	}
	return bad
}

func subField(t MetricSourceType) string {
	switch t {
	case ExternalServerMetricSourceType:
		return "externalServer"
	default:
		return strings.ToLower(string(t))
	}
}

// validateTarget checks a metric target: its type is one of allowed, the field of its type is set
// and positive, and no other value field is set.
func validateTarget(t MetricTarget, p string, allowed ...MetricTargetType) []string {
	var bad []string
	ok := false
	for _, a := range allowed {
		ok = ok || t.Type == a
	}
	if !ok {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		if t.Type == "" {
			return []string{fmt.Sprintf("%s.type is required (%s)", p, strings.Join(names, " or "))}
		}
		return []string{fmt.Sprintf("%s.type must be %s here, got %q", p, strings.Join(names, " or "), t.Type)}
	}
	positive := func(q *resource.Quantity) bool { return q.Sign() > 0 }
	switch t.Type {
	case UtilizationMetricType:
		if t.AverageUtilization == nil {
			bad = append(bad, p+".averageUtilization is required for type Utilization")
		} else if *t.AverageUtilization <= 0 {
			bad = append(bad, fmt.Sprintf("%s.averageUtilization must be positive, got %d", p, *t.AverageUtilization))
		}
	case AverageValueMetricType:
		if t.AverageValue == nil {
			bad = append(bad, p+".averageValue is required for type AverageValue")
		} else if !positive(t.AverageValue) {
			bad = append(bad, fmt.Sprintf("%s.averageValue must be positive, got %s", p, t.AverageValue.String()))
		}
	case ValueMetricType:
		if t.Value == nil {
			bad = append(bad, p+".value is required for type Value")
		} else if !positive(t.Value) {
			bad = append(bad, fmt.Sprintf("%s.value must be positive, got %s", p, t.Value.String()))
		}
	}
	if t.Type != UtilizationMetricType && t.AverageUtilization != nil {
		bad = append(bad, fmt.Sprintf("%s.averageUtilization must not be set for type %s", p, t.Type))
	}
	if t.Type != AverageValueMetricType && t.AverageValue != nil {
		bad = append(bad, fmt.Sprintf("%s.averageValue must not be set for type %s", p, t.Type))
	}
	if t.Type != ValueMetricType && t.Value != nil {
		bad = append(bad, fmt.Sprintf("%s.value must not be set for type %s", p, t.Type))
	}
	return bad
}
