package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/scaling"
)

// ElasticScalersConfig is global.elastic_scalers: policies from ElasticScaler objects.
type ElasticScalersConfig struct {
	// Enabled watches ElasticScalers (elasticscalers.v1alpha1.elasticscaler.io) and runs each
	// valid MetricsTrigger object as the policy <namespace>.<name> beside the file's policies
	// (default false). The watch waits while the API server does not serve the resource.
	Enabled bool `yaml:"enabled"`
	// Namespaces limits the watch to these namespaces (default: every namespace, which needs a
	// ClusterRole to list and watch elasticscalers).
	Namespaces []string `yaml:"namespaces"`
}

// ReloadError is the error of a reload whose next settings would change the ElasticScaler watch
// started under c (the configuration at start-up), naming the field; nil when the watch can stay
// as it is. The watch, its namespaces and the actors and Leases built on them are set at
// start-up, so a narrower list would leave the objects of the namespaces it drops running and a
// wider one would not be watched: turning the watch on, or another set of namespaces while it is
// on, needs a restart, as a new global.interval does. Turning it off is a reload like any other:
// the object policies are dropped (and come back when a later reload turns it on again).
func (c ElasticScalersConfig) ReloadError(next ElasticScalersConfig) error {
	const why = "the ElasticScaler watch cannot change while it runs: restart to apply"
	if !next.Enabled {
		return nil
	}
	if !c.Enabled {
		return fmt.Errorf("global.elastic_scalers.enabled: turned on by a reload (false at start-up); %s", why)
	}
	a, b := slices.Clone(c.Namespaces), slices.Clone(next.Namespaces)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(slices.Compact(a), slices.Compact(b)) {
		return fmt.Errorf("global.elastic_scalers.namespaces: changed from %v at start-up to %v; %s", c.Namespaces, next.Namespaces, why)
	}
	return nil
}

// ErrStateTrigger is returned (wrapped) by TranslateElasticScaler for a StateTrigger object: it
// names a Tidal whose spec.targetRef is the scaled workload, so its policy is not known without
// reading that Tidal. TranslateStateTrigger (or TranslateObject) translates it with a Tidal
// lookup; a caller without one skips such objects.
var ErrStateTrigger = errors.New("StateTrigger objects are translated with their Tidal (TranslateStateTrigger)")

// ObjectPolicy is a policy that comes from an object in the cluster rather than from the file.
type ObjectPolicy struct {
	// Source names the object, "elasticscaler <namespace>/<name>": the prefix of its errors.
	Source string
	// Namespace and Name are the object's.
	Namespace, Name string
	// Created orders the objects: when two conflict (one acting policy per target), the older
	// one wins, as the file's earlier policy does.
	Created time.Time
	// Policy is the translated policy, before defaults (WithPolicies fills and checks them).
	Policy Policy
	// Mode is the policy's webhook mode (spec.debi.mode; act when unset, as the API documents).
	Mode string
	// Paused is spec.debi.paused: the webhook writes nothing for the policy.
	Paused bool
	// PausedReplicas is spec.debi.pausedReplicas: the policy is paused held at that count.
	PausedReplicas *int32
	// StateTrigger marks the policy of a StateTrigger object (TranslateStateTrigger): its
	// decisions come from its Tidal's status only, through the webhook's Tidal watch. It must
	// not be run by the exporter, whose recommendations would fight the Tidal's.
	StateTrigger bool
	// paths maps the fields of the policy (relative paths such as scaling.max_replicas) to the
	// object's fields that set them (spec.maxReplicas), for errors.
	paths map[string]string
}

// ObjectError is an error of an object's field: "elasticscaler ns/name: spec.maxReplicas: …".
type ObjectError struct {
	// Source names the object (ObjectPolicy.Source).
	Source string
	// Path is the object's field path (spec.trigger.metricsTrigger.algorithmConfig.upTolerance);
	// empty for the object as a whole.
	Path string
	// Err says what is wrong.
	Err error
}

func (e *ObjectError) Error() string {
	if e.Path == "" {
		return e.Source + ": " + e.Err.Error()
	}
	return e.Source + ": " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ObjectError) Unwrap() error { return e.Err }

// policyPathOf is the policy field that an object's spec.debi path sets, for error mapping.
func policyPathOf(objPath string) string {
	switch objPath {
	case "spec.debi.evt.tau":
		return "evt.tau"
	case "spec.debi.evt.q":
		return "evt.q"
	case "spec.debi.budget.overloadBudget":
		return "budget.overload_budget"
	case "spec.debi.budget.slaUtilization":
		return "scaling.budget.u_sla"
	}
	return objPath
}

// PolicyName is the name of the policy of an ElasticScaler: <namespace>.<name>. Both parts are
// DNS names without dots in a namespace, so the first dot separates them.
func PolicyName(namespace, name string) string { return namespace + "." + name }

