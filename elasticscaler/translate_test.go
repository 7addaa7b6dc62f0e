package elasticscaler

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/scaling"
)

// fileWithPolicy is a configuration file with one policy of its own, whose budget hold: 0s and
// scaling.window: 0s are explicit zeros (kept only when validated from the file's keys).
const fileWithPolicy = `
global:
  prometheus_url: http://prometheus:9090
  interval: 15s
  elastic_scalers: {enabled: true, namespaces: [ai-inference]}
webhook:
  mode: shadow
  allow_unauthenticated: true
  policies:
  - {name: web, mode: act}
policies:
- name: web
  target: {namespace: shop, name: web}
  algorithm: budget
  scaling: {window: 0s, budget: {hold: 0s}}
`

func guideScaler(t testing.TB, file string) *esv1.ElasticScaler {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "apis", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var es esv1.ElasticScaler
	if err := yaml.UnmarshalStrict(b, &es); err != nil {
		t.Fatal(err)
	}
	es.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	return &es
}

func loadFile(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(fileWithPolicy))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func translate(t *testing.T, es *esv1.ElasticScaler) (config.ObjectPolicy, []string) {
	t.Helper()
	op, warns, err := TranslateElasticScaler(es)
	if err != nil {
		t.Fatal(err)
	}
	return op, warns
}

func TestGuideHPA(t *testing.T) {
	op, warns := translate(t, guideScaler(t, "guide-hpa.yaml"))
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	p := op.Policy
	if p.Name != "ai-inference.hpa-scaling-example" || p.Algorithm != "hpa" || op.Mode != config.ModeShadow {
		t.Fatalf("name %q algorithm %q mode %q", p.Name, p.Algorithm, op.Mode)
	}
	want := config.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ai-inference", Name: "vllm-inference"}
	if p.Target != want {
		t.Fatalf("target %+v", p.Target)
	}
	if p.Scaling.MinReplicas != 2 || p.Scaling.MaxReplicas != 10 || p.Scaling.Target != 0.7 || p.Request != 0 || p.Queries != (config.Queries{}) {
		t.Fatalf("scaling %+v request %v queries %+v", p.Scaling, p.Request, p.Queries)
	}
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got, ok := c.PolicyByName(p.Name)
	if !ok {
		t.Fatal("policy missing")
	}
	if !strings.Contains(got.Queries.Demand, `namespace_workload:debi_cpu_usage_cores:rate1m{namespace="ai-inference",workload_type="deployment",workload="vllm-inference"}`) ||
		!strings.Contains(got.Queries.Request, "debi_cpu_request_per_pod_cores") {
		t.Fatalf("default queries not filled: %+v", got.Queries)
	}
	if c.Webhook.ModeFor(p.Name) != config.ModeShadow || c.Webhook.ModeFor("web") != config.ModeAct || c.Webhook.Mode != config.ModeShadow {
		t.Fatalf("modes: %+v", c.Webhook.Policies)
	}
}

// TestHPAAlgorithmShadow: whatever spec.debi.mode says, an HPA-algorithm object's policy is
// shadow (warned when another mode was asked for); other algorithms keep their mode.
func TestHPAAlgorithmShadow(t *testing.T) {
	for _, tc := range []struct {
		algorithm string
		mode      esv1.DebiMode
		want      string
		warned    bool
	}{
		{"HPA", "", config.ModeShadow, false},
		{"hpa", esv1.DebiModeAct, config.ModeShadow, true},
		{"Hpa", esv1.DebiModeHPAFloor, config.ModeShadow, true},
		{"HPA", esv1.DebiModeShadow, config.ModeShadow, false},
		{"APA", "", config.ModeAct, false},
		{"APA", esv1.DebiModeHPAFloor, config.ModeHPAFloor, false},
	} {
		es := guideScaler(t, "guide-hpa.yaml")
		es.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = tc.algorithm
		if tc.mode != "" {
			es.Spec.Debi = &esv1.DebiSpec{Mode: tc.mode}
		}
		op, warns := translate(t, es)
		warned := len(warns) == 1 && strings.Contains(warns[0], "spec.debi.mode: "+string(tc.mode)+" ignored")
		if op.Mode != tc.want || warned != tc.warned || (!tc.warned && len(warns) != 0) {
			t.Errorf("%s mode %q: got mode %q, warnings %q", tc.algorithm, tc.mode, op.Mode, warns)
		}
	}
}

