package backtest

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// finishTrace fills the ratios to hpa, to the frontier and to the oracle, the frontier floor of
// the overload budget b, and each run's share of the floor's saving (FloorClosed).
func finishTrace(tr *TraceResult, b float64) {
	hpaCost, actualCost := math.NaN(), math.NaN()
	for _, r := range tr.Runs {
		switch r.Policy {
		case "hpa":
			hpaCost = r.Cost
		case ActualPolicy:
			actualCost = r.Cost
		}
	}
	env := Envelope(tr.Frontier)
	for i := range tr.Frontier {
		for _, e := range env {
			if e == tr.Frontier[i] {
				tr.Frontier[i].OnEnvelope = true
			}
		}
	}
	for i := range tr.Runs {
		r := &tr.Runs[i]
		r.CostRatio = r.Cost / hpaCost
		r.ActualRatio = r.Cost / actualCost
		r.FrontierRatio = math.NaN()
		if len(env) > 0 {
			c, clamped := EnvelopeCost(env, r.OverloadFraction)
			r.FrontierRatio, r.FrontierClamped = r.Cost/c, clamped
		}
		if r.Policy == OraclePolicy {
			tr.OracleFrontierRatio = r.FrontierRatio
		}
		r.FrontierBound = math.NaN()
		if len(env) > 0 && tr.bound != nil {
			c, _ := EnvelopeCost(env, r.OverloadFraction)
			bound := tr.bound.Cost
			if r.Policy == ActualPolicy && strings.HasPrefix(tr.ActualReady, "recorded") {
				bound = tr.bound.Instant // recorded pods did not start as the model's do
			}
			r.FrontierBound = bound(r.OverloadFraction) / c
		}
	}
	tr.FrontierFloor = math.NaN()
	if len(env) > 0 && tr.bound != nil {
		tr.FrontierFloor = tr.bound.Floor(env, tr.Unavoidable+BandLow*b, tr.Unavoidable+BandHigh*b)
	}
	oracleCost := math.NaN()
	for _, r := range tr.Runs {
		if r.Policy == OraclePolicy {
			oracleCost = r.Cost
		}
	}
	for i := range tr.Runs {
		r := &tr.Runs[i]
		r.GapClosed = GapClosed(r.FrontierRatio, tr.OracleFrontierRatio)
		// At the run's own overload, as its frontier ratio is: the band's lowest floor lies at
		// the band's lower edge wherever the fixed targets' cost falls with overload faster
		// than the cheapest schedule's, and a run that spends its budget could never reach it.
		r.FloorClosed = FloorClosed(r.FrontierRatio, r.FrontierBound)
		r.FloorClosedBand = FloorClosed(r.FrontierRatio, tr.FrontierFloor)
		r.BandMissChance = BandMissChance(b*float64(r.Ticks), r.avoidable, r.OverloadEpisodes)
		r.GapAtOverload = math.NaN()
		if len(env) > 0 && !math.IsNaN(oracleCost) {
			if e, _ := EnvelopeCost(env, r.OverloadFraction); e-oracleCost >= MinFloorSaving*e {
				r.GapAtOverload = (e - r.Cost) / (e - oracleCost)
			}
		}
	}
}

// GapClosed is (1 − fr)/(1 − oracle): 0 for no better than the best fixed HPA target at the
// same overload, 1 for the oracle. NaN (undefined) when the oracle saves less than
// MinFloorSaving over the envelope: the ratio would divide by about zero (−41.6 for a policy
// 0.4 % dearer than the envelope when the oracle saves 0.01 %).
func GapClosed(fr, oracle float64) float64 {
	if math.IsNaN(fr) || math.IsNaN(oracle) || !(1-oracle >= MinFloorSaving) {
		return math.NaN()
	}
	return (1 - fr) / (1 - oracle)
}

// MinFloorSaving is the least saving 1 − frontier_floor for which FloorClosed is defined: below
// it the floor is as dear as the best fixed target (or dearer), and the ratio would divide by
// about zero. GapClosed and GapAtOverload ask the same of the oracle's saving.
const MinFloorSaving = 0.01

