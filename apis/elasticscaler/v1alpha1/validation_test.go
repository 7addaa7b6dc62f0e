package v1alpha1

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func i32(v int32) *int32 { return &v }

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// metricsScaler is a valid MetricsTrigger object with one metric of each type (APA accepts all).
func metricsScaler() *ElasticScaler {
	return &ElasticScaler{
		ObjectMeta: metav1.ObjectMeta{Name: "es", Namespace: "ai-inference"},
		Spec: ElasticScalerSpec{
			TargetRef:   TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "vllm-inference"},
			MinReplicas: i32(2),
			MaxReplicas: i32(10),
			Trigger: Trigger{
				Type: MetricsTriggerType,
				MetricsTrigger: &MetricsTrigger{
					ScalingAlgorithm: "APA",
					AlgorithmConfig:  map[string]string{"upTolerance": "0.1"},
					Metrics: []MetricSpec{
						{Type: ResourceMetricSourceType, Resource: &ResourceMetricSource{MetricsName: "cpu", Target: MetricTarget{Type: UtilizationMetricType, AverageUtilization: i32(70)}}},
						{Type: ExternalMetricSourceType, External: &ExternalMetricSource{Metric: MetricIdentifier{Name: "queue_depth"}, Target: MetricTarget{Type: ValueMetricType, Value: qty("30")}}},
						{Type: ExternalServerMetricSourceType, ExternalServer: &ExternalServerMetricSource{MetricsName: "qps", Target: "100", Endpoint: "http://prometheus.monitoring.svc:9090/api/v1/query", Query: "sum(rate(x[1m]))", Protocol: "http"}},
						{Type: CustomMetricSourceType, Custom: &CustomMetricSource{Metric: MetricIdentifier{Name: "rps"}, Target: MetricTarget{Type: AverageValueMetricType, AverageValue: qty("20")}}},
						{Type: CustomMetricSourceType, Custom: &CustomMetricSource{Metric: MetricIdentifier{Name: "hits"}, DescribedObject: &CrossVersionObjectReference{Kind: "Ingress", Name: "main", APIVersion: "networking.k8s.io/v1"}, Target: MetricTarget{Type: ValueMetricType, Value: qty("2k")}}},
					},
				},
			},
			Debi: &DebiSpec{Mode: DebiModeShadow, Model: "holtwinters", LeadTime: &metav1.Duration{Duration: 2 * time.Minute}, HistoryStep: &metav1.Duration{Duration: 5 * time.Minute}},
		},
	}
}

func stateScaler() *ElasticScaler {
	return &ElasticScaler{
		ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: "ai-inference"},
		Spec: ElasticScalerSpec{
			TargetRef: TargetRef{APIVersion: "tidal.io/v1alpha1", Kind: "Tidal", Name: "tidal"},
			Trigger:   Trigger{Type: StateTriggerType, StateTrigger: &StateTrigger{}},
		},
	}
}

func TestValidateValid(t *testing.T) {
	for name, s := range map[string]*ElasticScaler{
		"metrics": metricsScaler(),
		"state":   stateScaler(),
		"empty algorithm means APA": func() *ElasticScaler {
			s := metricsScaler()
			s.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = ""
			return s
		}(),
		"hpa without ExternalServer": func() *ElasticScaler {
			s := metricsScaler()
			m := s.Spec.Trigger.MetricsTrigger
			m.ScalingAlgorithm = "hpa"
			m.Metrics = append(m.Metrics[:2], m.Metrics[3:]...)
			return s
		}(),
		"no minReplicas": func() *ElasticScaler { s := metricsScaler(); s.Spec.MinReplicas = nil; return s }(),
		"min == max":     func() *ElasticScaler { s := metricsScaler(); s.Spec.MinReplicas = i32(10); return s }(),
		"min 0":          func() *ElasticScaler { s := metricsScaler(); s.Spec.MinReplicas = i32(0); return s }(),
		"state with bounds": func() *ElasticScaler {
			s := stateScaler()
			s.Spec.MinReplicas, s.Spec.MaxReplicas = i32(1), i32(4)
			return s
		}(),
		"protocol case": func() *ElasticScaler {
			s := metricsScaler()
			s.Spec.Trigger.MetricsTrigger.Metrics[2].ExternalServer.Protocol = "HTTP"
			return s
		}(),
	} {
		if errs := s.Validate(); len(errs) != 0 {
			t.Errorf("%s: %v", name, errs.ToAggregate())
		}
	}
}

