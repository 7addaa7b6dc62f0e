package config

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

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
	// CPU demand, for memory its working set; required otherwise, unless the value comes from a
	// metrics API (external, object or pods): exactly one of query, external, object and pods.
	Query string `yaml:"query"`
	// External reads the value from external.metrics.k8s.io/v1beta1 (autoscaling/v2's External
	// metric: a queue's length, a cloud service's rate): the sum over the selected series.
	External *ExternalSource `yaml:"external"`
	// Object reads the value of one object's metric from custom.metrics.k8s.io/v1beta2
	// (autoscaling/v2's Object metric: an Ingress's requests per second).
	Object *ObjectSource `yaml:"object"`
	// Pods reads the metric of each of the target's pods from custom.metrics.k8s.io/v1beta2
	// (autoscaling/v2's Pods metric): the sum over the pods.
	Pods *PodsSource `yaml:"pods"`
	// Endpoint is the Prometheus-compatible API the metric's query and request_query go to, with
	// its own HTTP client settings. Default global.prometheus_url with global.http_config. Not
	// with a metrics API (external, object, pods).
	Endpoint *Endpoint `yaml:"endpoint"`
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
	// Activation is, with scaling.min_replicas 0, the value of the metric, in its unit, at or
	// below which it is idle: above it (observed, or in the policy's largest forecast over the
	// lead time) it wakes the workload from zero and keeps it from going there (KEDA's
	// activationThreshold). Only a metric read from outside the pods wakes a workload: an
	// external or object metric (default 0: any demand wakes it), or a query that sets its
	// activation, saying so (a router's requests, a queue); never cpu, memory or a pods metric.
	Activation *float64 `yaml:"activation"`
}

// Wakes says whether the metric wakes a workload from zero: it is read from outside the pods, so
// it is there when no pod runs — an External or an Object metric, or a query other than cpu and
// memory that sets its activation (PromQL may read the pods: the file says it does not).
func (m *Metric) Wakes() bool {
	switch {
	case m.External != nil || m.Object != nil:
		return true
	case m.Pods != nil || m.Name == "cpu" || m.Name == "memory":
		return false
	}
	return m.Activation != nil
}

// ExternalSource is an External metric of a metrics API: metric's series in namespace that
// selector selects. The exporter reads it at every step (docs/exporter.md, "Metrics APIs").
type ExternalSource struct {
	// Metric is the metric's name in external.metrics.k8s.io.
	Metric string `yaml:"metric"`
	// Namespace is the namespace the metric is read in. Default the target's namespace.
	Namespace string `yaml:"namespace"`
	// Selector selects the metric's series (autoscaling/v2's metric.selector); empty selects all.
	Selector *LabelSelector `yaml:"selector"`
}

// ObjectSource is an Object metric of custom.metrics.k8s.io: metric of described_object.
type ObjectSource struct {
	// Metric is the metric's name in custom.metrics.k8s.io.
	Metric string `yaml:"metric"`
	// DescribedObject is the object the metric describes (required).
	DescribedObject ObjectReference `yaml:"described_object"`
	// Namespace is the described object's namespace. Default the target's namespace.
	Namespace string `yaml:"namespace"`
	// Selector selects among the metric's series (autoscaling/v2's metric.selector).
	Selector *LabelSelector `yaml:"selector"`
}

// PodsSource is a Pods metric of custom.metrics.k8s.io: metric of each pod of the target. The
// pods are those of the target's scale subresource's status.selector, read by the exporter (as
// the HPA reads them), so the target must publish one (Deployments, StatefulSets and ReplicaSets
// do).
type PodsSource struct {
	// Metric is the metric's name in custom.metrics.k8s.io.
	Metric string `yaml:"metric"`
	// Selector selects among the metric's series (autoscaling/v2's metric.selector), not pods.
	Selector *LabelSelector `yaml:"selector"`
}

// ObjectReference names the object an Object metric describes, as autoscaling/v2's
// CrossVersionObjectReference.
type ObjectReference struct {
	// APIVersion is the object's group and version (networking.k8s.io/v1; v1 for the core group).
	APIVersion string `yaml:"api_version"`
	// Kind is the object's kind (Ingress, Service, Deployment…); required.
	Kind string `yaml:"kind"`
	// Name is the object's name; required.
	Name string `yaml:"name"`
}

// LabelSelector is a Kubernetes label selector: match_labels and match_expressions are ANDed.
type LabelSelector struct {
	// MatchLabels selects the series whose labels have these values.
	MatchLabels map[string]string `yaml:"match_labels"`
	// MatchExpressions are requirements on labels, e.g. {key: tier, operator: In, values: [gold]}.
	MatchExpressions []SelectorRequirement `yaml:"match_expressions"`
}

