package scaling

import (
	"math"
	"time"
)

func init() { Register("hpa", func(p Params) Algorithm { return NewHPA(p) }) }

// HPA reproduces the Kubernetes horizontal pod autoscaler for one resource-utilization metric:
// the replica calculator of pkg/controller/podautoscaler/replica_calculator.go (tolerance, ready
// and unready pods) followed by the behaviour of horizontal.go (stabilisation windows over past
// recommendations, then the scale-up and scale-down rate policies over past scale events, then
// min/max). Scale events are derived from the replica counts it is shown, so it stays right when
// something else (a person, a Tidal) changes the size.
type HPA struct {
	p               Params
	recommendations []timedReplicas // unstabilised recommendations, newest last
	upEvents        []timedReplicas // replicas added, by time
	downEvents      []timedReplicas // replicas removed, by time
	lastCurrent     int32
	seen            bool
}

type timedReplicas struct {
	t time.Time
	n int32
}

// NewHPA returns an HPA with validated parameters p.
func NewHPA(p Params) *HPA { return &HPA{p: p} }

// Name implements Algorithm.
func (h *HPA) Name() string { return "hpa" }

// Recommend implements Algorithm. in.W is the utilization at the current size; the HPA sees it
// as the average over ready pods, W·Current/Ready, exactly what metrics-server would report.
func (h *HPA) Recommend(in Input) Decision {
	h.observe(in)
	d := Decision{Target: h.p.Target}
	if in.Current == 0 {
		// Kubernetes disables scaling of a workload scaled to zero by hand.
		d.Replicas, d.Reason = 0, ReasonScaledToZero
		return d
	}
	// Out of bounds, Kubernetes rescales to the bound at once, without stabilisation or rate
	// limits (horizontal.go: "Current number of replicas above Spec.MaxReplicas").
	switch {
	case in.Current > h.p.MaxReplicas:
		d.Replicas, d.Reason = h.p.MaxReplicas, ReasonMaxReplicas
		return d
	case in.Current < h.p.MinReplicas:
		d.Replicas, d.Reason = h.p.MinReplicas, ReasonMinReplicas
		return d
	}
	var desired int32
	reason := ReasonScaleUp
	switch {
	case math.IsNaN(in.W) || in.W < 0:
		// No metrics: the HPA keeps the current size.
		desired, reason = in.Current, ReasonNoLoad
	default:
		desired = h.replicaCalculator(in)
		if desired == in.Current {
			reason = ReasonTolerance
		} else if desired < in.Current {
			reason = ReasonScaleDown
		}
	}
	final, limited := h.normalize(in.Time, in.Current, desired)
	if limited != "" {
		reason = limited
	}
	d.Replicas, d.Reason = final, reason
	return d
}

// replicaCalculator is GetResourceReplicas for one utilization metric with no missing pods:
// unready (starting) pods count as idle when scaling up, and a recomputed ratio that falls
// inside the tolerance or flips direction keeps the current size.
func (h *HPA) replicaCalculator(in Input) int32 {
	ready := in.Ready
	if ready > in.Current {
		ready = in.Current
	}
	if ready <= 0 {
		// No ready pod reports metrics: Kubernetes' calculator errors and the HPA keeps the size.
		return in.Current
	}
	unready := in.Current - ready
	usage := in.W * float64(in.Current) // total load in pod units
	usageRatio := usage / float64(ready) / h.p.Target
	scaleUpWithUnready := unready > 0 && usageRatio > 1
	if !scaleUpWithUnready {
		if math.Abs(1-usageRatio) <= h.p.Tolerance {
			return in.Current
		}
		return ceilInt32(usageRatio * float64(ready))
	}
	// Unready pods are assumed to use nothing yet.
	newRatio := usage / float64(in.Current) / h.p.Target
	if math.Abs(1-newRatio) <= h.p.Tolerance || newRatio < 1 {
		return in.Current
	}
	n := ceilInt32(newRatio * float64(in.Current))
	if n < in.Current {
		return in.Current
	}
	return n
}

