package elasticscaler

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
)

func esFixture(t *testing.T, file string) *esv1.ElasticScaler {
	t.Helper()
	b, err := os.ReadFile(file)
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

// TestGuideAPIMetrics: the guide's External and Custom metrics become metrics read from the
// metrics APIs (External, Object for a describedObject, Pods without), each with its Value or
// AverageValue target, and Resource memory a PromQL metric on the memory recording rules (80 %
// of the request at the reference utilization 0.5: a factor 0.8/0.5); nothing is ignored.
func TestGuideAPIMetrics(t *testing.T) {
	op, warns := translate(t, esFixture(t, "testdata/es-api-metrics.yaml"))
	for _, w := range warns {
		if strings.Contains(w, "ignored") || strings.Contains(w, "not supported") {
			t.Errorf("warning %q: no metric may be ignored", w)
		}
	}
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	p, _ := c.PolicyByName("shop.worker")
	ms := p.ScaleMetrics()
	if len(ms) != 5 {
		t.Fatalf("%d metrics, want 5: %+v", len(ms), ms)
	}
	names := []string{}
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "cpu,queue_depth,requests_per_second,http_requests,memory" {
		t.Fatalf("metric names %s", got)
	}
	q, ing, pods, mem := ms[1], ms[2], ms[3], ms[4]
	if s := q.Source; s == nil || s.Type != config.SourceExternal || s.Metric != "queue_depth" || s.Namespace != "shop" ||
		s.Selector == nil || s.Selector.MatchLabels["queue"] != "orders" {
		t.Errorf("external source %+v", q.Source)
	}
	if s := ing.Source; s == nil || s.Type != config.SourceObject || s.Object != (config.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"}) || s.Namespace != "shop" {
		t.Errorf("object source %+v", ing.Source)
	}
	if s := pods.Source; s == nil || s.Type != config.SourcePods || s.Metric != "http_requests" {
		t.Errorf("pods source %+v", pods.Source)
	}
	// In the metrics list the cpu target is the cpu metric's (70 % of the request) and the rule
	// keeps hpa's default target 0.5, the reference utilization: 30 messages per pod are a
	// capacity of 30/0.5 = 60 at load 1; the Ingress's 2000 over 4 pods 2000/0.5/4 = 1000; 100
	// per pod 100/0.5 = 200.
	for _, tc := range []struct {
		m    config.ScaleMetric
		want float64
	}{{q, 60}, {ing, 1000}, {pods, 200}} {
		if got := tc.m.CapacityPerPod(tc.m.Capacity, 4); !approxEq(got, tc.want) {
			t.Errorf("%s: capacity %v, want %v", tc.m.Name, got, tc.want)
		}
	}
	if mem.Source != nil || mem.Unit != "bytes" || !strings.Contains(mem.Query, "namespace_workload:debi_memory_working_set_bytes:sum") ||
		!strings.Contains(mem.CapacityQuery, "namespace_workload:debi_memory_request_per_pod_bytes:avg") || mem.Factor != 0.8/0.5 {
		t.Errorf("memory %+v", mem)
	}
}

func approxEq(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestGuideAPIMetricErrors: an error in a translated API metric is reported at the object's
// field path, not the policy's.
func TestGuideAPIMetricErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*esv1.ElasticScaler)
		path  string
		inMsg string
	}{
		{"external metric name", func(es *esv1.ElasticScaler) {
			es.Spec.Trigger.MetricsTrigger.Metrics[1].External.Metric.Name = "a/b"
		}, "spec.trigger.metricsTrigger.metrics[1].external.metric.name", "not a metric name"},
		{"external selector", func(es *esv1.ElasticScaler) {
			es.Spec.Trigger.MetricsTrigger.Metrics[1].External.Metric.Selector = &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "q", Operator: "Near", Values: []string{"x"}}}}
		}, "spec.trigger.metricsTrigger.metrics[1].external.metric.selector", "Near"},
		{"described object api version", func(es *esv1.ElasticScaler) {
			es.Spec.Trigger.MetricsTrigger.Metrics[2].Custom.DescribedObject.APIVersion = "a/b/c"
		}, "spec.trigger.metricsTrigger.metrics[2].custom.describedObject.apiVersion", "not a group/version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := esFixture(t, "testdata/es-api-metrics.yaml")
			tc.mod(es)
			op, _, err := TranslateElasticScaler(es)
			if err == nil {
				_, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
				err = errors.Join(errs...)
			}
			var oe *config.ObjectError
			if !errors.As(err, &oe) || oe.Path != tc.path || !strings.Contains(err.Error(), tc.inMsg) {
				t.Fatalf("error %v; want one at %s saying %q", err, tc.path, tc.inMsg)
			}
		})
	}
}

// TestZeroWithExternalMetric: spec.minReplicas 0 on an object whose trigger reads an External
// metric (read from outside the pods) is a policy that scales to zero, woken by that metric
// only; it passes the configuration's validation as the file's would.
func TestZeroWithExternalMetric(t *testing.T) {
	es := esFixture(t, "testdata/es-api-metrics.yaml")
	zero := int32(0)
	es.Spec.MinReplicas = &zero
	es.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "BUDGET"
	op, _ := translate(t, es)
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	p, _ := c.PolicyByName("shop.worker")
	cfgs, names, err := p.RunnerConfigs()
	if err != nil || p.Scaling.MinReplicas != 0 {
		t.Fatalf("min %d, err %v", p.Scaling.MinReplicas, err)
	}
	var wakes []string
	for i, c := range cfgs {
		if c.Wake {
			wakes = append(wakes, names[i])
		}
	}
	if got := strings.Join(wakes, ","); got != "queue_depth,requests_per_second" {
		t.Errorf("wake metrics %s, want the External queue_depth and the Custom requests_per_second of an Ingress", got)
	}
}
