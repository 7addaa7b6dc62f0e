package exporter

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestPathDelayNote: a scale-up's delay runs from the step that first recommended it to the step
// whose size reaches it; a recommendation withdrawn, or not applied within pathGiveUp, is no
// sample; a larger recommendation while one waits does not restart the wait; the ring keeps
// the last pathSamples.
func TestPathDelayNote(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	var d pathDelay
	d.note(at(0), 2, 2)
	d.note(at(15), 2, 4)  // asks for 4
	d.note(at(30), 2, 5)  // more, still waiting for 4
	d.note(at(45), 3, 5)  // partly
	d.note(at(60), 4, 5)  // 4 reached: 45 s; 5 is asked from here
	d.note(at(75), 5, 5)  // 5 reached: 15 s
	d.note(at(90), 5, 7)  // asks for 7…
	d.note(at(105), 5, 5) // …and withdraws it: no sample
	d.note(at(120), 5, 9) // asks for 9, never applied
	d.note(at(120+int(pathGiveUp.Seconds())+15), 5, 5)
	if len(d.samples) != 2 || d.samples[0] != 45 || d.samples[1] != 15 {
		t.Fatalf("samples %v, want [45 15]", d.samples)
	}
	if q := d.quantiles(); q[0] != 30 || math.Abs(q[1]-42) > 1e-9 || math.Abs(q[2]-44.7) > 1e-9 {
		t.Errorf("quantiles %v, want [30 42 44.7] (PromQL's)", q)
	}
	for i := range 2 * pathSamples {
		base := 1000 + 100*i
		d.note(at(base), 1, 2)
		d.note(at(base+15*(i%4+1)), 2, 2)
	}
	if len(d.samples) != pathSamples {
		t.Fatalf("%d samples kept, want %d", len(d.samples), pathSamples)
	}
	if q := d.quantiles(); q[0] != 37.5 || q[2] != 60 {
		t.Errorf("quantiles of the last %d: %v, want median 37.5 and 0.99 60", pathSamples, q)
	}
	var empty pathDelay
	if q := empty.quantiles(); !math.IsNaN(q[0]) {
		t.Errorf("quantiles without samples %v, want NaN", q)
	}
}

// TestPathDelayPublished: an acting policy publishes its decision path's quantiles and sample
// count; a shadow policy on the same target, whose recommendations nobody applies, does not.
func TestPathDelayPublished(t *testing.T) {
	size := 2.0
	f := &fakeQuerier{byExpr: map[string]series{
		"demand":   func(time.Time) (float64, bool, error) { return 3.6, true, nil }, // 4 pods at 0.9 target
		"replicas": func(time.Time) (float64, bool, error) { return size, true, nil },
		"ready":    func(time.Time) (float64, bool, error) { return size, true, nil },
	}}
	e, reg, logs := newLoggedExporter(t, `
webhook:
  mode: act
  policies:
    - {name: web-shadow, mode: shadow}
policies:
  - name: web
    target: {kind: Deployment, namespace: shop, name: web}
    algorithm: hpa
    request: 1
    queries: {demand: demand, replicas: replicas, ready_replicas: ready}
    scaling: {target: 0.9}
  - name: web-shadow
    target: {kind: Deployment, namespace: shop, name: web}
    algorithm: hpa
    request: 1
    queries: {demand: demand, replicas: replicas, ready_replicas: ready}
    scaling: {target: 0.9}
`, f)
	ctx := context.Background()
	for i := range 4 {
		if i == 3 {
			size = 4 // applied at the fourth step
		}
		e.Step(ctx, t0.Add(time.Duration(i)*e.interval))
	}
	if got := gauge(t, reg, "debi_recommended_replicas", "web"); got != 4 {
		t.Fatalf("recommended %v, want 4\n%s", got, logs.String())
	}
	wait := (3 * e.interval).Seconds()
	if got := gauge(t, reg, "debi_lead_time_seconds", "web", "component", "path", "quantile", "0.9"); got != wait {
		t.Errorf("path delay %v, want %v (three steps)", got, wait)
	}
	if got := gauge(t, reg, "debi_lead_time_samples", "web", "component", "path"); got != 1 {
		t.Errorf("path samples %v, want 1", got)
	}
	if _, ok := value(t, reg, "debi_lead_time_samples", "web-shadow", "component", "path"); ok {
		t.Error("a shadow policy's path is measured")
	}
}
