package scaling

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// planBrute is every optimal first size of the priced programme by enumeration of O: the
// sizes x_0 of the sets O that minimise Σ_q max(minR, the largest need outside O over
// [q, q+look]) + λ·|O ∖ doomed|.
func planBrute(need []int32, look int, minR int32, lambda float64) []int32 {
	n := len(need)
	best := math.Inf(1)
	var firsts []int32
	for mask := range 1 << n {
		ok := true
		cost := 0.0
		for j, c := range need {
			if c < 0 && mask>>j&1 == 0 {
				ok = false // a doomed tick is overloaded whatever is ordered
				break
			}
			if c >= 0 && mask>>j&1 == 1 {
				cost += lambda
			}
		}
		if !ok {
			continue
		}
		var first int32
		for q := range n {
			x := minR
			for j := q; j <= min(q+look, n-1); j++ {
				if mask>>j&1 == 0 {
					x = max(x, need[j])
				}
			}
			if q == 0 {
				first = x
			}
			cost += float64(x)
		}
		switch {
		case cost < best-1e-9:
			best, firsts = cost, []int32{first}
		case cost <= best+1e-9 && !slices.Contains(firsts, first):
			firsts = append(firsts, first)
		}
	}
	return firsts
}

// TestPlanBrute: the programme's first size is an optimal one, against enumeration on
// random needs with doomed ticks, at prices from below a pod to above a whole window.
func TestPlanBrute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		look := rng.IntN(5)
		n := 1 + rng.IntN(12)
		need := make([]int32, n)
		for j := range need {
			need[j] = int32(1 + rng.IntN(8))
			if j < look && rng.IntN(5) == 0 {
				need[j] = -1
			}
		}
		lambda := []float64{0.5, 1.5, 3, 7, 20}[trial%5]
		got := (&Plan{Look: look, Min: 1}).First(need, lambda)
		if want := planBrute(need, look, 1, lambda); !slices.Contains(want, got) {
			t.Fatalf("need %v, look %d, λ %v: first size %d, optimal first sizes %v", need, look, lambda, got, want)
		}
	}
}

// TestPlanSpends: a one-tick spike is left overloaded when covering it costs more pods than
// the price of a tick, and covered when it costs less; a plateau ahead is ordered in time.
func TestPlanSpends(t *testing.T) {
	spike := []int32{2, 2, 2, 12, 2, 2, 2, 2, 2, 2, 2, 2}
	// Covering the spike at tick 3 holds 10 more pods over the 4 ticks of its window (look 3).
	if got := (&Plan{Look: 3, Min: 1}).First(spike, 20); got != 2 {
		t.Errorf("λ 20 < 40 pod-ticks: first size %d, want 2 (the spike left overloaded)", got)
	}
	if got := (&Plan{Look: 3, Min: 1}).First(spike, 60); got != 12 {
		t.Errorf("λ 60 > 40 pod-ticks: first size %d, want 12 (the spike covered)", got)
	}
	plateau := []int32{2, 2, 2, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	if got := (&Plan{Look: 3, Min: 1}).First(plateau, 20); got != 9 {
		t.Errorf("a long plateau a start-up ahead: first size %d, want 9", got)
	}
	// A doomed tick is not paid for: nothing else needs more than 2.
	doomed := []int32{2, -1, 2, 2, 2}
	if got := (&Plan{Look: 3, Min: 1}).First(doomed, 1e6); got != 2 {
		t.Errorf("a doomed tick: first size %d, want 2", got)
	}
}

// BenchmarkPlan is one decision of the priced programme at a 2-minute lead on 15 s ticks
// (look 8, 256 states), over one start-up window ahead and over three, on needs that are random
// (5–24 pods), smooth (a walk of a pod up or down) and rising at every element (every state
// canonical: the worst case): the cost of the rule, to read against the ≤ 50 µs a decision may
// take.
func BenchmarkPlan(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, needs := range []string{"random", "smooth", "rising"} {
		for _, windows := range []int{1, 3} {
			b.Run(fmt.Sprintf("needs=%s/windows=%d", needs, windows), func(b *testing.B) {
				const look = 8
				need := make([]int32, windows*look+1)
				p := &Plan{Look: look, Min: 1}
				x := int32(12)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					for j := range need {
						switch needs {
						case "random":
							need[j] = int32(5 + rng.IntN(20))
						case "smooth":
							x = max(1, x+int32(rng.IntN(3))-1)
							need[j] = x
						default:
							need[j] = int32(5 + 2*j + rng.IntN(2))
						}
					}
					_ = p.First(need, 40)
				}
			})
		}
	}
}

// planReference is First as it was written first, on every one of the 2^look states, one at a
// time with its own choice: the programme the faster First must decide exactly as
// (TestPlanReference). Its walk back masks the state after the choice is shifted in, so that a
// look of 0 reads state 0 (First until this test's canonical states did not, and read look 0's
// choices wrong: no caller asks for look 0).
func planReference(p *Plan, need []int32, lambda float64) (int32, float64) {
	if len(need) == 0 {
		return p.Min, 0
	}
	look := min(max(p.Look, 0), MaxPlanLook)
	ns := 1 << look
	full := ns - 1
	words := (ns + 63) / 64
	choice := make([]uint64, len(need)*words)
	w, nw, m := make([]float64, ns), make([]float64, ns), make([]int32, ns)
	for q := range need {
		m[full] = 0
		for s := full - 1; s >= 0; s-- {
			p := 0
			for s>>p&1 == 1 {
				p++
			}
			n := int32(0)
			if j := q + 1 + p; j < len(need) && need[j] >= 0 {
				n = need[j]
			}
			m[s] = max(m[s|1<<p], n)
		}
		nq := need[q]
		for s := range ns {
			s0, s1 := (s<<1)&full, (s<<1|1)&full
			base := max(p.Min, m[s])
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
	s := full
	var inO []bool
	for q := len(need) - 1; q >= 0; q-- {
		bit := choice[q*words+s/64]>>(s%64)&1 == 1
		if q <= look {
			inO = append(inO, bit)
		}
		s <<= 1
		if bit {
			s |= 1
		}
		s &= full
	}
	n := p.Min
	for idx, o := range inO {
		if q := len(inO) - 1 - idx; !o && need[q] >= 0 {
			n = max(n, need[q])
		}
	}
	return n, w[full]
}

// TestPlanReference: First, which solves on canonical states only, decides exactly as
// planReference, which solves on every state — the same first size, ties included, at the same
// optimum to the last bit — at every
// look from 0 to 10, with elements overloaded whatever is ordered, minimum sizes 0, 2 and 4, on
// needs with many equal values and on needs that rise (where every state is canonical).
func TestPlanReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 3000 {
		look := trial % 11
		need := make([]int32, 1+rng.IntN(3*look+2))
		for j := range need {
			need[j] = int32(rng.IntN(6))
			if trial%7 == 0 {
				need[j] = int32(j + rng.IntN(2)) // rising, with a tie now and then
			}
			if rng.IntN(8) == 0 {
				need[j] = -1
			}
		}
		p := &Plan{Look: look, Min: int32(2 * (trial % 3))}
		lambda := []float64{0.25, 1, 2, 3.5, 8, 40}[trial%6]
		got, cost := p.solve(need, lambda)
		if want, wantCost := planReference(p, need, lambda); got != want || cost != wantCost {
			t.Fatalf("look %d, min %d, λ %v, need %v: first size %d at a cost of %v, the reference %d at %v", look, p.Min, lambda, need, got, cost, want, wantCost)
		}
	}
}
