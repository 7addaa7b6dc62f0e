package backtest

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// PricedOraclePolicy names the diagnostic that prices overload with a perfect forecast of the
// lead: at each tick it knows the need of every tick up to a horizon ahead (nothing beyond),
// and chooses the size that minimises pods + λ·(overloaded ticks) over that horizon, with the
// floor's own model of a start-up (a pod serves a start-up after its creation and is paid for
// from it) and λ adapted online so that the realised overload tracks the budget. It is causal
// in everything but the horizon's demand: what it leaves of the floor's saving is what a
// priced rule cannot take without knowing more than the lead, or λ in hindsight.
const PricedOraclePolicy = "priced-oracle"

// pricedHorizonLeads is the horizon of the priced oracle's programme in start-up windows: the
// plan's last window is truncated, so a plan much longer than the window adds nothing to its
// first decision.
const pricedHorizonLeads = 3

// pricedMaxLook bounds the programme's states (2^look per tick).
const pricedMaxLook = 12

// pricedGain is η of the price's update: ln λ ← ln λ + η·(overloaded − budget) at every tick,
// so a run of overloaded ticks raises λ by about η each, and a hundred served ticks lower it
// by η at a 1 % budget.
const pricedGain = 0.02

// pricedOracle is the decider of PricedOraclePolicy on w under o at the overload budget b.
func pricedOracle(w *World, o Options, b float64) (decider, error) {
	ticks := func(d time.Duration) int { return int((d + w.Tick - 1) / w.Tick) }
	k := ticks(o.DecisionDelay) + ticks(o.StartupDelay)
	if k > pricedMaxLook {
		return nil, fmt.Errorf("policy %s: a lead of %d ticks is more than its programme's %d", PricedOraclePolicy, k, pricedMaxLook)
	}
	peak := w.peak()
	per := o.SLAUtilization * o.Request
	raw := func(j int) int32 { // the need of tick j, -1 where no size within the bounds serves it
		d := peak[j]
		n := ceilInt32(d / per)
		for d > o.SLAUtilization*float64(n)*o.Request && n < math.MaxInt32 {
			n++
		}
		if n > o.Params.MaxReplicas {
			return -1
		}
		return max(n, o.Params.MinReplicas)
	}
	p := &pricedPlan{look: k, minR: o.Params.MinReplicas, lambda: float64(k + 1)}
	h := pricedHorizonLeads * max(k, 1)
	past := make([]int32, 0, len(peak)) // the spec ordered at each tick so far
	return func(_ context.Context, i int, obs policy.Observation) (policy.Result, error) {
		// The price follows the overload of the tick just served.
		if i > 0 && raw(i-1) >= 0 && scaling.Overloaded(peak[i-1], o.SLAUtilization, p.lastReady, o.Request) {
			p.lambda *= math.Exp(pricedGain * (1 - b))
		} else if i > 0 {
			p.lambda *= math.Exp(-pricedGain * b)
		}
		p.lambda = min(max(p.lambda, 1e-3), 1e7)
		end := min(i+h, len(peak)-1)
		p.need = p.need[:0]
		for j := i; j <= end; j++ {
			n := raw(j)
			// A tick the pods ordered before now cannot serve is overloaded whatever is ordered
			// now (a pod ready at j was in the spec over all of [j−k, j]).
			if n >= 0 && j < i+k {
				for q := max(j-k, 0); q < i; q++ {
					if q < len(past) && past[q] < n {
						n = -1
						break
					}
				}
			}
			p.need = append(p.need, n)
		}
		n := p.first()
		past = append(past, n)
		// What serves this tick, as the scorer counts it: a smaller size removes pods at once
		// when the decision is not delayed.
		p.lastReady = obs.Ready
		if o.DecisionDelay == 0 {
			p.lastReady = min(obs.Ready, n)
		}
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: n, Reason: "priced-oracle"}}, nil
	}, nil
}

// pricedPlan is the priced oracle's programme: over the need of the ticks ahead (-1: overloaded
// whatever is ordered now), the set O of ticks to leave overloaded that minimises
// Σ_q max(min_replicas, the largest need outside O over [q, q+look]) + λ|O|, as the floor's
// chain programme (solveChain) with its choices kept, so that the first size is read off.
type pricedPlan struct {
	look      int
	minR      int32
	lambda    float64
	lastReady int32
	need      []int32
	// The programme's arrays, reused across ticks.
	w, nw  []float64
	m      []int32
	choice []uint64 // choice[q·words + s/64] bit s%64: element q in O in state s
	inO    []bool
}

// first solves the programme and returns the size of its first tick.
func (p *pricedPlan) first() int32 {
	c := p.need
	ns := 1 << p.look
	full := ns - 1
	words := (ns + 63) / 64
	if len(p.w) != ns {
		p.w, p.nw, p.m = make([]float64, ns), make([]float64, ns), make([]int32, ns)
	}
	if cap(p.choice) < len(c)*words {
		p.choice = make([]uint64, len(c)*words)
	}
	choice := p.choice[:len(c)*words]
	clear(choice)
	clear(p.w)
	w, nw, m := p.w, p.nw, p.m
	for q := range c {
		windowMax(m, c, q)
		nq := c[q]
		for s := range ns {
			s0, s1 := (s<<1)&full, (s<<1|1)&full
			base := max(p.minR, m[s])
			// In O: the price, except for a tick overloaded whatever is ordered now.
			v1 := float64(base) + w[s1]
			if nq >= 0 {
				v1 += p.lambda
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
	// Walk the choices back from the end (past it, no element is needed) to the first tick's.
	s := full
	inO := p.inO[:0]
	for q := len(c) - 1; q >= 0; q-- {
		bit := choice[q*words+s/64]>>(s%64)&1 == 1
		if q <= p.look {
			inO = append(inO, bit)
		}
		s = (s << 1) & full
		if bit {
			s |= 1
		}
	}
	p.inO = inO
	// inO holds elements min(look, len−1) … 0, last first.
	n := p.minR
	for idx, o := range inO {
		q := len(inO) - 1 - idx
		if !o && c[q] >= 0 {
			n = max(n, c[q])
		}
	}
	return n
}