// SelectorRequirement is one expression of a label selector: operator In, NotIn, Exists or
// DoesNotExist.
type SelectorRequirement struct {
	// Key is the label.
	Key string `yaml:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	Operator string `yaml:"operator"`
	// Values are the values of In and NotIn (none for Exists and DoesNotExist).
	Values []string `yaml:"values"`
}

// Source types of a metric read from a metrics API (MetricSource.Type).
const (
	SourceExternal = "external"
	SourceObject   = "object"
	SourcePods     = "pods"
)

// MetricSource is where a metric read from a metrics API comes from, with the defaults filled.
type MetricSource struct {
	// Type is SourceExternal, SourceObject or SourcePods.
	Type   string
	Metric string
	// Namespace is the metric's namespace (the described object's for SourceObject).
	Namespace string
	// Selector selects among the metric's series (nil: all).
	Selector *LabelSelector
	// Object is the described object of SourceObject.
	Object ObjectReference
	// Path is the source's field path relative to the policy (metrics[1].external), for errors.
	Path string
}

// String names the metric as the exporter's log and the ElasticScaler's status do, e.g.
// `external metric "queue_depth" in namespace "shop"`.
func (s MetricSource) String() string {
	switch s.Type {
	case SourceObject:
		return fmt.Sprintf("object metric %q of %s %q in namespace %q", s.Metric, s.Object.Kind, s.Object.Name, s.Namespace)
	case SourcePods:
		return fmt.Sprintf("pods metric %q in namespace %q", s.Metric, s.Namespace)
	}
	return fmt.Sprintf("%s metric %q in namespace %q", s.Type, s.Metric, s.Namespace)
}

// Reasons a metrics-API metric failed: the reason label of debi_metric_source_errors_total and
// debi_metric_source_failed, the same set in the exporter and the webhook. Low cardinality by
// design: the error itself is in the exporter's log.
var SourceReasons = []string{"not_served", "timeout", "no_values", "not_found", "forbidden", "no_pod_selector", "error"}

// SourceReasonText says what a reason means, in the words of the exporter's errors.
func SourceReasonText(reason string) string {
	switch reason {
	case "not_served":
		return "metrics API not served"
	case "timeout":
		return "metric timed out"
	case "no_values":
		return "no values returned"
	case "not_found":
		return "not found (no such metric, or its API is gone)"
	case "forbidden":
		return "access forbidden"
	case "no_pod_selector":
		return "the target's pod selector is unknown (scale subresource status.selector)"
	}
	return "read failed (see the exporter's log)"
}

// SourceHistoryQuery is the PromQL of the history of a metrics-API metric: the values the
// exporter read and published as debi_metric_source_value, over every exporter instance (max:
// a restarted or rescheduled exporter is another instance of the same series).
func SourceHistoryQuery(policy, metric string) string {
	return fmt.Sprintf(`max(debi_metric_source_value{policy=%q,metric=%q})`, policy, metric)
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
	// Source, when set, is the metrics API the demand is read from at each step (Query is then
	// its history: SourceHistoryQuery, the series the exporter published).
	Source *MetricSource
	// Endpoint is the API Query and CapacityQuery go to (nil: global.prometheus_url), and
	// EndpointPath its field path relative to the policy, for errors.
	Endpoint     *Endpoint
	EndpointPath string
	// Wake says the metric wakes the workload from zero (Metric.Wakes), above Activation in its
	// unit (min_replicas 0).
	Wake       bool
	Activation float64
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
			Capacity: p.Request, Factor: 1, QueryPath: "queries.demand", CapacityPath: "queries.request", Stabilization: p.Metrics.MetricsPolicy,
			Endpoint: p.Queries.Endpoint, EndpointPath: "queries.endpoint"}}
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
		s := ScaleMetric{Name: m.Name, Unit: m.Unit, Query: m.Query, Factor: 1, QueryPath: mp + ".query", Stabilization: m.Stabilization,
			Endpoint: m.Endpoint, EndpointPath: mp + ".endpoint", Wake: m.Wakes()}
		if m.Activation != nil {
			s.Activation = *m.Activation
		}
		if src := m.source(p.Target.Namespace, mp); src != nil {
			s.Source, s.Query, s.QueryPath = src, SourceHistoryQuery(p.Name, m.Name), src.Path
		}
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

// source is the metrics-API source of the metric at path mp (metrics[j]), with its defaults
// (namespace: the target's), or nil for a PromQL metric.
func (m *Metric) source(namespace, mp string) *MetricSource {
	switch {
	case m.External != nil:
		x := m.External
		return &MetricSource{Type: SourceExternal, Metric: x.Metric, Namespace: cmp.Or(x.Namespace, namespace), Selector: x.Selector, Path: mp + ".external"}
	case m.Object != nil:
		x := m.Object
		return &MetricSource{Type: SourceObject, Metric: x.Metric, Namespace: cmp.Or(x.Namespace, namespace), Selector: x.Selector,
			Object: x.DescribedObject, Path: mp + ".object"}
	case m.Pods != nil:
		return &MetricSource{Type: SourcePods, Metric: m.Pods.Metric, Namespace: namespace, Selector: m.Pods.Selector, Path: mp + ".pods"}
	}
	return nil
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
		c.Wake, c.Activation = m.Wake && p.Scaling.MinReplicas == 0, m.Activation
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
		metricName(m, mp, j, seen, errs)
		metricUnit(m, mp, errs)
		nsrc := metricSource(m, mp, wsel, targetOK, errs)
		if nsrc > 0 && m.Endpoint != nil {
			errs.addf(mp+".endpoint", "a metric read from a metrics API (external, object or pods) has no Prometheus endpoint")
		} else {
			c.checkEndpoint(&m.Endpoint, mp+".endpoint", errs)
		}
		metricTarget(m, mp, wsel, nsrc, targetOK, errs)
		metricActivation(m, mp, p.Scaling.MinReplicas, errs)
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

// metricActivation checks metric m's activation at mp (policies[i].metrics[j]): a number, not
// negative, on a metric that wakes a workload, of a policy that scales to zero.
func metricActivation(m *Metric, mp string, minReplicas int32, errs *errList) {
	switch a := m.Activation; {
	case a == nil:
	case !(*a >= 0) || math.IsInf(*a, 0):
		errs.addf(mp+".activation", "must be a number, not negative, got %v", *a)
	case !m.Wakes():
		errs.addf(mp+".activation", "metric %q is read from the pods, so it cannot wake a workload from zero: only a query other than cpu and memory, an external or an object metric has an activation", m.Name)
	case minReplicas != 0:
		errs.addf(mp+".activation", "is read only by a policy that scales to zero (scaling.min_replicas: 0), got min_replicas %d", minReplicas)
	}
}

// zeroNeedsWake checks that a policy at path (policies[i]) that scales to zero has a metric
// that can wake it: at zero pods, a metric read from the pods reads nothing.
func zeroNeedsWake(p *Policy, path string, errs *errList) {
	if p.Scaling.MinReplicas != 0 || slices.ContainsFunc(p.Metrics.List, func(m Metric) bool { return m.Wakes() }) {
		return
	}
	errs.addf(path+".scaling.min_replicas", "0 needs a metric that wakes the workload from zero, read from outside the pods: "+
		"an external or an object metric, or a metrics[] query (a router's requests, a queue) that sets its activation; "+
		"the policy's %s read nothing when no pod runs", strings.Join(metricNames(p), ", "))
}

func metricNames(p *Policy) []string {
	if len(p.Metrics.List) == 0 {
		return []string{"queries.demand (cpu)"}
	}
	var out []string
	for _, m := range p.Metrics.List {
		out = append(out, m.Name)
	}
	return out
}

// metricName checks the name of metric m, the j-th at mp (policies[i].metrics[j]): a label
// value, once per policy (seen holds the names so far and their indices).
func metricName(m *Metric, mp string, j int, seen map[string]int, errs *errList) {
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
}

// metricUnit fills the unit of cpu (cores) and memory (bytes) and checks every metric's.
func metricUnit(m *Metric, mp string, errs *errList) {
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
}

// metricSource checks where metric m comes from, a query or one metrics API (external, object
// or pods), and fills the default query of cpu and memory from the recording rules (wsel selects
// the workload) when the target is valid. It returns how many metrics APIs m names.
func metricSource(m *Metric, mp, wsel string, targetOK bool, errs *errList) (nsrc int) {
	for _, set := range []bool{m.External != nil, m.Object != nil, m.Pods != nil} {
		if set {
			nsrc++
		}
	}
	switch {
	case nsrc > 1 || nsrc == 1 && m.Query != "":
		errs.addf(mp, "set exactly one of query, external, object and pods")
	case nsrc == 1:
		checkSource(m, mp, errs)
	}
	if targetOK && nsrc == 0 {
		switch {
		case m.Query == "" && m.Name == "cpu":
			m.Query = fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{%s})`, wsel)
		case m.Query == "" && m.Name == "memory" && m.Unit == "bytes":
			// The working set, as the HPA's memory metric (rules/debi.rules.yaml).
			m.Query = fmt.Sprintf(`sum(namespace_workload:debi_memory_working_set_bytes:sum{%s})`, wsel)
		}
	}
	switch {
	case nsrc > 0:
	case m.Query == "":
		errs.addf(mp+".query", "required: PromQL returning the workload's total of the metric (or a metrics API: external, object or pods)")
	default:
		checkExpr(mp+".query", m.Query, errs)
	}
	return nsrc
}

