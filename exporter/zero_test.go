package exporter

import (
	"context"
	"testing"
	"time"
)

// TestIdlePublished: a policy that scales to zero publishes how long its wake metric has been
// idle (debi_policy_idle_seconds, the webhook's queries.idle) and goes to zero at
// scale_to_zero_after; at zero, its router's requests wake it; a policy with min_replicas 1
// publishes no idle time.
func TestIdlePublished(t *testing.T) {
	rps, replicas := 10.0, 2.0
	f := &fakeQuerier{byExpr: map[string]series{
		"rps":      func(time.Time) (float64, bool, error) { return rps, true, nil },
		"replicas": func(time.Time) (float64, bool, error) { return replicas, true, nil },
		"ready":    func(time.Time) (float64, bool, error) { return replicas, true, nil },
		"demand":   constant(1),
	}}
	e, reg := newTestExporter(t, `
global: {interval: 1m}
policies:
  - name: llm
    target: {namespace: ai, name: vllm}
    algorithm: apa
    scaling: {min_replicas: 0, scale_to_zero_after: 3m}
    queries: {replicas: 'replicas', ready_replicas: 'ready'}
    metrics:
      - {name: requests, unit: requests_per_second, query: rps, target: {type: AverageValue, averageValue: "10"}, activation: 0.5, stabilization: {window: 1m}}
  - name: web
    target: {namespace: shop, name: web}
    algorithm: apa
    request: 1
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`, f)
	step := func(min int) (idle, rec float64) {
		t.Helper()
		e.Step(context.Background(), t0.Add(time.Duration(min)*time.Minute))
		idle, ok := value(t, reg, "debi_policy_idle_seconds", "llm")
		if !ok {
			t.Fatalf("minute %d: no debi_policy_idle_seconds for llm", min)
		}
		rec, _ = value(t, reg, "debi_recommended_replicas", "llm")
		return idle, rec
	}
	if idle, _ := step(0); idle != 0 {
		t.Fatalf("10 requests/s, activation 0.5: idle %v, want 0", idle)
	}
	rps = 0
	for m := 1; m < 3; m++ {
		if idle, rec := step(m); rec == 0 {
			t.Fatalf("minute %d, idle %v s: recommended 0 before scale_to_zero_after", m, idle)
		}
	}
	if idle, rec := step(3); idle != 180 || rec != 0 {
		t.Fatalf("last active at minute 0: idle %v s, recommended %v; want 180 s and 0", idle, rec)
	}
	replicas, rps = 0, 0.2
	if idle, rec := step(4); idle != 240 || rec != 0 {
		t.Fatalf("at zero, 0.2 requests/s below the activation: idle %v s, recommended %v; want 240 s and 0", idle, rec)
	}
	rps = 12
	if idle, rec := step(5); idle != 0 || rec < 1 {
		t.Fatalf("at zero, 12 requests/s: idle %v s, recommended %v; want 0 and woken", idle, rec)
	}
	if _, ok := value(t, reg, "debi_policy_idle_seconds", "web"); ok {
		t.Error("web (min_replicas 1) publishes an idle time")
	}
}
