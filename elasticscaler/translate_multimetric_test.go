package elasticscaler

import (
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/config"
)

// TestGuideTwoMetrics: an ElasticScaler with a Resource cpu and an ExternalServer metric becomes
// a policy on both (the metrics list), each at its own target, with the object's metrics policy;
// nothing is ignored with a warning any more.
func TestGuideTwoMetrics(t *testing.T) {
	op, warns := translate(t, guideScaler(t, "../../elasticscaler/testdata/es-two-metrics.yaml"))
	for _, w := range warns {
		if strings.Contains(w, "ignored") {
			t.Errorf("warning %q: no metric may be ignored", w)
		}
	}
	c, errs := loadFile(t).WithPolicies([]config.ObjectPolicy{op})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	p, _ := c.PolicyByName(op.Policy.Name)
	ms := p.ScaleMetrics()
	if len(ms) != 2 || ms[0].Name != "cpu" || ms[1].Name != "inference_qps" || ms[1].Unit != "items" {
		t.Fatalf("metrics %+v", ms)
	}
	// apa at target 0.5: cpu at 60 % of the request → capacity request × 0.6/0.5; qps 100 per
	// pod → 200 at load 1.
	if got := ms[0].CapacityPerPod(1, 3); got != 0.6/0.5 {
		t.Errorf("cpu capacity %v, want %v", got, 0.6/0.5)
	}
	if got := ms[1].CapacityPerPod(ms[1].Capacity, 3); got != 200 {
		t.Errorf("qps capacity %v, want 200", got)
	}
	if !strings.Contains(ms[1].Query, "http_requests_total") || ms[1].Stabilization.Window != 120*time.Second {
		t.Errorf("qps %+v", ms[1])
	}
}
