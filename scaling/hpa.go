package scaling

import (
	"math"
	"time"
)

func init() { Register("hpa", func(p Params) Algorithm { return NewHPA(p) }) }

// HPA reproduces the Kubernetes horizontal pod autoscaler controller
// (pkg/controller/podautoscaler at v1.37.2) for one CPU Resource metric with an AverageUtilization
// target: the replica calculator of replica_calculator.go (whole-percent utilization over the
// ready pods, the tolerance, unready pods counted idle on a scale-up) followed by horizontal.go's
// reconcile: the out-of-bounds shortcuts, then either normalizeDesiredReplicasWithBehaviors
// (Params.HPABehavior "default": stabilisation windows over past recommendations, then the rate
// policies over the scale events the HPA itself made, then min/max) or the legacy
// normalizeDesiredReplicas of an HPA without behavior ("none"). hack/hpadiff checks it sync by
// sync against the real controller.
//
// Like the controller, it only knows what it did: a scale event is recorded when Recommend returns
// a size different from in.Current, and a size someone else set is just the new current size.
type HPA struct {
	p Params
	// targetPercent is the HPA spec's int32 AverageUtilization, round(Target·100).
	targetPercent int32
	started       bool
	// recommendations are the unstabilised recommendations, kept as the controller keeps them:
	// a new one replaces the last entry older than every window, otherwise it is appended.
	recommendations []timedReplicas
	// upEvents and downEvents are the scale events (replicas added or removed) this HPA made,
	// with the controller's storeScaleEvent reuse of outdated entries; unused with "none".
	upEvents, downEvents []scaleEvent
	// unapplied: nothing applies the recommendations (SetUnapplied), so the scale events are the
	// observed changes of size, not the recommendations; lastCurrent is the size last seen.
	unapplied   bool
	lastCurrent int32
	// scratch is the copy Bounds probes (nil until the first).
	scratch *HPA
}

// Times are kept as Unix nanoseconds: the same order as the time.Time comparisons of the
// controller (for any date between 1678 and 2262) at the cost of an integer compare.
type timedReplicas struct {
	t int64
	n int32
}

type scaleEvent struct {
	t        int64
	n        int32 // replicas added or removed, non-negative
	outdated bool
}

// NewHPA returns an HPA with validated parameters p.
func NewHPA(p Params) *HPA {
	return &HPA{p: p, targetPercent: int32(math.Round(p.Target * 100))}
}

// Name implements Algorithm.
func (h *HPA) Name() string { return "hpa" }

// Reads implements Algorithm: the load and the ready count (the controller averages over the
// ready pods and counts unready ones idle on a scale-up).
func (h *HPA) Reads() Inputs { return InputLoad | InputReady }

// SetUnapplied implements Unapplied.
func (h *HPA) SetUnapplied(u bool) { h.unapplied = u }

// Recommend implements Algorithm: one reconcileAutoscaler at in.Time. in.W is the utilization at
// the current size, usage/(Current·request); the controller averages over the ready pods, which is
// W·Current/Ready.
func (h *HPA) Recommend(in Input) Decision {
	now := in.Time.UnixNano()
	if !h.started {
		// recordInitialRecommendation: the size found at the first sync counts as a
		// recommendation, so no scale-down below it within the window after start.
		h.started = true
		h.recommendations = append(h.recommendations[:0], timedReplicas{now, in.Current})
	} else if h.unapplied && in.Current != h.lastCurrent && h.p.HPABehavior != BehaviorNone {
		// Unapplied: the size moved (someone else scaled), and that is the scale event.
		if in.Current > h.lastCurrent {
			h.upEvents = storeScaleEvent(h.upEvents, now, in.Current-h.lastCurrent, h.p.ScaleUpPeriod)
		} else {
			h.downEvents = storeScaleEvent(h.downEvents, now, h.lastCurrent-in.Current, h.p.ScaleDownPeriod)
		}
	}
	h.lastCurrent = in.Current
	d := Decision{Target: h.p.Target}
	var final int32
	switch {
	case in.Current == 0:
		// The minimum is at least 1 (Validate), so a workload at zero was scaled there by hand:
		// the controller disables scaling and records nothing.
		d.Replicas, d.Reason = 0, ReasonScaledToZero
		return d
	case in.Current > h.p.MaxReplicas:
		// Out of bounds the controller rescales to the bound without computing metrics: no
		// recommendation is recorded, but the rescale is a scale event.
		final, d.Reason = h.p.MaxReplicas, ReasonMaxReplicas
	case in.Current < h.p.MinReplicas:
		final, d.Reason = h.p.MinReplicas, ReasonMinReplicas
	default:
		desired, ok := h.replicaCalculator(in)
		if !ok {
			// No metrics (or no ready pod reporting them): the reconcile fails before
			// normalisation, so nothing is recorded and the size stays.
			d.Replicas, d.Reason = in.Current, ReasonNoLoad
			return d
		}
		reason := ReasonTolerance
		if desired > in.Current {
			reason = ReasonScaleUp
		} else if desired < in.Current {
			reason = ReasonScaleDown
		}
		var limited string
		if h.p.HPABehavior == BehaviorNone {
			final, limited = h.normalizeLegacy(now, in.Current, desired)
		} else {
			final, limited = h.normalizeWithBehaviors(now, in.Current, desired)
		}
		if limited != "" {
			reason = limited
		}
		d.Reason = reason
	}
	if final != in.Current && h.p.HPABehavior != BehaviorNone && !h.unapplied {
		// storeScaleEvent after a successful rescale (the controller keeps none without behavior).
		if final > in.Current {
			h.upEvents = storeScaleEvent(h.upEvents, now, final-in.Current, h.p.ScaleUpPeriod)
		} else {
			h.downEvents = storeScaleEvent(h.downEvents, now, in.Current-final, h.p.ScaleDownPeriod)
		}
	}
	d.Replicas = final
	return d
}