// observe turns changes of the current size into scale events and forgets what no window needs.
func (h *HPA) observe(in Input) {
	if h.seen && in.Current != h.lastCurrent {
		if in.Current > h.lastCurrent {
			h.upEvents = append(h.upEvents, timedReplicas{in.Time, in.Current - h.lastCurrent})
		} else {
			h.downEvents = append(h.downEvents, timedReplicas{in.Time, h.lastCurrent - in.Current})
		}
	}
	h.seen, h.lastCurrent = true, in.Current
	h.upEvents = dropBefore(h.upEvents, in.Time.Add(-max(h.p.ScaleUpPeriod, h.p.ScaleDownPeriod)))
	h.downEvents = dropBefore(h.downEvents, in.Time.Add(-max(h.p.ScaleUpPeriod, h.p.ScaleDownPeriod)))
	h.recommendations = dropBefore(h.recommendations, in.Time.Add(-max(h.p.ScaleDownStabilization, h.p.ScaleUpStabilization)))
}

func dropBefore(ev []timedReplicas, cutoff time.Time) []timedReplicas {
	i := 0
	for i < len(ev) && !ev[i].t.After(cutoff) {
		i++
	}
	if i == 0 {
		return ev
	}
	return append(ev[:0], ev[i:]...)
}

// normalize is normalizeDesiredReplicasWithBehaviors: stabilise against past recommendations,
// record this one, then apply the rate policies and the bounds. It returns the reason when a
// limit changed the answer.
func (h *HPA) normalize(now time.Time, current, desired int32) (int32, string) {
	up, down := desired, desired
	upCut, downCut := now.Add(-h.p.ScaleUpStabilization), now.Add(-h.p.ScaleDownStabilization)
	for _, r := range h.recommendations {
		if r.t.After(upCut) {
			up = min(up, r.n)
		}
		if r.t.After(downCut) {
			down = max(down, r.n)
		}
	}
	rec := current
	if rec < up {
		rec = up
	}
	if rec > down {
		rec = down
	}
	h.recommendations = append(h.recommendations, timedReplicas{now, desired})
	reason := ""
	if rec != desired {
		reason = ReasonStabilized
	}

	switch {
	case rec > current:
		limit := h.scaleUpLimit(now, current)
		if limit < current {
			limit = current
		}
		maxAllowed := h.p.MaxReplicas
		lr := ReasonMaxReplicas
		if maxAllowed > limit {
			maxAllowed, lr = limit, ReasonRateLimited
		}
		if rec > maxAllowed {
			return maxAllowed, lr
		}
	case rec < current:
		limit := h.scaleDownLimit(now, current)
		if limit > current {
			limit = current
		}
		minAllowed := h.p.MinReplicas
		lr := ReasonMinReplicas
		if minAllowed < limit {
			minAllowed, lr = limit, ReasonRateLimited
		}
		if rec < minAllowed {
			return minAllowed, lr
		}
	}
	return rec, reason
}

func changeSince(ev []timedReplicas, cutoff time.Time) int32 {
	var s int32
	for _, e := range ev {
		if e.t.After(cutoff) {
			s += e.n
		}
	}
	return s
}

// scaleUpLimit is calculateScaleUpLimitWithScalingRules with the default policies (Pods and
// Percent over their periods, selectPolicy Max).
func (h *HPA) scaleUpLimit(now time.Time, current int32) int32 {
	result := int32(math.MinInt32)
	if h.p.ScaleUpPods > 0 {
		cut := now.Add(-h.p.ScaleUpPeriod)
		start := current - changeSince(h.upEvents, cut) + changeSince(h.downEvents, cut)
		result = max(result, start+h.p.ScaleUpPods)
	}
	if h.p.ScaleUpPercent > 0 {
		cut := now.Add(-h.p.ScaleUpPeriod)
		start := current - changeSince(h.upEvents, cut) + changeSince(h.downEvents, cut)
		result = max(result, ceilInt32(float64(start)*(1+h.p.ScaleUpPercent/100)))
	}
	return result
}

// scaleDownLimit is calculateScaleDownLimitWithBehaviors with one Percent policy.
func (h *HPA) scaleDownLimit(now time.Time, current int32) int32 {
	cut := now.Add(-h.p.ScaleDownPeriod)
	start := current - changeSince(h.upEvents, cut) + changeSince(h.downEvents, cut)
	return int32(float64(start) * (1 - h.p.ScaleDownPercent/100))
}