// TestGuideCustomAlgorithm: ExternalServer → queries.demand = query, request = target, target 1;
// algorithmConfig → the APA parameters; the annotations → metrics.
func TestGuideCustomAlgorithm(t *testing.T) {
	op, warns := translate(t, guideScaler(t, "guide-custom-algorithm.yaml"))
	p := op.Policy
	if p.Name != "ai-inference.custom-scaling-example" || p.Algorithm != "apa" {
		t.Fatalf("name %q algorithm %q", p.Name, p.Algorithm)
	}
	if p.Queries.Demand != `sum(rate(http_requests_total{job="vllm"}[1m]))` || p.Request != 100 || p.Scaling.Target != 1 {
		t.Fatalf("demand %q request %v target %v", p.Queries.Demand, p.Request, p.Scaling.Target)
	}
	s := p.Scaling
	if s.UpTolerance != 0.1 || s.DownTolerance != 0.1 || s.MaxScaleUpRate != 2 || s.MaxScaleDownRate != 2 {
		t.Fatalf("algorithmConfig: %+v", s)
	}
	if p.Metrics.Window != 120*time.Second || p.Metrics.Aggregation != scaling.AggMax {
		t.Fatalf("metrics %+v", p.Metrics)
	}
	if len(warns) != 0 {
		t.Fatalf("warnings %q", warns)
	}
	// The endpoint without the query API's path: the query goes there.
	if e := p.Queries.Endpoint; e == nil || e.URL != "http://prometheus.monitoring.svc:9090" || e.HTTPConfig != nil {
		t.Fatalf("queries.endpoint %+v, want http://prometheus.monitoring.svc:9090 with the default client", e)
	}
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got, _ := c.PolicyByName(p.Name)
	if got.Queries.Request != "" || got.Request != 100 || got.Queries.Demand != p.Queries.Demand || got.Queries.Replicas == "" {
		t.Fatalf("after defaults: request %v %q demand %q replicas %q", got.Request, got.Queries.Request, got.Queries.Demand, got.Queries.Replicas)
	}
	if m := got.ScaleMetrics()[0]; m.Endpoint == nil || m.Endpoint.URL != "http://prometheus.monitoring.svc:9090" || m.Endpoint.HTTPConfig.Authorization != nil {
		t.Fatalf("metric endpoint %+v, want its own with the default client", m.Endpoint)
	}
}

// TestExternalServerEndpoint: an ExternalServer's endpoint and protocol map onto the metric's
// endpoint (the query API's path dropped); global.prometheus_url itself is the global endpoint;
// a bad endpoint is reported at the object's field.
func TestExternalServerEndpoint(t *testing.T) {
	for _, tc := range []struct{ endpoint, protocol, want string }{
		{"http://prometheus.monitoring.svc:9090/api/v1/query", "", "http://prometheus.monitoring.svc:9090"},
		{"https://thanos.example/prefix/api/v1/query_range?x=1", "https", "https://thanos.example/prefix"},
		{"http://vm:8428/select/0/prometheus", "HTTP", "http://vm:8428/select/0/prometheus"},
	} {
		got := externalEndpoint(&esv1.ExternalServerMetricSource{Endpoint: tc.endpoint, Protocol: tc.protocol})
		if got.URL != tc.want {
			t.Errorf("%s (%s): %s, want %s", tc.endpoint, tc.protocol, got.URL, tc.want)
		}
	}
	// Two metrics: one on global.prometheus_url (the file's http://prometheus:9090), one on another.
	es := guideScaler(t, "guide-custom-algorithm.yaml")
	x := es.Spec.Trigger.MetricsTrigger.Metrics[0].ExternalServer
	x.Endpoint = "http://prometheus:9090/api/v1/query"
	y := *x
	y.MetricsName, y.Endpoint = "tenant_qps", "http://prometheus-b:9090/api/v1/query"
	es.Spec.Trigger.MetricsTrigger.Metrics = append(es.Spec.Trigger.MetricsTrigger.Metrics,
		esv1.MetricSpec{Type: esv1.ExternalServerMetricSourceType, ExternalServer: &y})
	op, _ := translate(t, es)
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got, _ := c.PolicyByName(op.Policy.Name)
	ms := got.ScaleMetrics()
	if len(ms) != 2 || ms[0].Endpoint != nil || ms[1].Endpoint == nil || ms[1].Endpoint.URL != "http://prometheus-b:9090" {
		t.Fatalf("metrics %+v: want the first on the global endpoint, the second on prometheus-b", ms)
	}
}

