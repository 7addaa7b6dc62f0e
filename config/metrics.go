package config

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// PolicyMetrics is a policy's metrics key, in one of two forms:
//
//   - a mapping, the single-metric form every configuration has used: the stabilisation policy
//     (window, aggregation, missing_data, outlier filter) of the one demand of queries.demand,
//     in cores per request (request or queries.request). It is one metric named "cpu";
//   - a list, the several-metrics form: each entry a Metric with its own query, unit and target,
//     and its own stabilisation policy. The decision is the largest replica count over them.
type PolicyMetrics struct {
	scaling.MetricsPolicy
	// List is the several-metrics form (empty for the single-metric form): written as the
	// metrics key's list itself, `metrics: [{name: cpu, …}, {name: rps, …}]`.
	List []Metric `yaml:"[]"`
}

// UnmarshalYAML reads either form: a sequence is the list, anything else the stabilisation
// policy. Both decode strictly, with the file's decoder.
func (m *PolicyMetrics) UnmarshalYAML(unmarshal func(any) error) error {
	var probe any
	if err := unmarshal(&probe); err != nil {
		return err
	}
	if _, ok := probe.([]any); ok {
		return unmarshal(&m.List)
	}
	return unmarshal(&m.MetricsPolicy)
}

// MarshalYAML writes the form it was read in.
func (m PolicyMetrics) MarshalYAML() (any, error) {
	if len(m.List) > 0 {
		return m.List, nil
	}
	return m.MetricsPolicy, nil
}

// Metric is one metric of a policy in the several-metrics form.
type Metric struct {
	// Name names the metric in the series (label metric), the reason and the status: a label
	// value, unique in the policy. "cpu" and "memory" have default units (cores, bytes) and
	// queries (the recording rules of rules/debi.rules.yaml: CPU used, memory working set, and
	// the request of one pod for a Utilization target).
	Name string `yaml:"name"`
	// Unit is the unit of the query's value: cores, bytes, requests_per_second or items (a
	// queue's length). Default cores for cpu, bytes for memory; required otherwise.
	Unit string `yaml:"unit"`
	// Query is PromQL returning one series: the workload's total of the metric (cores used,
	// bytes in use, requests per second, messages queued). Default for cpu the recording rule's
	// CPU demand, for memory its working set; required otherwise.
	Query string `yaml:"query"`
	// Target is what one pod should carry, as autoscaling/v2 says it (type Utilization,
	// AverageValue or Value).
	Target MetricTarget `yaml:"target"`
	// Request and RequestQuery are, for a Utilization target, the request of one pod in the
	// metric's unit: fixed, or PromQL. Default for cpu and memory the recording rules' request.
	Request      float64 `yaml:"request"`
	RequestQuery string  `yaml:"request_query"`
	// Stabilization is the metric's stabilisation policy (the Elastic Scaler's metrics policy):
	// window, aggregation, missing_data, outlier_filter, outlier_threshold. Default 60s Average.
	Stabilization scaling.MetricsPolicy `yaml:"stabilization"`
}

// MetricTarget is a metric's target, in the shape and with the meaning of autoscaling/v2's
// MetricTarget: Utilization holds each pod at averageUtilization percent of its request,
// AverageValue at averageValue per pod, Value the whole workload at value. The policy's rule
// applies its target utilization (scaling.target, debi's U(n), budget's u_sla) to every metric
// alike, so each metric's capacity per pod is its target divided by the policy's reference
// utilization (scaling.ReferenceUtilization): with algorithm hpa, a pod carries averageValue
// at scaling.target exactly as the HPA would hold it.
type MetricTarget struct {
	Type string `yaml:"type"`
	// AverageUtilization is a percentage of the request (Utilization; optional: without it the
	// request is the capacity and the policy's target utilization applies, as queries.request).
	AverageUtilization *float64 `yaml:"averageUtilization"`
	// AverageValue and Value are quantities ("100", "0.5", "500m", "512Mi").
	AverageValue string `yaml:"averageValue"`
	Value        string `yaml:"value"`
}

// Target types, as autoscaling/v2.
const (
	TargetUtilization  = "Utilization"
	TargetAverageValue = "AverageValue"
	TargetValue        = "Value"
)

// Units of a metric.
var metricUnits = []string{"cores", "bytes", "requests_per_second", "items"}

// MetricUnits are the units a metric may be in.
func MetricUnits() []string { return append([]string(nil), metricUnits...) }

var metricNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// SingleMetricName is the name of the one metric of a policy in the single-metric form.
const SingleMetricName = "cpu"

