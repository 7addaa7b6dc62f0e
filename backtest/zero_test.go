package backtest

import (
	"context"
	"testing"
	"time"
)

// TestSimulateScaleToZero replays an idle hour between two busy ones: at min_replicas 0 hpa
// (KEDA's rule) goes to zero while idle and pays a cold start when the load returns (overload
// with no pod ready), which the same policy at min_replicas 1 never does; the time at zero
// is cost saved.
func TestSimulateScaleToZero(t *testing.T) {
	var d []float64
	for i := range 180 { // one-minute samples: busy, idle, busy
		v := 12.0
		if i >= 60 && i < 120 {
			v = 0
		}
		d = append(d, v)
	}
	o := DefaultOptions()
	o.Warmup, o.StartupDelay = 10, 2*time.Minute
	run := func(min int32) Run {
		o.Params.MinReplicas = min
		w, err := NewWorld(d, time.Minute, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(context.Background(), w, "hpa", o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, zero := run(1), run(0)
	t.Logf("min 1: cost %.1f, overload %.4f; min 0: cost %.1f, overload %.4f, at zero %.3f, cold %.4f",
		one.Cost, one.OverloadFraction, zero.Cost, zero.OverloadFraction, zero.ZeroShare, zero.ColdOverload)
	// Idle for 60 minutes, scale_to_zero_after 5m and the HPA's 5-minute stabilisation: at zero
	// for most of the idle hour.
	if zero.ZeroShare < 0.2 || zero.ZeroShare > 60.0/170 {
		t.Errorf("at zero %.3f of the time, want most of the idle hour (60 of 170 scored minutes)", zero.ZeroShare)
	}
	if !(zero.ColdOverload > 0) || zero.ColdOverload > zero.OverloadFraction {
		t.Errorf("cold overload %.4f of %.4f overloaded: the wake pays a start-up with no pod ready", zero.ColdOverload, zero.OverloadFraction)
	}
	if one.ZeroShare != 0 || one.ColdOverload != 0 || !(zero.Cost < one.Cost) {
		t.Errorf("min 1: at zero %.3f, cold %.4f, cost %.1f; min 0 should cost less (%.1f)", one.ZeroShare, one.ColdOverload, one.Cost, zero.Cost)
	}
}
