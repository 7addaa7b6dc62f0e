package policy

import (
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// The priced hold (METHOD §9, the priced rule). Releasing pods is an action with a price: the
// overload it causes when the demand comes back before pods ordered again are ready. How likely
// that is depends on what the forecast cannot see — under demand that steps at every sample the
// next step is unknown until it comes, while a glide between samples shows where it is going —
// so no one hold is right for every workload. The rule therefore prices each candidate hold in
// the currency it sizes in: for each it keeps the size the priced sizes held that long would
// have been, the pods that size would have had ready (pods ordered serve a lead later, pods
// released go at once), and the mean of pods + λ·(overloaded ticks) it would have cost on the
// ticks served; the priced size is held for the candidate that would have cost least.
//
// The candidates are 0, 1, 2 and 4 lead times, none longer than scaling.budget.hold, each
// either alone or also holding through the ticks after a history point before the nowcast has
// read it (tickBudget.settle): there the path is already the new point's while the demand now is
// not yet, so a release decided on it may be ordered back a tick later, when the nowcast catches
// up — on some workloads, not on others, which is why the counterfactual chooses (issue 31,
// twenty-fourth round). The mean is exponential over the span of λ's own descent, 1/(η·budget)
// ticks; before a tick has been judged the longest candidate holds.
const holdCandidates = 2 * len(holdLeads)

// holdLeads are the candidate holds in lead times: candidate i holds holdLeads[i % 4] leads, and
// the candidates from 4 on also hold through the settle (settled).
var holdLeads = [...]int{0, 1, 2, 4}

// settled says whether candidate i holds through the ticks before the nowcast has read a new
// history point.
func settled(i int) bool { return i >= len(holdLeads) }

// pricedHold is the priced hold's state.
type pricedHold struct {
	k     int                 // the lead in ticks: pods ordered now are ready k ticks later
	holds [holdCandidates]int // the candidate holds in ticks
	// settle is the ticks after a history point before the nowcast has read it, at most the
	// longest hold (scaling.budget.hold 0 holds nothing, not even through them).
	settle int
	n      []int32                 // the priced sizes, newest last: the longest hold + 1 of them
	size   [holdCandidates][]int32 // each candidate's size over the last k+1 ticks, newest last
	// ready is the pods each candidate has ready over the tick to come (-1: none sized yet).
	ready  [holdCandidates]int32
	cost   [holdCandidates]float64 // the mean of pods + λ·(overloaded) on the ticks judged
	judged int
	chosen int
}

// init sizes the state for a lead of k ticks, holds of at most most ticks and a settle of
// settle ticks.
func (h *pricedHold) init(k, most, settle int) {
	*h = pricedHold{k: max(k, 1), settle: min(max(settle, 0), max(most, 0))}
	for i := range h.holds {
		h.holds[i] = min(holdLeads[i%len(holdLeads)]*h.k, max(most, 0))
		h.ready[i] = -1
		h.size[i] = make([]int32, 0, h.k+2)
	}
	h.n = make([]int32, 0, h.longest()+2)
	h.chosen = holdCandidates - 1
}

// longest is the most ticks any candidate holds.
func (h *pricedHold) longest() int { return max(h.holds[holdCandidates-1], h.settle) }

// observe judges the tick just served — its demand, as the price judges it, against each
// candidate's pods ready over it, at the price λ — then takes the priced size n of this tick,
// settling whether the tick comes before the nowcast has read the last history point, and
// returns the size held for the candidate that has cost least, and that candidate's hold.
func (h *pricedHold) observe(demand, sla, request, lambda, span float64, n int32, settling bool) int32 {
	if h.ready[0] >= 0 && demand == demand { // a NaN demand (no observation) judges nothing
		a := 1 / span
		if float64(h.judged) < span {
			h.judged++
			a = 1 / float64(h.judged)
		}
		for i := range h.cost {
			c := float64(h.size[i][len(h.size[i])-1])
			if scaling.Overloaded(demand, sla, h.ready[i], request) {
				c += lambda
			}
			h.cost[i] += a * (c - h.cost[i])
		}
	}
	h.n = push(h.n, n, h.longest()+1)
	var held [holdCandidates]int32
	for i, hd := range h.holds {
		s := int32(0)
		switch {
		case settled(i) && !(settling && h.settle > hd):
			s = held[i-len(holdLeads)] // the same hold as its twin's now
		default:
			if settling && settled(i) {
				hd = h.settle
			}
			for _, x := range h.n[max(len(h.n)-1-hd, 0):] {
				s = max(s, x)
			}
		}
		held[i] = s
		h.size[i] = push(h.size[i], s, h.k+1)
		r := s
		for _, x := range h.size[i] {
			r = min(r, x)
		}
		h.ready[i] = r
	}
	if h.judged > 0 {
		best := holdCandidates - 1 // ties go to the longer hold
		for i := best - 1; i >= 0; i-- {
			if h.cost[i] < h.cost[best] {
				best = i
			}
		}
		h.chosen = best
	}
	return h.held()
}

// held is the size the chosen candidate holds now.
func (h *pricedHold) held() int32 {
	s := h.size[h.chosen]
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// settles says whether the chosen candidate holds through the ticks before the nowcast has read
// a new history point.
func (h *pricedHold) settles() bool { return settled(h.chosen) && h.settle > 0 }

// hold is the chosen candidate's hold, at tick.
func (h *pricedHold) hold(tick time.Duration) time.Duration {
	return time.Duration(h.holds[h.chosen]) * tick
}

// push appends x to s and keeps its newest n values, in s's array once it holds them.
func push(s []int32, x int32, n int) []int32 {
	s = append(s, x)
	if len(s) > n {
		s = s[:copy(s, s[len(s)-n:])]
	}
	return s
}