// ScaleMetric is one metric of a policy as the exporter, the webhook and the what-if use it,
// whatever the form it was written in.
type ScaleMetric struct {
	Name, Unit string
	// Query is the demand, CapacityQuery (may be empty) the per-pod base of the capacity, and
	// Capacity its fixed value (0: from CapacityQuery).
	Query, CapacityQuery string
	Capacity             float64
	// Factor turns the base into the capacity per pod: capacity = base × Factor, divided by the
	// current replicas when PerWorkload (a Value target is the whole workload's).
	Factor      float64
	PerWorkload bool
	// QueryPath and CapacityPath are the field paths of the two queries, relative to the policy
	// (queries.demand, metrics[1].query…), for errors.
	QueryPath, CapacityPath string
	Stabilization           scaling.MetricsPolicy
}

// CapacityPerPod is the capacity of one pod from the base (the request query's value, or
// Capacity) at current replicas.
func (m ScaleMetric) CapacityPerPod(base float64, current int32) float64 {
	c := base * m.Factor
	if m.PerWorkload {
		c /= float64(max(current, 1))
	}
	return c
}

// ScaleMetrics are the policy's metrics (one, named cpu, for the single-metric form), with the
// defaults filled: call it on a loaded policy.
func (p *Policy) ScaleMetrics() []ScaleMetric {
	if len(p.Metrics.List) == 0 {
		return []ScaleMetric{{Name: SingleMetricName, Unit: "cores", Query: p.Queries.Demand, CapacityQuery: p.Queries.Request,
			Capacity: p.Request, Factor: 1, QueryPath: "queries.demand", CapacityPath: "queries.request", Stabilization: p.Metrics.MetricsPolicy}}
	}
	ref := 1.0
	if spec, err := policy.Parse(p.Algorithm, p.Model); err == nil {
		if u := scaling.ReferenceUtilization(spec.Algorithm, p.Scaling); u > 0 {
			ref = u
		}
	}
	out := make([]ScaleMetric, 0, len(p.Metrics.List))
	for j, m := range p.Metrics.List {
		mp := fmt.Sprintf("metrics[%d]", j)
		s := ScaleMetric{Name: m.Name, Unit: m.Unit, Query: m.Query, Factor: 1, QueryPath: mp + ".query", Stabilization: m.Stabilization}
		switch m.Target.Type {
		case TargetUtilization:
			s.Capacity, s.CapacityQuery, s.CapacityPath = m.Request, m.RequestQuery, mp+".request_query"
			if u := m.Target.AverageUtilization; u != nil {
				s.Factor = *u / 100 / ref
			}
		case TargetAverageValue:
			s.Capacity, s.Factor = quantity(m.Target.AverageValue)/ref, 1
		case TargetValue:
			s.Capacity, s.Factor, s.PerWorkload = quantity(m.Target.Value)/ref, 1, true
		}
		out = append(out, s)
	}
	return out
}

// quantity is the value of a validated quantity (NaN if it is not one).
func quantity(s string) float64 {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return math.NaN()
	}
	return q.AsApproximateFloat64()
}

// RunnerConfigs are the runner configurations of the policy's metrics (RunnerConfig with each
// metric's stabilisation and fixed capacity), for policy.NewMulti.
func (p *Policy) RunnerConfigs() ([]policy.Config, []string, error) {
	base, err := p.RunnerConfig()
	if err != nil {
		return nil, nil, err
	}
	ms := p.ScaleMetrics()
	cfgs, names := make([]policy.Config, len(ms)), make([]string, len(ms))
	for i, m := range ms {
		c := base
		c.Metrics = m.Stabilization
		c.Request = 1 // replaced at every step by the metric's capacity
		if m.CapacityQuery == "" && !m.PerWorkload && m.Capacity*m.Factor > 0 {
			c.Request = m.Capacity * m.Factor
		}
		cfgs[i], names[i] = c, m.Name
	}
	return cfgs, names, nil
}