func TestGuideMetricsPolicy(t *testing.T) {
	op, _ := translate(t, guideScaler(t, "guide-metrics-policy.yaml"))
	want := scaling.MetricsPolicy{Window: 120 * time.Second, Aggregation: scaling.AggMax, MissingData: scaling.MissingIgnore,
		OutlierFilter: true, OutlierThreshold: 2.5}
	if op.Policy.Metrics.MetricsPolicy != want {
		t.Fatalf("metrics %+v, want %+v", op.Policy.Metrics, want)
	}
	es := guideScaler(t, "guide-metrics-policy.yaml")
	es.Annotations[esv1.AnnotationWindowSeconds] = "-3"
	op, warns := translate(t, es)
	if op.Policy.Metrics.Window != 60*time.Second || len(warns) != 1 || !strings.Contains(warns[0], "metadata.annotations: annotation elasticscaler.io/metrics.windowSeconds") {
		t.Fatalf("fallback: %v %q", op.Policy.Metrics.Window, warns)
	}
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if got, _ := c.PolicyByName(op.Policy.Name); got.Metrics.MetricsPolicy != (scaling.MetricsPolicy{Window: time.Minute, Aggregation: scaling.AggMax,
		MissingData: scaling.MissingIgnore, OutlierFilter: true, OutlierThreshold: 2.5}) {
		t.Fatalf("after defaults %+v", got.Metrics)
	}
}

func guideTidal(t testing.TB) *tidalv1.Tidal {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "apis", "testdata", "guide-tidal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var td tidalv1.Tidal
	if err := yaml.UnmarshalStrict(b, &td); err != nil {
		t.Fatal(err)
	}
	return &td
}

func tidalLookup(tds ...*tidalv1.Tidal) TidalLookup {
	return func(ns, name string) (*tidalv1.Tidal, bool) {
		for _, td := range tds {
			if td.Namespace == ns && td.Name == name {
				return td, true
			}
		}
		return nil, false
	}
}

func TestStateTriggerNeedsItsTidal(t *testing.T) {
	// Without a lookup, a StateTrigger object is not translated (TranslateElasticScaler).
	_, _, err := TranslateElasticScaler(guideScaler(t, "guide-state-trigger.yaml"))
	if !errors.Is(err, ErrStateTrigger) {
		t.Fatalf("got %v, want ErrStateTrigger", err)
	}
}