// Paths of the ElasticScaler fields the translation reads.
const (
	esMetricsTrigger  = "spec.trigger.metricsTrigger"
	esAlgorithmConfig = esMetricsTrigger + ".algorithmConfig"
	esMetrics         = esMetricsTrigger + ".metrics"
)

// PolicyFromElasticScaler translates an ElasticScaler to the policy debi runs for it, with the
// translation's warnings. The policy is not yet defaulted nor checked against the file: that is
// (*Config).WithPolicies, the file's own validation. A StateTrigger object returns an error
// wrapping ErrStateTrigger.
func PolicyFromElasticScaler(es *esv1.ElasticScaler) (Policy, []string, error) {
	op, warns, err := TranslateElasticScaler(es)
	return op.Policy, warns, err
}

// algorithmParams are the algorithmConfig keys debi reads (case-insensitive), each setting one
// scaling parameter: the parameters of scaling.Params' table an ElasticScaler may set
// (scaling.Param.ES), keyed by their configuration key without underscores.
var algorithmParams = func() map[string]scaling.Param {
	out := map[string]scaling.Param{}
	for _, d := range (scaling.Params{}).Table() {
		if k := d.ESKey(); k != "" {
			out[k] = d
		}
	}
	return out
}()

// TranslateElasticScaler is PolicyFromElasticScaler with what the watch needs besides the policy:
// the webhook mode, the object's identity and the map from the policy's fields back to the
// object's, so that WithPolicies reports errors at the object's paths. It runs the object's
// admission checks ((*ElasticScaler).Validate) first: an object may have been stored without the
// admission webhook. Every error is an *ObjectError (several joined with errors.Join).
func TranslateElasticScaler(es *esv1.ElasticScaler) (ObjectPolicy, []string, error) {
	t := &esTranslation{op: ObjectPolicy{
		Source: "elasticscaler " + es.Namespace + "/" + es.Name, Namespace: es.Namespace, Name: es.Name,
		Created: es.CreationTimestamp.Time, paths: map[string]string{},
	}}
	if err := t.admit(es); err != nil {
		return t.op, nil, err
	}
	mt := es.Spec.Trigger.MetricsTrigger // Validate: set for a MetricsTrigger
	t.translateTarget(es)
	t.translateBounds(es.Spec.MinReplicas, es.Spec.MaxReplicas)
	t.translateAlgorithm(mt)
	t.translateMetrics(mt.Metrics)
	t.translateAlgorithmConfig(mt.AlgorithmConfig)
	t.translateMetricsPolicy(es.Annotations)
	t.translateDebi(es.Spec.Debi)
	t.translateHPAMode(es.Spec.Debi, mt)
	return t.result()
}

// esTranslation is one ElasticScaler's translation under way: the policy and its paths as they
// are built, and the errors and warnings in the order the steps find them (tests compare them).
type esTranslation struct {
	op    ObjectPolicy
	errs  []error
	warns []string
}

// bad records an error of the object's field path.
func (t *esTranslation) bad(path, format string, args ...any) {
	t.errs = append(t.errs, &ObjectError{Source: t.op.Source, Path: path, Err: fmt.Errorf(format, args...)})
}

// warn records a warning of the object's field path.
func (t *esTranslation) warn(path, format string, args ...any) {
	t.warns = append(t.warns, t.op.Source+": "+path+": "+fmt.Sprintf(format, args...))
}

// result is the translation's policy, warnings and errors (joined).
func (t *esTranslation) result() (ObjectPolicy, []string, error) {
	if len(t.errs) > 0 {
		return t.op, t.warns, errors.Join(t.errs...)
	}
	return t.op, t.warns, nil
}

// admit runs the object's admission checks ((*ElasticScaler).Validate) and refuses a
// StateTrigger object (ErrStateTrigger): the error that ends the translation, or nil.
func (t *esTranslation) admit(es *esv1.ElasticScaler) error {
	for _, fe := range es.Validate() {
		t.errs = append(t.errs, &ObjectError{Source: t.op.Source, Path: fe.Field, Err: errors.New(fe.ErrorBody())})
	}
	if len(t.errs) > 0 {
		return errors.Join(t.errs...)
	}
	if es.Spec.Trigger.Type == esv1.StateTriggerType {
		return &ObjectError{Source: t.op.Source, Path: "spec.trigger.type", Err: ErrStateTrigger}
	}
	return nil
}

