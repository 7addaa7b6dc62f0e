package webhook

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
)

// TestTidalBindsObjectPolicy: a Tidal labelled elasticscaler.io/name=<object> (the guide's
// binding) drives the policy of that ElasticScaler, <namespace>.<name>.
func TestTidalBindsObjectPolicy(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	es := &esv1.ElasticScaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-scaler"},
		Spec: esv1.ElasticScalerSpec{
			TargetRef: esv1.TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MinReplicas: i32(2), MaxReplicas: i32(12),
			Trigger: esv1.Trigger{Type: esv1.MetricsTriggerType, MetricsTrigger: &esv1.MetricsTrigger{Metrics: []esv1.MetricSpec{{
				Type: esv1.ResourceMetricSourceType, Resource: &esv1.ResourceMetricSource{MetricsName: "cpu",
					Target: esv1.MetricTarget{Type: esv1.UtilizationMetricType, AverageUtilization: i32(60)}}}}}},
		},
	}
	op, _, err := elasticscaler.TranslateElasticScaler(es)
	if err != nil {
		t.Fatal(err)
	}
	cfg, errs := testConfig(t, "webhook: {allow_unauthenticated: true}\n").WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name   string
		labels map[string]string
		after  int32
		want   string
	}{
		{"by name", map[string]string{LabelScalerName: "web-scaler"}, 9, ""},
		{"by name and namespace", map[string]string{LabelScalerName: "web-scaler", LabelScalerNamespace: "shop"}, 9, ""},
		{"clamped to the object's maxReplicas", map[string]string{LabelScalerName: "web-scaler"}, 12, ""},
		{"another object", map[string]string{LabelScalerName: "api-scaler"}, 0, `nor "shop.api-scaler"`},
		{"the object in another namespace", map[string]string{LabelScalerName: "web-scaler", LabelScalerNamespace: "other"}, 0, `nor "other.web-scaler"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"web": 4})
			desired := 9.0
			if tc.after == 12 {
				desired = 40
			}
			ev := TidalEvent{Namespace: "shop", Name: "t", Labels: tc.labels, Status: TidalStatus{DesiredReplicas: f(desired)}}
			act.tidals["shop/t"] = tidalObjectFrom(ev)
			c := newTestController(t, cfg, act, nil, nil)
			out, err := c.Tidal(context.Background(), &TidalEvent{Namespace: "shop", Name: "t"})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || len(act.Writes()) != 0 {
					t.Fatalf("err = %v, writes %v; want %q and no write", err, act.Writes(), tc.want)
				}
				return
			}
			if err != nil || out.After != tc.after || out.Policy != "shop.web-scaler" {
				t.Fatalf("out %+v err %v; want %d by shop.web-scaler", out, err, tc.after)
			}
		})
	}
}

// TestWebhookElasticScalers: with global.elastic_scalers on, a running webhook puts an
// ElasticScaler created at run time in force (debi_webhook_policy_info), follows a change of its
// spec.debi.mode, keeps it across a reload of the file and drops it when the object is deleted.
func TestWebhookElasticScalers(t *testing.T) {
	began := time.Now()
	e := newKubeEnv(t)
	ctx := context.Background()
	e.applyFile(t, "../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	esGVR := schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}
	poll(t, 20*time.Second, "elasticscalers served", func() bool {
		_, err := e.dyn.Resource(esGVR).Namespace(e.ns).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	file := "global: {elastic_scalers: {enabled: true, namespaces: [" + e.ns + "]}}\n" +
		"webhook: {allow_unauthenticated: true, tidal: {enabled: false}}\n"
	if err := os.WriteFile(cfgFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	url := runWebhook(t, Options{ConfigFile: cfgFile, RestConfig: e.rc, EnableLifecycle: true}, reg)
	metrics := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor := func(what string, cond func(string) bool) time.Duration {
		t.Helper()
		start := time.Now()
		var body string
		for time.Since(start) < 20*time.Second {
			if body = metrics(); cond(body) {
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "debi_webhook_policy_info") {
				lines = append(lines, l)
			}
		}
		t.Fatalf("timed out waiting for %s; policy info:\n%s", what, strings.Join(lines, "\n"))
		return 0
	}
	policy := `policy="` + e.ns + `.vllm-scaler"`
	es := e.dyn.Resource(esGVR).Namespace(e.ns)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": "vllm-scaler", "namespace": e.ns},
		"spec": map[string]any{
			"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
			"minReplicas": int64(1), "maxReplicas": int64(10),
			"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
				"scalingAlgorithm": "APA",
				"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
					"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
					"query": `sum(rate(http_requests_total{job="vllm"}[1m]))`}}},
			}},
		},
	}}
	if _, err := es.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitFor("the object's policy", func(b string) bool {
		return strings.Contains(b, `debi_webhook_policy_info{algorithm="apa",mode="act",`+policy+`} 1`)
	})
	t.Logf("created → debi_webhook_policy_info{%s,mode=act} in %v", policy, d.Round(time.Millisecond))

	u, err := es.Get(ctx, "vllm-scaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "shadow", "spec", "debi", "mode")
	if _, err := es.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor("mode shadow", func(b string) bool {
		return strings.Contains(b, `debi_webhook_policy_info{algorithm="apa",mode="shadow",`+policy+`} 1`) &&
			!strings.Contains(b, `mode="act",`+policy)
	})
	t.Logf("spec.debi.mode act → shadow in force in %v", d.Round(time.Millisecond))

	// A reload of a changed file keeps the object's policy.
	if err := os.WriteFile(cfgFile, []byte(file+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, msg := request(t, "POST", url+"/-/reload", "", ""); code != 200 {
		t.Fatalf("reload: %d %s", code, msg)
	}
	if b := metrics(); !strings.Contains(b, `debi_webhook_policy_info{algorithm="apa",mode="shadow",`+policy+`} 1`) {
		t.Fatalf("object policy lost on reload")
	}

	if err := es.Delete(ctx, "vllm-scaler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor("the policy gone", func(b string) bool { return !strings.Contains(b, policy) })
	t.Logf("deleted → gone in %v; whole test %v", d.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}
