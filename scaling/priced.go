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
	w, nw  []float64
	m      []int32
	choice []uint64 // choice[q·words + s/64] bit s%64: element q in O in state s
	inO    []bool
}

var planPool = sync.Pool{New: func() any { return new(planScratch) }}

// MaxPlanLook bounds Plan.Look.
const MaxPlanLook = 16

// First solves the programme on need at the price λ (per overloaded element, in pod-elements) and
// returns the size of its first element. An element that is -1 is not paid for.
func (p *Plan) First(need []int32, lambda float64) int32 {
	if len(need) == 0 {
		return p.Min
	}
	look := min(max(p.Look, 0), MaxPlanLook)
	ns := 1 << look
	full := ns - 1
	words := (ns + 63) / 64
	sc := planPool.Get().(*planScratch)
	defer planPool.Put(sc)
	if cap(sc.w) < ns {
		sc.w, sc.nw, sc.m = make([]float64, ns), make([]float64, ns), make([]int32, ns)
	}
	if cap(sc.choice) < len(need)*words {
		sc.choice = make([]uint64, len(need)*words)
	}
	choice := sc.choice[:len(need)*words]
	clear(choice)
	w, nw, m := sc.w[:ns], sc.nw[:ns], sc.m[:ns]
	clear(w)
	for q := range need {
		WindowMax(m, need, q)
		nq := need[q]
		row := choice[q*words : q*words+words]
		mask := len(w) - 1 // full, spelled so that the compiler knows s0 and s1 are in w
		for s := range m {
			s0, s1 := (s<<1)&mask, (s<<1|1)&mask
			base := max(p.Min, m[s])
			// In O: the price, except for an element overloaded whatever is ordered now.
			v1 := float64(base) + w[s1]
			if nq >= 0 {
				v1 += lambda
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
	// Walk the choices back from the end (past it, no element is needed) to the first element's.
	s := full
	inO := sc.inO[:0]
	for q := len(need) - 1; q >= 0; q-- {
		bit := choice[q*words+s/64]>>(s%64)&1 == 1
		if q <= look {
			inO = append(inO, bit)
		}
		s = (s << 1) & full
		if bit {
			s |= 1
		}
	}
	sc.inO = inO
	// inO holds elements min(look, len−1) … 0, last first.
	n := p.Min
	for idx, o := range inO {
		q := len(inO) - 1 - idx
		if !o && need[q] >= 0 {
			n = max(n, need[q])
		}
	}
	return n
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
