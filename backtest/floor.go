package backtest

import (
	"math"
	"slices"

	"github.com/debi-scaler/debi/scaling"
)

// startBound is the start-up half of NeedBound: the cheapest schedule counting that a pod is
// paid for from its creation and serves only a start-up delay of d ticks later.
//
// A pod ready at tick j was created at tick j − d or before and has stayed in the spec since,
// so the spec at tick i holds every pod ready at any tick of [i, i+d]: it is at least the need
// of every tick of that window that is not overloaded, and at least min_replicas. For a set O of
// overloaded ticks the cheapest schedule therefore costs at least
//
//	f(O) = Σ_i max(min_replicas, max over the window's ticks outside O of need),
//
// and the floor at k overloaded ticks is f*(k) = min over |O| = k of f(O). A tick whose demand is
// above u_sla·N_max·R is in every O (no size within the bounds serves it) and has max_replicas
// ready: its need is N_max, as if it were outside O. Every policy compared holds N_max there,
// serving what can be served; a floor that dropped to min_replicas over hours of saturation
// because the tick is overloaded anyway would count a saving no one would take (it sheds all
// the load that N_max serves).
//
// Two relaxations keep it exact enough and cheap, each only lowering the bound:
//   - the window is read at a stride s (a divisor of d no longer than a sample period, reading at
//     least minLook ticks after the first where d allows), at ticks i, i+s, …, i+d, so each
//     residue of the ticks mod s is a chain of its own and the programme below has 2^(d/s)
//     states (16 at a 2-minute start-up on 15 s ticks); under step demand, where the need is
//     constant over a sample, every sample the window touches is read, so nothing is lost but
//     in the trace's last start-up window, whose last tick the stride may not reach (12
//     pod-ticks in 1.17 million on a 28-day trace);
//   - |O| = k is priced instead of imposed (Lagrangian relaxation): for a price λ per overloaded
//     tick the programme solves min_O f(O) + λ|O| exactly, and its optimum (k_λ, f_λ) gives
//     f*(k) ≥ f_λ + λ(k_λ − k) for every k. The prices are refined along the lower convex hull
//     of f* up to the overloads of interest.
type startBound struct {
	chains [][]int32 // the need per chain (residue mod stride), N_max where every size overloads
	look   int       // ticks of a chain a window reads after its first: d / stride
	above  [][]bool  // per chain: the ticks above u_sla·N_max·R, which hold N_max (their need)
	minR   int32
	pts    []lagPoint // the solved prices, each a tangent of the hull
	calls  int        // programmes solved (for the tests and the benchmark)
}

type lagPoint struct {
	lambda, f float64 // price and cost (pod-ticks, without the price) of an optimum
	k         int     // its overloaded ticks
}

// maxLook bounds the states of the programme (2^maxLook per tick); minLook is the fewest ticks
// after its first that a window reads where the delay allows (under linear demand the window's
// largest need can lie at a sample inside it, between two ticks read).
const maxLook, minLook = 10, 4

// newStartBound is the bound over need (pods per scored tick, -1: overloaded at every size,
// held at maxR) for a start-up of d ticks and samples of period ticks, refined up to kmax
// overloaded ticks; nil when d is 0 (NeedBound's own sort is then exact).
func newStartBound(need []int32, minR, maxR int32, d, period, kmax int) *startBound {
	if d <= 0 || len(need) == 0 {
		return nil
	}
	s := 1
	for c := 1; c <= d; c++ { // the largest divisor of d within a sample period that reads minLook ticks
		if d%c == 0 && c <= max(period, 1) && d/c >= min(d, minLook) {
			s = c
		}
	}
	for d/s > maxLook {
		s++ // a longer stride reads fewer ticks: still a bound
		for d%s != 0 {
			s++
		}
	}
	b := &startBound{chains: make([][]int32, s), above: make([][]bool, s), look: d / s, minR: minR}
	for i, n := range need {
		above := n < 0
		if above {
			n = maxR
		}
		b.chains[i%s] = append(b.chains[i%s], n)
		b.above[i%s] = append(b.above[i%s], above)
	}
	b.refine(kmax)
	return b
}

