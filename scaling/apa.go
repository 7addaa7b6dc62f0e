package scaling

import "math"

func init() { Register("apa", func(p Params) Algorithm { return apa{p} }) }

// apa is the Elastic Scaler's built-in Average Pod Autoscaling rule: scale up when the load is
// above Target·(1+UpTolerance) to ceil(N·W/Target), at most N·MaxScaleUpRate; scale down when
// it is below Target·(1−DownTolerance) to ceil(N·W/Target), at least ceil(N/MaxScaleDownRate);
// then min/max. It keeps no state: each decision stands alone.
type apa struct{ p Params }

func (apa) Name() string { return "apa" }

// Reads implements Algorithm: the load alone.
func (apa) Reads() Inputs { return InputLoad }

func (a apa) Recommend(in Input) Decision {
	d := Decision{Target: a.p.Target, Replicas: in.Current, Reason: ReasonTolerance}
	if math.IsNaN(in.W) || in.W < 0 {
		d.Reason = ReasonNoLoad
		return a.bound(d)
	}
	if in.Current <= 0 {
		d.Replicas, d.Reason = a.p.MinReplicas, ReasonMinReplicas
		return a.bound(d)
	}
	ratio := in.W / a.p.Target
	n := float64(in.Current)
	switch {
	case ratio > 1+a.p.UpTolerance:
		want := ceilInt32(n * ratio)
		limit := ceilInt32(n * a.p.MaxScaleUpRate)
		d.Replicas, d.Reason = want, ReasonScaleUp
		if want > limit {
			d.Replicas, d.Reason = limit, ReasonRateLimited
		}
	case ratio < 1-a.p.DownTolerance:
		want := ceilInt32(n * ratio)
		limit := ceilInt32(n / a.p.MaxScaleDownRate)
		d.Replicas, d.Reason = want, ReasonScaleDown
		if want < limit {
			d.Replicas, d.Reason = limit, ReasonRateLimited
		}
	}
	return a.bound(d)
}

func (a apa) bound(d Decision) Decision {
	switch {
	case d.Replicas > a.p.MaxReplicas:
		d.Replicas, d.Reason = a.p.MaxReplicas, ReasonMaxReplicas
	case d.Replicas < a.p.MinReplicas:
		d.Replicas, d.Reason = a.p.MinReplicas, ReasonMinReplicas
	}
	return d
}
