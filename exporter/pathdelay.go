package exporter

import (
	"math"
	"slices"
	"time"
)

// The decision path's delay, the other part of the lead time: from the step whose
// recommendation first asks for more pods than the target has, through Prometheus, the alert,
// Alertmanager and the webhook, to the step that sees the target's size (its replicas query)
// reach it. Measured by the exporter on its own steps, so its resolution is one
// global.interval and it includes the size's own lag (kube-state-metrics' scrape); only
// policies that act (webhook mode act or hpa-floor) are measured, and a recommendation
// withdrawn, or not applied within pathGiveUp, is no sample.

const (
	// pathSamples is how many of a policy's last scale-ups the quantiles are over.
	pathSamples = 32
	// pathGiveUp ends a wait for a scale-up that is not applied (paused, held, failed).
	pathGiveUp = 30 * time.Minute
)

// pathDelay is one policy's measurement.
type pathDelay struct {
	since   time.Time // the pending scale-up's first step; zero: none pending
	to      int32     // its recommended size
	samples []float64 // the last pathSamples delays, in seconds (a ring once full)
	next    int
}

// note takes a step's size and recommendation.
func (d *pathDelay) note(t time.Time, current, recommended int32) {
	if !d.since.IsZero() {
		switch {
		case current >= d.to:
			d.add(t.Sub(d.since).Seconds())
			d.since = time.Time{}
		case recommended <= current, t.Sub(d.since) > pathGiveUp:
			d.since = time.Time{} // withdrawn, or not applied
		default:
			return
		}
	}
	if recommended > current {
		d.since, d.to = t, recommended
	}
}

func (d *pathDelay) add(s float64) {
	if len(d.samples) < pathSamples {
		d.samples = append(d.samples, s)
		return
	}
	d.samples[d.next] = s
	d.next = (d.next + 1) % pathSamples
}

// quantiles are the delays' quantiles by leadQuantiles, as PromQL's quantile computes them
// (linear between the sorted values); NaN without samples.
func (d *pathDelay) quantiles() [3]float64 {
	out := [3]float64{math.NaN(), math.NaN(), math.NaN()}
	if len(d.samples) == 0 {
		return out
	}
	s := slices.Sorted(slices.Values(d.samples))
	for i, q := range leadQuantileValues {
		out[i] = quantileSorted(s, q)
	}
	return out
}

// sum is the delays' sum.
func (d *pathDelay) sum() float64 {
	s := 0.0
	for _, v := range d.samples {
		s += v
	}
	return s
}

// quantileSorted is PromQL's quantile of sorted values: rank q·(n−1), linear between neighbours.
func quantileSorted(s []float64, q float64) float64 {
	r := q * float64(len(s)-1)
	lo := int(math.Floor(r))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (r-float64(lo))*(s[hi]-s[lo])
}