// FloorClosed is (1 − fr)/(1 − floor), the share of the saving at equal overload that the
// floor shows possible which a frontier ratio fr captures: 0 for no better than the best
// fixed HPA target, 1 at the floor, negative for a policy dearer than the best fixed target.
// NaN (undefined) when either input is NaN or infinite, or when the floor saves less than
// MinFloorSaving (a floor at or above 1 leaves nothing to close).
func FloorClosed(fr, floor float64) float64 {
	if math.IsNaN(fr) || math.IsInf(fr, 0) || math.IsNaN(floor) || math.IsInf(floor, 0) || !(1-floor >= MinFloorSaving) {
		return math.NaN()
	}
	return (1 - fr) / (1 - floor)
}

// Envelope returns the lower envelope of (overload fraction, cost) of the sweep: the points that
// no other point beats on both, sorted by overload fraction (cost then falls along it).
func Envelope(pts []FrontierPoint) []FrontierPoint {
	s := slices.Clone(pts)
	sort.Slice(s, func(i, j int) bool {
		if s[i].OverloadFraction != s[j].OverloadFraction {
			return s[i].OverloadFraction < s[j].OverloadFraction
		}
		return s[i].Cost < s[j].Cost
	})
	var env []FrontierPoint
	best := math.Inf(1)
	for _, p := range s {
		if p.Cost < best {
			env = append(env, p)
			best = p.Cost
		}
	}
	return env
}

// EnvelopeCost interpolates the envelope's cost linearly at overload fraction x. Outside the
// envelope it returns the cost of the nearest end and clamped=true.
func EnvelopeCost(env []FrontierPoint, x float64) (cost float64, clamped bool) {
	if x < env[0].OverloadFraction {
		return env[0].Cost, true
	}
	last := env[len(env)-1]
	if x > last.OverloadFraction {
		return last.Cost, true
	}
	for i := 1; i < len(env); i++ {
		a, b := env[i-1], env[i]
		if x <= b.OverloadFraction {
			if b.OverloadFraction == a.OverloadFraction {
				return math.Min(a.Cost, b.Cost), false
			}
			f := (x - a.OverloadFraction) / (b.OverloadFraction - a.OverloadFraction)
			return a.Cost + f*(b.Cost-a.Cost), false
		}
	}
	return env[0].Cost, false
}

// BandLow and BandHigh are the band a budget policy keeps its avoidable overload in, as shares of
// the budget: a policy that spends exactly its budget lands on either side of 1×, and the band
// is where the floor is read (FrontierFloor), where BandMissChance counts a miss, and what the
// what-if's recommendation holds the budget policy to.
const BandLow, BandHigh = 0.5, 1.5

// BandMissChance is the chance that overload arriving in episodes of mean length over/episodes
// ticks, as a Poisson process whose mean total is budget ticks, totals outside 0.5–1.5× budget:
// with μ = budget·episodes/over episodes expected, P(N < μ/2) + P(N > 3μ/2). Episodes of one
// length make it the least such chance; lengths that vary make the total vary more. NaN without
// a budget or an episode.
func BandMissChance(budget, over float64, episodes int) float64 {
	if !(budget > 0) || episodes <= 0 || !(over > 0) {
		return math.NaN()
	}
	mu := budget * float64(episodes) / over
	lo, hi := BandLow*mu, BandHigh*mu
	// The Poisson probabilities from the mode outwards (no underflow at a large μ), added up
	// where N is inside the band.
	mode := math.Floor(mu)
	lg, _ := math.Lgamma(mode + 1)
	pm := math.Exp(mode*math.Log(mu) - mu - lg)
	in := 0.0
	for n, p := mode, pm; n >= lo && p > 0; n-- {
		if n <= hi {
			in += p
		}
		p *= n / mu
	}
	for n, p := mode+1, pm*mu/(mode+1); p > 0; n++ {
		if n > hi {
			break
		}
		if n >= lo {
			in += p
		}
		p *= mu / (n + 1)
	}
	return max(0, 1-in)
}
