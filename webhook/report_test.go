package webhook

import (
	"context"
	"testing"

	"github.com/debi-scaler/debi/elasticscaler"
)

// TestControllerObserve: every decision reaches the Observe hook with what it read.
func TestControllerObserve(t *testing.T) {
	cfg := testConfig(t, `
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: apa
    request: 1
    scaling: {min_replicas: 1, max_replicas: 20}
webhook: {allow_unauthenticated: true}
`)
	var got []elasticscaler.Decision
	c, err := NewController(cfg, ControllerOptions{Actuator: newFakeActuator(map[string]int32{"web": 4}),
		Query: staticQuery(map[string]float64{`debi_load_ratio{policy="web",load="w"}`: 0.9}), Observe: func(o elasticscaler.Decision) { got = append(got, o) }})
	if err != nil {
		t.Fatal(err)
	}
	msg := &AlertmanagerMessage{Alerts: []Alert{{Status: StatusFiring, Labels: map[string]string{"policy": "web"}}}}
	if _, err := c.Alerts(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Policy != "web" || got[0].Metrics == nil || got[0].Metrics.Inputs == 0 {
		t.Fatalf("observations %+v", got)
	}
	t.Logf("observation: %+v metrics %+v", got[0], *got[0].Metrics)
}
