package forecast

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// This file implements W3 of the method (METHOD §3): the peaks-over-threshold high-water level.
// A generalized Pareto distribution (GPD) is fitted to the excesses of the demand history over a
// high threshold, and the level the demand exceeds with a small probability q is read from the
// fitted tail. Everything here works on demand (cores), never on utilization.

// GPD fit methods accepted by POTConfig.Method, and the Method reported for an empirical fallback.
const (
	potMethodMoments   = "moments"
	potMethodGrimshaw  = "grimshaw"
	potMethodEmpirical = "empirical"
)

// potXiZero is the |ξ| below which the tail quantile uses the exponential (ξ → 0) limit of
// eq. (13); the two branches agree to about |ξ|·ln²(q·n/N_t)·σ/2 there, far below any load unit.
const potXiZero = 1e-9

// POTConfig configures the peaks-over-threshold fit. The zero value is not valid: start from
// DefaultPOTConfig, because a zero tail fraction or risk has no sensible meaning.
type POTConfig struct {
	// Tau is the tail fraction τ: the threshold is the empirical (1−τ) quantile, so about τ·n
	// points are excesses. Must be in (0, 1).
	Tau float64 `yaml:"tau" json:"tau"`
	// Q is the risk q: the high-water level is exceeded with probability q. Must be in (0, 1)
	// and below Tau, otherwise the level falls at or below the threshold (METHOD §3.4 [fix]).
	Q float64 `yaml:"q" json:"q"`
	// MinExcesses is the fewest excesses a fit accepts; with fewer, HighWater falls back to the
	// empirical (1−q) quantile. Must be at least 1 (a moment fit needs 2 to have a variance,
	// and HighWater falls back when the variance is undefined).
	MinExcesses int `yaml:"min_excesses" json:"min_excesses"`
	// Method is the GPD fit: "moments" (the default, also chosen by "") or "grimshaw"
	// (maximum likelihood by Grimshaw's method, as in SPOT).
	Method string `yaml:"method" json:"method"`
}

// DefaultPOTConfig returns the method's defaults (METHOD §3): τ = 0.2, q = 0.1, at least 10
// excesses, method-of-moments fit.
func DefaultPOTConfig() POTConfig {
	return POTConfig{Tau: 0.2, Q: 0.1, MinExcesses: 10, Method: potMethodMoments}
}

// Validate reports every invalid setting; each error names the field first, so a policy file
// error points at the line to fix. One error is returned as it is, several joined by errors.Join
// in the order tau, q, q against tau, min_excesses, method; q is checked against tau only when
// both are valid.
func (c POTConfig) Validate() error {
	var errs []error
	tauOK := c.Tau > 0 && c.Tau < 1 // also rejects NaN
	if !tauOK {
		errs = append(errs, fmt.Errorf("tau (%g) must be in (0, 1): it is the fraction of points above the threshold", c.Tau))
	}
	qOK := c.Q > 0 && c.Q < 1
	if !qOK {
		errs = append(errs, fmt.Errorf("q (%g) must be in (0, 1): it is the probability that load exceeds the high-water level", c.Q))
	}
	if tauOK && qOK && c.Q >= c.Tau {
		errs = append(errs, fmt.Errorf("q (%g) must be below tau (%g): with q ≥ tau the high-water level falls at or below the threshold and the fit adds nothing over the empirical quantile", c.Q, c.Tau))
	}
	if c.MinExcesses < 1 {
		errs = append(errs, fmt.Errorf("min_excesses (%d) must be at least 1", c.MinExcesses))
	}
	switch c.Method {
	case "", potMethodMoments, potMethodGrimshaw:
	default:
		errs = append(errs, fmt.Errorf("method %q unknown (known: %s, %s)", c.Method, potMethodMoments, potMethodGrimshaw))
	}
	return joinErrors(errs)
}

