package scaling

import (
	"math"
	"testing"
)

// TestOverloadedAny: overloaded when any metric is above u_sla·ready·its capacity; a missing
// demand is no overload; one metric is Overloaded itself.
func TestOverloadedAny(t *testing.T) {
	// 4 ready pods at u_sla 0.9: cpu capacity 1 core → 3.6 cores; rps 100 → 360.
	caps := []float64{1, 100}
	for _, c := range []struct {
		demands []float64
		want    bool
	}{
		{[]float64{3.5, 350}, false},
		{[]float64{3.7, 350}, true},
		{[]float64{3.5, 361}, true},
		{[]float64{math.NaN(), 361}, true},
		{[]float64{math.NaN(), math.Inf(1)}, false},
	} {
		if got := OverloadedAny(0.9, 4, c.demands, caps); got != c.want {
			t.Errorf("OverloadedAny(%v) = %v, want %v", c.demands, got, c.want)
		}
	}
	if OverloadedAny(0.9, 4, []float64{3.7}, []float64{1}) != Overloaded(3.7, 0.9, 4, 1) {
		t.Error("one metric must be Overloaded")
	}
}
