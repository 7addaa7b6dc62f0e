package scaling

import "math/bits"

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
// lead ahead). Its arrays are reused: after the first call at a size it does not allocate. It
// is not safe for concurrent use.
type Plan struct {
	// Look is the start-up window in elements (at most 16: the programme has 2^Look states).
	Look int
	// Min is the fewest pods of any element (min_replicas).
	Min int32
	// The programme's arrays, reused across calls.
	w, nw  []float64
	m      []int32
	choice []uint64 // choice[q·words + s/64] bit s%64: element q in O in state s
	inO    []bool
}

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
	if len(p.w) != ns {
		p.w, p.nw, p.m = make([]float64, ns), make([]float64, ns), make([]int32, ns)
	}
	if cap(p.choice) < len(need)*words {
		p.choice = make([]uint64, len(need)*words)
	}
	choice := p.choice[:len(need)*words]
	clear(choice)
	clear(p.w)
	w, nw, m := p.w, p.nw, p.m
	for q := range need {
		WindowMax(m, need, q)
		nq := need[q]
		for s := range ns {
			s0, s1 := (s<<1)&full, (s<<1|1)&full
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
			choice[q*words+s/64] |= 1 << (s % 64)
		}
		w, nw = nw, w
	}
	p.w, p.nw = w, nw
	// Walk the choices back from the end (past it, no element is needed) to the first element's.
	s := full
	inO := p.inO[:0]
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
	p.inO = inO
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
	full := len(m) - 1
	m[full] = 0
	for s := full - 1; s >= 0; s-- {
		p := bits.TrailingZeros(uint(^s))
		j := q + 1 + p
		n := int32(0)
		if j < len(c) && c[j] >= 0 {
			n = c[j]
		}
		m[s] = max(m[s|1<<p], n)
	}
}