// translateTarget sets the policy's name and target (spec.targetRef, namespace default the
// object's).
func (t *esTranslation) translateTarget(es *esv1.ElasticScaler) {
	p := &t.op.Policy
	p.Name = PolicyName(es.Namespace, es.Name)
	t.op.paths["name"] = "metadata.name"
	ref := es.Spec.TargetRef
	p.Target = Target{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
	if p.Target.Namespace == "" {
		p.Target.Namespace = es.Namespace
	}
	for k, v := range map[string]string{"target": "spec.targetRef", "target.api_version": "spec.targetRef.apiVersion",
		"target.kind": "spec.targetRef.kind", "target.namespace": "spec.targetRef.namespace", "target.name": "spec.targetRef.name",
		"queries.replicas": "spec.targetRef.kind", "queries.ready_replicas": "spec.targetRef.kind"} {
		t.op.paths[k] = v
	}
}

// translateBounds sets scaling.min_replicas (spec.minReplicas, default 1) and
// scaling.max_replicas (spec.maxReplicas).
func (t *esTranslation) translateBounds(minReplicas, maxReplicas *int32) {
	p := &t.op.Policy
	p.Scaling.MinReplicas = esv1.DefaultMinReplicas
	if m := minReplicas; m != nil {
		p.Scaling.MinReplicas = *m
		if *m == 0 {
			// debi's min_replicas is at least 1; say why rather than the file's message alone.
			t.bad("spec.minReplicas", "0 is not supported by debi's policies (no scale to zero): set at least 1")
		}
	}
	t.op.paths["scaling.min_replicas"] = "spec.minReplicas"
	if m := maxReplicas; m != nil {
		p.Scaling.MaxReplicas = *m
	}
	t.op.paths["scaling.max_replicas"] = "spec.maxReplicas"
}

// translateAlgorithm sets the algorithm: HPA, APA, DEBI, BUDGET are debi's hpa, apa, debi,
// budget; any other name is what the file's algorithm field takes (policy.Parse, checked by
// WithPolicies).
func (t *esTranslation) translateAlgorithm(mt *esv1.MetricsTrigger) {
	t.op.Policy.Algorithm = strings.ToLower(mt.Algorithm())
	t.op.paths["algorithm"] = esMetricsTrigger + ".scalingAlgorithm"
	t.op.paths["model"] = "spec.debi.model"
	t.op.paths["fallback_model"] = "spec.debi.fallbackModel"
}

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
	metric Metric
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
	t.op.Policy.Metrics.List = make([]Metric, len(list))
	for j, lm := range list {
		t.op.Policy.Metrics.List[j] = lm.metric
		t.op.paths[fmt.Sprintf("metrics[%d].target", j)] = lm.target
		t.op.paths[fmt.Sprintf("metrics[%d]", j)] = lm.target
		for k, v := range lm.sources {
			t.op.paths[fmt.Sprintf("metrics[%d].%s", j, k)] = v
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
		t.warn(mp+".externalServer.endpoint", "not queried: debi runs the query on global.prometheus_url (%s)", x.Endpoint)
		return listMetric{
			metric: Metric{Name: metricLabel(x.MetricsName, i), Unit: "items", Query: x.Query,
				Target: MetricTarget{Type: TargetAverageValue, AverageValue: strings.TrimSpace(x.Target)}},
			target: mp + ".externalServer.target",
		}, ""
	case esv1.ExternalMetricSourceType:
		x := m.External
		return listMetric{
			metric: Metric{Name: metricLabel(x.Metric.Name, i), Unit: "items", Target: apiTarget(x.Target),
				External: &ExternalSource{Metric: x.Metric.Name, Selector: labelSelector(x.Metric.Selector)}},
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
	lm := listMetric{metric: Metric{Name: name}}
	switch r.Target.Type {
	case esv1.UtilizationMetricType:
		u := float64(*r.Target.AverageUtilization)
		lm.metric.Target = MetricTarget{Type: TargetUtilization, AverageUtilization: &u}
		lm.target = mp + ".resource.target.averageUtilization"
	default:
		lm.metric.Target = MetricTarget{Type: TargetAverageValue, AverageValue: r.Target.AverageValue.String()}
		lm.target = mp + ".resource.target.averageValue"
	}
	return lm, ""
}

// customListMetric is the Custom metric metrics[i] of the list at mp: an object's metric with a
// describedObject, else the target's pods'.
func customListMetric(mp string, i int, x *esv1.CustomMetricSource) listMetric {
	met := Metric{Name: metricLabel(x.Metric.Name, i), Unit: "items"}
	paths := map[string]string{}
	if o := x.DescribedObject; o != nil {
		met.Object = &ObjectSource{Metric: x.Metric.Name, Selector: labelSelector(x.Metric.Selector),
			DescribedObject: ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}}
		for k, v := range map[string]string{"metric": ".metric.name", "selector": ".metric.selector",
			"described_object.kind": ".describedObject.kind", "described_object.name": ".describedObject.name",
			"described_object.api_version": ".describedObject.apiVersion"} {
			paths["object."+k] = mp + ".custom" + v
		}
	} else {
		// The target's pods, by its scale subresource's selector, as the HPA's pods metric.
		met.Pods = &PodsSource{Metric: x.Metric.Name, Selector: labelSelector(x.Metric.Selector)}
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
		t.op.paths["scaling.target"] = mp + ".resource.target.averageUtilization"
	case esv1.AverageValueMetricType:
		// Cores per pod: the request becomes that value and the target 1, so that
		// utilization = demand/(replicas·averageValue).
		p.Request = target.AverageValue.AsApproximateFloat64()
		p.Scaling.Target = 1
		t.op.paths["request"] = mp + ".resource.target.averageValue"
		t.op.paths["scaling.target"] = mp + ".resource.target.averageValue"
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
	t.op.paths["queries.demand"] = mp + ".externalServer.query"
	t.op.paths["request"] = mp + ".externalServer.target"
	t.op.paths["scaling.target"] = mp + ".externalServer.target"
	t.warn(mp+".externalServer.endpoint", "not queried: debi runs the query on global.prometheus_url (%s)", x.Endpoint)
}

// translateAlgorithmConfig sets the scaling parameters of algorithmConfig (string values, as
// the guide writes them), in the order of their keys.
func (t *esTranslation) translateAlgorithmConfig(cfg map[string]string) {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.algorithmParam(k, cfg[k])
	}
}

// algorithmParam sets the scaling parameter of algorithmConfig key k to raw: a number or a
// duration, as the parameter takes.
func (t *esTranslation) algorithmParam(k, raw string) {
	p := &t.op.Policy
	path := esAlgorithmConfig + "." + k
	ap, ok := algorithmParams[strings.ToLower(k)]
	if !ok {
		t.warn(path, "not a parameter debi reads; ignored")
		return
	}
	v := strings.TrimSpace(raw)
	switch {
	case ap.Float != nil:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			t.bad(path, "%q is not a number", raw)
			return
		}
		if ap.Key == "target" && t.op.paths["scaling.target"] != "" {
			t.warn(path, "overrides the target of %s", t.op.paths["scaling.target"])
		}
		*ap.Float(&p.Scaling) = f
	default:
		d, err := parseDuration(v)
		if err != nil {
			t.bad(path, "%q is not a duration (5m, 300s, or a number of seconds)", raw)
			return
		}
		*ap.Dur(&p.Scaling) = d
	}
	p.setScalingKey(ap.Key)
	t.op.paths["scaling."+ap.Key] = path
}

// translateMetricsPolicy sets the metrics policy of the object's annotations, the policy's and
// each listed metric's: invalid values fall back with a warning, as the guide says.
func (t *esTranslation) translateMetricsPolicy(annotations map[string]string) {
	p := &t.op.Policy
	mpol, mw := esv1.ParseMetricsPolicy(annotations)
	for _, w := range mw {
		t.warns = append(t.warns, t.op.Source+": metadata.annotations: "+w)
	}
	p.Metrics.MetricsPolicy = scaling.MetricsPolicy{
		Window: time.Duration(mpol.WindowSeconds) * time.Second, Aggregation: scaling.Aggregation(mpol.AggregationType),
		MissingData: scaling.MissingData(mpol.MissingDataPolicy), OutlierFilter: mpol.EnableOutlierFilter,
		OutlierThreshold: mpol.OutlierThreshold,
	}
	for j := range p.Metrics.List {
		p.Metrics.List[j].Stabilization = p.Metrics.MetricsPolicy // the object's one metrics policy
	}
}

// translateDebi translates debi's extension, spec.debi: the webhook mode (act when unset), the
// pause, the models, lead time and history step, EVT and budget.
func (t *esTranslation) translateDebi(d *esv1.DebiSpec) {
	t.op.Mode = ModeAct
	if d != nil {
		p := &t.op.Policy
		if d.Mode != "" {
			t.op.Mode = string(d.Mode)
		}
		t.op.Paused, t.op.PausedReplicas = d.Paused, d.PausedReplicas
		p.Model, p.FallbackModel = d.Model, d.FallbackModel
		if d.LeadTime != nil {
			p.LeadTime = d.LeadTime.Duration
			if p.LeadTime == 0 {
				t.warn("spec.debi.leadTime", "0 means the default (%v) in debi's policies", DefaultLeadTime)
			}
		}
		if d.HistoryStep != nil {
			p.HistoryStep = d.HistoryStep.Duration
		}
		t.translateEVT(d.EVT)
		t.translateBudget(d.Budget)
	}
	t.op.paths["lead_time"] = "spec.debi.leadTime"
	t.op.paths["history_step"] = "spec.debi.historyStep"
	t.op.paths["mode"] = "spec.debi.mode"
}

// translateEVT sets the policy's EVT parameters of spec.debi.evt.
func (t *esTranslation) translateEVT(e *esv1.DebiEVT) {
	if e == nil {
		return
	}
	p := &t.op.Policy
	t.number("spec.debi.evt.tau", e.Tau, &p.EVT.Tau)
	t.number("spec.debi.evt.q", e.Q, &p.EVT.Q)
	if e.MinExcesses != nil {
		p.EVT.MinExcesses = int(*e.MinExcesses)
		t.op.paths["evt.min_excesses"] = "spec.debi.evt.minExcesses"
	}
	if e.Method != "" {
		p.EVT.Method = e.Method
		t.op.paths["evt.method"] = "spec.debi.evt.method"
	}
}

// translateBudget sets the policy's overload budget and budget parameters of spec.debi.budget.
func (t *esTranslation) translateBudget(b *esv1.DebiBudget) {
	if b == nil {
		return
	}
	p := &t.op.Policy
	t.number("spec.debi.budget.overloadBudget", b.OverloadBudget, &p.Budget.Budget)
	t.number("spec.debi.budget.slaUtilization", b.SLAUtilization, &p.Scaling.Budget.SLAUtilization)
	if b.Hold != nil {
		p.Scaling.Budget.Hold = b.Hold.Duration
		p.setScalingKey("budget.hold")
		t.op.paths["scaling.budget.hold"] = "spec.debi.budget.hold"
	}
}

// number reads the number v of the object's field path into dst, unless v is empty.
func (t *esTranslation) number(path, v string, dst *float64) {
	if v == "" {
		return
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.bad(path, "%q is not a number", v)
		return
	}
	*dst = x
	t.op.paths[policyPathOf(path)] = path
}

// translateHPAMode runs a policy of scalingAlgorithm HPA in shadow mode: the Kubernetes HPA that
// package hpaowner creates for the object scales the target, so debi must not write it too.
// debi's HPA model decides and publishes beside the real HPA (a live comparison) and writes
// nothing.
func (t *esTranslation) translateHPAMode(d *esv1.DebiSpec, mt *esv1.MetricsTrigger) {
	if !mt.IsHPA() {
		return
	}
	if d != nil && d.Mode != "" && t.op.Mode != ModeShadow {
		t.warn("spec.debi.mode", "%s ignored: with scalingAlgorithm HPA the Kubernetes HPA debi creates for this object scales the target; debi runs the policy in shadow mode", t.op.Mode)
	}
	t.op.Mode = ModeShadow
}

// apiTarget is the target of an External or Custom metric: Value or AverageValue, as
// autoscaling/v2 (Validate: the field of the type is set and positive).
func apiTarget(t esv1.MetricTarget) MetricTarget {
	if t.Type == esv1.ValueMetricType && t.Value != nil {
		return MetricTarget{Type: TargetValue, Value: t.Value.String()}
	}
	if t.AverageValue != nil {
		return MetricTarget{Type: TargetAverageValue, AverageValue: t.AverageValue.String()}
	}
	return MetricTarget{Type: string(t.Type)}
}

// targetField is the object's field of target t's value.
func targetField(t esv1.MetricTarget) string {
	if t.Type == esv1.ValueMetricType {
		return "value"
	}
	return "averageValue"
}

// labelSelector is a Kubernetes label selector in the file's form.
func labelSelector(s *metav1.LabelSelector) *LabelSelector {
	if s == nil || len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return nil
	}
	out := &LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, SelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
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

// parseDuration reads 5m, 1h30m or a bare number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e9 {
			return 0, errors.New("out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

var policyPathRe = regexp.MustCompile(`^policies\[(\d+)\](?:\.(.*))?$`)
var policyIndexRe = regexp.MustCompile(`\bpolicies\[(\d+)\]`)
var webhookPolicyPathRe = regexp.MustCompile(`^webhook\.policies\[(\d+)\](?:\.(.*))?$`)

// WithPolicies returns the configuration with the file's policies and every valid extra one,
// validated together as the file alone is (config.Load's defaults and checks, the checks across
// policies included: unique names, one acting policy per target), and one *ObjectError per error
// of a rejected extra, at the object's field path. The file's policies always win a conflict;
// among the extras, the older object (then the smaller source) wins. Each extra's mode becomes
// its webhook.policies entry. c is not modified; the extras' warnings are the result's
// Warnings() after the file's.
func (c *Config) WithPolicies(extra []ObjectPolicy) (*Config, []error) {
	ext := slices.Clone(extra)
	sort.SliceStable(ext, func(i, j int) bool {
		if !ext[i].Created.Equal(ext[j].Created) {
			return ext[i].Created.Before(ext[j].Created)
		}
		return ext[i].Source < ext[j].Source
	})
	var rejected []error
	// Each pass validates the file and the extras left; the errors at an extra's fields reject
	// it. An error the pass cannot attribute (a section-wide check an extra trips) falls back to
	// adding the extras one at a time.
	for {
		n, errs, err := c.validateWith(ext)
		if err != nil { // the file itself no longer validates: cannot happen for Load's output
			return c, append(rejected, err)
		}
		if len(errs) == 0 {
			return n, rejected
		}
		byExtra, other := attribute(errs, n, len(n.Policies)-len(ext), ext)
		if len(other) > 0 {
			return c.addOneByOne(ext, rejected)
		}
		var keep []ObjectPolicy
		for i, op := range ext {
			if es := byExtra[i]; len(es) > 0 {
				rejected = append(rejected, es...)
				continue
			}
			keep = append(keep, op)
		}
		ext = keep
	}
}

// addOneByOne adds the extras in order, keeping each that validates with those kept before it.
func (c *Config) addOneByOne(ext []ObjectPolicy, rejected []error) (*Config, []error) {
	var kept []ObjectPolicy
	for _, op := range ext {
		try := append(slices.Clone(kept), op)
		n, errs, err := c.validateWith(try)
		if err != nil {
			return c, append(rejected, err)
		}
		if len(errs) == 0 {
			kept = append(kept, op)
			continue
		}
		byExtra, other := attribute(errs, n, len(n.Policies)-len(try), try)
		for _, es := range byExtra {
			rejected = append(rejected, es...) // kept ones validated before: these are op's
		}
		for _, e := range other {
			rejected = append(rejected, &ObjectError{Source: op.Source, Path: "spec", Err: e})
		}
	}
	n, errs, err := c.validateWith(kept)
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	if err != nil {
		return c, append(rejected, err)
	}
	return n, rejected
}

// validateWith decodes the file's document again, appends the extras and their webhook modes
// and runs the file's validation, returning every error. err is set when the file's document
// does not decode.
func (c *Config) validateWith(ext []ObjectPolicy) (*Config, []error, error) {
	var n *Config
	var given []givenKeys
	if c.src != nil {
		var err error
		if n, given, err = decodeDocument(c.src); err != nil {
			return nil, nil, err
		}
		// LoadFile set the directory of the file's secrets on the loaded client configuration.
		n.Global.HTTPConfig = c.Global.HTTPConfig
	} else {
		// A configuration built by hand: its policies are validated again as they are.
		cp := *c
		cp.Policies = slices.Clone(c.Policies)
		cp.Webhook.Policies = slices.Clone(c.Webhook.Policies)
		cp.Webhook.Tidal.Resources = slices.Clone(c.Webhook.Tidal.Resources)
		cp.warnings = slices.Clone(c.warnings)
		n = &cp
	}
	for _, op := range ext {
		n.Policies = append(n.Policies, op.Policy)
		if op.Mode != "" {
			n.Webhook.Policies = append(n.Webhook.Policies, WebhookPolicy{Name: op.Policy.Name, Mode: op.Mode, Paused: op.Paused, PausedReplicas: op.PausedReplicas})
		}
	}
	var errs errList
	n.validate(given, &errs)
	n.src = c.src
	return n, errs, nil
}

// decodeDocument is Load's decoding: the configuration before defaults, and the keys given.
func decodeDocument(b []byte) (*Config, []givenKeys, error) {
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("empty configuration")
		}
		return nil, nil, withYAMLPaths(b, err)
	}
	var keys struct {
		Policies []givenKeys `yaml:"policies"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&keys); err != nil {
		return nil, nil, withYAMLPaths(b, err)
	}
	return c, keys.Policies, nil
}

// attribute sorts a validation's errors into those of each extra (at the object's paths) and
// the others. The extras are policies[nFile…] and their webhook.policies entries.
func attribute(errs []error, n *Config, nFile int, ext []ObjectPolicy) (map[int][]error, []error) {
	by := map[int][]error{}
	var other []error
	idx := map[string]int{}
	for i, op := range ext {
		idx[op.Policy.Name] = i
	}
	for _, err := range errs {
		path, msg := errorPath(err)
		i, rel := -1, ""
		if m := policyPathRe.FindStringSubmatch(path); m != nil {
			k, _ := strconv.Atoi(m[1])
			if k >= nFile && k-nFile < len(ext) {
				i, rel = k-nFile, m[2]
			}
		} else if m := webhookPolicyPathRe.FindStringSubmatch(path); m != nil {
			k, _ := strconv.Atoi(m[1])
			if k < len(n.Webhook.Policies) {
				if j, ok := idx[n.Webhook.Policies[k].Name]; ok {
					i, rel = j, m[2]
				}
			}
		}
		if i < 0 {
			other = append(other, err)
			continue
		}
		op := ext[i]
		if n != nil { // "already used by policies[3]": name the policy, not its index
			msg = policyIndexRe.ReplaceAllStringFunc(msg, func(m string) string {
				k, _ := strconv.Atoi(policyIndexRe.FindStringSubmatch(m)[1])
				if k < len(n.Policies) {
					return fmt.Sprintf("policy %q", n.Policies[k].Name)
				}
				return m
			})
		}
		if rel == "name" && strings.HasPrefix(path, "webhook.") {
			rel = "mode" // an entry is the extra's own: only its mode can be at fault
		}
		by[i] = append(by[i], &ObjectError{Source: op.Source, Path: op.objectPath(rel), Err: errors.New(objectMessage(op, rel, msg))})
	}
	return by, other
}

// objectPath is the object's field that sets the policy field rel, the longest mapped prefix;
// "spec" when none does.
func (op ObjectPolicy) objectPath(rel string) string {
	for r := rel; r != ""; {
		if p, ok := op.paths[r]; ok {
			return p
		}
		i := strings.LastIndexByte(r, '.')
		if i < 0 {
			break
		}
		r = r[:i]
	}
	return "spec"
}

// objectMessage names the policy field as well when the object's path does not say it.
func objectMessage(op ObjectPolicy, rel, msg string) string {
	if _, ok := op.paths[rel]; ok || rel == "" {
		return msg
	}
	return fmt.Sprintf("%s (debi policy field %s)", msg, rel)
}

// errorPath splits a validation error into its field path and message.
func errorPath(err error) (string, string) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Path, fe.Err.Error()
	}
	var we *fieldError
	if errors.As(err, &we) {
		return we.path, we.msg
	}
	return "", err.Error()
}

// StateTrigger objects.
//
// A StateTrigger ElasticScaler names a Tidal (spec.targetRef); the Tidal's spec.targetRef is the
// workload and its status.desiredReplicas (written by `debi tidal-controller` from its cron
// rules) the size. The object becomes a policy <namespace>.<name> on the Tidal's target that
// only the webhook runs: the webhook's Tidal watch binds the Tidal to it by the Tidal's
// elasticscaler.io labels and applies the Tidal's count through the safe actuator (mode, bounds,
// pause, conflict retries). No metric drives it: the exporter never runs it (scalersource hands
// it out only when asked, Options.StateTriggers, which the webhook sets), so no
// debi_recommended_replicas series, no DebiScaleRecommended alert, and an alert sent by hand
// finds no inputs and holds.

// TidalLookup returns the Tidal namespace/name (from the watch's cache); false when there is none.
type TidalLookup func(namespace, name string) (*tidalv1.Tidal, bool)

// The labels that bind a Tidal to its ElasticScaler (the guide's); the namespace label defaults
// to the Tidal's own namespace.
const (
	TidalLabelScalerName      = "elasticscaler.io/name"
	TidalLabelScalerNamespace = "elasticscaler.io/namespace"
)

// StateTriggerAlgorithm is the algorithm of a StateTrigger policy. It is never run (no metric
// drives the policy); the file's checks need one, and hpa needs no model.
const StateTriggerAlgorithm = "hpa"

// TranslateObject translates any ElasticScaler: a MetricsTrigger object by
// TranslateElasticScaler, a StateTrigger object by TranslateStateTrigger with lookup.
func TranslateObject(es *esv1.ElasticScaler, lookup TidalLookup) (ObjectPolicy, []string, error) {
	if es.Spec.Trigger.Type == esv1.StateTriggerType {
		return TranslateStateTrigger(es, lookup)
	}
	return TranslateElasticScaler(es)
}

// TranslateStateTrigger translates a StateTrigger ElasticScaler with its Tidal (found by lookup
// at spec.targetRef, whose namespace defaults to the object's) to the policy <namespace>.<name>:
//
//   - target: the Tidal's spec.targetRef (namespace default the Tidal's; it must be the Tidal's,
//     as the webhook lets a Tidal drive only a target of its own namespace);
//   - scaling.min_replicas: spec.minReplicas, default 1 (0 rejected: no scale to zero);
//     scaling.max_replicas: spec.maxReplicas, default 2147483647 — without bounds the Tidal's
//     count is applied as it is;
//   - the webhook mode: spec.debi.mode, default act;
//   - algorithm: StateTriggerAlgorithm with the file's default queries, never run
//     (ObjectPolicy.StateTrigger).
//
// The Tidal must carry the labels elasticscaler.io/name=<name> (and elasticscaler.io/namespace
// =<namespace>, or be in the object's namespace without it): the webhook's watch sees only
// labelled Tidals and binds them by these labels. A missing Tidal, a target that is not a
// Tidal, a Tidal bound to another object or without a target are errors of the object
// (*ObjectError, several joined). The Tidal's rules are the Tidal controller's to check.
func TranslateStateTrigger(es *esv1.ElasticScaler, lookup TidalLookup) (ObjectPolicy, []string, error) {
	op := ObjectPolicy{
		Source: "elasticscaler " + es.Namespace + "/" + es.Name, Namespace: es.Namespace, Name: es.Name,
		Created: es.CreationTimestamp.Time, StateTrigger: true, paths: map[string]string{},
	}
	var errs []error
	var warns []string
	bad := func(path, format string, args ...any) {
		errs = append(errs, &ObjectError{Source: op.Source, Path: path, Err: fmt.Errorf(format, args...)})
	}
	warn := func(path, format string, args ...any) {
		warns = append(warns, op.Source+": "+path+": "+fmt.Sprintf(format, args...))
	}
	for _, fe := range es.Validate() {
		bad(fe.Field, "%s", fe.ErrorBody())
	}
	if len(errs) > 0 {
		return op, nil, errors.Join(errs...)
	}
	if es.Spec.Trigger.Type != esv1.StateTriggerType {
		return op, nil, &ObjectError{Source: op.Source, Path: "spec.trigger.type", Err: fmt.Errorf("%s is not a StateTrigger", es.Spec.Trigger.Type)}
	}
	ref := es.Spec.TargetRef
	gv, _ := schema.ParseGroupVersion(ref.APIVersion) // Validate: a group/version
	if gv != tidalv1.SchemeGroupVersion || ref.Kind != "Tidal" {
		return op, nil, &ObjectError{Source: op.Source, Path: "spec.targetRef", Err: fmt.Errorf(
			"a StateTrigger's target must be a Tidal (apiVersion %s, kind Tidal), got %s %s", tidalv1.SchemeGroupVersion, ref.APIVersion, ref.Kind)}
	}
	tns := ref.Namespace
	if tns == "" {
		tns = es.Namespace
	}
	var td *tidalv1.Tidal
	ok := false
	if lookup != nil {
		td, ok = lookup(tns, ref.Name)
	}
	if !ok || td == nil {
		return op, nil, &ObjectError{Source: op.Source, Path: "spec.targetRef.name", Err: fmt.Errorf("tidal %s/%s not found", tns, ref.Name)}
	}
	tidal := "tidal " + td.Namespace + "/" + td.Name
	lname, lns := td.Labels[TidalLabelScalerName], td.Labels[TidalLabelScalerNamespace]
	if lns == "" {
		lns = td.Namespace
	}
	if lname != es.Name || lns != es.Namespace {
		bad("spec.targetRef.name", "%s is not bound to this ElasticScaler: its labels %s=%q, %s=%q must name %s/%s (the webhook binds a Tidal by them)",
			tidal, TidalLabelScalerName, td.Labels[TidalLabelScalerName], TidalLabelScalerNamespace, td.Labels[TidalLabelScalerNamespace], es.Namespace, es.Name)
	}
	tr := td.Spec.TargetRef
	target := Target{APIVersion: tr.APIVersion, Kind: tr.Kind, Namespace: tr.Namespace, Name: tr.Name}
	if target.Namespace == "" {
		target.Namespace = td.Namespace
	}
	switch {
	case tr.APIVersion == "" || tr.Kind == "" || tr.Name == "":
		bad("spec.targetRef.name", "%s: spec.targetRef needs apiVersion, kind and name, got %s %s %q", tidal, tr.APIVersion, tr.Kind, tr.Name)
	case target.Namespace != td.Namespace:
		bad("spec.targetRef.name", "%s: its target %s %s/%s is in another namespace: a Tidal may only drive a target of its own namespace",
			tidal, tr.Kind, target.Namespace, tr.Name)
	}

	p := &op.Policy
	p.Name = PolicyName(es.Namespace, es.Name)
	p.Target = target
	p.Algorithm = StateTriggerAlgorithm
	op.paths["name"] = "metadata.name"
	// The target is the Tidal's: an error there is at the object's reference to the Tidal.
	for _, k := range []string{"target", "target.api_version", "target.kind", "target.namespace", "target.name",
		"queries.replicas", "queries.ready_replicas"} {
		op.paths[k] = "spec.targetRef"
	}
	p.Scaling.MinReplicas = esv1.DefaultMinReplicas
	if m := es.Spec.MinReplicas; m != nil {
		p.Scaling.MinReplicas = *m
		if *m == 0 {
			bad("spec.minReplicas", "0 is not supported by debi's policies (no scale to zero): set at least 1")
		}
	}
	op.paths["scaling.min_replicas"] = "spec.minReplicas"
	p.Scaling.MaxReplicas = math.MaxInt32
	if m := es.Spec.MaxReplicas; m != nil {
		p.Scaling.MaxReplicas = *m
	}
	op.paths["scaling.max_replicas"] = "spec.maxReplicas"
	op.Mode = ModeAct
	if d := es.Spec.Debi; d != nil {
		if d.Mode != "" {
			op.Mode = string(d.Mode)
		}
		op.Paused, op.PausedReplicas = d.Paused, d.PausedReplicas
		if d.Model != "" || d.FallbackModel != "" || d.LeadTime != nil || d.HistoryStep != nil {
			warn("spec.debi", "model, fallbackModel, leadTime and historyStep are not used by a StateTrigger (its Tidal gives the replicas)")
		}
	}
	op.paths["mode"] = "spec.debi.mode"
	if len(errs) > 0 {
		return op, warns, errors.Join(errs...)
	}
	return op, warns, nil
}

// setScalingKey records that the translation set scaling.<key> (or scaling.budget.<key> for
// "budget.<key>"): it keeps its value, zero included, as a key of the file does.
func (p *Policy) setScalingKey(key string) {
	if p.given.Scaling == nil {
		p.given.Scaling = map[string]any{}
	}
	if sub, ok := strings.CutPrefix(key, "budget."); ok {
		b, _ := p.given.Scaling["budget"].(map[string]any)
		if b == nil {
			b = map[string]any{}
			p.given.Scaling["budget"] = b
		}
		b[sub] = true
		return
	}
	p.given.Scaling[key] = true
}
