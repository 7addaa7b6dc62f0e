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
	p := &pricedState{plan: scaling.Plan{Look: k, Min: o.Params.MinReplicas}, lambda: float64(k + 1)}
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
		n := p.plan.First(p.need, p.lambda)
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

// pricedState is the priced oracle's state between ticks: the programme, the price, the ready
// count of the tick just served and the need ahead (reused).
type pricedState struct {
	plan      scaling.Plan
	lambda    float64
	lastReady int32
	need      []int32
}