func TestAlgorithm(t *testing.T) {
	for in, want := range map[string]string{"": "APA", "apa": "APA", "Hpa": "HPA", " debi ": "DEBI", "my-algo": "MY-ALGO"} {
		m := &MetricsTrigger{ScalingAlgorithm: in}
		if got := m.Algorithm(); got != want {
			t.Errorf("Algorithm(%q) = %q, want %q", in, got, want)
		}
	}
	if !(&MetricsTrigger{ScalingAlgorithm: "hPa"}).IsHPA() || (&MetricsTrigger{}).IsHPA() {
		t.Error("IsHPA")
	}
}

// TestValidateInvalid is one invalid variant per admission rule of the guide: each must be
// rejected with the error at the expected path, whose text contains the expected words.
func TestValidateInvalid(t *testing.T) {
	const metrics = "spec.trigger.metricsTrigger.metrics"
	metric := func(i int, f func(*MetricSpec)) func(*ElasticScaler) {
		return func(s *ElasticScaler) { f(&s.Spec.Trigger.MetricsTrigger.Metrics[i]) }
	}
	cases := []struct {
		name   string
		base   func() *ElasticScaler
		mutate func(*ElasticScaler)
		path   string
		typ    field.ErrorType
		detail string // substring of the error's text
	}{
		// targetRef (every trigger).
		{"no targetRef.apiVersion", metricsScaler, func(s *ElasticScaler) { s.Spec.TargetRef.APIVersion = "" }, "spec.targetRef.apiVersion", field.ErrorTypeRequired, ""},
		{"bad targetRef.apiVersion", metricsScaler, func(s *ElasticScaler) { s.Spec.TargetRef.APIVersion = "a/b/c" }, "spec.targetRef.apiVersion", field.ErrorTypeInvalid, ""},
		{"no targetRef.kind", stateScaler, func(s *ElasticScaler) { s.Spec.TargetRef.Kind = "" }, "spec.targetRef.kind", field.ErrorTypeRequired, ""},
		{"no targetRef.name", stateScaler, func(s *ElasticScaler) { s.Spec.TargetRef.Name = "" }, "spec.targetRef.name", field.ErrorTypeRequired, ""},
		{"bad targetRef.namespace", metricsScaler, func(s *ElasticScaler) { s.Spec.TargetRef.Namespace = "Not_A_Label" }, "spec.targetRef.namespace", field.ErrorTypeInvalid, ""},
		// Bounds.
		{"negative minReplicas", metricsScaler, func(s *ElasticScaler) { s.Spec.MinReplicas = i32(-1) }, "spec.minReplicas", field.ErrorTypeInvalid, "greater than or equal to 0"},
		{"maxReplicas 0", metricsScaler, func(s *ElasticScaler) { s.Spec.MinReplicas = nil; s.Spec.MaxReplicas = i32(0) }, "spec.maxReplicas", field.ErrorTypeInvalid, "greater than or equal to 1"},
		{"max < min", metricsScaler, func(s *ElasticScaler) { s.Spec.MinReplicas, s.Spec.MaxReplicas = i32(5), i32(3) }, "spec.maxReplicas", field.ErrorTypeInvalid, "minReplicas (5)"},
		{"max < min, StateTrigger", stateScaler, func(s *ElasticScaler) { s.Spec.MinReplicas, s.Spec.MaxReplicas = i32(5), i32(3) }, "spec.maxReplicas", field.ErrorTypeInvalid, "minReplicas (5)"},
		{"MetricsTrigger without maxReplicas", metricsScaler, func(s *ElasticScaler) { s.Spec.MaxReplicas = nil }, "spec.maxReplicas", field.ErrorTypeRequired, "MetricsTrigger"},
		// trigger.type.
		{"no trigger.type", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.Type = "" }, "spec.trigger.type", field.ErrorTypeRequired, "MetricsTrigger or StateTrigger"},
		{"unknown trigger.type", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.Type = "EventTrigger" }, "spec.trigger.type", field.ErrorTypeNotSupported, "MetricsTrigger"},
		{"trigger.type is case-sensitive", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.Type = "metricstrigger" }, "spec.trigger.type", field.ErrorTypeNotSupported, ""},
		// MetricsTrigger.
		{"MetricsTrigger without metricsTrigger", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.MetricsTrigger = nil }, "spec.trigger.metricsTrigger", field.ErrorTypeRequired, ""},
		{"MetricsTrigger with stateTrigger", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.StateTrigger = &StateTrigger{} }, "spec.trigger.stateTrigger", field.ErrorTypeForbidden, "only metricsTrigger"},
		{"bad scalingAlgorithm", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "my algo" }, "spec.trigger.metricsTrigger.scalingAlgorithm", field.ErrorTypeInvalid, ""},
		{"empty algorithmConfig key", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.MetricsTrigger.AlgorithmConfig[""] = "1" }, "spec.trigger.metricsTrigger.algorithmConfig", field.ErrorTypeInvalid, ""},
		{"no metrics", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.MetricsTrigger.Metrics = nil }, metrics, field.ErrorTypeRequired, "at least one metric"},
		{"metric without type", metricsScaler, metric(1, func(m *MetricSpec) { m.Type = "" }), metrics + "[1]", field.ErrorTypeInvalid, "invalid metric at index 1: type is required"},
		{"metric of unknown type", metricsScaler, metric(0, func(m *MetricSpec) { m.Type = "Pods" }), metrics + "[0]", field.ErrorTypeInvalid, "invalid metric at index 0: type must be"},
		{"metric without its sub-structure", metricsScaler, metric(0, func(m *MetricSpec) { m.Resource = nil }), metrics + "[0]", field.ErrorTypeInvalid, "invalid metric at index 0: resource is required for type Resource"},
		{"metric with two sub-structures", metricsScaler, metric(0, func(m *MetricSpec) {
			m.ExternalServer = &ExternalServerMetricSource{MetricsName: "x"}
		}), metrics + "[0]", field.ErrorTypeInvalid, "invalid metric at index 0: only resource may be set for type Resource, externalServer is set too"},
		{"metric sub-structure of another type", metricsScaler, metric(1, func(m *MetricSpec) { m.Type = CustomMetricSourceType }), metrics + "[1]", field.ErrorTypeInvalid, "only custom may be set"},
		{"Resource without metricsName", metricsScaler, metric(0, func(m *MetricSpec) { m.Resource.MetricsName = "" }), metrics + "[0]", field.ErrorTypeInvalid, "resource.metricsName is required"},
		{"Resource without target.type", metricsScaler, metric(0, func(m *MetricSpec) { m.Resource.Target.Type = "" }), metrics + "[0]", field.ErrorTypeInvalid, "resource.target.type is required"},
		{"Resource with target Value", metricsScaler, metric(0, func(m *MetricSpec) {
			m.Resource.Target = MetricTarget{Type: ValueMetricType, Value: qty("1")}
		}), metrics + "[0]", field.ErrorTypeInvalid, "resource.target.type must be Utilization or AverageValue"},
		{"Utilization without averageUtilization", metricsScaler, metric(0, func(m *MetricSpec) { m.Resource.Target.AverageUtilization = nil }), metrics + "[0]", field.ErrorTypeInvalid, "averageUtilization is required"},
		{"Utilization 0", metricsScaler, metric(0, func(m *MetricSpec) { m.Resource.Target.AverageUtilization = i32(0) }), metrics + "[0]", field.ErrorTypeInvalid, "averageUtilization must be positive"},
		{"Utilization with averageValue", metricsScaler, metric(0, func(m *MetricSpec) { m.Resource.Target.AverageValue = qty("1") }), metrics + "[0]", field.ErrorTypeInvalid, "averageValue must not be set for type Utilization"},
		{"External without metric.name", metricsScaler, metric(1, func(m *MetricSpec) { m.External.Metric.Name = "" }), metrics + "[1]", field.ErrorTypeInvalid, "external.metric.name is required"},
		{"External without value", metricsScaler, metric(1, func(m *MetricSpec) { m.External.Target.Value = nil }), metrics + "[1]", field.ErrorTypeInvalid, "external.target.value is required"},
		{"External with negative value", metricsScaler, metric(1, func(m *MetricSpec) { m.External.Target.Value = qty("-3") }), metrics + "[1]", field.ErrorTypeInvalid, "external.target.value must be positive"},
		{"ExternalServer without metricsName", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.MetricsName = "" }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.metricsName is required"},
		{"ExternalServer without target", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Target = "" }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.target is required"},
		{"ExternalServer target not a number", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Target = "lots" }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.target must be a positive number"},
		{"ExternalServer without endpoint", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Endpoint = "" }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.endpoint is required"},
		{"ExternalServer endpoint not a URL", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Endpoint = "prometheus:9090" }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.endpoint must be an http"},
		{"ExternalServer without query", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Query = " " }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.query is required"},
		{"ExternalServer bad protocol", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Protocol = "grpc" }), metrics + "[2]", field.ErrorTypeInvalid, "externalServer.protocol must be http or https"},
		{"ExternalServer protocol mismatch", metricsScaler, metric(2, func(m *MetricSpec) { m.ExternalServer.Protocol = "https" }), metrics + "[2]", field.ErrorTypeInvalid, "does not match"},
		{"Custom pods metric with Value", metricsScaler, metric(3, func(m *MetricSpec) {
			m.Custom.Target = MetricTarget{Type: ValueMetricType, Value: qty("1")}
		}), metrics + "[3]", field.ErrorTypeInvalid, "custom.target.type must be AverageValue"},
		{"Custom object without name", metricsScaler, metric(4, func(m *MetricSpec) { m.Custom.DescribedObject.Name = "" }), metrics + "[4]", field.ErrorTypeInvalid, "custom.describedObject.name is required"},
		{"Custom without metric.name", metricsScaler, metric(3, func(m *MetricSpec) { m.Custom.Metric.Name = "" }), metrics + "[3]", field.ErrorTypeInvalid, "custom.metric.name is required"},
		{"HPA with ExternalServer", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "HPA" }, metrics + "[2]", field.ErrorTypeInvalid, "invalid metric at index 2: type ExternalServer is not supported with scalingAlgorithm HPA"},
		{"HPA, case-insensitive, with ExternalServer", metricsScaler, func(s *ElasticScaler) { s.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "hpa" }, metrics + "[2]", field.ErrorTypeInvalid, "not supported with scalingAlgorithm HPA"},
		{"HPA with minReplicas 0", metricsScaler, func(s *ElasticScaler) {
			s.Spec.MinReplicas = i32(0)
			m := s.Spec.Trigger.MetricsTrigger
			m.ScalingAlgorithm, m.Metrics = "HPA", m.Metrics[:1]
		}, "spec.minReplicas", field.ErrorTypeInvalid, "HPA"},
		{"HPA with a target in another namespace", metricsScaler, func(s *ElasticScaler) {
			s.Spec.TargetRef.Namespace = "other"
			m := s.Spec.Trigger.MetricsTrigger
			m.ScalingAlgorithm, m.Metrics = "HPA", m.Metrics[:1]
		}, "spec.targetRef.namespace", field.ErrorTypeInvalid, "ElasticScaler's namespace"},
		// StateTrigger.
		{"StateTrigger without stateTrigger", stateScaler, func(s *ElasticScaler) { s.Spec.Trigger.StateTrigger = nil }, "spec.trigger.stateTrigger", field.ErrorTypeRequired, "stateTrigger: {}"},
		{"StateTrigger with metricsTrigger", stateScaler, func(s *ElasticScaler) {
			s.Spec.Trigger.MetricsTrigger = metricsScaler().Spec.Trigger.MetricsTrigger
		}, "spec.trigger.metricsTrigger", field.ErrorTypeForbidden, "only stateTrigger"},
		// debi's extension.
		{"negative debi.pausedReplicas", metricsScaler, func(s *ElasticScaler) { s.Spec.Debi.PausedReplicas = i32(-1) }, "spec.debi.pausedReplicas", field.ErrorTypeInvalid, "must not be negative"},
		{"debi.pausedReplicas with hpa-floor", metricsScaler, func(s *ElasticScaler) { s.Spec.Debi.Mode, s.Spec.Debi.PausedReplicas = DebiModeHPAFloor, i32(3) }, "spec.debi.pausedReplicas", field.ErrorTypeInvalid, "hpa-floor"},
		{"unknown debi.mode", metricsScaler, func(s *ElasticScaler) { s.Spec.Debi.Mode = "dry-run" }, "spec.debi.mode", field.ErrorTypeNotSupported, "shadow"},
		{"negative debi.leadTime", metricsScaler, func(s *ElasticScaler) { s.Spec.Debi.LeadTime.Duration = -time.Second }, "spec.debi.leadTime", field.ErrorTypeInvalid, ""},
		{"zero debi.historyStep", metricsScaler, func(s *ElasticScaler) { s.Spec.Debi.HistoryStep.Duration = 0 }, "spec.debi.historyStep", field.ErrorTypeInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.base()
			c.mutate(s)
			errs := s.Validate()
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			for _, e := range errs {
				if e.Field == c.path && e.Type == c.typ && strings.Contains(e.Error(), c.detail) {
					return
				}
			}
			t.Errorf("no %s error at %s containing %q; got:\n%s", c.typ, c.path, c.detail, errs.ToAggregate())
		})
	}
}

