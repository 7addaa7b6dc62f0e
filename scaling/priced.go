package scaling

import (
	"math/bits"
	"sync"
)

// Plan is the priced programme (METHOD §9, the priced rule): over the need of the elements
// ahead (an element is a tick, or a block of ticks; -1: overloaded whatever is ordered now), the
// set O of elements to leave overloaded that minimises
//
//	Σ_q max(Min, the largest need outside O over [q, q+Look]) + λ·|O|
//
// — pods are paid for from the element they are ordered at and serve Look elements later, so the
// size at q must hold the need of every element of the start-up window ahead that is not left
// overloaded — and the size of its first element. It is the programme the backtest's floor
// solves in hindsight (on a whole trace) and the priced rule solves at every decision (on the
// lead ahead). A Plan holds its settings only: the programme's arrays are scratch, shared by all
// Plans through a pool (a fleet of policies holds as many as decide at once, not one each), and
// once the pool's have grown to a size a call does not allocate. It is safe for concurrent use.
type Plan struct {
	// Look is the start-up window in elements (at most 16: the programme has 2^Look states).
	Look int
	// Min is the fewest pods of any element (min_replicas).
	Min int32
}

// planScratch is the programme's arrays: every call writes all it reads.
type planScratch struct {
	w, nw  []float64 // by state; only the canonical states of the element are written and read
	choice []uint64  // choice[q·words + s/64] bit s%64: element q in O in canonical state s
	canon  []canonState
}

// canonState is a canonical state of the start-up window after an element (see First): bits,
// bit p set unless element q+1+p is a record; top, the largest need of its records (at least
// Min); low, the bits of its records whose needs are at most the element's own.
type canonState struct {
	bits, low uint32
	top       int32
}

var planPool = sync.Pool{New: func() any { return new(planScratch) }}

// MaxPlanLook bounds Plan.Look.
const MaxPlanLook = 16

// First solves the programme on need at the price λ (per overloaded element, in pod-elements) and
// returns the size of its first element. An element that is -1 is not paid for.
//
// The programme's state after element q is which of the next Look elements are in O, but what
// the elements up to q pay depends only on its records: the elements outside O whose needs are
// above Min and above every need before them in the window (each element up to q holds the
// largest need of a prefix of that window). States with the same records cost the same, to the
// last bit, and choose the same, so the programme is solved on one state of each, its canonical
// one: every element that is not a record counted in O. On a window of needs with ties or
// dips that is a few dozen states where there are 2^Look; on a window that rises at every
// element it is all of them.
func (p *Plan) First(need []int32, lambda float64) int32 {
	n, _ := p.solve(need, lambda)
	return n
}

// solve is First's size and the programme's optimum.
func (p *Plan) solve(need []int32, lambda float64) (int32, float64) {
	if len(need) == 0 {
		return p.Min, 0
	}
	look := min(max(p.Look, 0), MaxPlanLook)
	ns := 1 << look
	full := uint32(ns - 1)
	words := (ns + 63) / 64
	sc := planPool.Get().(*planScratch)
	defer planPool.Put(sc)
	if cap(sc.w) < ns {
		sc.w, sc.nw, sc.canon = make([]float64, ns), make([]float64, ns), make([]canonState, 0, ns)
	}
	if cap(sc.choice) < len(need)*words {
		sc.choice = make([]uint64, len(need)*words)
	}
	choice := sc.choice[:len(need)*words]
	clear(choice)
	w, nw := sc.w[:ns], sc.nw[:ns]
	clear(w) // before the first element nothing has been paid for, in any state
	// need of element j as a record sees it: nothing past the end or overloaded at every size.
	at := func(j int) int32 {
		if j < len(need) && need[j] >= 0 {
			return need[j]
		}
		return 0
	}
	for q := range need {
		nq := need[q]
		// The canonical states of the window q+1 … q+look, grown element by element: each state
		// so far takes the element in O, and, where its need is above the state's top, as a
		// record too.
		cs := append(sc.canon[:0], canonState{top: p.Min})
		for pos := range look {
			v := at(q + 1 + pos)
			bit := uint32(1) << pos
			for i := range cs {
				c := &cs[i]
				if v > c.top {
					r := canonState{bits: c.bits, low: c.low, top: v}
					if v <= nq {
						r.low |= bit
					}
					cs = append(cs, r)
					c = &cs[i]
				}
				c.bits |= bit
			}
		}
		sc.canon = cs
		row := choice[q*words : q*words+words]
		for _, c := range cs {
			s := c.bits
			base := c.top
			// The state before element q: with q in O, s shifted (its records stay records);
			// with q outside O and a record, the records of s at or below its need are not.
			s1 := (s<<1 | 1) & full
			v1 := float64(base) + w[s1]
			if nq >= 0 {
				v1 += lambda
				s0 := s1
				if nq > p.Min {
					s0 = (s<<1 | c.low<<1) & full
				}
				if v0 := float64(max(base, nq)) + w[s0]; v0 <= v1 {
					nw[s] = v0
					continue
				}
			}
			nw[s] = v1
			row[s/64] |= 1 << (s % 64)
		}
		w, nw = nw, w
	}
	// Walk the choices back from the end (past it, no element is needed: every element in O, the
	// canonical state full) to the first element's, canonical state by canonical state.
	s := full
	opt := w[full]
	n := p.Min
	for q := len(need) - 1; q >= 0; q-- {
		inO := choice[q*words+int(s/64)]>>(s%64)&1 == 1
		nq := need[q]
		if q <= look && !inO && nq >= 0 {
			n = max(n, nq) // element q is in the first element's window, outside O
		}
		if inO {
			s = (s<<1 | 1) & full
			continue
		}
		// Outside O: q is a record of the window before it if its need is above Min, and the
		// records of s at or below its need are then not.
		if nq <= p.Min {
			s = (s<<1 | 1) & full
			continue
		}
		low := uint32(0)
		for pos := range look {
			if s>>pos&1 == 0 && at(q+1+pos) <= nq {
				low |= 1 << pos
			}
		}
		s = (s<<1 | low<<1) & full
	}
	return n, opt
}

// WindowMax sets m[s], for every state s of the next len(m)−1 = 2^look − 1 elements after q
// (bit p: element q+1+p in O), to the largest need among those outside O; an element past the
// end of c, or overloaded at every size (-1), needs nothing.
func WindowMax(m []int32, c []int32, q int) {
	// Bit by bit: with bits 0 … p−1 done, the states with bit p set (element q+1+p in O) are those
	// without it, and the states with it clear need element q+1+p's need as well.
	m[0] = 0
	for p := range bits.Len(uint(len(m) - 1)) {
		n := int32(0)
		if j := q + 1 + p; j < len(c) && c[j] >= 0 {
			n = c[j]
		}
		lo := m[:1<<p]
		copy(m[1<<p:2<<p], lo)
		for s, v := range lo {
			lo[s] = max(v, n)
		}
	}
}