// metricTarget checks the target of metric m, whose source names nsrc metrics APIs, and its
// request: a Utilization target's (utilizationTarget), or that an AverageValue or Value target
// has none (valueTarget).
func metricTarget(m *Metric, mp, wsel string, nsrc int, targetOK bool, errs *errList) {
	t := &m.Target
	if nsrc > 0 && t.Type == TargetUtilization {
		errs.addf(mp+".target.type", "a metric from a metrics API takes an AverageValue or Value target (Utilization is a resource's)")
	}
	switch t.Type {
	case TargetUtilization:
		utilizationTarget(m, mp, wsel, targetOK, errs)
	case TargetAverageValue, TargetValue:
		valueTarget(m, mp, errs)
	case "":
		errs.addf(mp+".target.type", "required: Utilization, AverageValue or Value")
	default:
		errs.addf(mp+".target.type", "%q is not Utilization, AverageValue or Value", t.Type)
	}
}

// utilizationTarget checks a Utilization target of metric m and its request per pod, a fixed
// request or a query, filling the request query of cpu and memory (in bytes) from the recording
// rules when the target is valid.
func utilizationTarget(m *Metric, mp, wsel string, targetOK bool, errs *errList) {
	t := &m.Target
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
}

// valueTarget checks an AverageValue or Value target of metric m: a positive quantity in its
// own field alone, and no request.
func valueTarget(m *Metric, mp string, errs *errList) {
	t := &m.Target
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
}