// TestValidateMetricMessage pins the whole text of a metric's error, as the webhook will show it.
func TestValidateMetricMessage(t *testing.T) {
	s := metricsScaler()
	s.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "HPA"
	errs := s.Validate()
	if len(errs) != 1 {
		t.Fatalf("want 1 error, got %v", errs)
	}
	const want = "spec.trigger.metricsTrigger.metrics[2]: Invalid value: invalid metric at index 2: type ExternalServer is not supported with scalingAlgorithm HPA (use Resource, External or Custom, or another algorithm)"
	if got := errs[0].Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseMetricsPolicy(t *testing.T) {
	def := DefaultMetricsPolicy()
	if def != (MetricsPolicy{60, "Average", "Ignore", 5, false, 1.5}) {
		t.Fatalf("defaults %+v", def)
	}
	with := func(f func(*MetricsPolicy)) MetricsPolicy { p := DefaultMetricsPolicy(); f(&p); return p }
	cases := []struct {
		name     string
		ann      map[string]string
		want     MetricsPolicy
		warnings []string // substrings, in order
	}{
		{"none", nil, def, nil},
		{"other annotations", map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "elasticscaler.io/name": "x"}, def, nil},
		{"the guide's example", map[string]string{
			AnnotationWindowSeconds: "120", AnnotationAggregationType: "Max", AnnotationMissingDataPolicy: "ignore",
			AnnotationGCFactor: "8", AnnotationEnableOutlierFilter: "true", AnnotationOutlierThreshold: "2.5",
		}, MetricsPolicy{120, "Max", "Ignore", 8, true, 2.5}, nil},
		{"partial", map[string]string{AnnotationWindowSeconds: "120", AnnotationAggregationType: "Max"},
			with(func(p *MetricsPolicy) { p.WindowSeconds, p.AggregationType = 120, "Max" }), nil},
		{"case-insensitive", map[string]string{AnnotationAggregationType: "p90", AnnotationMissingDataPolicy: "TREATASZERO", AnnotationEnableOutlierFilter: "True"},
			with(func(p *MetricsPolicy) {
				p.AggregationType, p.MissingDataPolicy, p.EnableOutlierFilter = "P90", "TreatAsZero", true
			}), nil},
		{"fail policy, min", map[string]string{AnnotationAggregationType: "min", AnnotationMissingDataPolicy: "fail", AnnotationEnableOutlierFilter: "false"},
			with(func(p *MetricsPolicy) { p.AggregationType, p.MissingDataPolicy = "Min", "Fail" }), nil},
		{"windowSeconds 0", map[string]string{AnnotationWindowSeconds: "0"}, def, []string{"windowSeconds: \"0\" is not a positive integer; using the default 60"}},
		{"windowSeconds negative", map[string]string{AnnotationWindowSeconds: "-5"}, def, []string{"windowSeconds"}},
		{"windowSeconds not an integer", map[string]string{AnnotationWindowSeconds: "1.5"}, def, []string{"windowSeconds"}},
		{"windowSeconds a duration", map[string]string{AnnotationWindowSeconds: "60s"}, def, []string{"windowSeconds"}},
		{"aggregationType unknown", map[string]string{AnnotationAggregationType: "P99"}, def, []string{"aggregationType: \"P99\" is not one of Average, Max, Min, P90; using the default Average"}},
		{"missingDataPolicy unknown", map[string]string{AnnotationMissingDataPolicy: "zero"}, def, []string{"missingDataPolicy"}},
		{"gcFactor 0", map[string]string{AnnotationGCFactor: "0"}, def, []string{"gcFactor: \"0\" is not a positive integer; using the default 5"}},
		{"enableOutlierFilter yes", map[string]string{AnnotationEnableOutlierFilter: "yes"}, def, []string{"enableOutlierFilter"}},
		{"outlierThreshold 0", map[string]string{AnnotationOutlierThreshold: "0"}, def, []string{"outlierThreshold: \"0\" is not a positive number; using the default 1.5"}},
		{"outlierThreshold NaN", map[string]string{AnnotationOutlierThreshold: "NaN"}, def, []string{"outlierThreshold"}},
		{"outlierThreshold Inf", map[string]string{AnnotationOutlierThreshold: "+Inf"}, def, []string{"outlierThreshold"}},
		{"unknown key", map[string]string{AnnotationPrefix + "window": "60"}, def, []string{"elasticscaler.io/metrics.window is not a metrics-policy key"}},
		{"one bad key keeps the good ones", map[string]string{AnnotationWindowSeconds: "abc", AnnotationGCFactor: "8", AnnotationOutlierThreshold: "-1"},
			with(func(p *MetricsPolicy) { p.GCFactor = 8 }), []string{"outlierThreshold", "windowSeconds"}},
		{"spaces", map[string]string{AnnotationWindowSeconds: " 30 "}, with(func(p *MetricsPolicy) { p.WindowSeconds = 30 }), nil},
	}
	for _, c := range cases {
		got, warnings := ParseMetricsPolicy(c.ann)
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		if len(warnings) != len(c.warnings) {
			t.Errorf("%s: warnings %q, want %d", c.name, warnings, len(c.warnings))
			continue
		}
		for i, w := range c.warnings {
			if !strings.Contains(warnings[i], w) {
				t.Errorf("%s: warning %q does not contain %q", c.name, warnings[i], w)
			}
		}
	}
}

