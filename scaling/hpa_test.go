package scaling

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestHPAReplicaCalculator(t *testing.T) {
	for _, tc := range []struct {
		name         string
		current, rdy int32
		w            float64
		want         int32
		reason       string
	}{
		// usage ratio 0.54/0.5 = 1.08, inside the 0.1 tolerance.
		{"inside tolerance", 4, 4, 0.54, 4, ReasonTolerance},
		// ratio 2 → ceil(2·4) = 8; the default policies allow max(4+4, 4·2) = 8.
		{"scale up", 4, 4, 1.0, 8, ReasonScaleUp},
		// ratio 5 → 10, limited to max(2+4, ceil(2·2)) = 6 in one 15 s period.
		{"scale up rate-limited", 2, 2, 2.5, 6, ReasonRateLimited},
		// ratio 0.2 → ceil(0.2·10) = 2; first decision, nothing in the window yet but itself.
		{"scale down first decision", 10, 10, 0.1, 2, ReasonScaleDown},
		// 5 of 10 pods starting. Load = 0.4·10 = 4 pod-units; over ready pods 4/5 = 0.8 →
		// ratio 1.6 > 1, so unready pods count as idle: 4/10/0.5 = 0.8 < 1 → keep 10.
		{"unready pods hold a scale-up", 10, 5, 0.4, 10, ReasonTolerance},
		// Load 9 pod-units over 5 ready → ratio 3.6; with unready idle 9/10/0.5 = 1.8 → 18,
		// limited to max(10+4, 20) = 20 → 18.
		{"unready pods counted idle", 10, 5, 0.9, 18, ReasonScaleUp},
		// Above max replicas: Kubernetes brings the size back to max first.
		{"above max", 60, 60, 0.5, 50, ReasonMaxReplicas},
		// Load 3·0.5 → ratio 30 → 30 pods, clamped to max 50 is not hit; rate limit 1+4=5.
		{"from one pod", 1, 1, 15, 5, ReasonRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHPA(DefaultParams())
			d := h.Recommend(Input{Time: t0, Current: tc.current, Ready: tc.rdy, W: tc.w})
			if d.Replicas != tc.want || d.Reason != tc.reason {
				t.Errorf("got %d (%s), want %d (%s)", d.Replicas, d.Reason, tc.want, tc.reason)
			}
		})
	}
}

func TestHPANoMetricsKeepsSize(t *testing.T) {
	h := NewHPA(DefaultParams())
	if d := h.Recommend(Input{Time: t0, Current: 7, Ready: 7, W: math.NaN()}); d.Replicas != 7 || d.Reason != ReasonNoLoad {
		t.Fatalf("NaN load: got %+v, want 7 (no-load-data)", d)
	}
	if d := h.Recommend(Input{Time: t0, Current: 0, Ready: 0, W: 5}); d.Replicas != 0 || d.Reason != ReasonScaledToZero {
		t.Fatalf("scaled to zero: got %+v, want 0", d)
	}
}

// TestHPAScaleDownStabilization: a high recommendation holds the size for the 5-minute window
// (the maximum of the recommendations in it), then the size follows the load down.
func TestHPAScaleDownStabilization(t *testing.T) {
	h := NewHPA(DefaultParams())
	n := int32(10)
	step := func(at time.Duration, w float64) Decision {
		d := h.Recommend(Input{Time: t0.Add(at), Current: n, Ready: n, W: w})
		n = d.Replicas
		return d
	}
	if d := step(0, 0.5); d.Replicas != 10 {
		t.Fatalf("t=0: %d, want 10", d.Replicas)
	}
	for m := 1; m <= 5; m++ {
		// desired ceil(0.1/0.5·10) = 2, but 10 was recommended at t=0, within the window
		// (strictly after now−5m) until t=5m.
		d := step(time.Duration(m)*time.Minute-time.Second, 0.1)
		if d.Replicas != 10 || d.Reason != ReasonStabilized {
			t.Fatalf("t=%dm: %d (%s), want 10 stabilized", m, d.Replicas, d.Reason)
		}
	}
	// At 5m01s the t=0 recommendation has left the window; the others are all 2.
	if d := step(5*time.Minute+time.Second, 0.1); d.Replicas != 2 {
		t.Fatalf("after the window: %d, want 2", d.Replicas)
	}
}