// utilizationEpsilon guards the floor of a utilization rebuilt from the float W. The controller
// computes floor(100·Σusage/Σrequest) on integer millicores; W·Current/Ready·100 is the same
// quotient up to a few ulps, so an exact whole percent may come out as k−1e-13 and floor to k−1.
// Adding 1e-9 cannot push a true quotient over a whole percent: with integer millicores a
// non-integer quotient 100u/(n·r) is at least 1/(n·r) below the next integer, ten times 1e-9 or
// more for any n·r up to 1e8 millicores (100 000 pods of one core), while the float error, a few
// 1e-16·quotient, stays far below 1e-9.
const utilizationEpsilon = 1e-9

// utilization is the controller's whole-percent utilization of usage (in request units, W·Current)
// over n pods.
func utilization(usage float64, n int32) int32 {
	u := math.Floor(100*usage/float64(n) + utilizationEpsilon)
	if u >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(u)
}

// withinTolerance is Tolerances.isWithin with both tolerances at Params.Tolerance (the
// controller's --horizontal-pod-autoscaler-tolerance; debi does not model per-HPA tolerances).
func (h *HPA) withinTolerance(ratio float64) bool {
	return (1.0-h.p.Tolerance) <= ratio && ratio <= (1.0+h.p.Tolerance)
}

// replicaCalculator is GetResourceReplicas for one CPU utilization metric with every running pod
// reporting (no missing pods): Ready pods report, Current−Ready are unready (starting). It returns
// false when the controller would fail to compute a count (no load data, no ready pod).
func (h *HPA) replicaCalculator(in Input) (int32, bool) {
	if math.IsNaN(in.W) || in.W < 0 || in.Ready <= 0 {
		return 0, false
	}
	ready := in.Ready
	unready := max(in.Current-ready, 0)
	usage := in.W * float64(in.Current) // total usage in units of one pod's request
	ratio := float64(utilization(usage, ready)) / float64(h.targetPercent)
	if unready == 0 || ratio <= 1.0 {
		if h.withinTolerance(ratio) {
			return in.Current, true
		}
		return ceilInt32(ratio * float64(ready)), true
	}
	// Scale-up with unready pods: they are assumed to use nothing, and the ratio is recomputed
	// over every pod; a change of direction or a result inside the tolerance keeps the size.
	pods := ready + unready
	newRatio := float64(utilization(usage, pods)) / float64(h.targetPercent)
	if h.withinTolerance(newRatio) || newRatio < 1.0 {
		return in.Current, true
	}
	n := ceilInt32(newRatio * float64(pods))
	if n < in.Current {
		return in.Current, true
	}
	return n, true
}

// storeScaleEvent is the controller's storeScaleEvent: events older than the longest policy
// period are marked outdated, and the new event replaces the last outdated one or is appended.
func storeScaleEvent(ev []scaleEvent, now int64, n int32, longestPeriod time.Duration) []scaleEvent {
	cutoff := now - int64(longestPeriod)
	idx := -1
	for i := range ev {
		if ev[i].t < cutoff {
			ev[i].outdated = true
		}
		if ev[i].outdated {
			idx = i
		}
	}
	e := scaleEvent{t: now, n: n}
	if idx >= 0 {
		ev[idx] = e
		return ev
	}
	return append(ev, e)
}

// storeRecommendation records desired at now, replacing the entry at old (the last one no window
// needs) when there is one.
func (h *HPA) storeRecommendation(old int, now int64, desired int32) {
	r := timedReplicas{now, desired}
	if old >= 0 {
		h.recommendations[old] = r
	} else {
		h.recommendations = append(h.recommendations, r)
	}
}