// checkSource checks the metrics-API source of metric m at path mp (policies[i].metrics[j]).
func checkSource(m *Metric, mp string, errs *errList) {
	var metric string
	var sel *LabelSelector
	var sp string
	switch {
	case m.External != nil:
		sp, metric, sel = mp+".external", m.External.Metric, m.External.Selector
		checkNamespace(sp+".namespace", m.External.Namespace, errs)
	case m.Object != nil:
		sp, metric, sel = mp+".object", m.Object.Metric, m.Object.Selector
		checkNamespace(sp+".namespace", m.Object.Namespace, errs)
		o := m.Object.DescribedObject
		op := sp + ".described_object"
		if o.Kind == "" {
			errs.addf(op+".kind", "required: the kind of the object the metric describes")
		}
		if o.Name == "" {
			errs.addf(op+".name", "required: the name of the object the metric describes")
		}
		if o.APIVersion != "" {
			if _, err := schema.ParseGroupVersion(o.APIVersion); err != nil {
				errs.addf(op+".api_version", "%q is not a group/version: %v", o.APIVersion, err)
			}
		}
	default:
		sp, metric, sel = mp+".pods", m.Pods.Metric, m.Pods.Selector
	}
	switch {
	case metric == "":
		errs.addf(sp+".metric", "required")
	case strings.ContainsAny(metric, "/ ") || metric != strings.TrimSpace(metric):
		errs.addf(sp+".metric", "%q is not a metric name (no '/' or spaces)", metric)
	}
	if sel != nil {
		if _, err := sel.Selector(); err != nil {
			errs.addf(sp+".selector", "%v", err)
		}
	}
}

// checkNamespace checks an optional namespace name.
func checkNamespace(path, ns string, errs *errList) {
	if ns == "" {
		return
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		errs.addf(path, "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
	}
}

// Selector is the selector as the metrics APIs take it (nil selects everything). It is
// metav1.LabelSelectorAsSelector's conversion, written here so that the file format needs no
// Kubernetes API types.
func (s *LabelSelector) Selector() (labels.Selector, error) {
	if s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0 {
		return labels.Everything(), nil
	}
	reqs := make([]labels.Requirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))
	for k, v := range s.MatchLabels {
		r, err := labels.NewRequirement(k, selection.Equals, []string{v})
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, *r)
	}
	ops := map[string]selection.Operator{"In": selection.In, "NotIn": selection.NotIn, "Exists": selection.Exists,
		"DoesNotExist": selection.DoesNotExist}
	for _, e := range s.MatchExpressions {
		op, ok := ops[e.Operator]
		if !ok {
			return nil, fmt.Errorf("%q is not a valid label selector operator", e.Operator)
		}
		r, err := labels.NewRequirement(e.Key, op, append([]string(nil), e.Values...))
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, *r)
	}
	return labels.NewSelector().Add(reqs...), nil
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
