package backtest

import (
	"context"
	"math"
	"time"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// needAt is the fewest pods that serve demand d at u_sla, clamped to the bounds: n*(t), the
// oracle's size and the SPEC RG reference. It uses the scorer's own comparison, so a size of
// needAt is never counted as overloaded.
func needAt(d float64, o Options) int32 {
	per := o.SLAUtilization * o.Request
	n := ceilInt32(d / per)
	for d > o.SLAUtilization*float64(n)*o.Request && n < math.MaxInt32 {
		n++
	}
	return min(max(n, o.Params.MinReplicas), o.Params.MaxReplicas)
}

// oracle knows future demand (METHOD §7): at tick i it orders the largest need over the ticks
// until the pods it orders now can serve (decision delay and start-up delay, each rounded up
// to whole ticks): every tick's demand is covered at u_sla although new pods arrive late.
func oracle(w *World, o Options) decider {
	ticks := func(d time.Duration) int { return int((d + w.Tick - 1) / w.Tick) }
	k := ticks(o.DecisionDelay) + ticks(o.StartupDelay)
	if o.Overload == OverloadTime && o.Demand != DemandStep {
		// The pods ready at a tick serve until the next, and under linear demand the demand
		// moves to the next tick's over that interval: its demand too. Under step demand the
		// interval holds the tick's own level.
		k++
	}
	return func(_ context.Context, i int, obs policy.Observation) (policy.Result, error) {
		var n int32
		peak := w.peak()
		for j := i; j <= min(i+k, len(peak)-1); j++ {
			n = max(n, needAt(peak[j], o)) // the smallest count that carries every metric
		}
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: n, Reason: "oracle"}}, nil
	}
}
