package webhook

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
