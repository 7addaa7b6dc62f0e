package elasticscaler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/scaling"
)

// ErrStateTrigger is returned (wrapped) by TranslateElasticScaler for a StateTrigger object: it
// names a Tidal whose spec.targetRef is the scaled workload, so its policy is not known without
// reading that Tidal. TranslateStateTrigger (or TranslateObject) translates it with a Tidal
// lookup; a caller without one skips such objects.
var ErrStateTrigger = errors.New("StateTrigger objects are translated with their Tidal (TranslateStateTrigger)")

// policyPathOf is the policy field that an object's spec.debi path sets, for error mapping.
func policyPathOf(objPath string) string {
	if p, ok := specPaths[objPath]; ok {
		return p
	}
	return objPath
}

// specPaths maps each typed field of spec.debi to the policy field it sets, as the parameter
// tables declare them (schema.Param.Spec).
var specPaths = func() map[string]string {
	m := map[string]string{}
	add := func(section, key, spec string) {
		if spec != "" {
			m["spec.debi."+spec] = section + key
		}
	}
	for _, d := range (config.Policy{}).Table() {
		add("", d.Key, d.Spec)
	}
	for _, d := range (scaling.Params{}).Table() {
		add("scaling.", d.Key, d.Spec)
	}
	for _, d := range (forecast.CalibratorConfig{}).Table() {
		add("budget.", d.Key, d.Spec)
	}
	for _, d := range (forecast.POTConfig{}).Table() {
		add("evt.", d.Key, d.Spec)
	}
	return m
}()

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
func PolicyFromElasticScaler(es *esv1.ElasticScaler) (config.Policy, []string, error) {
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
func TranslateElasticScaler(es *esv1.ElasticScaler) (config.ObjectPolicy, []string, error) {
	t := &esTranslation{op: config.ObjectPolicy{
		Source: "elasticscaler " + es.Namespace + "/" + es.Name, Namespace: es.Namespace, Name: es.Name,
		Created: es.CreationTimestamp.Time, Paths: map[string]string{},
	}}
	if err := t.admit(es); err != nil {
		return t.op, nil, err
	}
	mt := es.Spec.Trigger.MetricsTrigger // Validate: set for a MetricsTrigger
	t.translateTarget(es)
	t.translateBounds(es.Spec.MinReplicas, es.Spec.MaxReplicas)
	t.translateAlgorithm(mt)
	t.translateMetrics(mt.Metrics)
	t.zeroNeedsWake(mt)
	t.translateAlgorithmConfig(mt.AlgorithmConfig)
	t.translateMetricsPolicy(es.Annotations)
	t.translateDebi(es.Spec.Debi)
	t.translateHPAMode(es.Spec.Debi, mt)
	return t.result()
}

// esTranslation is one ElasticScaler's translation under way: the policy and its paths as they
// are built, and the errors and warnings in the order the steps find them (tests compare them).
type esTranslation struct {
	op    config.ObjectPolicy
	errs  []error
	warns []string
}

// bad records an error of the object's field path.
func (t *esTranslation) bad(path, format string, args ...any) {
	t.errs = append(t.errs, &config.ObjectError{Source: t.op.Source, Path: path, Err: fmt.Errorf(format, args...)})
}

// warn records a warning of the object's field path.
func (t *esTranslation) warn(path, format string, args ...any) {
	t.warns = append(t.warns, t.op.Source+": "+path+": "+fmt.Sprintf(format, args...))
}

// result is the translation's policy, warnings and errors (joined).
func (t *esTranslation) result() (config.ObjectPolicy, []string, error) {
	if len(t.errs) > 0 {
		return t.op, t.warns, errors.Join(t.errs...)
	}
	return t.op, t.warns, nil
}

// admit runs the object's admission checks ((*ElasticScaler).Validate) and refuses a
// StateTrigger object (ErrStateTrigger): the error that ends the translation, or nil.
func (t *esTranslation) admit(es *esv1.ElasticScaler) error {
	for _, fe := range es.Validate() {
		t.errs = append(t.errs, &config.ObjectError{Source: t.op.Source, Path: fe.Field, Err: errors.New(fe.ErrorBody())})
	}
	if len(t.errs) > 0 {
		return errors.Join(t.errs...)
	}
	if es.Spec.Trigger.Type == esv1.StateTriggerType {
		return &config.ObjectError{Source: t.op.Source, Path: "spec.trigger.type", Err: ErrStateTrigger}
	}
	return nil
}

// translateTarget sets the policy's name and target (spec.targetRef, namespace default the
// object's).
func (t *esTranslation) translateTarget(es *esv1.ElasticScaler) {
	p := &t.op.Policy
	p.Name = PolicyName(es.Namespace, es.Name)
	t.op.Paths["name"] = "metadata.name"
	ref := es.Spec.TargetRef
	p.Target = config.Target{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
	if p.Target.Namespace == "" {
		p.Target.Namespace = es.Namespace
	}
	for k, v := range map[string]string{"target": "spec.targetRef", "target.api_version": "spec.targetRef.apiVersion",
		"target.kind": "spec.targetRef.kind", "target.namespace": "spec.targetRef.namespace", "target.name": "spec.targetRef.name",
		"queries.replicas": "spec.targetRef.kind", "queries.ready_replicas": "spec.targetRef.kind"} {
		t.op.Paths[k] = v
	}
}

// translateBounds sets scaling.min_replicas (spec.minReplicas, default 1) and
// scaling.max_replicas (spec.maxReplicas).
func (t *esTranslation) translateBounds(minReplicas, maxReplicas *int32) {
	p := &t.op.Policy
	p.Scaling.MinReplicas = esv1.DefaultMinReplicas
	if m := minReplicas; m != nil {
		p.Scaling.MinReplicas = *m
		p.SetScalingKey("min_replicas") // 0 is kept: the policy scales to zero
	}
	t.op.Paths["scaling.min_replicas"] = "spec.minReplicas"
	if m := maxReplicas; m != nil {
		p.Scaling.MaxReplicas = *m
	}
	t.op.Paths["scaling.max_replicas"] = "spec.maxReplicas"
}

// zeroNeedsWake checks spec.minReplicas 0 of a MetricsTrigger object: the policy scales to zero
// (docs/llm-serving.md, "Down to zero") when one of its metrics is read from outside the pods,
// an External metric or a Custom one of a describedObject, which wake it above 0 (KEDA's
// default activation); not with scalingAlgorithm HPA, whose Kubernetes HPA would need its own
// scale to zero.
func (t *esTranslation) zeroNeedsWake(mt *esv1.MetricsTrigger) {
	switch {
	case t.op.Policy.Scaling.MinReplicas != 0:
	case mt.IsHPA():
		t.bad("spec.minReplicas", "0 is not supported with scalingAlgorithm HPA (the Kubernetes HPA debi creates does not scale to zero): set at least 1, or another algorithm")
	case !slices.ContainsFunc(t.op.Policy.Metrics.List, func(m config.Metric) bool { return m.Wakes() }):
		t.bad("spec.minReplicas", "0 needs a metric that wakes the workload from zero, read from outside the pods: an External metric, or a Custom metric with a describedObject; this trigger's metrics read nothing when no pod runs")
	}
}

// translateAlgorithm sets the algorithm: HPA, APA, DEBI, BUDGET are debi's hpa, apa, debi,
// budget; any other name is what the file's algorithm field takes (policy.Parse, checked by
// WithPolicies).
func (t *esTranslation) translateAlgorithm(mt *esv1.MetricsTrigger) {
	t.op.Policy.Algorithm = strings.ToLower(mt.Algorithm())
	t.op.Paths["algorithm"] = esMetricsTrigger + ".scalingAlgorithm"
	t.op.Paths["model"] = "spec.debi.model"
	t.op.Paths["fallback_model"] = "spec.debi.fallbackModel"
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
		if ap.Key == "target" && t.op.Paths["scaling.target"] != "" {
			t.warn(path, "overrides the target of %s", t.op.Paths["scaling.target"])
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
	p.SetScalingKey(ap.Key)
	t.op.Paths["scaling."+ap.Key] = path
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
	t.op.Mode = config.ModeAct
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
				t.warn("spec.debi.leadTime", "0 means the default (%v) in debi's policies", config.DefaultLeadTime)
			}
		}
		if d.HistoryStep != nil {
			p.HistoryStep = d.HistoryStep.Duration
		}
		t.translateEVT(d.EVT)
		t.translateBudget(d.Budget)
	}
	t.op.Paths["lead_time"] = "spec.debi.leadTime"
	t.op.Paths["history_step"] = "spec.debi.historyStep"
	t.op.Paths["mode"] = "spec.debi.mode"
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
		t.op.Paths["evt.min_excesses"] = "spec.debi.evt.minExcesses"
	}
	if e.Method != "" {
		p.EVT.Method = e.Method
		t.op.Paths["evt.method"] = "spec.debi.evt.method"
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
		p.SetScalingKey("budget.hold")
		t.op.Paths["scaling.budget.hold"] = "spec.debi.budget.hold"
	}
	if b.Rule != "" {
		p.Scaling.Budget.Rule = scaling.BudgetRule(b.Rule)
		p.SetScalingKey("budget.rule")
		t.op.Paths["scaling.budget.rule"] = "spec.debi.budget.rule"
	}
	if b.Idle != "" {
		p.Scaling.Budget.Idle = scaling.BudgetIdle(b.Idle)
		p.SetScalingKey("budget.idle")
		t.op.Paths["scaling.budget.idle"] = "spec.debi.budget.idle"
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
	t.op.Paths[policyPathOf(path)] = path
}

// translateHPAMode runs a policy of scalingAlgorithm HPA in shadow mode: the Kubernetes HPA that
// the Owner (hpaowner.go) creates for the object scales the target, so debi must not write it too.
// debi's HPA model decides and publishes beside the real HPA (a live comparison) and writes
// nothing.
func (t *esTranslation) translateHPAMode(d *esv1.DebiSpec, mt *esv1.MetricsTrigger) {
	if !mt.IsHPA() {
		return
	}
	if d != nil && d.Mode != "" && t.op.Mode != config.ModeShadow {
		t.warn("spec.debi.mode", "%s ignored: with scalingAlgorithm HPA the Kubernetes HPA debi creates for this object scales the target; debi runs the policy in shadow mode", t.op.Mode)
	}
	t.op.Mode = config.ModeShadow
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

// TranslateObject translates any ElasticScaler: a MetricsTrigger object by
// TranslateElasticScaler, a StateTrigger object by TranslateStateTrigger with lookup.
func TranslateObject(es *esv1.ElasticScaler, lookup TidalLookup) (config.ObjectPolicy, []string, error) {
	if es.Spec.Trigger.Type == esv1.StateTriggerType {
		return TranslateStateTrigger(es, lookup)
	}
	return TranslateElasticScaler(es)
}
