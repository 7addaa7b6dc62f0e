package elasticscaler

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
)

// translateMetrics translates the metrics: one usable metric is the single-metric form, as it
// has always been translated; several are the metrics list, the largest count over them
// deciding. The metrics debi cannot use are warned of, or an error when none is left.
func (t *esTranslation) translateMetrics(metrics []esv1.MetricSpec) {
	if usesMetricsList(metrics) {
		list, unusable := t.metricsList(metrics)
		if len(list) == 0 {
			t.bad(esMetrics, "no metric debi can use: %s", strings.Join(unusable, "; "))
			return
		}
		t.setMetricsList(list)
		t.ignoredMetrics(unusable)
		return
	}
	used, unusable := t.singleMetric(metrics)
	if used < 0 {
		t.bad(esMetrics, "no metric debi can use: %s", strings.Join(unusable, "; "))
		return
	}
	t.ignoredMetrics(unusable)
}

// usesMetricsList says whether the metrics translate to the metrics list: more than one usable
// metric, or one that only the list has (memory, or one read from the metrics APIs).
func usesMetricsList(metrics []esv1.MetricSpec) bool {
	usable, fromAPI := 0, false
	for _, m := range metrics {
		switch m.Type {
		case esv1.ResourceMetricSourceType:
			if r := strings.ToLower(m.Resource.MetricsName); r == "cpu" || r == "memory" {
				usable++
				fromAPI = fromAPI || r == "memory" // the list form has the memory metric
			}
		case esv1.ExternalServerMetricSourceType:
			usable++
		case esv1.ExternalMetricSourceType, esv1.CustomMetricSourceType:
			// Read from the metrics APIs: only the metrics list has such a metric.
			usable++
			fromAPI = true
		}
	}
	return usable > 1 || fromAPI
}

// ignoredMetrics warns of the metrics debi left out, each "metrics[i]: why".
func (t *esTranslation) ignoredMetrics(unusable []string) {
	for _, u := range unusable {
		t.warn(esMetrics, "ignored: %s", u)
	}
}

// listMetric is a metric of the metrics list with the object's fields it comes from.
type listMetric struct {
	metric config.Metric
	// target is the object's field of the metric's target.
	target string
	// sources maps the source's fields (external.metric, pods.selector, …) to the object's.
	sources map[string]string
}

// metricsList translates the metrics to the metrics list, in their order, a name taken twice
// made unique by the metric's index, with why each metric left out is ("metrics[i]: why").
func (t *esTranslation) metricsList(metrics []esv1.MetricSpec) ([]listMetric, []string) {
	var list []listMetric
	var unusable []string
	for i, m := range metrics {
		lm, why := t.listMetricOf(i, m)
		if why != "" {
			unusable = append(unusable, fmt.Sprintf("metrics[%d]: %s", i, why))
			continue
		}
		for _, prev := range list {
			if prev.metric.Name == lm.metric.Name {
				lm.metric.Name = fmt.Sprintf("%s_%d", lm.metric.Name, i)
			}
		}
		list = append(list, lm)
	}
	return list, unusable
}

// setMetricsList sets the policy's metrics list and the paths of its fields.
func (t *esTranslation) setMetricsList(list []listMetric) {
	t.op.Policy.Metrics.List = make([]config.Metric, len(list))
	for j, lm := range list {
		t.op.Policy.Metrics.List[j] = lm.metric
		t.op.Paths[fmt.Sprintf("metrics[%d].target", j)] = lm.target
		t.op.Paths[fmt.Sprintf("metrics[%d]", j)] = lm.target
		for k, v := range lm.sources {
			t.op.Paths[fmt.Sprintf("metrics[%d].%s", j, k)] = v
		}
	}
}

// listMetricOf translates metrics[i] to a metric of the list, or says why debi cannot use it.
func (t *esTranslation) listMetricOf(i int, m esv1.MetricSpec) (listMetric, string) {
	mp := fmt.Sprintf("%s[%d]", esMetrics, i)
	switch m.Type {
	case esv1.ResourceMetricSourceType:
		return resourceListMetric(mp, m.Resource)
	case esv1.ExternalServerMetricSourceType:
		x := m.ExternalServer
		return listMetric{
			metric: config.Metric{Name: metricLabel(x.MetricsName, i), Unit: "items", Query: x.Query, Endpoint: externalEndpoint(x),
				Target: config.MetricTarget{Type: config.TargetAverageValue, AverageValue: strings.TrimSpace(x.Target)}},
			target:  mp + ".externalServer.target",
			sources: map[string]string{"query": mp + ".externalServer.query", "endpoint": mp + ".externalServer.endpoint", "endpoint.url": mp + ".externalServer.endpoint"},
		}, ""
	case esv1.ExternalMetricSourceType:
		x := m.External
		return listMetric{
			metric: config.Metric{Name: metricLabel(x.Metric.Name, i), Unit: "items", Target: apiTarget(x.Target),
				External: &config.ExternalSource{Metric: x.Metric.Name, Selector: labelSelector(x.Metric.Selector)}},
			target:  mp + ".external.target." + targetField(x.Target),
			sources: map[string]string{"external.metric": mp + ".external.metric.name", "external.selector": mp + ".external.metric.selector"},
		}, ""
	case esv1.CustomMetricSourceType:
		return customListMetric(mp, i, m.Custom), ""
	}
	return listMetric{}, fmt.Sprintf("type %s is not supported by debi", m.Type)
}

