package webhook

import (
	"strings"
	"testing"

	"github.com/debi-scaler/debi/elasticscaler"
)

// TestMetricsConditionNamesEndpoint: the MetricsPipeline condition of a policy whose metric on
// its own endpoint is missing names the metric and the endpoint; a stale policy names its
// metrics on their own endpoints.
func TestMetricsConditionNamesEndpoint(t *testing.T) {
	c := testConfig(t, `
global: {prometheus_url: http://prometheus:9090}
webhook: {allow_unauthenticated: true}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    metrics:
      - {name: cpu, target: {type: Utilization, averageUtilization: 60}}
      - {name: qps, unit: requests_per_second, query: 'sum(rate(reqs[1m]))', endpoint: {url: 'http://debi:pw@prometheus-b:9090'}, target: {type: AverageValue, averageValue: "10"}}
`)
	ctl, err := NewController(c, ControllerOptions{Actuator: newFakeActuator(map[string]int32{"web": 4})})
	if err != nil {
		t.Fatal(err)
	}
	ps := ctl.policies["web"]
	bad := ps.withEndpoints([]string{"load@qps: no series", "load@cpu: no series"})
	m := elasticscaler.MetricsCondition(&elasticscaler.MetricsRead{Inputs: 4, Failed: bad}, 1)
	if !strings.Contains(m.Message, "load@qps: no series (metric qps reads endpoint http://debi:xxxxx@prometheus-b:9090)") ||
		strings.Contains(m.Message, "metric cpu reads") || strings.Contains(m.Message, "pw@") {
		t.Errorf("message %q: want the qps metric's endpoint, its password redacted", m.Message)
	}
	if note := ps.endpointNote(); note != "; metric qps reads endpoint http://debi:xxxxx@prometheus-b:9090" {
		t.Errorf("stale note %q", note)
	}
}
