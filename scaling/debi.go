package scaling

import "math"

func init() { Register("debi", func(p Params) Algorithm { return debi{p} }) }

// DynamicTarget is eq. (18), U(n) = Upper − B/n with B = (Upper − Lower)·MinReplicas (eq. 17):
// U(MinReplicas) = Lower, rising toward Upper as n grows, so a large deployment runs hotter
// (one extra pod is a smaller share of its capacity) and a small one keeps more headroom.
func DynamicTarget(n int32, p Params) float64 {
	if n <= 0 {
		return p.Lower
	}
	b := (p.Upper - p.Lower) * float64(p.MinReplicas)
	return p.Upper - b/float64(n)
}

// Algorithm2 is the paper's Algorithm 2 in closed form (METHOD §5): given the load W as
// utilization at the current size N, it keeps N inside the tolerance band around U(N), returns
// MinReplicas when the load fits there at the lower bound, and otherwise the n in
// [MinReplicas+1, MaxReplicas] whose planned load U(n)·n is nearest to L = W·N. Because
// U(n)·n = Upper·n − B is linear in n, that n is round((L+B)/Upper) clamped, ties to the larger n
// (or the ceiling, with RoundCeil). It also returns the target U used and the branch taken.
func Algorithm2(w float64, n int32, p Params) (int32, float64, string) {
	if math.IsNaN(w) || w < 0 {
		return clamp(n, p.MinReplicas, p.MaxReplicas), DynamicTarget(n, p), ReasonNoLoad
	}
	if n >= p.MinReplicas && n <= p.MaxReplicas {
		u := DynamicTarget(n, p)
		if math.Abs(w/u-1) <= p.Tolerance {
			return n, u, ReasonTolerance
		}
	}
	l := w * float64(max(n, 1)) // a workload at zero still carries its load
	if l <= p.Lower*float64(p.MinReplicas) {
		return p.MinReplicas, p.Lower, ReasonMinReplicas
	}
	b := (p.Upper - p.Lower) * float64(p.MinReplicas)
	x := (l + b) / p.Upper
	var k int32
	if p.Rounding == RoundCeil {
		k = ceilInt32(x - 1e-9) // a planned load equal to the target within rounding needs no extra pod
	} else {
		k = ceilInt32(math.Floor(x + 0.5)) // round half up: ties go to the larger n
	}
	lo := p.MinReplicas + 1
	if lo > p.MaxReplicas {
		lo = p.MaxReplicas
	}
	k = clamp(k, lo, p.MaxReplicas)
	reason := ReasonScaleUp
	switch {
	case k == p.MaxReplicas && x > float64(p.MaxReplicas):
		reason = ReasonMaxReplicas
	case k < n:
		reason = ReasonScaleDown
	}
	return k, DynamicTarget(k, p), reason
}

// debi is Algorithm 2 with the observation window of METHOD §5.5: the recommendation is the
// larger of Algorithm 2 for W and for the mean observed load over the window, so a forecast that
// dips below what the last minutes actually carried cannot shrink the deployment.
type debi struct{ p Params }

func (debi) Name() string { return "debi" }

// Reads implements Algorithm: the load, and the window's mean load when the window is on.
func (a debi) Reads() Inputs {
	if a.p.Window > 0 {
		return InputLoad | InputWindow
	}
	return InputLoad
}

func (a debi) Recommend(in Input) Decision {
	n, u, reason := Algorithm2(in.W, in.Current, a.p)
	if a.p.Window > 0 && !math.IsNaN(in.WindowW) {
		if wn, wu, _ := Algorithm2(in.WindowW, in.Current, a.p); wn > n {
			n, u, reason = wn, wu, ReasonWindow
		}
	}
	return Decision{Replicas: n, Target: u, Reason: reason}
}