// metricDefaults fills and checks the several-metrics form of policy p at path (policies[i]).
func (c *Config) metricDefaults(p *Policy, path string, targetOK bool, errs *errList) {
	if len(p.Metrics.List) == 0 {
		return
	}
	if p.Queries.Demand != "" {
		errs.addf(path+".queries.demand", "set either queries.demand (one metric) or a metrics list, not both")
	}
	if p.Queries.Request != "" || p.Request != 0 {
		errs.addf(path+".request", "set the request of each metric in the metrics list (metrics[].request or request_query), not the policy's")
	}
	kind := p.Target.WorkloadType()
	wsel := fmt.Sprintf(`namespace=%q,workload_type=%q,workload=%q`, p.Target.Namespace, kind, p.Target.Name)
	seen := map[string]int{}
	for j := range p.Metrics.List {
		m := &p.Metrics.List[j]
		mp := fmt.Sprintf("%s.metrics[%d]", path, j)
		switch {
		case m.Name == "":
			errs.addf(mp+".name", "required")
		case !metricNameRe.MatchString(m.Name) || len(m.Name) > 63:
			errs.addf(mp+".name", "%q must be lower-case letters, digits and '_', starting with a letter (it is a label value)", m.Name)
		default:
			if k, dup := seen[m.Name]; dup {
				errs.addf(mp+".name", "%q is already used by metrics[%d]", m.Name, k)
			}
			seen[m.Name] = j
		}
		switch {
		case m.Unit == "" && m.Name == "cpu":
			m.Unit = "cores"
		case m.Unit == "" && m.Name == "memory":
			m.Unit = "bytes"
		case m.Unit == "":
			errs.addf(mp+".unit", "required: one of %s", strings.Join(metricUnits, ", "))
		default:
			known := false
			for _, u := range metricUnits {
				known = known || u == m.Unit
			}
			if !known {
				errs.addf(mp+".unit", "%q is not one of %s", m.Unit, strings.Join(metricUnits, ", "))
			}
		}
		if targetOK {
			switch {
			case m.Query == "" && m.Name == "cpu":
				m.Query = fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{%s})`, wsel)
			case m.Query == "" && m.Name == "memory" && m.Unit == "bytes":
				// The working set, as the HPA's memory metric (rules/debi.rules.yaml).
				m.Query = fmt.Sprintf(`sum(namespace_workload:debi_memory_working_set_bytes:sum{%s})`, wsel)
			}
		}
		if m.Query == "" {
			errs.addf(mp+".query", "required: PromQL returning the workload's total of the metric")
		} else {
			checkExpr(mp+".query", m.Query, errs)
		}
		t := &m.Target
		switch t.Type {
		case TargetUtilization:
			if u := t.AverageUtilization; u != nil && (!(*u > 0) || math.IsInf(*u, 0)) {
				errs.addf(mp+".target.averageUtilization", "must be a positive percentage, got %v", *u)
			}
			if t.AverageValue != "" || t.Value != "" {
				errs.addf(mp+".target", "type Utilization takes averageUtilization only")
			}
			if m.Request < 0 || math.IsNaN(m.Request) || math.IsInf(m.Request, 0) {
				errs.addf(mp+".request", "must be a positive request per pod in %s, got %v", m.Unit, m.Request)
			} else if m.Request > 0 && m.RequestQuery != "" {
				errs.addf(mp+".request", "set either request or request_query, not both")
			}
			if m.Request == 0 && m.RequestQuery == "" && targetOK {
				switch m.Name {
				case "cpu":
					m.RequestQuery = fmt.Sprintf(`max(namespace_workload:debi_cpu_request_per_pod_cores:avg{%s})`, wsel)
				case "memory":
					if m.Unit == "bytes" {
						m.RequestQuery = fmt.Sprintf(`max(namespace_workload:debi_memory_request_per_pod_bytes:avg{%s})`, wsel)
						break
					}
					errs.addf(mp+".request_query", "required with a Utilization target: the request of one pod in %s (or a fixed request)", m.Unit)
				default:
					errs.addf(mp+".request_query", "required with a Utilization target: the request of one pod in %s (or a fixed request)", m.Unit)
				}
			}
			if m.RequestQuery != "" {
				checkExpr(mp+".request_query", m.RequestQuery, errs)
			}
		case TargetAverageValue, TargetValue:
			field, v := "averageValue", t.AverageValue
			if t.Type == TargetValue {
				field, v = "value", t.Value
			}
			q, err := resource.ParseQuantity(strings.TrimSpace(v))
			switch {
			case v == "":
				errs.addf(mp+".target."+field, "required with type %s", t.Type)
			case err != nil:
				errs.addf(mp+".target."+field, "%q is not a quantity (e.g. 100, 0.5, 500m, 512Mi)", v)
			case q.Sign() <= 0:
				errs.addf(mp+".target."+field, "must be positive, got %s", v)
			}
			if t.AverageUtilization != nil || (t.Type == TargetValue && t.AverageValue != "") || (t.Type == TargetAverageValue && t.Value != "") {
				errs.addf(mp+".target", "type %s takes %s only", t.Type, field)
			}
			if m.Request != 0 || m.RequestQuery != "" {
				errs.addf(mp+".request", "only a Utilization target has a request")
			}
		case "":
			errs.addf(mp+".target.type", "required: Utilization, AverageValue or Value")
		default:
			errs.addf(mp+".target.type", "%q is not Utilization, AverageValue or Value", t.Type)
		}
		if m.Stabilization.Window == 0 {
			m.Stabilization.Window = scaling.DefaultMetricsPolicy().Window
		}
		var warns []string
		m.Stabilization, warns = m.Stabilization.Normalize()
		for _, w := range warns {
			c.warnings = append(c.warnings, fmt.Sprintf("%s.stabilization.%s", mp, w))
		}
	}
}

// checkExpr parses a query and checks that it returns a vector or a scalar.
func checkExpr(path, q string, errs *errList) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		errs.add(&FieldError{Path: path, Err: err})
		return
	}
	if t := expr.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
		errs.addf(path, "must return an instant vector or a scalar, got a %s", t)
	}
}
