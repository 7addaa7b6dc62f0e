package webhook

import (
	"context"
	"testing"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/scaling"
)

// zeroConfigYAML scales a model server to zero on its router's request rate (hpa: KEDA's rule).
const zeroConfigYAML = `
policies:
  - name: llm
    target: {namespace: ai, name: vllm}
    algorithm: hpa
    scaling: {min_replicas: 0, max_replicas: 10, target: 0.5, scale_to_zero_after: 5m}
    metrics:
      - name: requests
        unit: requests_per_second
        query: sum(rate(router_requests_total[1m]))
        target: {type: AverageValue, averageValue: "2"}
        activation: 0
webhook:
  mode: act
  allow_unauthenticated: true
`

const (
	qLLMLoad     = `debi_load_ratio{load="w",metric="requests",policy="llm"}`
	qLLMReplicas = `debi_current_replicas{policy="llm"}`
	qLLMIdle     = `debi_policy_idle_seconds{policy="llm"}`
)

// TestScaleToZeroDecisions: a policy with min_replicas 0 reads the exporter's idle time. Idle
// for scale_to_zero_after, it goes to zero; at zero it stays while idle and wakes, to one pod as
// KEDA does (the published state of hpa at zero allows one), while a wake metric is active; at
// zero a target is not taken for paused; a missing idle time holds the size.
func TestScaleToZeroDecisions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current int32
		values  map[string]float64
		after   int32
		reason  string
	}{
		{"idle for 5m: to zero", 3, map[string]float64{qLLMLoad: 0.01, qLLMReplicas: 3, qLLMIdle: 300}, 0, scaling.ReasonIdle},
		{"idle for less", 3, map[string]float64{qLLMLoad: 0.01, qLLMReplicas: 3, qLLMIdle: 299}, 3, "stabilized"},
		{"at zero, idle: stays", 0, map[string]float64{qLLMLoad: 0.01, qLLMReplicas: 0, qLLMIdle: 900, `debi_decision_ceiling_replicas{policy="llm"}`: 1}, 0, scaling.ReasonIdle},
		{"at zero, active: wakes to one pod", 0, map[string]float64{qLLMLoad: 3, qLLMReplicas: 0, qLLMIdle: 0, `debi_decision_ceiling_replicas{policy="llm"}`: 1}, 1, scaling.ReasonWoken},
		{"no idle time: hold", 3, map[string]float64{qLLMLoad: 0.01, qLLMReplicas: 3, qLLMIdle: nan}, 3, "held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"vllm": tc.current})
			q := &recordingQuery{values: tc.values, ambiguous: map[string]bool{}}
			if _, ok := tc.values[`debi_decision_floor_replicas{policy="llm"}`]; !ok && tc.current > 0 {
				q.values[`debi_decision_floor_replicas{policy="llm"}`] = float64(tc.current) // the HPA's stabilisation window
			}
			c := newTestController(t, testConfig(t, zeroConfigYAML), act, q.query, nil)
			outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "llm")})))
			if err != nil {
				t.Fatal(err)
			}
			o := outs[0]
			if o.After != tc.after || o.Reason != tc.reason {
				t.Fatalf("outcome %+v, want %d (%s)", o, tc.after, tc.reason)
			}
			if wrote := len(act.Writes()) > 0; wrote != (tc.after != tc.current) {
				t.Errorf("writes %v for %d → %d", act.Writes(), tc.current, tc.after)
			}
		})
	}
}