// POTResult is the outcome of HighWater. When Fallback is true, Z is the empirical (1−q)
// quantile, Xi and Sigma are zero and Reason names the guard that fired; a non-empty Reason with
// Fallback false records a softer event (Grimshaw failed and moments were used instead). All
// fields stay finite so that the result always encodes as JSON.
type POTResult struct {
	// N is the number of finite values used; NaN and ±Inf inputs are dropped.
	N int `json:"n"`
	// Excesses is N_t, the number of values strictly above Threshold.
	Excesses int `json:"excesses"`
	// Threshold is t, the empirical (1−τ) quantile.
	Threshold float64 `json:"threshold"`
	// Xi and Sigma are the fitted GPD shape ξ and scale σ of the excesses.
	Xi    float64 `json:"xi"`
	Sigma float64 `json:"sigma"`
	// Z is the high-water level: the demand exceeded with probability q.
	Z float64 `json:"z"`
	// Method is the fit that produced Z: "moments", "grimshaw" or "empirical".
	Method   string `json:"method"`
	Fallback bool   `json:"fallback"`
	Reason   string `json:"reason,omitempty"`
}

// HighWater computes the extreme-value high-water level of the demand history x (METHOD §3).
//
// Quantiles are Hyndman–Fan type 7 (linear interpolation between order statistics, the default
// of R and NumPy): for the sorted values s of length n and level p, h = (n−1)·p and
// Q(p) = s[⌊h⌋] + (h−⌊h⌋)·(s[⌊h⌋+1] − s[⌊h⌋]). The threshold and the fallback use the same
// definition, so a fallback is the plain empirical answer to the same question.
//
// An invalid cfg, an empty x, or an x without any finite value is an error. Every other problem
// (NaN/Inf present, too few excesses, zero excess variance, a non-finite fit) falls back to the
// empirical (1−q) quantile and says so in the result: callers always get a usable level, and a
// skipped fit is never silent.
//
// HighWater allocates exactly one copy of the finite values of x, which it orders partially in
// place (selection, expected O(n): only three order statistics and the excesses are needed, not
// a full sort) and reuses for the excesses; it is cheap enough to run at every control step.
func HighWater(x []float64, cfg POTConfig) (POTResult, error) {
	if err := cfg.Validate(); err != nil {
		return POTResult{}, fmt.Errorf("high-water config: %w", err)
	}
	if len(x) == 0 {
		return POTResult{}, errors.New("high-water: empty input")
	}
	s := make([]float64, 0, len(x))
	for _, v := range x {
		if potFinite(v) {
			s = append(s, v)
		}
	}
	dropped := len(x) - len(s)
	if len(s) == 0 {
		return POTResult{}, fmt.Errorf("high-water: no finite value among %d inputs", len(x))
	}
	n := len(s)
	// Only three order statistics and the values above the threshold are needed, so s is
	// partially ordered by selection rather than sorted. After the first selection everything
	// in s[:k+1] is ≤ t, so the excesses and the higher fallback quantile live in s[k+1:].
	t, k := potQuantileSelect(s, 1-cfg.Tau, 0)
	res := POTResult{N: n, Threshold: t, Method: cfg.Method}
	if res.Method == "" {
		res.Method = potMethodMoments
	}
	// The fallback is computed up front because the excesses below overwrite s.
	empirical, _ := potQuantileSelect(s, 1-cfg.Q, k+1)
	ys := potPartitionAbove(s[k+1:], t)
	nt := len(ys)
	res.Excesses = nt

	switch {
	case dropped > 0:
		return potFallback(res, empirical, fmt.Sprintf("input has %d NaN/Inf values (dropped for the empirical quantile): fit skipped", dropped)), nil
	case nt < cfg.MinExcesses || nt < 2:
		return potFallback(res, empirical, fmt.Sprintf("only %d excesses over the threshold %g, below min_excesses %d (or 2, to have a variance): fit skipped", nt, t, cfg.MinExcesses)), nil
	case cfg.Q*float64(n) >= float64(nt):
		// Ties at the threshold can leave fewer than q·n points above it; then eq. (13) gives
		// z ≤ t and the tail says nothing above the threshold.
		return potFallback(res, empirical, fmt.Sprintf("q·n (%g) is not below the %d excesses (ties at the threshold): fit skipped", cfg.Q*float64(n), nt)), nil
	}

	for i := range ys {
		ys[i] -= t
	}
	mean, variance := potMeanVar(ys)
	if variance == 0 {
		return potFallback(res, empirical, fmt.Sprintf("excess variance s² = 0 (all %d excesses equal %g): fit skipped", nt, mean)), nil
	}

	var xi, sigma float64
	if res.Method == potMethodGrimshaw {
		var err error
		xi, sigma, err = potGrimshawFit(ys)
		if err != nil {
			res.Method = potMethodMoments
			res.Reason = fmt.Sprintf("grimshaw fit failed (%v): used moments", err)
		}
	}
	if res.Method == potMethodMoments {
		xi, sigma = potMomentsFromStats(mean, variance)
	}

	z := potTailLevel(t, sigma, xi, cfg.Q*float64(n)/float64(nt))
	if !potFinite(xi) || !potFinite(sigma) || sigma <= 0 || !potFinite(z) {
		reason := fmt.Sprintf("%s fit not usable (xi=%g, sigma=%g, z=%g)", res.Method, xi, sigma, z)
		if res.Reason != "" {
			reason = res.Reason + "; " + reason
		}
		return potFallback(res, empirical, reason), nil
	}
	res.Xi, res.Sigma, res.Z = xi, sigma, z
	return res, nil
}

