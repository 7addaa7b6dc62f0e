package policy

import (
	"math"
	"testing"
	"time"
)

// TestPricedHold: the priced hold is the candidate that would have cost least in pods +
// λ·(overloaded ticks). When the priced sizes see the demand coming (each holds the need of the
// lead ahead), no hold is worth its pods; when they only follow it, every rise is overloaded
// until the pods ordered are ready, and the hold that keeps the pods over the low phase wins.
func TestPricedHold(t *testing.T) {
	const k, lambda, span = 3, 100.0, 1000.0
	demand := func(i int) float64 { // 10 for six ticks, 2 for six
		if i%12 < 6 {
			return 10
		}
		return 2
	}
	run := func(size func(i int) int32, most int) (h pricedHold, overloaded, held int) {
		h.init(k, most)
		for i := range 600 {
			// Judge the tick just served against the pods the chosen hold had ready over it.
			if i > 0 && demand(i-1) > float64(h.ready[h.chosen]) && i > 300 {
				overloaded++
			}
			n := size(i)
			if got := h.observe(demand(i-1), 1, 1, lambda, span, n); got != n && i > 300 {
				held++
			}
		}
		return h, overloaded, held
	}
	ahead := func(i int) int32 { // the need of every tick until pods ordered now are ready
		n := 0.0
		for j := i; j <= i+k; j++ {
			n = math.Max(n, demand(j))
		}
		return int32(n)
	}
	h, over, held := run(ahead, 100)
	if h.hold(time.Second) != 0 || over != 0 || held != 0 {
		t.Errorf("sizes that see the lead: hold %v, %d ticks overloaded, %d held; want 0, 0, 0 (costs %v)", h.hold(time.Second), over, held, h.cost)
	}
	follow := func(i int) int32 { return int32(demand(i)) }
	h, over, held = run(follow, 100)
	if h.hold(time.Second) < 6*time.Second || over != 0 || held == 0 {
		t.Errorf("sizes that follow: hold %v, %d ticks overloaded, %d held; want at least the 6 s low phase held, none overloaded (costs %v)", h.hold(time.Second), over, held, h.cost)
	}
	// scaling.budget.hold 0: nothing is held, whatever it costs.
	h, over, held = run(follow, 0)
	if h.hold(time.Second) != 0 || held != 0 || over == 0 {
		t.Errorf("hold 0: hold %v, %d held, %d overloaded; want nothing held (and the rises overloaded)", h.hold(time.Second), held, over)
	}
	// The longest candidate is at most scaling.budget.hold.
	h.init(k, 5)
	if h.holds != [holdCandidates]int{0, 3, 5, 5} {
		t.Errorf("candidates at most 5 ticks: %v, want [0 3 5 5]", h.holds)
	}
	// Before a tick is judged, the longest holds; a tick with no demand (NaN) judges nothing.
	h.init(k, 100)
	h.observe(math.NaN(), 1, 1, lambda, span, 10)
	h.observe(math.NaN(), 1, 1, lambda, span, 2)
	if h.judged != 0 || h.held() != 10 {
		t.Errorf("no demand: judged %d ticks, held %d; want 0 judged and 10 held (the longest hold)", h.judged, h.held())
	}
	h.observe(3, 1, 1, lambda, span, 2)
	if h.judged != 1 {
		t.Errorf("judged %d ticks, want 1", h.judged)
	}
}