// The guide's StateTrigger object and its Tidal, verbatim: a policy on the Tidal's Deployment,
// bound the way the webhook's Tidal watch binds the Tidal (its labels name the object).
func TestStateTriggerFromGuide(t *testing.T) {
	es, td := guideScaler(t, "guide-state-trigger.yaml"), guideTidal(t)
	op, warns, err := TranslateObject(es, tidalLookup(td))
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	want := config.Policy{Name: "ai-inference.state-scaling-example", Algorithm: StateTriggerAlgorithm,
		Target:  config.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ai-inference", Name: "elastic-scaler-state-test"},
		Scaling: scaling.Params{MinReplicas: 1, MaxReplicas: math.MaxInt32}}
	if !reflect.DeepEqual(op.Policy, want) || op.Mode != config.ModeAct || !op.StateTrigger || op.Source != "elasticscaler ai-inference/state-scaling-example" {
		t.Fatalf("got %+v mode %q state %v", op.Policy, op.Mode, op.StateTrigger)
	}
	// The Tidal's labels name the object: the webhook's fallback binding (config.PolicyName of
	// elasticscaler.io/namespace and elasticscaler.io/name) is this policy's name.
	if got := PolicyName(td.Labels[TidalLabelScalerNamespace], td.Labels[TidalLabelScalerName]); got != op.Policy.Name {
		t.Fatalf("the Tidal binds to %q, the policy is %q", got, op.Policy.Name)
	}
	// The file's validation accepts it, and its webhook mode is act.
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got, ok := c.PolicyByName(op.Policy.Name)
	if !ok || got.Scaling.MinReplicas != 1 || got.Scaling.MaxReplicas != math.MaxInt32 {
		t.Fatalf("after defaults %+v", got)
	}
	if m := c.Webhook.ModeFor(op.Policy.Name); m != config.ModeAct {
		t.Fatalf("mode %q", m)
	}

	// Bounds and mode from the object.
	es.Spec.MinReplicas, es.Spec.MaxReplicas = ptrTo(int32(2)), ptrTo(int32(4))
	es.Spec.Debi = &esv1.DebiSpec{Mode: esv1.DebiModeShadow}
	op, _, err = TranslateObject(es, tidalLookup(td))
	if err != nil || op.Policy.Scaling.MinReplicas != 2 || op.Policy.Scaling.MaxReplicas != 4 || op.Mode != config.ModeShadow {
		t.Fatalf("%v %+v %q", err, op.Policy.Scaling, op.Mode)
	}
	// A Tidal without a namespace in its targetRef: the Tidal's.
	td.Spec.TargetRef.Namespace = ""
	if op, _, err = TranslateObject(es, tidalLookup(td)); err != nil || op.Policy.Target.Namespace != "ai-inference" {
		t.Fatal(err, op.Policy.Target)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestStateTriggerErrors(t *testing.T) {
	const src = "elasticscaler ai-inference/state-scaling-example: "
	for name, tc := range map[string]struct {
		es   func(*esv1.ElasticScaler)
		td   func(*tidalv1.Tidal)
		none bool
		want string
	}{
		"missing tidal": {none: true, want: src + "spec.targetRef.name: tidal ai-inference/tidal-frequent-test not found"},
		"other name": {es: func(es *esv1.ElasticScaler) { es.Spec.TargetRef.Name = "x" },
			want: src + "spec.targetRef.name: tidal ai-inference/x not found"},
		"other namespace": {es: func(es *esv1.ElasticScaler) { es.Spec.TargetRef.Namespace = "batch" },
			want: src + "spec.targetRef.name: tidal batch/tidal-frequent-test not found"},
		"not a tidal": {es: func(es *esv1.ElasticScaler) {
			es.Spec.TargetRef.APIVersion, es.Spec.TargetRef.Kind = "apps/v1", "Deployment"
		},
			want: src + "spec.targetRef: a StateTrigger's target must be a Tidal (apiVersion tidal.io/v1alpha1, kind Tidal), got apps/v1 Deployment"},
		"unlabelled tidal": {td: func(td *tidalv1.Tidal) { td.Labels = nil },
			want: src + `spec.targetRef.name: tidal ai-inference/tidal-frequent-test is not bound to this ElasticScaler: its labels elasticscaler.io/name="", elasticscaler.io/namespace="" must name ai-inference/state-scaling-example (the webhook binds a Tidal by them)`},
		"tidal of another object": {td: func(td *tidalv1.Tidal) { td.Labels[TidalLabelScalerName] = "other" },
			want: "is not bound to this ElasticScaler"},
		"target in another namespace": {td: func(td *tidalv1.Tidal) { td.Spec.TargetRef.Namespace = "shop" },
			want: src + "spec.targetRef.name: tidal ai-inference/tidal-frequent-test: its target Deployment shop/elastic-scaler-state-test is in another namespace: a Tidal may only drive a target of its own namespace"},
		"min 0": {es: func(es *esv1.ElasticScaler) { es.Spec.MinReplicas = ptrTo(int32(0)) },
			want: src + "spec.minReplicas: 0 is not supported on a StateTrigger ElasticScaler: its Tidal's count is applied within [minReplicas, maxReplicas]; set at least 1"},
		"admission": {es: func(es *esv1.ElasticScaler) { es.Spec.Trigger.StateTrigger = nil },
			want: src + "spec.trigger.stateTrigger"},
	} {
		t.Run(name, func(t *testing.T) {
			es, td := guideScaler(t, "guide-state-trigger.yaml"), guideTidal(t)
			if tc.es != nil {
				tc.es(es)
			}
			if tc.td != nil {
				tc.td(td)
			}
			lookup := tidalLookup(td)
			if tc.none {
				lookup = tidalLookup()
			}
			_, _, err := TranslateObject(es, lookup)
			var oe *config.ObjectError
			if err == nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// WithPolicies: the Tidal's target already scaled by a file policy → the file wins, the
	// error is at the object's reference to the Tidal.
	es, td := guideScaler(t, "guide-state-trigger.yaml"), guideTidal(t)
	td.Spec.TargetRef.Name = "web"
	td.Namespace, es.Namespace, td.Labels[TidalLabelScalerNamespace] = "shop", "shop", "shop"
	td.Spec.TargetRef.Namespace = "shop"
	op, _, err := TranslateObject(es, tidalLookup(td))
	if err != nil {
		t.Fatal(err)
	}
	_, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "elasticscaler shop/state-scaling-example: spec.targetRef: ") {
		t.Fatalf("got %v", errs)
	}
}

func TestDebiExtension(t *testing.T) {
	es := guideScaler(t, "guide-hpa.yaml")
	es.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "budget"
	es.Spec.Debi = &esv1.DebiSpec{Mode: esv1.DebiModeShadow, Model: "holtwinters", FallbackModel: "arima", LeadTime: &metav1.Duration{Duration: 3 * time.Minute},
		HistoryStep: &metav1.Duration{Duration: time.Minute}}
	op, _ := translate(t, es)
	if op.Mode != config.ModeShadow || op.Policy.Model != "holtwinters" || op.Policy.FallbackModel != "arima" || op.Policy.LeadTime != 3*time.Minute || op.Policy.HistoryStep != time.Minute {
		t.Fatalf("%+v", op)
	}
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got, _ := c.PolicyByName(op.Policy.Name)
	if rc, err := got.RunnerConfig(); err != nil || rc.Fallback != "arima" {
		t.Fatalf("runner fallback %q (%v), want arima from spec.debi.fallbackModel", rc.Fallback, err)
	}
	if got.Algorithm != "holtwinters-budget" || c.Webhook.ModeFor(got.Name) != config.ModeShadow {
		t.Fatalf("algorithm %q mode %q", got.Algorithm, c.Webhook.ModeFor(got.Name))
	}
}

// TestWithPoliciesKeepsFile: the file's policies come out exactly as Load makes them (the explicit
// zeros of its keys kept), whatever the extras.
func TestWithPoliciesKeepsFile(t *testing.T) {
	file := loadFile(t)
	op, _ := translate(t, guideScaler(t, "guide-hpa.yaml"))
	c, errs := file.WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if len(c.Policies) != 2 || !reflect.DeepEqual(c.Policies[0], file.Policies[0]) {
		t.Fatalf("file policy changed:\n%+v\n%+v", c.Policies[0], file.Policies[0])
	}
	if file.Policies[0].Scaling.Window != 0 || file.Policies[0].Scaling.Budget.Hold != 0 {
		t.Fatalf("explicit zeros lost: %+v", file.Policies[0].Scaling)
	}
	if len(file.Policies) != 1 || len(file.Webhook.Policies) != 1 {
		t.Fatal("WithPolicies modified the file's configuration")
	}
	again, _ := file.WithPolicies(nil)
	if !reflect.DeepEqual(again.Policies, file.Policies) {
		t.Fatal("WithPolicies(nil) differs from config.Load")
	}
}

// TestBadObjects: every error path of the translation and of the file's validation, at the
// object's field.
func TestBadObjects(t *testing.T) {
	hpa := func() *esv1.ElasticScaler { return guideScaler(t, "guide-hpa.yaml") }
	custom := func() *esv1.ElasticScaler { return guideScaler(t, "guide-custom-algorithm.yaml") }
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name string
		es   func() *esv1.ElasticScaler
		// translate is set when the translation itself fails; else WithPolicies rejects it.
		translate bool
		path      string
		msg       string
	}{
		{"admission: max below min", func() *esv1.ElasticScaler { e := hpa(); e.Spec.MaxReplicas = i32(1); return e }, true, "spec.maxReplicas", "minReplicas (2)"},
		{"admission: no metrics", func() *esv1.ElasticScaler { e := hpa(); e.Spec.Trigger.MetricsTrigger.Metrics = nil; return e }, true, "spec.trigger.metricsTrigger.metrics", ""},
		{"min 0", func() *esv1.ElasticScaler { e := custom(); e.Spec.MinReplicas = i32(0); return e }, true, "spec.minReplicas", "needs a metric that wakes the workload from zero"},
		{"algorithmConfig not a number", func() *esv1.ElasticScaler {
			e := custom()
			e.Spec.Trigger.MetricsTrigger.AlgorithmConfig["upTolerance"] = "ten percent"
			return e
		}, true, "spec.trigger.metricsTrigger.algorithmConfig.upTolerance", "not a number"},
		{"algorithmConfig not a duration", func() *esv1.ElasticScaler {
			e := custom()
			e.Spec.Trigger.MetricsTrigger.AlgorithmConfig["window"] = "soon"
			return e
		}, true, "spec.trigger.metricsTrigger.algorithmConfig.window", "not a duration"},
		{"ephemeral-storage only", func() *esv1.ElasticScaler {
			e := hpa()
			e.Spec.Trigger.MetricsTrigger.Metrics[0].Resource.MetricsName = "ephemeral-storage"
			return e
		}, true, "spec.trigger.metricsTrigger.metrics", "resource \"ephemeral-storage\""},
		{"algorithmConfig out of range", func() *esv1.ElasticScaler {
			e := custom()
			e.Spec.Trigger.MetricsTrigger.AlgorithmConfig["downTolerance"] = "1.5"
			return e
		}, false, "spec.trigger.metricsTrigger.algorithmConfig.downTolerance", "down_tolerance must be in [0, 1)"},
		{"utilization above 100", func() *esv1.ElasticScaler {
			e := hpa()
			e.Spec.Trigger.MetricsTrigger.Metrics[0].Resource.Target.AverageUtilization = i32(150)
			return e
		}, false, "spec.trigger.metricsTrigger.metrics[0].resource.target.averageUtilization", "target must be in (0, 1]"},
		{"unknown algorithm", func() *esv1.ElasticScaler {
			e := hpa()
			e.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "magic"
			return e
		}, false, "spec.trigger.metricsTrigger.scalingAlgorithm", "unknown policy"},
		{"bad PromQL", func() *esv1.ElasticScaler {
			e := custom()
			e.Spec.Trigger.MetricsTrigger.Metrics[0].ExternalServer.Query = "sum(rate(x[1m]"
			return e
		}, false, "spec.trigger.metricsTrigger.metrics[0].externalServer.query", ""},
		{"history step not a multiple of the interval", func() *esv1.ElasticScaler {
			e := hpa()
			e.Spec.Debi = &esv1.DebiSpec{HistoryStep: &metav1.Duration{Duration: 20 * time.Second}}
			return e
		}, false, "spec.debi.historyStep", "multiple of global.interval"},
		{"unknown model", func() *esv1.ElasticScaler {
			e := hpa()
			e.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "DEBI"
			e.Spec.Debi = &esv1.DebiSpec{Model: "crystal-ball"}
			return e
		}, false, "spec.trigger.metricsTrigger.scalingAlgorithm", "unknown model"},
		{"fallback slower than the model", func() *esv1.ElasticScaler {
			e := hpa()
			e.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "BUDGET"
			e.Spec.Debi = &esv1.DebiSpec{Model: "arima", FallbackModel: "holtwinters"}
			return e
		}, false, "spec.debi.fallbackModel", "never forecast first"},
		{"name too long for a policy", func() *esv1.ElasticScaler {
			e := hpa()
			e.Name = strings.Repeat("a", 250)
			return e
		}, false, "metadata.name", "at most 253"},
		{"same target as the file's acting policy", func() *esv1.ElasticScaler {
			e := custom()
			e.Spec.TargetRef = esv1.TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Namespace: "shop"}
			return e
		}, false, "spec.targetRef", `already scaled by policy "web"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, _, err := TranslateElasticScaler(tc.es())
			if !tc.translate {
				if err != nil {
					t.Fatalf("translation failed: %v", err)
				}
				c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
				if len(c.Policies) != 1 {
					t.Errorf("rejected object's policy kept: %d policies", len(c.Policies))
				}
				err = errors.Join(errs...)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			var oe *config.ObjectError
			if !errors.As(err, &oe) {
				t.Fatalf("not an ObjectError: %v", err)
			}
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, op.Source+": "+tc.path+": ") && strings.Contains(line, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no error at %s containing %q:\n%v", tc.path, tc.msg, err)
			}
			t.Log(err)
		})
	}
}

// TestConflictsBetweenObjects: two objects acting on one target: the older wins; a duplicate of
// the file's name never replaces the file's policy; the valid ones stay.
func TestConflictsBetweenObjects(t *testing.T) {
	olderES := guideScaler(t, "guide-hpa.yaml")
	olderES.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "APA" // HPA would be shadow
	older, _ := translate(t, olderES)
	newer := guideScaler(t, "guide-metrics-policy.yaml")
	newer.CreationTimestamp = metav1.NewTime(time.Unix(2000, 0))
	nop, _ := translate(t, newer)
	shadow := guideScaler(t, "guide-custom-algorithm.yaml")
	shadow.Spec.Debi = &esv1.DebiSpec{Mode: esv1.DebiModeShadow}
	sop, _ := translate(t, shadow)
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{nop, sop, older})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "elasticscaler ai-inference/metrics-policy-example: spec.targetRef: ") ||
		!strings.Contains(errs[0].Error(), `policy "ai-inference.hpa-scaling-example"`) {
		t.Fatalf("errors: %v", errs)
	}
	var names []string
	for _, p := range c.Policies {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(names, []string{"web", "ai-inference.custom-scaling-example", "ai-inference.hpa-scaling-example"}) {
		t.Fatalf("policies %v", names)
	}
}

// TestSectionWideError: an error the pass cannot attribute (webhook.queries.floor: none with a
// stateful algorithm) rejects the object that trips it, one at a time.
func TestSectionWideError(t *testing.T) {
	src := strings.Replace(fileWithPolicy, "  allow_unauthenticated: true\n", "  allow_unauthenticated: true\n  queries: {floor: none, ceiling: none}\n", 1)
	src = strings.Replace(src, "algorithm: budget\n  scaling: {window: 0s, budget: {hold: 0s}}", "algorithm: apa", 1)
	file, err := config.Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	shadow := guideScaler(t, "guide-custom-algorithm.yaml")
	shadow.Spec.Debi = &esv1.DebiSpec{Mode: esv1.DebiModeShadow}
	apa, _ := translate(t, shadow)
	hpa, _ := translate(t, guideScaler(t, "guide-hpa.yaml"))
	c, errs := file.WithPolicies([]config.ObjectPolicy{apa, hpa})
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "elasticscaler ai-inference/hpa-scaling-example: spec: webhook.queries.floor: cannot be none") {
		t.Fatalf("errors: %v", errs)
	}
	if len(c.Policies) != 2 || c.Policies[1].Name != apa.Policy.Name {
		t.Fatalf("policies %+v", c.Policies)
	}
}

// BenchmarkWithPolicies500: the file's validation of 500 object policies at once (one pass).
func BenchmarkWithPolicies500(b *testing.B) {
	file, err := config.Load([]byte(fileWithPolicy))
	if err != nil {
		b.Fatal(err)
	}
	base := guideScaler(b, "guide-custom-algorithm.yaml")
	ops := make([]config.ObjectPolicy, 500)
	for i := range ops {
		es := base.DeepCopy()
		es.Name = "s" + strconv.Itoa(i)
		es.Spec.TargetRef.Name = "w" + strconv.Itoa(i)
		if ops[i], _, err = TranslateElasticScaler(es); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if c, errs := file.WithPolicies(ops); len(errs) != 0 || len(c.Policies) != 501 {
			b.Fatal(errs)
		}
	}
}

// TestDebiEVTAndBudget: spec.debi.evt and spec.debi.budget set the policy's EVT fit and overload
// budget; a bad value is refused at its object path, by admission or by the file's checks.
func TestDebiEVTAndBudget(t *testing.T) {
	es := guideScaler(t, "guide-custom-algorithm.yaml")
	es.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "BUDGET"
	es.Spec.Debi = &esv1.DebiSpec{
		EVT:    &esv1.DebiEVT{Tau: "0.25", Q: "0.05", MinExcesses: ptrTo(int32(12)), Method: "grimshaw"},
		Budget: &esv1.DebiBudget{OverloadBudget: "0.02", SLAUtilization: "0.8", Hold: &metav1.Duration{Duration: 4 * time.Minute}, Rule: "priced", Idle: "hold"},
	}
	op, _ := translate(t, es)
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	p, _ := c.PolicyByName(op.Policy.Name)
	if p.EVT.Tau != 0.25 || p.EVT.Q != 0.05 || p.EVT.MinExcesses != 12 || p.EVT.Method != "grimshaw" ||
		p.Budget.Budget != 0.02 || p.Scaling.Budget.SLAUtilization != 0.8 || p.Scaling.Budget.Hold != 4*time.Minute ||
		p.Scaling.Budget.Rule != scaling.RulePriced || p.Scaling.Budget.Idle != scaling.IdleHold {
		t.Fatalf("evt %+v budget %+v scaling.budget %+v", p.EVT, p.Budget, p.Scaling.Budget)
	}
	for _, tc := range []struct {
		set  func(*esv1.DebiSpec)
		path string
	}{
		{func(d *esv1.DebiSpec) { d.EVT.Tau = "a fifth" }, "spec.debi.evt.tau"},
		{func(d *esv1.DebiSpec) { d.Budget.OverloadBudget = "0.7" }, "spec.debi.budget.overloadBudget"}, // the file's check: in (0, 0.5)
		{func(d *esv1.DebiSpec) { d.Budget.SLAUtilization = "1.5" }, "spec.debi.budget.slaUtilization"},
		{func(d *esv1.DebiSpec) { d.Budget.Rule = "cheapest" }, "spec.debi.budget.rule"},
		{func(d *esv1.DebiSpec) { d.Budget.Idle = "spend" }, "spec.debi.budget.idle"},
	} {
		bad := es.DeepCopy()
		tc.set(bad.Spec.Debi)
		op, _, err := TranslateElasticScaler(bad)
		if err == nil {
			_, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
			err = errors.Join(errs...)
		}
		if err == nil || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want an error at it", tc.path, err)
		}
	}
}

// TestElasticScalerExplicitZeros: an algorithmConfig key set to 0 keeps 0 where zero is a
// setting (upTolerance, scaleDownStabilization), as the file's keys do; a key left out takes
// its default.
func TestElasticScalerExplicitZeros(t *testing.T) {
	es := guideScaler(t, "guide-custom-algorithm.yaml")
	ac := es.Spec.Trigger.MetricsTrigger.AlgorithmConfig
	for k := range ac {
		delete(ac, k)
	}
	ac["upTolerance"], ac["scaleDownStabilization"] = "0", "0s"
	op, _ := translate(t, es)
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got, _ := c.PolicyByName(op.Policy.Name)
	s, def := got.Scaling, scaling.DefaultParams()
	if s.UpTolerance != 0 || s.ScaleDownStabilization != 0 {
		t.Errorf("explicit zeros replaced: up_tolerance %v, scale_down_stabilization %v", s.UpTolerance, s.ScaleDownStabilization)
	}
	if s.DownTolerance != def.DownTolerance || s.Tolerance != def.Tolerance {
		t.Errorf("keys left out: down_tolerance %v tolerance %v, want the defaults", s.DownTolerance, s.Tolerance)
	}
}

// TestPausedObject: spec.debi.paused pauses the object's policy in the webhook
// (webhook.policies[].paused), as the file's paused does; unset, it is not paused.
func TestPausedObject(t *testing.T) {
	for _, paused := range []bool{true, false} {
		es := guideScaler(t, "guide-custom-algorithm.yaml")
		es.Spec.Debi = &esv1.DebiSpec{Paused: paused}
		op, _ := translate(t, es)
		c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
		if len(errs) != 0 {
			t.Fatal(errs)
		}
		if got := c.Webhook.PausedFor(op.Policy.Name); got != paused || c.Webhook.PausedFor("web") {
			t.Errorf("spec.debi.paused %v: PausedFor %v (web: %v)", paused, got, c.Webhook.PausedFor("web"))
		}
	}
}

// TestAnyKindTarget: an ElasticScaler whose targetRef is any kind with a scale subresource (a
// serving framework's role adapter) becomes a policy with every default query, built on the pods
// and size the exporter publishes from the scale subresource.
func TestAnyKindTarget(t *testing.T) {
	es := guideScaler(t, "guide-hpa.yaml")
	es.Spec.TargetRef = esv1.TargetRef{APIVersion: "workloads.x-k8s.io/v1alpha1", Kind: "RoleBasedGroupScalingAdapter", Name: "decode"}
	op, _ := translate(t, es)
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatalf("rejected: %v", errs)
	}
	p, ok := c.PolicyByName(op.Policy.Name)
	if !ok {
		t.Fatalf("policy %q not merged", op.Policy.Name)
	}
	if !p.Target.PodsFromScale() || !strings.Contains(p.Queries.Replicas, "debi_target_spec_replicas") ||
		!strings.Contains(p.Queries.ReadyReplicas, `workload_type="rolebasedgroupscalingadapter",workload="decode"`) {
		t.Errorf("queries of a RoleBasedGroupScalingAdapter target: %+v", p.Queries)
	}
}

// TestMergeLeavesTranslationsAlone: putting objects' policies beside the file's
// (config.WithPolicies: defaults filled in, endpoints resolved) never changes the translations
// it is given. The source compares each translation with the last one; a translation changed
// in place by the merge differed from the next, identical one, so every status write re-applied
// the objects (and re-pinned a paused policy over the last decision).
func TestMergeLeavesTranslationsAlone(t *testing.T) {
	for _, file := range []string{"guide-hpa.yaml", "guide-custom-algorithm.yaml", "guide-metrics-policy.yaml"} {
		t.Run(file, func(t *testing.T) {
			a, _ := translate(t, guideScaler(t, file))
			b, _ := translate(t, guideScaler(t, file))
			if !reflect.DeepEqual(a, b) {
				t.Fatal("two translations of one object differ")
			}
			if _, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{a}); len(errs) != 0 {
				t.Fatalf("rejected: %v", errs)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("the merge changed the translation it was given:\n%+v\nwas\n%+v", a.Policy, b.Policy)
			}
		})
	}
}