// TestHPAScaleUpEventsFromObservedSize: scale events are taken from the sizes the HPA is shown,
// so a second scale-up inside the same 15 s period is limited by the first.
func TestHPAScaleUpEventsFromObservedSize(t *testing.T) {
	h := NewHPA(DefaultParams())
	h.Recommend(Input{Time: t0, Current: 4, Ready: 4, W: 0.5})
	// The size went 4 → 8 (someone applied a scale-up); 5 s later the load asks for 32.
	// Period start = 8 − 4 added = 4 → limit max(4+4, 4·2) = 8: no further growth yet.
	d := h.Recommend(Input{Time: t0.Add(5 * time.Second), Current: 8, Ready: 8, W: 2})
	if d.Replicas != 8 || d.Reason != ReasonRateLimited {
		t.Fatalf("within the period: %+v, want 8 rate-limited", d)
	}
	// 16 s after the event it has left the 15 s period: limit max(8+4, 16) = 16.
	d = h.Recommend(Input{Time: t0.Add(21 * time.Second), Current: 8, Ready: 8, W: 2})
	if d.Replicas != 16 {
		t.Fatalf("after the period: %+v, want 16", d)
	}
}

func TestHPAMinClamp(t *testing.T) {
	p := DefaultParams()
	p.MinReplicas = 3
	h := NewHPA(p)
	if d := h.Recommend(Input{Time: t0, Current: 5, Ready: 5, W: 0.01}); d.Replicas != 3 || d.Reason != ReasonMinReplicas {
		t.Fatalf("got %+v, want min 3", d)
	}
	// Below min, Kubernetes rescales to min at once: no stabilisation, no rate limit, whatever
	// the load says.
	h = NewHPA(p)
	h.Recommend(Input{Time: t0, Current: 3, Ready: 3, W: 0.5})
	if d := h.Recommend(Input{Time: t0.Add(time.Second), Current: 1, Ready: 1, W: 0.01}); d.Replicas != 3 || d.Reason != ReasonMinReplicas {
		t.Fatalf("below min: got %+v, want 3 at once", d)
	}
}

func TestAPA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current int32
		w       float64
		want    int32
		reason  string
	}{
		{"inside up tolerance", 4, 0.54, 4, ReasonTolerance},      // 1.08 ≤ 1.1
		{"scale up", 4, 0.75, 6, ReasonScaleUp},                   // ceil(4·1.5) = 6
		{"scale up capped by rate", 4, 2.0, 8, ReasonRateLimited}, // want 16, cap 4·2
		{"scale down", 10, 0.3, 6, ReasonScaleDown},               // ceil(10·0.6) = 6
		{"scale down capped by rate", 10, 0.05, 5, ReasonRateLimited},
		{"max clamp", 40, 1.5, 50, ReasonMaxReplicas},
		{"no data keeps size", 7, math.NaN(), 7, ReasonNoLoad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New("apa", DefaultParams())
			if err != nil {
				t.Fatal(err)
			}
			d := a.Recommend(Input{Current: tc.current, Ready: tc.current, W: tc.w})
			if d.Replicas != tc.want || d.Reason != tc.reason {
				t.Errorf("got %d (%s), want %d (%s)", d.Replicas, d.Reason, tc.want, tc.reason)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	for _, n := range []string{"hpa", "HPA", "Apa", "debi"} {
		if _, err := New(n, DefaultParams()); err != nil {
			t.Errorf("New(%q): %v", n, err)
		}
	}
	_, err := New("kpa", DefaultParams())
	if err == nil || !contains(err.Error(), "hpa") {
		t.Errorf("unknown algorithm error should list the known ones, got %v", err)
	}
}

func TestParamsValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		field string
		mut   func(*Params)
	}{
		{"min_replicas", func(p *Params) { p.MinReplicas = 0 }},
		{"max_replicas", func(p *Params) { p.MaxReplicas = 0 }},
		{"target", func(p *Params) { p.Target = math.NaN() }},
		{"tolerance", func(p *Params) { p.Tolerance = -1 }},
		{"upper", func(p *Params) { p.Upper = 0.2 }},
		{"rounding", func(p *Params) { p.Rounding = "up" }},
		{"max_scale_up_rate", func(p *Params) { p.MaxScaleUpRate = 0.5 }},
		{"scale_down_percent", func(p *Params) { p.ScaleDownPercent = 150 }},
	} {
		p := DefaultParams()
		tc.mut(&p)
		err := p.Validate()
		if err == nil || !contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v does not name the field", tc.field, err)
		}
		if _, err := New("hpa", p); err == nil {
			t.Errorf("%s: New accepted invalid params", tc.field)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}