// normalizeWithBehaviors is normalizeDesiredReplicasWithBehaviors for the API-default behavior:
// stabilise against past recommendations, record this one, then apply the rate policies and the
// bounds. It returns the reason when a limit changed the answer.
func (h *HPA) normalizeWithBehaviors(now int64, current, desired int32) (int32, string) {
	up, down := desired, desired
	upCut, downCut := now-int64(h.p.ScaleUpStabilization), now-int64(h.p.ScaleDownStabilization)
	old := -1
	for i, r := range h.recommendations {
		if r.t > upCut {
			up = min(up, r.n)
		}
		if r.t > downCut {
			down = max(down, r.n)
		}
		if r.t < upCut && r.t < downCut {
			old = i
		}
	}
	rec := current
	if rec < up {
		rec = up
	}
	if rec > down {
		rec = down
	}
	h.storeRecommendation(old, now, desired)
	reason := ""
	if rec != desired {
		reason = ReasonStabilized
	}

	switch {
	case rec > current:
		limit := max(h.scaleUpLimit(now, current), current)
		maxAllowed, lr := h.p.MaxReplicas, ReasonMaxReplicas
		if maxAllowed > limit {
			maxAllowed, lr = limit, ReasonRateLimited
		}
		if rec > maxAllowed {
			return maxAllowed, lr
		}
	case rec < current:
		limit := min(h.scaleDownLimit(now, current), current)
		minAllowed, lr := h.p.MinReplicas, ReasonMinReplicas
		if minAllowed < limit {
			minAllowed, lr = limit, ReasonRateLimited
		}
		if rec < minAllowed {
			return minAllowed, lr
		}
	}
	return rec, reason
}

// normalizeLegacy is normalizeDesiredReplicas, the path of an HPA without behavior: the highest
// recommendation of the --horizontal-pod-autoscaler-downscale-stabilization window
// (ScaleDownStabilization; an entry exactly at the cutoff still counts, the controller tests
// Before(cutoff) here), then convertDesiredReplicasWithRules: at most max(2·current, 4), at least
// min. Note the stabilised value may exceed the current size even when the load asks for less.
func (h *HPA) normalizeLegacy(now int64, current, desired int32) (int32, string) {
	stabilized := desired
	cutoff := now - int64(h.p.ScaleDownStabilization)
	old := -1
	for i, r := range h.recommendations {
		if r.t < cutoff {
			old = i
		} else if r.n > stabilized {
			stabilized = r.n
		}
	}
	h.storeRecommendation(old, now, desired)
	reason := ""
	if stabilized != desired {
		reason = ReasonStabilized
	}
	scaleUpLimit := int32(math.Max(2*float64(current), 4))
	maxAllowed, lr := h.p.MaxReplicas, ReasonMaxReplicas
	if maxAllowed > scaleUpLimit {
		maxAllowed, lr = scaleUpLimit, ReasonRateLimited
	}
	switch {
	case stabilized < h.p.MinReplicas:
		return h.p.MinReplicas, ReasonMinReplicas
	case stabilized > maxAllowed:
		return maxAllowed, lr
	}
	return stabilized, reason
}

func changeSince(ev []scaleEvent, cutoff int64) int32 {
	var s int32
	for _, e := range ev {
		if e.t > cutoff {
			s += e.n
		}
	}
	return s
}

// periodStart is the size at the start of the period ending now, from this HPA's scale events.
func (h *HPA) periodStart(now int64, current int32, period time.Duration) int32 {
	cut := now - int64(period)
	return current - changeSince(h.upEvents, cut) + changeSince(h.downEvents, cut)
}

// scaleUpLimit is calculateScaleUpLimitWithScalingRules with the Pods and Percent policies over
// ScaleUpPeriod (a zero value drops its policy) and selectPolicy Max.
func (h *HPA) scaleUpLimit(now int64, current int32) int32 {
	result := int32(math.MinInt32)
	start := h.periodStart(now, current, h.p.ScaleUpPeriod)
	if h.p.ScaleUpPods > 0 {
		result = max(result, start+h.p.ScaleUpPods)
	}
	if h.p.ScaleUpPercent > 0 {
		result = max(result, int32(math.Ceil(float64(start)*(1+h.p.ScaleUpPercent/100))))
	}
	return result
}

// scaleDownLimit is calculateScaleDownLimitWithBehaviors with one Percent policy over
// ScaleDownPeriod.
func (h *HPA) scaleDownLimit(now int64, current int32) int32 {
	start := h.periodStart(now, current, h.p.ScaleDownPeriod)
	return int32(float64(start) * (1 - h.p.ScaleDownPercent/100))
}