// solve returns an optimum of min_O f(O) + λ|O|: its cost f (without the price) and its k.
func (b *startBound) solve(lambda float64) (float64, int) {
	b.calls++
	var f float64
	var k int
	for i, c := range b.chains {
		cf, ck := solveChain(c, b.above[i], b.look, b.minR, lambda)
		f, k = f+cf, k+ck
	}
	return f, k
}

// solveChain is the programme on one chain: the cost of element q is max(minR, the largest need
// outside O among elements q … q+look), and an element in O costs λ. The state is which of the
// next look elements are in O; ties go to fewer overloaded elements. An element above capacity
// (above) is overloaded and costs λ, but holds its need (N_max) as one outside O does.
func solveChain(c []int32, above []bool, look int, minR int32, lambda float64) (float64, int) {
	ns := 1 << look
	full := ns - 1
	w, nw := make([]float64, ns), make([]float64, ns)
	wk, nk := make([]int32, ns), make([]int32, ns)
	m := make([]int32, ns)
	for q := range c {
		scaling.WindowMax(m, c, q)
		nq := c[q]
		for s := range ns {
			s0, s1 := (s<<1)&full, (s<<1|1)&full
			base := max(minR, m[s])
			if above[q] {
				nw[s], nk[s] = float64(max(base, nq))+lambda+w[s0], wk[s0]+1
				continue
			}
			v1, k1 := float64(base)+lambda+w[s1], wk[s1]+1
			if v0 := float64(max(base, nq)) + w[s0]; v0 < v1 || v0 == v1 && wk[s0] <= k1 {
				nw[s], nk[s] = v0, wk[s0]
				continue
			}
			nw[s], nk[s] = v1, k1
		}
		w, nw, wk, nk = nw, w, nk, wk
	}
	k := int(wk[full]) // past the end no element is needed
	return w[full] - lambda*float64(k), k
}

// refine solves prices along the hull of f* from k = 0 up to kmax: between two solved points it
// solves the price of their chord and stops where no optimum lies below the chord or the
// chord and the tangents agree within 1e-4 of the cost.
func (b *startBound) refine(kmax int) {
	hi := 0.0 // a price above which nothing is overloaded that need not be
	for _, c := range b.chains {
		for _, n := range c {
			hi = max(hi, float64(n))
		}
	}
	hi = (hi+1)*float64(b.look+1) + 1
	add := func(lambda float64) lagPoint {
		f, k := b.solve(lambda)
		p := lagPoint{lambda, f, k}
		b.pts = append(b.pts, p)
		return p
	}
	lo := add(hi)
	// The far end: halve the price until the optimum overloads at least kmax ticks.
	far := lo
	for lambda := hi / 2; far.k < kmax && lambda > 1e-6; lambda /= 2 {
		far = add(lambda)
	}
	if far.k < kmax {
		add(0) // the cheapest of all: the flat end of the hull
	}
	var split func(a, z lagPoint, depth int)
	split = func(a, z lagPoint, depth int) {
		if z.k <= a.k+1 || depth > 40 || a.k > kmax {
			return
		}
		lambda := (a.f - z.f) / float64(z.k-a.k) // the chord's slope
		c := add(lambda)
		chord := a.f + lambda*float64(a.k) // the chord's value of f + λk
		if c.f+lambda*float64(c.k) >= chord-1e-9*math.Abs(chord) || c.k == a.k || c.k == z.k {
			return // the chord is on the hull: its price's tangent is the chord itself
		}
		mid := func(k int) float64 { // the chord against the tangents at the chord's middle
			return a.f + (z.f-a.f)*float64(k-a.k)/float64(z.k-a.k)
		}
		if km := (a.k + z.k) / 2; mid(km)-b.lower(float64(km)) <= 1e-4*mid(km) {
			return
		}
		split(a, c, depth+1)
		split(c, z, depth+1)
	}
	// Walk the halvings in order of k: each consecutive pair is a segment of the hull to refine.
	pts := slices.Clone(b.pts)
	slices.SortFunc(pts, func(x, y lagPoint) int { return x.k - y.k })
	for i := 1; i < len(pts); i++ {
		split(pts[i-1], pts[i], 0)
	}
}

// lower is the bound on f*(k) in pod-ticks: the largest of the solved prices' tangents.
func (b *startBound) lower(k float64) float64 {
	v := math.Inf(-1)
	for _, p := range b.pts {
		v = max(v, p.f+p.lambda*(float64(p.k)-k))
	}
	return v
}