// potGrimshawFit is FitGPDGrimshaw behind a variable so that a test can make it fail: no data set
// is known that defeats it while the moment fit still works.
var potGrimshawFit = FitGPDGrimshaw

// potFallback fills res with the empirical answer and the reason the fit was skipped.
func potFallback(res POTResult, empirical float64, reason string) POTResult {
	res.Xi, res.Sigma = 0, 0
	res.Z = empirical
	res.Method = potMethodEmpirical
	res.Fallback = true
	res.Reason = reason
	return res
}

// potTailLevel is eq. (13): the level exceeded with probability q when a fraction N_t/n of the
// points exceed t and the excesses follow GPD(ξ, σ); r = q·n/N_t. It uses expm1 so that small
// but non-negligible ξ loses no digits to cancellation, and the exact exponential limit
// t − σ·ln r when |ξ| < 1e-9.
func potTailLevel(t, sigma, xi, r float64) float64 {
	if math.Abs(xi) < potXiZero {
		return t - sigma*math.Log(r)
	}
	return t + sigma/xi*math.Expm1(-xi*math.Log(r))
}

// potQuantileSelect returns the Hyndman–Fan type 7 quantile of the non-empty s at level p and
// the index k = ⌊(n−1)·p⌋ of the lower order statistic it interpolates from. It reorders s so
// that s[k] holds the value of rank k, with s[:k] ≤ s[k] ≤ s[k+1:]. The caller promises that
// s[:from] already holds the from smallest values and that k ≥ from−1, so only s[from:] is
// searched: a second, higher quantile costs a selection in the upper part only.
func potQuantileSelect(s []float64, p float64, from int) (q float64, k int) {
	n := len(s)
	h := p * float64(n-1)
	k = min(max(int(math.Floor(h)), 0), n-1)
	if k >= from {
		potSelect(s[from:], k-from)
	}
	if k == n-1 {
		return s[k], k
	}
	next := s[k+1] // the value of rank k+1 is the smallest of s[k+1:]
	for _, v := range s[k+2:] {
		next = min(next, v)
	}
	return s[k] + (h-float64(k))*(next-s[k]), k
}

// potSelect reorders s (NaN-free) so that s[k] holds the value of rank k, with s[:k] ≤ s[k] ≤
// s[k+1:]. It is Hoare's quickselect with a median-of-three pivot and a three-way partition, so
// that ties (a flat load, a saturated metric) shrink the range instead of stalling it; expected
// time O(n). Should pivots keep going wrong, the remaining range is sorted with pdqsort, which
// bounds the worst case by O(n log n). Either way nothing is allocated.
func potSelect(s []float64, k int) {
	potSelectRounds(s, k, 3*bits.Len(uint(len(s))))
}

