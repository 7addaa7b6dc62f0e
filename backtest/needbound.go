package backtest

import (
	"cmp"
	"math"
	"slices"
)

// NeedBound is the cheapest cost of any schedule of sizes within the replica bounds at a given
// overload fraction over the scored ticks of a World, hindsight included. A tick that is not
// overloaded has at least its need n*(t) ready (needAt, the scorer's own comparison), and a pod
// ready is a pod paid for; an overloaded tick at least min_replicas, but for one above
// u_sla·N_max·R, which no size avoids and which holds N_max as every policy compared holds it
// (serving what can be served). So at overload x the cheapest overloads those ticks, saving
// nothing on them, and then the ticks of largest need: the instant bound, which lets pods serve
// the moment they are created.
// With a start-up delay a pod is paid for from its creation, so the spec at each tick holds the
// ready pods of the whole start-up window ahead: the start-up bound (startBound), never below the
// instant one, which Cost takes.
type NeedBound struct {
	total float64   // Σ need over the scored ticks, in pods
	saved []float64 // saved[k]: what the k cheapest overloaded ticks save (the ticks above capacity first, nothing)
	unit  float64   // core-hours per pod-tick
	start *startBound
}

// NeedBound is the world's bound under o (its request, u_sla, replica bounds and start-up delay),
// refined up to the overload fraction xmax.
func (w *World) NeedBound(o Options, xmax float64) *NeedBound {
	all := w.peak()
	peak := all[min(w.Warm, len(all)):]
	if o.Overload == OverloadTime && o.Demand != DemandStep {
		// Counted over time, the pods ready at a tick serve the interval after it, which no size
		// below the need of the smaller of its two ends serves for any of its time: reading that
		// need at the tick keeps the bound below every schedule's cost at its overload (a tick
		// below it is overloaded for the whole interval, and the others are counted at least as
		// much by the time they are overloaded). Under step demand an interval holds the level
		// of the tick that starts it, the tick's own.
		peak = slices.Clone(peak)
		for i := range peak {
			if j := min(w.Warm, len(all)) + i + 1; j < len(all) {
				peak[i] = min(peak[i], all[j])
			}
		}
	}
	need := make([]float64, 0, len(peak))
	pods := make([]int32, len(peak))
	b := &NeedBound{saved: make([]float64, 1, len(peak)+1), unit: o.Request * w.Tick.Seconds() / 3600}
	for i, d := range peak {
		pods[i] = needAt(d, o)
		b.total += float64(pods[i])
		if d > o.SLAUtilization*float64(o.Params.MaxReplicas)*o.Request {
			// Overloaded at every size, and held at max_replicas, as every policy compared holds
			// it: in every overloaded set, first, and saving nothing.
			pods[i] = -1
			b.saved = append(b.saved, 0)
			continue
		}
		need = append(need, float64(pods[i]))
	}
	slices.SortFunc(need, func(x, y float64) int { return cmp.Compare(y, x) })
	for _, n := range need {
		b.saved = append(b.saved, b.saved[len(b.saved)-1]+n-float64(o.Params.MinReplicas))
	}
	if w.Tick > 0 {
		d := int((o.StartupDelay + w.Tick - 1) / w.Tick)
		b.start = newStartBound(pods, o.Params.MinReplicas, o.Params.MaxReplicas, d, int(w.Period/w.Tick), int(math.Ceil(min(1, xmax)*float64(len(peak)))))
	}
	return b
}

// Cost is the bound in core-hours at overload fraction x (a share of the scored ticks).
func (b *NeedBound) Cost(x float64) float64 {
	c := b.Instant(x)
	if b.start != nil {
		k := float64(len(b.saved) - 1)
		c = max(c, b.start.lower(math.Floor(min(1, max(0, x))*k+1e-9))*b.unit)
	}
	return c
}

// Instant is the instant bound at x: pods that serve the moment they are created. It is the
// bound of a run whose ready pods are recorded rather than modelled (the actual row).
func (b *NeedBound) Instant(x float64) float64 {
	k := len(b.saved) - 1
	over := min(k, max(0, int(math.Floor(x*float64(k)+1e-9))))
	return (b.total - b.saved[over]) * b.unit
}

// Floor is the lowest bound ÷ the envelope's cost over the overload fractions in [lo, hi]
// that a whole number of scored ticks can make (NaN when none can).
func (b *NeedBound) Floor(env []FrontierPoint, lo, hi float64) float64 {
	k := float64(len(b.saved) - 1)
	floor := math.NaN()
	for n := int(math.Ceil(lo*k - 1e-9)); n <= int(math.Floor(hi*k+1e-9)) && n < len(b.saved); n++ {
		x := float64(n) / k
		c, _ := EnvelopeCost(env, x)
		if v := b.Cost(x) / c; !(v >= floor) {
			floor = v
		}
	}
	return floor
}

// boundReach is the overload fraction up to which a trace's NeedBound is refined: past the
// budget's band (the unavoidable share added), where the floor is read, and past what a run
// near it overloads; beyond it the bound holds but is looser.
func boundReach(unavoidable float64, o Options) float64 {
	return unavoidable + max(0.05, 3*o.Calibration.Budget)
}