// resourceListMetric is a Resource metric of the list at mp (cpu or memory), or why not.
func resourceListMetric(mp string, r *esv1.ResourceMetricSource) (listMetric, string) {
	name := strings.ToLower(r.MetricsName)
	if name != "cpu" && name != "memory" {
		return listMetric{}, fmt.Sprintf("resource %q: debi reads the resources cpu and memory (from Prometheus); use an ExternalServer metric with a PromQL query for others", r.MetricsName)
	}
	// memory, as cpu, takes the defaults of its name: the recording rules of
	// rules/debi.rules.yaml over the cAdvisor and kube-state-metrics series
	// metrics-server serves (the working set, the pods' requests).
	lm := listMetric{metric: config.Metric{Name: name}}
	switch r.Target.Type {
	case esv1.UtilizationMetricType:
		u := float64(*r.Target.AverageUtilization)
		lm.metric.Target = config.MetricTarget{Type: config.TargetUtilization, AverageUtilization: &u}
		lm.target = mp + ".resource.target.averageUtilization"
	default:
		lm.metric.Target = config.MetricTarget{Type: config.TargetAverageValue, AverageValue: r.Target.AverageValue.String()}
		lm.target = mp + ".resource.target.averageValue"
	}
	return lm, ""
}

// customListMetric is the Custom metric metrics[i] of the list at mp: an object's metric with a
// describedObject, else the target's pods'.
func customListMetric(mp string, i int, x *esv1.CustomMetricSource) listMetric {
	met := config.Metric{Name: metricLabel(x.Metric.Name, i), Unit: "items"}
	paths := map[string]string{}
	if o := x.DescribedObject; o != nil {
		met.Object = &config.ObjectSource{Metric: x.Metric.Name, Selector: labelSelector(x.Metric.Selector),
			DescribedObject: config.ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}}
		for k, v := range map[string]string{"metric": ".metric.name", "selector": ".metric.selector",
			"described_object.kind": ".describedObject.kind", "described_object.name": ".describedObject.name",
			"described_object.api_version": ".describedObject.apiVersion"} {
			paths["object."+k] = mp + ".custom" + v
		}
	} else {
		// The target's pods, by its scale subresource's selector, as the HPA's pods metric.
		met.Pods = &config.PodsSource{Metric: x.Metric.Name, Selector: labelSelector(x.Metric.Selector)}
		paths["pods.metric"], paths["pods.selector"] = mp+".custom.metric.name", mp+".custom.metric.selector"
	}
	met.Target = apiTarget(x.Target)
	return listMetric{metric: met, target: mp + ".custom.target." + targetField(x.Target), sources: paths}
}

// singleMetric translates the first usable metric to the single-metric form, warning of each
// later usable one, and returns its index (-1: none) with why each metric left out is
// ("metrics[i]: why").
func (t *esTranslation) singleMetric(metrics []esv1.MetricSpec) (int, []string) {
	used := -1
	var unusable []string
	for i, m := range metrics {
		mp := fmt.Sprintf("%s[%d]", esMetrics, i)
		why := t.singleMetricOf(mp, m, used >= 0)
		switch {
		case why != "":
			unusable = append(unusable, fmt.Sprintf("metrics[%d]: %s", i, why))
		case used < 0:
			used = i
		default:
			t.warn(mp, "ignored: debi scales on one metric, metrics[%d]", used)
		}
	}
	return used, unusable
}

// singleMetricOf translates the metric at mp to the policy's demand, request and target, unless
// taken (an earlier metric is used), or says why debi cannot use it.
func (t *esTranslation) singleMetricOf(mp string, m esv1.MetricSpec, taken bool) string {
	switch m.Type {
	case esv1.ResourceMetricSourceType:
		r := m.Resource
		if !strings.EqualFold(r.MetricsName, "cpu") {
			return fmt.Sprintf("resource %q: debi's resource demand is CPU (the recording rules of rules/); use an ExternalServer metric with a PromQL query for others", r.MetricsName)
		}
		if !taken {
			t.cpuTarget(mp, r.Target)
		}
	case esv1.ExternalServerMetricSourceType:
		if !taken {
			t.externalServerDemand(mp, m.ExternalServer)
		}
	default:
		return fmt.Sprintf("type %s is not supported by debi yet (it reads PromQL: use ExternalServer, or Resource cpu)", m.Type)
	}
	return ""
}