// potSelectRounds is potSelect with an explicit budget of partition rounds, so that tests can
// exercise the pdqsort fallback.
func potSelectRounds(s []float64, k, rounds int) {
	lo, hi := 0, len(s)
	for hi-lo > 12 {
		if rounds == 0 {
			slices.Sort(s[lo:hi])
			return
		}
		rounds--
		a, b, c := s[lo], s[lo+(hi-lo)/2], s[hi-1]
		pivot := max(min(a, b), min(max(a, b), c)) // median of three
		// Invariant: s[lo:lt] < pivot, s[lt:i] == pivot, s[gt:hi] > pivot.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch v := s[i]; {
			case v < pivot:
				s[lt], s[i] = v, s[lt]
				lt++
				i++
			case v > pivot:
				gt--
				s[i], s[gt] = s[gt], v
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return // s[k] is in the block equal to the pivot
		}
	}
	slices.Sort(s[lo:hi]) // insertion sort at this size
}

// potPartitionAbove moves the values of s strictly above t to the end of s and returns them.
func potPartitionAbove(s []float64, t float64) []float64 {
	j := len(s)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] > t {
			j--
			s[i], s[j] = s[j], s[i]
		}
	}
	return s[j:]
}

func potFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// potMeanVar returns the mean and the unbiased (n−1) sample variance of y, computed in two
// passes so that a large common offset does not cancel the variance away.
func potMeanVar(y []float64) (mean, variance float64) {
	for _, v := range y {
		mean += v
	}
	mean /= float64(len(y))
	if len(y) < 2 {
		return mean, 0
	}
	var ss, c float64
	for _, v := range y {
		d := v - mean
		ss += d * d
		c += d
	}
	// The compensation term corrects the rounding of mean (Chan, Golub & LeVeque).
	variance = (ss - c*c/float64(len(y))) / float64(len(y)-1)
	return mean, variance
}

// potMomentsFromStats is the corrected method-of-moments estimator (METHOD §3.3 [fix]): with
// R = Ȳ²/s², ξ = ½(1 − R) and σ = ½·Ȳ·(1 + R). It follows from the GPD moments
// E[Y] = σ/(1−ξ) and Var[Y] = σ²/((1−ξ)²(1−2ξ)), so R = 1 − 2ξ. The paper's eq. (15),
// ½(R − 1), is Hosking's shape k = −ξ.
func potMomentsFromStats(mean, variance float64) (xi, sigma float64) {
	r := mean * mean / variance
	return 0.5 * (1 - r), 0.5 * mean * (1 + r)
}

// potCheckExcesses validates excesses for the exported fits and returns their summary.
func potCheckExcesses(excesses []float64) (mean, variance, minY, maxY float64, err error) {
	if len(excesses) < 2 {
		return 0, 0, 0, 0, fmt.Errorf("%d excesses: a GPD fit needs at least 2", len(excesses))
	}
	minY = math.Inf(1)
	for i, v := range excesses {
		if !potFinite(v) || v < 0 {
			return 0, 0, 0, 0, fmt.Errorf("excesses[%d] is %v: excesses must be finite and non-negative", i, v)
		}
		minY = min(minY, v)
		maxY = max(maxY, v)
	}
	mean, variance = potMeanVar(excesses)
	if mean == 0 || variance <= 0 || minY == maxY {
		return 0, 0, 0, 0, fmt.Errorf("excesses have mean %g and variance %g: a GPD fit needs spread", mean, variance)
	}
	return mean, variance, minY, maxY, nil
}

