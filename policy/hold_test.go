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
		h.init(k, most, 0)
		for i := range 600 {
			// Judge the tick just served against the pods the chosen hold had ready over it.
			if i > 0 && demand(i-1) > float64(h.ready[h.chosen]) && i > 300 {
				overloaded++
			}
			n := size(i)
			if got := h.observe(demand(i-1), 1, 1, lambda, span, n, false); got != n && i > 300 {
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
	h.init(k, 5, 2)
	if h.holds != [holdCandidates]int{0, 3, 5, 5, 0, 3, 5, 5} || h.settle != 2 {
		t.Errorf("candidates at most 5 ticks: %v, settle %d; want [0 3 5 5 0 3 5 5], 2", h.holds, h.settle)
	}
	// scaling.budget.hold 0 holds nothing, not even through the settle.
	h.init(k, 0, 2)
	if h.settle != 0 {
		t.Errorf("hold 0: settle %d ticks, want 0", h.settle)
	}
	// Before a tick is judged, the longest holds; a tick with no demand (NaN) judges nothing.
	h.init(k, 100, 0)
	h.observe(math.NaN(), 1, 1, lambda, span, 10, false)
	h.observe(math.NaN(), 1, 1, lambda, span, 2, false)
	if h.judged != 0 || h.held() != 10 {
		t.Errorf("no demand: judged %d ticks, held %d; want 0 judged and 10 held (the longest hold)", h.judged, h.held())
	}
	h.observe(3, 1, 1, lambda, span, 2, false)
	if h.judged != 1 {
		t.Errorf("judged %d ticks, want 1", h.judged)
	}
}

// TestPricedHoldSettle: the candidates that also hold through the ticks after a history point
// before the nowcast has read it. Where the sizes priced there drop and come back once the
// nowcast catches up, holding through them is chosen and nothing is overloaded; where the
// demand does fall at the history point, releasing at once is, and nothing is held.
func TestPricedHoldSettle(t *testing.T) {
	const k, settle, period, lambda, span = 3, 2, 20, 100.0, 1000.0
	run := func(demand func(i int) float64, size func(i int) int32) (h pricedHold, overloaded, held int) {
		h.init(k, 100, settle)
		for i := range 2000 {
			if i > 0 && demand(i-1) > float64(h.ready[h.chosen]) && i > 1000 {
				overloaded++
			}
			n := size(i)
			if got := h.observe(demand(i-1), 1, 1, lambda, span, n, i%period < settle); got != n && i > 1000 {
				held++
			}
		}
		return h, overloaded, held
	}
	ahead := func(demand func(i int) float64) func(i int) int32 {
		return func(i int) int32 {
			n := 0.0
			for j := i; j <= i+k; j++ {
				n = math.Max(n, demand(j))
			}
			return int32(n)
		}
	}
	// High for 12 ticks from each history point, then low; the sizes priced see the lead ahead
	// but drop to the low level on the two ticks after each point.
	highFirst := func(i int) float64 {
		if i%period < 12 {
			return 10
		}
		return 2
	}
	spurious := func(i int) int32 {
		if i%period < settle {
			return 2
		}
		return ahead(highFirst)(i)
	}
	h, over, held := run(highFirst, spurious)
	if !h.settles() || h.hold(time.Second) != 0 || over != 0 || held == 0 {
		t.Errorf("drops before the nowcast reads the point: settles %v, hold %v, %d overloaded, %d held; want settles, no other hold, none overloaded (costs %v)",
			h.settles(), h.hold(time.Second), over, held, h.cost)
	}
	// Low for 10 ticks from each history point, then high: the drop at the point is real.
	lowFirst := func(i int) float64 {
		if i%period < 10 {
			return 2
		}
		return 10
	}
	h, over, held = run(lowFirst, ahead(lowFirst))
	if h.settles() || h.hold(time.Second) != 0 || over != 0 || held != 0 {
		t.Errorf("drops that are real: settles %v, hold %v, %d overloaded, %d held; want nothing held (costs %v)", h.settles(), h.hold(time.Second), over, held, h.cost)
	}
}