// cpuTarget sets the policy's target (and request) from the target of the Resource cpu metric
// at mp.
func (t *esTranslation) cpuTarget(mp string, target esv1.MetricTarget) {
	p := &t.op.Policy
	switch target.Type {
	case esv1.UtilizationMetricType:
		// The recording rules' CPU demand and request: utilization = demand/(replicas·request).
		p.Scaling.Target = float64(*target.AverageUtilization) / 100
		t.op.Paths["scaling.target"] = mp + ".resource.target.averageUtilization"
	case esv1.AverageValueMetricType:
		// Cores per pod: the request becomes that value and the target 1, so that
		// utilization = demand/(replicas·averageValue).
		p.Request = target.AverageValue.AsApproximateFloat64()
		p.Scaling.Target = 1
		t.op.Paths["request"] = mp + ".resource.target.averageValue"
		t.op.Paths["scaling.target"] = mp + ".resource.target.averageValue"
	}
}

// externalServerDemand sets the policy's demand query, request and target from the
// ExternalServer metric at mp.
func (t *esTranslation) externalServerDemand(mp string, x *esv1.ExternalServerMetricSource) {
	p := &t.op.Policy
	v, _ := strconv.ParseFloat(strings.TrimSpace(x.Target), 64) // Validate: a positive number
	// The query's value in units of the per-pod target: request = target and target
	// utilization 1, so utilization = demand/(replicas·target) and the pods are sized to
	// carry target each (HPA's AverageValue).
	p.Queries.Demand = x.Query
	p.Request = v
	p.Scaling.Target = 1
	t.op.Paths["queries.demand"] = mp + ".externalServer.query"
	t.op.Paths["request"] = mp + ".externalServer.target"
	t.op.Paths["scaling.target"] = mp + ".externalServer.target"
	p.Queries.Endpoint = externalEndpoint(x)
	t.op.Paths["queries.endpoint"] = mp + ".externalServer.endpoint"
	t.op.Paths["queries.endpoint.url"] = mp + ".externalServer.endpoint"
}

// apiPaths are the paths of Prometheus's query API that an ExternalServer endpoint may name
// (the guide's http://prometheus.monitoring.svc:9090/api/v1/query): the client adds them.
var apiPaths = []string{"/api/v1/query_range", "/api/v1/query", "/api/v1/", "/api/v1"}

// externalEndpoint is the endpoint the ExternalServer metric's query goes to: its endpoint's
// URL without the query API's path, in its protocol (Validate: http or https, the URL's scheme
// when both are set). It has the default HTTP client: an object's endpoint gets none of
// global.http_config's credentials, and global.prometheus_url itself is the global endpoint
// (config.Load).
func externalEndpoint(x *esv1.ExternalServerMetricSource) *config.Endpoint {
	u, err := url.Parse(strings.TrimSpace(x.Endpoint))
	if err != nil {
		return &config.Endpoint{URL: x.Endpoint} // reported by the file's validation at its path
	}
	for _, p := range apiPaths {
		if s, ok := strings.CutSuffix(u.Path, p); ok {
			u.Path = s
			break
		}
	}
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	if pr := strings.ToLower(x.Protocol); pr == "http" || pr == "https" {
		u.Scheme = pr
	}
	return &config.Endpoint{URL: u.String()}
}

// apiTarget is the target of an External or Custom metric: Value or AverageValue, as
// autoscaling/v2 (Validate: the field of the type is set and positive).
func apiTarget(t esv1.MetricTarget) config.MetricTarget {
	if t.Type == esv1.ValueMetricType && t.Value != nil {
		return config.MetricTarget{Type: config.TargetValue, Value: t.Value.String()}
	}
	if t.AverageValue != nil {
		return config.MetricTarget{Type: config.TargetAverageValue, AverageValue: t.AverageValue.String()}
	}
	return config.MetricTarget{Type: string(t.Type)}
}

// targetField is the object's field of target t's value.
func targetField(t esv1.MetricTarget) string {
	if t.Type == esv1.ValueMetricType {
		return "value"
	}
	return "averageValue"
}

// labelSelector is a Kubernetes label selector in the file's form.
func labelSelector(s *metav1.LabelSelector) *config.LabelSelector {
	if s == nil || len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return nil
	}
	out := &config.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, config.SelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	return out
}

// metricLabel is an ExternalServer metric's name as a metric label value (lower case, '_' for
// anything else), or metric<i> when nothing is left.
func metricLabel(name string, i int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9' && b.Len() > 0:
			b.WriteRune(r)
		case b.Len() > 0:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("metric%d", i)
	}
	return strings.TrimRight(b.String(), "_")
}

// objectEndpoints are the endpoints of the object's ExternalServer metrics, by the metric's name
// in its policy ("" for the only metric of the single-metric form), as the MetricsPipeline
// condition names them.
func objectEndpoints(es *esv1.ElasticScaler) map[string]string {
	mt := es.Spec.Trigger.MetricsTrigger
	if mt == nil {
		return nil
	}
	out := map[string]string{}
	for i, m := range mt.Metrics {
		if m.ExternalServer == nil {
			continue
		}
		name := metricLabel(m.ExternalServer.MetricsName, i)
		if len(mt.Metrics) == 1 {
			name = ""
		}
		out[name] = externalEndpoint(m.ExternalServer).String()
	}
	return out
}