// FitGPDMoments fits a generalized Pareto distribution to excesses (non-negative values over a
// threshold) by the corrected method of moments: ξ = ½(1 − Ȳ²/s²), σ = ½·Ȳ·(1 + Ȳ²/s²), with
// s² the unbiased sample variance. The estimator is cheap and robust for light and moderate
// tails; it needs a finite variance (ξ < ½) and gets noisy once the fourth moment is infinite
// (ξ ≥ ¼), where FitGPDGrimshaw is the better choice.
func FitGPDMoments(excesses []float64) (xi, sigma float64, err error) {
	mean, variance, _, _, err := potCheckExcesses(excesses)
	if err != nil {
		return 0, 0, err
	}
	xi, sigma = potMomentsFromStats(mean, variance)
	return xi, sigma, nil
}

// Grimshaw search settings. The profile equation is solved for θ = ξ/σ; the grid is in the
// dimensionless θ·Ȳ (right side) or θ·max(Y) (left side), so it does not depend on load units.
const (
	potGrimshawGrid     = 48   // grid points per side scanned for sign changes
	potGrimshawNearest  = 1e-6 // smallest |θ|·scale scanned: closer roots are the ξ = 0 candidate
	potGrimshawFarthest = 1e8  // largest θ·Ȳ scanned: ξ ≈ ln(1e8) ≈ 18 is beyond any real tail
	potBrentMaxIter     = 100
)

// FitGPDGrimshaw fits a generalized Pareto distribution to excesses by maximum likelihood with
// Grimshaw's method (Technometrics 1993), as SPOT does (Siffer et al., KDD 2017).
//
// For θ = ξ/σ the likelihood equations reduce to one equation in θ:
// w(θ) = u(θ)·v(θ) − 1 = 0 with u(θ) = mean(1/(1+θY)) and v(θ) = 1 + mean(ln(1+θY)); a root gives
// ξ = v(θ) − 1 and σ = ξ/θ, with log-likelihood −N_t·(ln σ + ξ + 1). Roots lie in
// (−1/max Y, 0) and (0, 2(Ȳ − min Y)/min Y²). Unlike SPOT, which polishes a few starting points
// with L-BFGS-B, each side is scanned on a geometric grid and every sign change is refined with
// Brent's bracketed method, so every root found is a true root. The root of largest likelihood
// wins, the exponential fit (ξ = 0, σ = Ȳ: θ = 0 always solves the equation) included; two roots
// closer than one grid step can be missed, as with any scan.
func FitGPDGrimshaw(excesses []float64) (xi, sigma float64, err error) {
	mean, _, minY, maxY, err := potCheckExcesses(excesses)
	if err != nil {
		return 0, 0, err
	}

	// The exponential candidate.
	bestXi, bestSigma := 0.0, mean
	bestNegLL := math.Log(mean) + 1 // −ll/N_t

	consider := func(theta float64) {
		if theta == 0 {
			return
		}
		x := potGrimshawXi(excesses, theta)
		s := x / theta
		if !potFinite(x) || !(s > 0) || !potFinite(s) {
			return
		}
		if nll := math.Log(s) + x + 1; nll < bestNegLL {
			bestXi, bestSigma, bestNegLL = x, s, nll
		}
	}

	// Left side: θ = −r/max Y with r ∈ (0, 1); r near 1 is ξ near −1 (support ending at max Y).
	rLo := min(potGrimshawNearest*maxY/mean, 0.25)
	prevT, prevW := math.NaN(), math.NaN()
	const half = potGrimshawGrid / 2
	for j := 0; j <= potGrimshawGrid; j++ {
		var r float64
		if j <= half {
			r = rLo * math.Pow(0.5/rLo, float64(j)/float64(half)) // geometric rLo → 0.5
		} else {
			r = 1 - 0.5*math.Pow(1e-9/0.5, float64(j-half)/float64(potGrimshawGrid-half)) // 0.5 → 1−1e-9
		}
		th := -r / maxY
		w := potGrimshawW(excesses, th)
		if potFinite(prevW) && potFinite(w) && (prevW < 0) != (w < 0) {
			if root, ok := potBrent(excesses, prevT, th, prevW, w); ok {
				consider(root)
			}
		}
		prevT, prevW = th, w
	}

	// Right side: θ·Ȳ geometric from 1e-6 up to Grimshaw's bound (capped).
	hiScaled := potGrimshawFarthest
	if minY > 0 {
		hiScaled = min(hiScaled, 2*(mean-minY)/(minY*minY)*mean)
	}
	loScaled := potGrimshawNearest
	if hiScaled > loScaled {
		prevT, prevW = math.NaN(), math.NaN()
		for j := 0; j <= potGrimshawGrid; j++ {
			th := loScaled * math.Pow(hiScaled/loScaled, float64(j)/potGrimshawGrid) / mean
			w := potGrimshawW(excesses, th)
			if potFinite(prevW) && potFinite(w) && (prevW < 0) != (w < 0) {
				if root, ok := potBrent(excesses, prevT, th, prevW, w); ok {
					consider(root)
				}
			}
			prevT, prevW = th, w
		}
	}

	if !potFinite(bestXi) || !potFinite(bestSigma) || bestSigma <= 0 {
		return 0, 0, fmt.Errorf("grimshaw: no finite maximum-likelihood estimate for %d excesses", len(excesses))
	}
	return bestXi, bestSigma, nil
}

