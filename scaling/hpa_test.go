package scaling

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestHPAReplicaCalculator: one decision of a fresh HPA. The controller works on whole percents:
// utilization = floor(100·usage/(ready·request)), ratio = utilization/50 for the 0.5 target.
func TestHPAReplicaCalculator(t *testing.T) {
	for _, tc := range []struct {
		name         string
		current, rdy int32
		w            float64
		want         int32
		reason       string
	}{
		// 54 % → ratio 1.08, inside the 0.1 tolerance.
		{"inside tolerance", 4, 4, 0.54, 4, ReasonTolerance},
		// 55.9 % is 55 % for the controller: ratio 1.1 is still inside (1.1 ≤ 1+0.1), where
		// the unrounded 1.118 would ask for ceil(1.118·4) = 5.
		{"whole percent", 4, 4, 0.559, 4, ReasonTolerance},
		// 100 % → ratio 2 → ceil(2·4) = 8; the default policies allow max(4+4, 4·2) = 8.
		{"scale up", 4, 4, 1.0, 8, ReasonScaleUp},
		// 250 % → ratio 5 → 10, limited to max(2+4, ceil(2·2)) = 6 in one 15 s period.
		{"scale up rate-limited", 2, 2, 2.5, 6, ReasonRateLimited},
		// 10 % → ratio 0.2 → ceil(0.2·10) = 2, but the size found at the first sync (10) is
		// itself a recommendation in the window: no scale-down yet.
		{"scale down first decision", 10, 10, 0.1, 10, ReasonStabilized},
		// 5 of 10 pods starting. Usage 0.4·10 = 4 requests; over the 5 ready pods 80 % → ratio
		// 1.6 > 1, so unready pods count as idle: 40 % over 10 pods → 0.8 < 1 → keep 10.
		{"unready pods hold a scale-up", 10, 5, 0.4, 10, ReasonTolerance},
		// Usage 9 requests over 5 ready → 180 % → 3.6; with unready idle 90 % over 10 → 1.8 →
		// ceil(18) = 18, under the limit max(10+4, 20) = 20.
		{"unready pods counted idle", 10, 5, 0.9, 18, ReasonScaleUp},
		// Ready is not capped at Current (the controller counts ready pods in the pod list):
		// usage 0.75·4 = 3 requests over 6 ready pods is 50 % → ratio 1 → keep 4. Capping
		// Ready at 4 would give 75 % → ceil(1.5·4) = 6.
		{"more ready than current", 4, 6, 0.75, 4, ReasonTolerance},
		// Above max replicas: Kubernetes brings the size back to max first.
		{"above max", 60, 60, 0.5, 50, ReasonMaxReplicas},
		// 1500 % → ratio 30 → 30 pods; rate limit max(1+4, 1·2) = 5.
		{"from one pod", 1, 1, 15, 5, ReasonRateLimited},
		// No ready pod reports: the controller fails to compute and keeps the size.
		{"no ready pod", 3, 0, 0.9, 3, ReasonNoLoad},
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

// TestHPAUtilizationEpsilon: usage 0.36·5 = 1.8 requests over 4 ready pods is exactly 45 %, but
// in floats 100·(0.36·5)/4 = 44.99999999999999, which a bare floor turns into 44 % (ratio 0.88,
// a scale-down to ceil(0.88·4) = 4). With the epsilon it is 45 % → ratio 0.9, inside the tolerance.
func TestHPAUtilizationEpsilon(t *testing.T) {
	w, cur, ready := 0.36, 5.0, 4.0 // variables: constant arithmetic would be exact
	if got := 100 * (w * cur) / ready; math.Floor(got) != 44 {
		t.Fatalf("the float case this test relies on changed: %v", got)
	}
	p := DefaultParams()
	p.ScaleDownStabilization = 0 // so that a scale-down would show at once
	h := NewHPA(p)
	if d := h.Recommend(Input{Time: t0, Current: 5, Ready: 4, W: 0.36}); d.Replicas != 5 || d.Reason != ReasonTolerance {
		t.Fatalf("got %+v, want 5 within tolerance", d)
	}
}

// TestHPATargetPercent: the HPA spec holds an int32 percent, round(Target·100).
func TestHPATargetPercent(t *testing.T) {
	p := DefaultParams()
	p.Target = 0.8
	h := NewHPA(p)
	// 100 % of 4 pods against 80 %: ratio 1.25 → ceil(5) = 5.
	if d := h.Recommend(Input{Time: t0, Current: 4, Ready: 4, W: 1}); d.Replicas != 5 || d.Target != 0.8 {
		t.Fatalf("got %+v, want 5 (target 0.8)", d)
	}
	if h.targetPercent != 80 {
		t.Fatalf("targetPercent %d, want 80", h.targetPercent)
	}
}

// run drives h at 15 s syncs from n replicas, applying every answer, and returns the sizes after
// each sync.
func run(h *HPA, n int32, w ...float64) []int32 {
	var got []int32
	for i, wi := range w {
		d := h.Recommend(Input{Time: t0.Add(time.Duration(i) * 15 * time.Second), Current: n, Ready: n, W: wi})
		n = d.Replicas
		got = append(got, n)
	}
	return got
}

func equalSizes(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func repeat(w float64, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = w
	}
	return s
}

// TestHPAScaleEventsAreTheHPAs: scale events are stamped when the HPA makes them. From one pod
// under a huge load at 15 s syncs, each sync's period (strictly after now−15 s) no longer holds
// the previous sync's event, so the limit is max(n+4, 2n) from the current size:
// 1 → 5 → 10 → 20 → 40 → 50 (max). Deriving events from the observed sizes instead would stamp
// each scale-up one sync late and halve the pace (1 → 5 → 5 → 10 → 10 → 20).
func TestHPAScaleEventsAreTheHPAs(t *testing.T) {
	got := run(NewHPA(DefaultParams()), 1, repeat(100, 6)...)
	if want := []int32{5, 10, 20, 40, 50, 50}; !equalSizes(got, want) {
		t.Fatalf("sizes %v, want %v", got, want)
	}
}

// TestHPAScaleEventInsidePeriod: a second sync inside the 15 s period sees the first one's event.
func TestHPAScaleEventInsidePeriod(t *testing.T) {
	h := NewHPA(DefaultParams())
	// t=0: 1 → 5 (limit max(1+4, 2)), event +4 at t=0.
	if d := h.Recommend(Input{Time: t0, Current: 1, Ready: 1, W: 100}); d.Replicas != 5 {
		t.Fatalf("t=0: %+v, want 5", d)
	}
	// t=5s: period start 5−4 = 1 → limit 5 again: no growth.
	if d := h.Recommend(Input{Time: t0.Add(5 * time.Second), Current: 5, Ready: 5, W: 20}); d.Replicas != 5 || d.Reason != ReasonRateLimited {
		t.Fatalf("t=5s: %+v, want 5 rate-limited", d)
	}
	// t=16s: the t=0 event has left the period: limit max(5+4, 10) = 10.
	if d := h.Recommend(Input{Time: t0.Add(16 * time.Second), Current: 5, Ready: 5, W: 20}); d.Replicas != 10 {
		t.Fatalf("t=16s: %+v, want 10", d)
	}
}

// TestHPAExternalResizeIsNoEvent: a size someone else set is not a scale event (the controller
// never sees it as one), so it does not eat into the rate limit.
func TestHPAExternalResizeIsNoEvent(t *testing.T) {
	h := NewHPA(DefaultParams())
	h.Recommend(Input{Time: t0, Current: 4, Ready: 4, W: 0.5})
	// Someone scaled 4 → 8; 5 s later 200 % asks for 32. No event in the period: start 8 →
	// limit max(8+4, 16) = 16.
	d := h.Recommend(Input{Time: t0.Add(5 * time.Second), Current: 8, Ready: 8, W: 2})
	if d.Replicas != 16 || d.Reason != ReasonRateLimited {
		t.Fatalf("after the external resize: %+v, want 16 rate-limited", d)
	}
	// 5 s later the HPA's own +8 event (t=5s) is in the period: start 16−8 = 8 → limit 16.
	d = h.Recommend(Input{Time: t0.Add(10 * time.Second), Current: 16, Ready: 16, W: 2})
	if d.Replicas != 16 || d.Reason != ReasonRateLimited {
		t.Fatalf("inside the period of its own event: %+v, want 16 rate-limited", d)
	}
}

// TestHPAOutdatedEventReused: storeScaleEvent marks events older than the longest policy period
// of their direction outdated and overwrites one, even when the other direction's period is
// longer. Scale-up period 15 s, scale-down 60 s at 50 %, no stabilisation.
func TestHPAOutdatedEventReused(t *testing.T) {
	p := DefaultParams()
	p.ScaleDownPeriod, p.ScaleDownPercent, p.ScaleDownStabilization = time.Minute, 50, 0
	h := NewHPA(p)
	step := func(at time.Duration, cur int32, w float64) Decision {
		return h.Recommend(Input{Time: t0.Add(at), Current: cur, Ready: cur, W: w})
	}
	// t=0: 100 % of 2 → 4 (limit max(6, 4)); event +2 at 0.
	if d := step(0, 2, 1); d.Replicas != 4 {
		t.Fatalf("t=0: %+v, want 4", d)
	}
	// t=20s: 100 % of 4 → 8 (the t=0 event is out of the 15 s period); the t=0 event is
	// outdated (before 20s−15s) and overwritten by +4 at 20s.
	if d := step(20*time.Second, 4, 1); d.Replicas != 8 {
		t.Fatalf("t=20s: %+v, want 8", d)
	}
	if len(h.upEvents) != 1 {
		t.Fatalf("up events %v, want the outdated one overwritten", h.upEvents)
	}
	// t=30s: 1 % → ratio 0.02 → ceil(0.16) = 1. Scale-down period start over 60 s: 8 − 4 (the
	// t=20s event; the t=0 one is gone) = 4 → at least int32(4·0.5) = 2. Had the t=0 event been
	// kept, the start would be 2 and the limit 1.
	if d := step(30*time.Second, 8, 0.01); d.Replicas != 2 || d.Reason != ReasonRateLimited {
		t.Fatalf("t=30s: %+v, want 2 rate-limited", d)
	}
}

// TestHPAInitialRecommendation: the size at the first sync holds a scale-down for the window.
// With behavior the window keeps entries strictly after now−5m; the legacy path drops only
// entries before the cutoff, so an entry exactly 5m old still counts there.
func TestHPAInitialRecommendation(t *testing.T) {
	low := repeat(0.1, 23) // 10 % of 10 pods → 2
	want := make([]int32, 23)
	for i := range want {
		want[i] = 10
	}
	// Behavior defaults: held for syncs 0..19 (0..285 s); at 300 s the t=0 entry is out → 2.
	want[20], want[21], want[22] = 2, 2, 2
	if got := run(NewHPA(DefaultParams()), 10, low...); !equalSizes(got, want) {
		t.Errorf("default behavior: %v, want %v", got, want)
	}
	// Legacy: still held at 300 s, down at 315 s.
	p := DefaultParams()
	p.HPABehavior = BehaviorNone
	want[20] = 10
	if got := run(NewHPA(p), 10, low...); !equalSizes(got, want) {
		t.Errorf("no behavior: %v, want %v", got, want)
	}
}

// TestHPAMissingMetricsRecordNothing: while metrics are missing the controller records nothing
// and keeps the size, so after an outage longer than the window it scales down at once.
func TestHPAMissingMetricsRecordNothing(t *testing.T) {
	for _, b := range []HPABehavior{BehaviorDefault, BehaviorNone} {
		p := DefaultParams()
		p.HPABehavior = b
		// t=0: 50 % → 10 (within tolerance); then 6 minutes without metrics; then 10 % → 2:
		// the only recommendations (10 at t=0) are 6.25 minutes old.
		w := append(append([]float64{0.5}, repeat(math.NaN(), 24)...), 0.1)
		got := run(NewHPA(p), 10, w...)
		for i, n := range got[:25] {
			if n != 10 {
				t.Fatalf("%s: sync %d: %d, want 10", b, i, n)
			}
		}
		if got[25] != 2 {
			t.Errorf("%s: after the outage %d, want 2 at once", b, got[25])
		}
	}
	h := NewHPA(DefaultParams())
	if d := h.Recommend(Input{Time: t0, Current: 7, Ready: 7, W: math.NaN()}); d.Replicas != 7 || d.Reason != ReasonNoLoad {
		t.Fatalf("NaN load: got %+v, want 7 (no-load-data)", d)
	}
	if d := h.Recommend(Input{Time: t0, Current: 7, Ready: 7, W: -1}); d.Replicas != 7 || d.Reason != ReasonNoLoad {
		t.Fatalf("negative load: got %+v, want 7 (no-load-data)", d)
	}
	if len(h.recommendations) != 1 {
		t.Fatalf("recommendations %v, want only the initial one", h.recommendations)
	}
}

// TestHPAScaledToZero: a workload at zero (min ≥ 1) has scaling disabled: 0, nothing recorded.
func TestHPAScaledToZero(t *testing.T) {
	for _, b := range []HPABehavior{BehaviorDefault, BehaviorNone} {
		p := DefaultParams()
		p.HPABehavior = b
		h := NewHPA(p)
		for i := range 3 {
			d := h.Recommend(Input{Time: t0.Add(time.Duration(i) * 15 * time.Second), Current: 0, Ready: 0, W: 5})
			if d.Replicas != 0 || d.Reason != ReasonScaledToZero {
				t.Fatalf("%s: got %+v, want 0 (scaled-to-zero)", b, d)
			}
		}
		if len(h.upEvents)+len(h.downEvents) != 0 {
			t.Fatalf("%s: events recorded while disabled", b)
		}
	}
}

// TestHPAOutOfBounds: above max or below min the controller rescales to the bound without
// computing metrics: no recommendation is recorded, but the rescale is a scale event.
func TestHPAOutOfBounds(t *testing.T) {
	p := DefaultParams()
	p.MaxReplicas = 10
	h := NewHPA(p)
	step := func(at time.Duration, cur int32, w float64) Decision {
		return h.Recommend(Input{Time: t0.Add(at), Current: cur, Ready: cur, W: w})
	}
	step(0, 5, 0.5) // 50 % → 5; recommendations 5 (initial) and 5
	if d := step(15*time.Second, 12, 0.5); d.Replicas != 10 || d.Reason != ReasonMaxReplicas {
		t.Fatalf("above max: %+v, want 10 at-max", d)
	}
	// 10 % of 10 → 2; the highest recommendation in the window is 5 (the out-of-bounds sync
	// recorded none): 5. The −2 event at 15 s is not strictly inside (15 s, 30 s].
	if d := step(30*time.Second, 10, 0.1); d.Replicas != 5 || d.Reason != ReasonStabilized {
		t.Fatalf("after: %+v, want 5 stabilized", d)
	}

	p = DefaultParams()
	p.MinReplicas = 2
	h = NewHPA(p)
	step(0, 4, 0.5)
	// Below min: 1 → 2 at once, a +1 event at 5 s.
	if d := step(5*time.Second, 1, 0.01); d.Replicas != 2 || d.Reason != ReasonMinReplicas {
		t.Fatalf("below min: %+v, want 2 at-min", d)
	}
	// 10000 % asks for far more; the period start is 2 − 1 = 1 → limit max(1+4, 2) = 5.
	if d := step(10*time.Second, 2, 100); d.Replicas != 5 || d.Reason != ReasonRateLimited {
		t.Fatalf("after below-min rescale: %+v, want 5 rate-limited", d)
	}
}

func TestHPAMinClamp(t *testing.T) {
	p := DefaultParams()
	p.MinReplicas = 3
	p.ScaleDownStabilization = 0
	h := NewHPA(p)
	// 1 % of 5 → ceil(0.02·5) = 1, below min 3.
	if d := h.Recommend(Input{Time: t0, Current: 5, Ready: 5, W: 0.01}); d.Replicas != 3 || d.Reason != ReasonMinReplicas {
		t.Fatalf("got %+v, want min 3", d)
	}
}

// TestHPALegacyRateLimit: without behavior the controller allows max(2·current, 4) per sync:
// from one pod under a huge load 1 → 4 → 8 → 16 → 32 → 50 (max).
func TestHPALegacyRateLimit(t *testing.T) {
	p := DefaultParams()
	p.HPABehavior = BehaviorNone
	got := run(NewHPA(p), 1, repeat(100, 6)...)
	if want := []int32{4, 8, 16, 32, 50, 50}; !equalSizes(got, want) {
		t.Fatalf("sizes %v, want %v", got, want)
	}
}

// TestHPALegacyStabilizationCanRaise: the legacy path stabilises to the highest recent
// recommendation even when it is above the current size, so a lower load may still scale up.
func TestHPALegacyStabilizationCanRaise(t *testing.T) {
	p := DefaultParams()
	p.HPABehavior = BehaviorNone
	h := NewHPA(p)
	// t=0: 1000 % of 4 → 80, limited to 8 (recommendation 80 recorded).
	if d := h.Recommend(Input{Time: t0, Current: 4, Ready: 4, W: 10}); d.Replicas != 8 {
		t.Fatalf("t=0: %+v, want 8", d)
	}
	// t=15s: 30 % of 8 → ceil(0.6·8) = 5, stabilised to 80, limited to 16.
	if d := h.Recommend(Input{Time: t0.Add(15 * time.Second), Current: 8, Ready: 8, W: 0.3}); d.Replicas != 16 || d.Reason != ReasonRateLimited {
		t.Fatalf("t=15s: %+v, want 16 rate-limited", d)
	}
	// The behavior path keeps the size instead: the recommendation is brought between the
	// lowest recent one within the 0 s scale-up window (5, this one) and the highest within the
	// 5-minute scale-down window (80), starting from the current 8: 8.
	h = NewHPA(DefaultParams())
	h.Recommend(Input{Time: t0, Current: 4, Ready: 4, W: 10})
	if d := h.Recommend(Input{Time: t0.Add(15 * time.Second), Current: 8, Ready: 8, W: 0.3}); d.Replicas != 8 || d.Reason != ReasonStabilized {
		t.Fatalf("behavior: %+v, want 8 stabilized", d)
	}
}

// TestHPASteadyStateBounded: the recommendation and event slices stop growing (old entries are
// overwritten), so a long run neither leaks nor allocates.
func TestHPASteadyStateBounded(t *testing.T) {
	h := NewHPA(DefaultParams())
	n := int32(10)
	for i := range 2000 {
		w := 0.2 + float64(i%7)/10
		n = h.Recommend(Input{Time: t0.Add(time.Duration(i) * 15 * time.Second), Current: n, Ready: n, W: w}).Replicas
	}
	if len(h.recommendations) > 25 || len(h.upEvents) > 3 || len(h.downEvents) > 3 {
		t.Fatalf("grew: %d recommendations, %d up, %d down events", len(h.recommendations), len(h.upEvents), len(h.downEvents))
	}
	allocs := testing.AllocsPerRun(100, func() {
		n = h.Recommend(Input{Time: t0.Add(time.Hour * 24), Current: n, Ready: n, W: 0.4}).Replicas
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decision", allocs)
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
		{"min_replicas", func(p *Params) { p.MinReplicas = -1 }},
		{"max_replicas", func(p *Params) { p.MaxReplicas = 0 }},
		{"target", func(p *Params) { p.Target = math.NaN() }},
		{"tolerance", func(p *Params) { p.Tolerance = -1 }},
		{"upper", func(p *Params) { p.Upper = 0.2 }},
		{"rounding", func(p *Params) { p.Rounding = "up" }},
		{"max_scale_up_rate", func(p *Params) { p.MaxScaleUpRate = 0.5 }},
		{"scale_down_percent", func(p *Params) { p.ScaleDownPercent = 150 }},
		{"hpa_behavior", func(p *Params) { p.HPABehavior = "" }},
		{"hpa_behavior", func(p *Params) { p.HPABehavior = "legacy" }},
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

// TestHPAUnapplied: an HPA whose recommendations nothing applies (a shadow baseline) keeps
// recommending what the controller would, rather than counting its own unapplied
// recommendations as scale events; a size someone else sets is its scale event.
func TestHPAUnapplied(t *testing.T) {
	p := DefaultParams()
	// Recorded as if applied, the size stuck at 4 under 200 % load: the first sync asks for
	// max(4+4, 2·4) = 8 and records +4; 5 s later the period starts at 4−4 = 0 and the limit
	// max(0+4, 0) = 4 is the current size: the recommendation collapses (the bug of a shadow
	// policy recorded as applied).
	applied := NewHPA(p)
	if d := applied.Recommend(Input{Time: t0, Current: 4, Ready: 4, W: 2}); d.Replicas != 8 {
		t.Fatalf("t=0: %+v, want 8", d)
	}
	if d := applied.Recommend(Input{Time: t0.Add(5 * time.Second), Current: 4, Ready: 4, W: 2}); d.Replicas != 4 || d.Reason != ReasonRateLimited {
		t.Fatalf("applied, size stuck: %+v, want the collapse to 4 rate-limited", d)
	}
	u := NewHPA(p)
	u.SetUnapplied(true)
	for i := range 6 {
		d := u.Recommend(Input{Time: t0.Add(time.Duration(i) * 5 * time.Second), Current: 4, Ready: 4, W: 2})
		if d.Replicas != 8 || d.Reason != ReasonRateLimited {
			t.Fatalf("unapplied, sync %d: %+v, want 8 rate-limited at every sync", i, d)
		}
	}
	// Someone (the acting policy) scales 4 → 6: that is the event. 5 s later the period starts
	// at 6−2 = 4: limit max(4+4, 8) = 8.
	if d := u.Recommend(Input{Time: t0.Add(30 * time.Second), Current: 6, Ready: 6, W: 2}); d.Replicas != 8 || d.Reason != ReasonRateLimited {
		t.Fatalf("unapplied, after an observed +2: %+v, want 8 rate-limited", d)
	}
	if len(u.upEvents) != 1 || u.upEvents[0].n != 2 {
		t.Fatalf("unapplied up events %+v, want the one observed +2", u.upEvents)
	}
}