// TestDeepCopy fills every field of an ElasticScaler, copies it, and checks the copy is equal and
// shares no memory with the original: a deepcopy stale against the types fails it.
func TestDeepCopy(t *testing.T) {
	var a, fresh ElasticScaler
	fill(reflect.ValueOf(&a).Elem(), 1)
	fill(reflect.ValueOf(&fresh).Elem(), 1)
	b := a.DeepCopy()
	if !reflect.DeepEqual(&a, b) {
		t.Fatal("copy differs")
	}
	fill(reflect.ValueOf(b).Elem(), 2)
	if !reflect.DeepEqual(a, fresh) {
		t.Fatal("changing the copy changed the original: the deepcopy shares memory (regenerate with hack/crds.sh)")
	}
	if a.DeepCopyObject() == nil || (&ElasticScalerList{Items: []ElasticScaler{a}}).DeepCopyObject() == nil {
		t.Fatal("DeepCopyObject")
	}
}

var (
	quantityType = reflect.TypeOf(resource.Quantity{})
	timeType     = reflect.TypeOf(metav1.Time{})
)

// fill sets every exported field reachable from v to a value that depends on seed, allocating
// pointers, two-element slices and two-entry maps.
func fill(v reflect.Value, seed int) {
	switch v.Type() {
	case quantityType:
		v.Set(reflect.ValueOf(resource.MustParse(string(rune('0' + seed)))))
		return
	case timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(int64(seed), 0).UTC())))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed)
			}
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), seed)
	case reflect.Slice:
		if v.Len() != 2 {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := 0; i < 2; i++ {
			fill(v.Index(i), seed+i)
		}
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for i := 0; i < 2; i++ {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, i)
			fill(e, seed)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString(string(rune('a' + seed)))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Uint8:
		v.SetUint(uint64(seed))
	case reflect.Bool:
		v.SetBool(seed%2 == 1)
	}
}