// potGrimshawW is Grimshaw's w(θ) = u(θ)·v(θ) − 1; it is NaN outside 1 + θ·max Y > 0.
func potGrimshawW(y []float64, theta float64) float64 {
	var su, sv float64
	for _, v := range y {
		a := theta * v
		if a <= -1 {
			return math.NaN()
		}
		su += 1 / (1 + a)
		sv += math.Log1p(a)
	}
	n := float64(len(y))
	return (su/n)*(1+sv/n) - 1
}

// potGrimshawXi is the profile shape ξ(θ) = mean(ln(1+θY)).
func potGrimshawXi(y []float64, theta float64) float64 {
	var sv float64
	for _, v := range y {
		sv += math.Log1p(theta * v)
	}
	return sv / float64(len(y))
}

// potBrent finds a root of potGrimshawW in [a, b], given f(a) and f(b) of opposite signs, by
// Brent's method (inverse quadratic interpolation guarded by bisection). It takes the data
// rather than a closure so that the search allocates nothing.
func potBrent(y []float64, a, b, fa, fb float64) (float64, bool) {
	if (fa < 0) == (fb < 0) {
		return 0, false
	}
	if math.Abs(fa) < math.Abs(fb) {
		a, b, fa, fb = b, a, fb, fa
	}
	c, fc := a, fa
	d := b - a
	e := d
	for range potBrentMaxIter {
		if fb == 0 {
			return b, true
		}
		if (fb < 0) == (fc < 0) {
			c, fc = a, fa
			d = b - a
			e = d
		}
		if math.Abs(fc) < math.Abs(fb) {
			a, b, c = b, c, b
			fa, fb, fc = fb, fc, fb
		}
		tol := 2*0x1p-52*math.Abs(b) + 1e-300
		m := 0.5 * (c - b)
		if math.Abs(m) <= tol {
			return b, true
		}
		if math.Abs(e) >= tol && math.Abs(fa) > math.Abs(fb) {
			var p, q float64
			s := fb / fa
			if a == c {
				// Secant step.
				p = 2 * m * s
				q = 1 - s
			} else {
				// Inverse quadratic interpolation.
				qq := fa / fc
				r := fb / fc
				p = s * (2*m*qq*(qq-r) - (b-a)*(r-1))
				q = (qq - 1) * (r - 1) * (s - 1)
			}
			if p > 0 {
				q = -q
			} else {
				p = -p
			}
			if 2*p < min(3*m*q-math.Abs(tol*q), math.Abs(e*q)) {
				e = d
				d = p / q
			} else {
				d = m
				e = m
			}
		} else {
			d = m
			e = m
		}
		a, fa = b, fb
		if math.Abs(d) > tol {
			b += d
		} else {
			b += math.Copysign(tol, m)
		}
		fb = potGrimshawW(y, b)
		if math.IsNaN(fb) {
			return 0, false
		}
	}
	return b, true
}
