package scaling

import (
	"math"
	"testing"
	"time"
)

// TestDecideZero is the scale-to-zero step of the composition (min_replicas 0): idle for
// scale_to_zero_after goes to zero whatever the rule says, at zero nothing happens until a wake
// metric is active, and then the workload wakes to the rule's answer at one pod — to one pod for
// hpa, whose state allows nothing more from zero (KEDA's 0 → 1, then the HPA).
func TestDecideZero(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	p := DefaultParams()
	p.MinReplicas, p.MaxReplicas, p.ScaleToZeroAfter = 0, 20, 5*time.Minute
	decide := func(name string, in Input) Decision {
		t.Helper()
		at := in.Current
		if name == "resized" { // apa whose bounds were computed at 2 replicas, before a resize to 3
			name, at = "apa", 2
		}
		alg, err := New(name, p)
		if err != nil {
			t.Fatal(err)
		}
		in.Time = t0
		return Decide(RuleOf(alg), in, BoundsOf(alg, p, t0, at))
	}
	// W at one pod 2.5: five pods' worth at hpa's and apa's target 0.5, three at budget's u_sla 0.9.
	busy := Input{Current: 0, Ready: 0, W: 2.5, WindowW: 2.5, WNow: 2.5, WDown: 2.5}
	for _, c := range []struct {
		name, alg string
		in        Input
		want      int32
		reason    string
	}{
		{"at zero, idle", "apa", with(busy, func(in *Input) { in.Idle = 30 }), 0, ReasonIdle},
		{"at zero, idle not known", "apa", with(busy, func(in *Input) { in.Idle = math.NaN() }), 0, ReasonIdle},
		{"at zero, active: apa wakes to its answer at one pod (at most ×2)", "apa", with(busy, func(in *Input) { in.Idle = 0 }), 2, ReasonWoken},
		{"at zero, active: budget wakes to its size at one pod, ceil(2.5/0.9)", "budget", with(busy, func(in *Input) { in.Idle = 0 }), 3, ReasonWoken},
		{"at zero, active: hpa wakes to one pod (KEDA)", "hpa", with(busy, func(in *Input) { in.Idle = 0 }), 1, ReasonWoken},
		{"at zero, active, no load: one pod", "apa", Input{}, 1, ReasonWoken},
		{"running, idle less than scale_to_zero_after", "apa", Input{Current: 3, Ready: 3, W: 0.01, Idle: 299}, 2, ReasonRateLimited},
		{"running, idle for scale_to_zero_after", "apa", Input{Current: 3, Ready: 3, W: 0.01, Idle: 300}, 0, ReasonIdle},
		{"running, idle for longer, the rule asking for more", "hpa", Input{Current: 3, Ready: 3, W: 2, Idle: 600}, 0, ReasonIdle},
		{"running, active", "hpa", Input{Current: 3, Ready: 3, W: 1, Idle: 0}, 6, ReasonScaleUp},
		{"running, idle, resized since the step", "resized", Input{Current: 3, Ready: 3, W: 0.01, Idle: 600}, 3, ReasonSizeChanged},
		{"running, idle not known", "apa", Input{Current: 3, Ready: 3, W: 0.01, Idle: math.NaN()}, 2, ReasonRateLimited},
	} {
		d := decide(c.alg, c.in)
		if d.Replicas != c.want || d.Reason != c.reason {
			t.Errorf("%s: %+v, want %d (%s)", c.name, d, c.want, c.reason)
		}
	}

	// With min_replicas 1 nothing changes: idle means nothing, and a workload at zero (scaled
	// there by hand) is left alone by hpa, as the HPA does.
	p.MinReplicas = 1
	if d := decide("apa", Input{Current: 3, Ready: 3, W: 0.01, Idle: 3600}); d.Replicas != 2 {
		t.Errorf("min 1, idle: %+v, want 2", d)
	}
	if d := decide("hpa", with(busy, func(in *Input) { in.Idle = 0 })); d.Replicas != 0 || d.Reason != ReasonScaledToZero {
		t.Errorf("min 1, at zero: %+v, want 0 (%s)", d, ReasonScaledToZero)
	}
}

func with(in Input, f func(*Input)) Input {
	f(&in)
	return in
}
