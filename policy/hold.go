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
// The candidates are 0, 1, 2 and 4 lead times, none longer than scaling.budget.hold; the mean
// is exponential over the span of λ's own descent, 1/(η·budget) ticks; before a tick has been
// judged the longest candidate holds.
const holdCandidates = 4

// holdLeads are the candidate holds in lead times.
var holdLeads = [holdCandidates]int{0, 1, 2, 4}

// pricedHold is the priced hold's state.
type pricedHold struct {
	k     int                     // the lead in ticks: pods ordered now are ready k ticks later
	holds [holdCandidates]int     // the candidate holds in ticks
	n     []int32                 // the priced sizes, newest last: the longest hold + 1 of them
	size  [holdCandidates][]int32 // each candidate's size over the last k+1 ticks, newest last
	// ready is the pods each candidate has ready over the tick to come (-1: none sized yet).
	ready  [holdCandidates]int32
	cost   [holdCandidates]float64 // the mean of pods + λ·(overloaded) on the ticks judged
	judged int
	chosen int
}

// init sizes the state for a lead of k ticks and holds of at most most ticks.
func (h *pricedHold) init(k, most int) {
	*h = pricedHold{k: max(k, 1)}
	for i, l := range holdLeads {
		h.holds[i] = min(l*h.k, max(most, 0))
		h.ready[i] = -1
		h.size[i] = make([]int32, 0, h.k+2)
	}
	h.n = make([]int32, 0, h.holds[holdCandidates-1]+2)
	h.chosen = holdCandidates - 1
}

// observe judges the tick just served — its demand, as the price judges it, against each
// candidate's pods ready over it, at the price λ — then takes the priced size n of this tick and
// returns the size held for the candidate that has cost least, and that candidate's hold.
func (h *pricedHold) observe(demand, sla, request, lambda, span float64, n int32) int32 {
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
	h.n = push(h.n, n, h.holds[holdCandidates-1]+1)
	for i, hd := range h.holds {
		s := int32(0)
		for _, x := range h.n[max(len(h.n)-1-hd, 0):] {
			s = max(s, x)
		}
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
