package forecast

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// potGPDSample draws n values from GPD(xi, sigma) by the inverse CDF
// F⁻¹(u) = σ/ξ·((1−u)^(−ξ) − 1), or −σ·ln(1−u) for ξ = 0, with a fixed seed.
func potGPDSample(seed uint64, n int, xi, sigma float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	y := make([]float64, n)
	for i := range y {
		u := 1 - rng.Float64() // in (0, 1]
		if xi == 0 {
			y[i] = -sigma * math.Log(u)
		} else {
			y[i] = sigma / xi * (math.Pow(u, -xi) - 1)
		}
	}
	return y
}

// potQuantile7 is an independent Hyndman–Fan type 7 quantile, the oracle for fallbacks.
func potQuantile7(x []float64, p float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	h := p * float64(len(s)-1)
	lo := math.Floor(h)
	if int(lo) == len(s)-1 {
		return s[len(s)-1]
	}
	return s[int(lo)] + (h-lo)*(s[int(lo)+1]-s[int(lo)])
}

func potSeq(from, to float64) []float64 {
	var x []float64
	for v := from; v <= to; v++ {
		x = append(x, v)
	}
	return x
}

func potClose(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestFitGPDRecoversParameters fits GPD samples of known shape. Tolerances: for ξ ≤ 0 both
// estimators have a standard error near (1−ξ)/√n ≈ 0.01 at n = 20,000, so 0.05 is about five
// standard errors; for ξ = 0.3 the fourth moment of the GPD is infinite (ξ ≥ ¼), so the sample
// variance and the moment estimator converge slowly (over 1,000 seeds the 99th percentile of
// |ξ̂ − ξ| was 0.08 and of |σ̂ − 1| 0.12): moments get 0.10/0.15 there, while maximum
// likelihood keeps 0.05. Every tolerance rejects the paper's sign-flipped eq. (15), which would
// give ξ̂ ≈ ∓0.3 for ξ = ±0.3 (an error of 0.6).
func TestFitGPDRecoversParameters(t *testing.T) {
	const n = 20000
	fits := map[string]func([]float64) (float64, float64, error){
		"moments":  FitGPDMoments,
		"grimshaw": FitGPDGrimshaw,
	}
	for _, tc := range []struct {
		method      string
		xi          float64
		tolXi, tolS float64
	}{
		{"moments", -0.3, 0.05, 0.05},
		{"moments", 0, 0.05, 0.05},
		{"moments", 0.3, 0.10, 0.15},
		{"grimshaw", -0.3, 0.05, 0.05},
		{"grimshaw", 0, 0.05, 0.05},
		{"grimshaw", 0.3, 0.05, 0.05},
	} {
		t.Run(tc.method+"/xi="+strconv.FormatFloat(tc.xi, 'g', -1, 64), func(t *testing.T) {
			y := potGPDSample(42, n, tc.xi, 1)
			xi, sigma, err := fits[tc.method](y)
			if err != nil {
				t.Fatal(err)
			}
			if !potClose(xi, tc.xi, tc.tolXi) || !potClose(sigma, 1, tc.tolS) {
				t.Errorf("ξ̂ = %.4f (want %v ± %v), σ̂ = %.4f (want 1 ± %v)", xi, tc.xi, tc.tolXi, sigma, tc.tolS)
			}
		})
	}
}

// TestFitGPDMomentsExact checks the corrected formulas on data whose moments are known exactly.
func TestFitGPDMomentsExact(t *testing.T) {
	// Y = {1, 3}: Ȳ = 2, s² = ((1−2)² + (3−2)²)/(2−1) = 2, R = Ȳ²/s² = 2,
	// ξ = ½(1 − 2) = −0.5, σ = ½·2·(1 + 2) = 3.
	xi, sigma, err := FitGPDMoments([]float64{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !potClose(xi, -0.5, 1e-15) || !potClose(sigma, 3, 1e-15) {
		t.Errorf("ξ, σ = %v, %v; want -0.5, 3", xi, sigma)
	}
	for name, y := range map[string][]float64{
		"one value": {1},
		"constant":  {2, 2, 2},
		"negative":  {1, -1, 2},
		"nan":       {1, math.NaN(), 2},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := FitGPDMoments(y); err == nil {
				t.Error("FitGPDMoments: want error")
			}
			if _, _, err := FitGPDGrimshaw(y); err == nil {
				t.Error("FitGPDGrimshaw: want error")
			}
		})
	}
}

// TestHighWaterTailClass runs the whole pipeline on three classic tails. Excesses over a high
// threshold of a uniform are uniform, a GPD with ξ = −1 (Ȳ = w/2, s² = w²/12, so R = 3 and
// ξ = ½(1−3) = −1); of an exponential, exponential (ξ = 0); of a Pareto with index α = 3,
// GPD with ξ = 1/α ≈ 0.33.
func TestHighWaterTailClass(t *testing.T) {
	const n = 20000
	rng := rand.New(rand.NewPCG(7, 11))
	uniform := make([]float64, n)
	expo := make([]float64, n)
	pareto := make([]float64, n)
	for i := range n {
		uniform[i] = rng.Float64()
		expo[i] = rng.ExpFloat64()
		pareto[i] = math.Pow(1-rng.Float64(), -1.0/3)
	}
	for _, method := range []string{"moments", "grimshaw"} {
		for _, tc := range []struct {
			name     string
			x        []float64
			lo, hi   float64
			trueXi   float64
			trueHigh float64 // the true (1−q) = 0.9 quantile
		}{
			{"uniform", uniform, -1.1, -0.9, -1, 0.9},        // F⁻¹(0.9) = 0.9
			{"exponential", expo, -0.05, 0.05, 0, math.Ln10}, // F⁻¹(0.9) = ln 10
			{"pareto", pareto, 0.2, 0.45, 1.0 / 3, 2.154435}, // F⁻¹(0.9) = 0.1^(−1/3)
		} {
			t.Run(method+"/"+tc.name, func(t *testing.T) {
				cfg := DefaultPOTConfig()
				cfg.Method = method
				res, err := HighWater(tc.x, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.Fallback || res.Reason != "" || res.Method != method {
					t.Fatalf("unexpected result %+v", res)
				}
				if res.Xi < tc.lo || res.Xi > tc.hi {
					t.Errorf("ξ̂ = %.4f, want in [%v, %v] (true %.3f)", res.Xi, tc.lo, tc.hi, tc.trueXi)
				}
				if !potClose(res.Z, tc.trueHigh, 0.03*tc.trueHigh) {
					t.Errorf("z = %.4f, want the true 0.9 quantile %.4f within 3%%", res.Z, tc.trueHigh)
				}
			})
		}
	}
}

// TestPOTPaperEq15FlipsSign is the [fix] of METHOD §3.3: the paper's eq. (15) is Hosking's
// k = ½(Ȳ²/s² − 1) = −ξ. On a heavy (Pareto, ξ = 1/3) tail it comes out negative, so eq. (13)
// treats the tail as bounded and puts the high-water level far below the truth. A small risk
// q = 0.01 makes the extrapolation (q·n/N_t = 0.05) long enough to show it: with t ≈ 0.2^(−1/3)
// = 1.710 and σ ≈ t/3 = 0.570, the paper's ξ ≈ −1/3 gives z ≈ 1.710 + 1.710·(1 − 0.05^(1/3))
// ≈ 2.79 against the true 0.01^(−1/3) = 4.642.
func TestPOTPaperEq15FlipsSign(t *testing.T) {
	const n = 20000
	rng := rand.New(rand.NewPCG(3, 5))
	x := make([]float64, n)
	for i := range x {
		x[i] = math.Pow(1-rng.Float64(), -1.0/3)
	}
	cfg := DefaultPOTConfig()
	cfg.Q = 0.01
	res, err := HighWater(x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ys []float64
	for _, v := range x {
		if v > res.Threshold {
			ys = append(ys, v-res.Threshold)
		}
	}
	mean, variance := potMeanVar(ys)
	paperXi := 0.5 * (mean*mean/variance - 1)
	if !(res.Xi > 0.2) || !(paperXi < -0.2) || !potClose(paperXi, -res.Xi, 1e-12) {
		t.Fatalf("corrected ξ = %.4f, paper's = %.4f: want ξ > 0.2 and the paper's value its negative", res.Xi, paperXi)
	}
	r := cfg.Q * float64(res.N) / float64(res.Excesses)
	zPaper := potTailLevel(res.Threshold, res.Sigma, paperXi, r)
	const truth = 4.641589 // 0.01^(−1/3)
	if !(zPaper < 0.7*truth) || !potClose(res.Z, truth, 0.05*truth) {
		t.Errorf("z = %.4f (paper's %.4f), truth %.4f: want ours close and the paper's well below", res.Z, zPaper, truth)
	}
}

// TestPOTConfigValidate checks that each invalid setting is rejected with its field name.
func TestPOTConfigValidate(t *testing.T) {
	mod := func(f func(*POTConfig)) POTConfig {
		c := DefaultPOTConfig()
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  POTConfig
		want []string // substrings of the error; nil means valid
	}{
		{"default", DefaultPOTConfig(), nil},
		{"grimshaw", mod(func(c *POTConfig) { c.Method = "grimshaw" }), nil},
		{"empty method is moments", mod(func(c *POTConfig) { c.Method = "" }), nil},
		{"q above tau", mod(func(c *POTConfig) { c.Q = 0.25 }), []string{"q (0.25)", "tau (0.2)", "below"}},
		{"q equals tau", mod(func(c *POTConfig) { c.Q = 0.2 }), []string{"q (0.2)", "tau (0.2)"}},
		{"tau zero", mod(func(c *POTConfig) { c.Tau = 0 }), []string{"tau (0)"}},
		{"tau one", mod(func(c *POTConfig) { c.Tau = 1 }), []string{"tau (1)"}},
		{"tau NaN", mod(func(c *POTConfig) { c.Tau = math.NaN() }), []string{"tau (NaN)"}},
		{"q zero", mod(func(c *POTConfig) { c.Q = 0 }), []string{"q (0)"}},
		{"q negative", mod(func(c *POTConfig) { c.Q = -0.1 }), []string{"q (-0.1)"}},
		{"min_excesses", mod(func(c *POTConfig) { c.MinExcesses = 0 }), []string{"min_excesses (0)"}},
		{"method", mod(func(c *POTConfig) { c.Method = "mle" }), []string{`method "mle"`, "moments", "grimshaw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, hwErr := HighWater([]float64{1, 2, 3}, tc.cfg)
			if tc.want == nil {
				if err != nil || hwErr != nil {
					t.Fatalf("Validate = %v, HighWater = %v; want valid", err, hwErr)
				}
				return
			}
			if err == nil || hwErr == nil {
				t.Fatalf("Validate = %v, HighWater = %v; want errors", err, hwErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) || !strings.Contains(hwErr.Error(), w) {
					t.Errorf("errors %q / %q do not contain %q", err, hwErr, w)
				}
			}
		})
	}
}

// TestPOTTailLevelEq13 checks eq. (13) against hand-derived values and the continuity of its
// exponential limit.
func TestPOTTailLevelEq13(t *testing.T) {
	for _, tc := range []struct {
		name              string
		thr, sigma, xi, r float64
		want              float64
	}{
		// z = 10 + (2/0.5)·(0.5^(−0.5) − 1) = 10 + 4·(√2 − 1) = 11.656854249492380...
		{"heavy", 10, 2, 0.5, 0.5, 10 + 4*(math.Sqrt2-1)},
		// z = 10 + (2/−0.5)·(0.5^(0.5) − 1) = 10 − 4·(1/√2 − 1) = 11.171572875253810...
		{"light", 10, 2, -0.5, 0.5, 10 - 4*(1/math.Sqrt2-1)},
		// ξ = 0: z = 10 − 2·ln 0.5 = 10 + 2·ln 2 = 11.386294361119891...
		{"exponential", 10, 2, 0, 0.5, 10 + 2*math.Ln2},
		// r = 1 (q·n = N_t): z = t whatever the tail, the degenerate case of METHOD §3.4.
		{"q·n = N_t", 10, 2, 0.5, 1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := potTailLevel(tc.thr, tc.sigma, tc.xi, tc.r); !potClose(got, tc.want, 1e-12) {
				t.Errorf("z = %.15g, want %.15g", got, tc.want)
			}
		})
	}
	t.Run("continuous at xi=0", func(t *testing.T) {
		// Expanding r^(−ξ) = e^(−ξ ln r): z(ξ) = t − σ ln r + σ·ξ·ln²r/2 + O(ξ²), so near
		// ξ = 0 the two branches differ by about σ·|ξ|·ln²r/2 ≈ 0.48·|ξ| for σ = 2, r = 0.5:
		// below the switch at |ξ| = 1e-9 the limit is off the first-order value by < 0.5e-9,
		// above it expm1 keeps the formula accurate, the next term σ·|ξ|²·|ln r|³/6 being
		// about 1.1e-13 at |ξ| = 1e-6.
		z0 := potTailLevel(10, 2, 0, 0.5)
		for _, xi := range []float64{-1e-6, -2e-9, -0.5e-9, 0.5e-9, 2e-9, 1e-6} {
			got := potTailLevel(10, 2, xi, 0.5)
			tol := 1e-12
			if math.Abs(xi) < 1e-9 {
				tol = 0.5e-9
			}
			if want := z0 + 2*xi*math.Ln2*math.Ln2/2; !potClose(got, want, tol) {
				t.Errorf("ξ = %g: z = %.15g, want %.15g", xi, got, want)
			}
		}
	})
}

// TestHighWaterGuards checks that every guard falls back to the empirical (1−q) quantile (type 7)
// and names itself.
func TestHighWaterGuards(t *testing.T) {
	// 185 ones and 2..16: the threshold (h = 0.8·199 = 159.2) is 1, there are 15 excesses, fewer
	// than q·n = 20.
	var ties []float64
	for range 185 {
		ties = append(ties, 1)
	}
	ties = append(ties, potSeq(2, 16)...)
	// 40 zeros and 10 fives: t = s[39] + 0.2·(s[40] − s[39]) = 1 (h = 0.8·49 = 39.2), ten
	// excesses all equal to 4.
	var flat []float64
	for range 40 {
		flat = append(flat, 0)
	}
	for range 10 {
		flat = append(flat, 5)
	}
	// Values 1e200..1e202: deviations squared overflow, so the variance is +Inf and ξ is NaN.
	var huge []float64
	for i := 1.0; i <= 100; i++ {
		huge = append(huge, i*1e200)
	}

	for _, tc := range []struct {
		name   string
		x      []float64
		reason string
		want   float64 // the empirical 0.9 quantile, derived by hand
	}{
		// Finite values 1..100: h = 0.9·99 = 89.1, z = 90 + 0.1·(91 − 90) = 90.1.
		{"nan and inf", append(potSeq(1, 50), append([]float64{math.NaN(), math.Inf(1), math.Inf(-1)}, potSeq(51, 100)...)...), "3 NaN/Inf values", 90.1},
		// 1..20: t at h = 15.2 is 16.2, four excesses (17..20) < 10; z: h = 17.1 → 18.1.
		{"few excesses", potSeq(1, 20), "only 4 excesses", 18.1},
		// h = 0.9·49 = 44.1 lies among the fives: z = 5.
		{"zero variance", flat, "s² = 0", 5},
		// h = 0.9·199 = 179.1 lies among the ones: z = 1.
		{"ties at threshold", ties, "ties at the threshold", 1},
		// h = 89.1: z = 90e200 + 0.1·1e200 = 90.1e200.
		{"non-finite fit", huge, "fit not usable", 90.1e200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := HighWater(tc.x, DefaultPOTConfig())
			if err != nil {
				t.Fatal(err)
			}
			if !res.Fallback || res.Method != "empirical" || !strings.Contains(res.Reason, tc.reason) {
				t.Fatalf("got %+v, want a fallback with reason %q", res, tc.reason)
			}
			finite := slices.DeleteFunc(slices.Clone(tc.x), func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
			if oracle := potQuantile7(finite, 0.9); !potClose(res.Z, tc.want, 1e-9*math.Abs(tc.want)) || res.Z != oracle {
				t.Errorf("z = %.15g, want %.15g (oracle %.15g)", res.Z, tc.want, oracle)
			}
			if _, err := json.Marshal(res); err != nil {
				t.Errorf("result does not encode: %v", err)
			}
		})
	}

	t.Run("grimshaw fails", func(t *testing.T) {
		saved := potGrimshawFit
		defer func() { potGrimshawFit = saved }()
		potGrimshawFit = func([]float64) (float64, float64, error) { return 0, 0, errors.New("no root") }
		x := potGPDSample(1, 1000, 0, 1)
		cfg := DefaultPOTConfig()
		cfg.Method = "grimshaw"
		got, err := HighWater(x, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Method = "moments"
		want, _ := HighWater(x, cfg)
		if got.Fallback || got.Method != "moments" || !strings.Contains(got.Reason, "grimshaw fit failed (no root): used moments") ||
			got.Z != want.Z || got.Xi != want.Xi {
			t.Errorf("got %+v, want the moments result %+v with a reason", got, want)
		}
	})

	for name, x := range map[string][]float64{
		"empty":   nil,
		"all NaN": {math.NaN(), math.Inf(1)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := HighWater(x, DefaultPOTConfig()); err == nil {
				t.Error("want error")
			}
		})
	}
}

// TestHighWaterOneCopy checks that HighWater leaves its input alone and allocates only the copy
// it sorts, for both fits.
func TestHighWaterOneCopy(t *testing.T) {
	x := potGPDSample(9, 2000, 0.1, 3)
	orig := slices.Clone(x)
	for _, method := range []string{"moments", "grimshaw"} {
		t.Run(method, func(t *testing.T) {
			cfg := DefaultPOTConfig()
			cfg.Method = method
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := HighWater(x, cfg); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > 1 {
				t.Errorf("HighWater allocates %v times per call, want 1 (the sorted copy)", allocs)
			}
			if !slices.Equal(x, orig) {
				t.Fatal("HighWater modified its input")
			}
		})
	}
}

// potGPDNegLogLik is the GPD negative log-likelihood of y, +Inf outside the support.
func potGPDNegLogLik(y []float64, xi, sigma float64) float64 {
	if !(sigma > 0) {
		return math.Inf(1)
	}
	n := float64(len(y))
	if math.Abs(xi) < 1e-12 {
		var s float64
		for _, v := range y {
			s += v
		}
		return n*math.Log(sigma) + s/sigma
	}
	var s float64
	for _, v := range y {
		a := 1 + xi*v/sigma
		if a <= 0 {
			return math.Inf(1)
		}
		s += math.Log(a)
	}
	return n*math.Log(sigma) + (1+1/xi)*s
}

// TestFitGPDGrimshawIsMaximum checks the root search against a brute-force search of the
// likelihood surface on small samples, where the likelihood is flat and roots are many: no
// (ξ, σ) on a grid over ξ ∈ [−0.9, 1.5] (ξ > −1, where the maximum is a true maximum)
// may beat Grimshaw's answer.
func TestFitGPDGrimshawIsMaximum(t *testing.T) {
	for _, xi := range []float64{-0.4, 0, 0.2, 0.6} {
		for _, n := range []int{15, 60, 150} {
			t.Run(strconv.FormatFloat(xi, 'g', -1, 64)+"/n="+strconv.Itoa(n), func(t *testing.T) {
				y := potGPDSample(uint64(n)+17, n, xi, 2)
				gx, gs, err := FitGPDGrimshaw(y)
				if err != nil {
					t.Fatal(err)
				}
				got := potGPDNegLogLik(y, gx, gs)
				mean, _ := potMeanVar(y)
				// Grid: ξ in steps of 0.02, ln σ in steps of 0.02 over ln Ȳ ± 2.5.
				best, bx, bs := math.Inf(1), 0.0, 0.0
				for i := -45; i <= 75; i++ {
					x := float64(i) / 50
					for j := -125; j <= 125; j++ {
						s := mean * math.Exp(float64(j)/50)
						if v := potGPDNegLogLik(y, x, s); v < best {
							best, bx, bs = v, x, s
						}
					}
				}
				if got > best+1e-9 {
					t.Errorf("grimshaw (ξ=%.4f, σ=%.4f) has −ll %.6f; the grid found %.6f at (%.2f, %.4f)", gx, gs, got, best, bx, bs)
				}
			})
		}
	}
}

// TestPOTSelect checks the selection against a full sort on inputs chosen to hurt quickselect:
// ties, presorted and reversed runs, an organ pipe, and a zero round budget that forces the
// pdqsort fallback.
func TestPOTSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	gen := map[string]func(i, n int) float64{
		"random":     func(int, int) float64 { return rng.NormFloat64() },
		"all equal":  func(int, int) float64 { return 3 },
		"two values": func(int, int) float64 { return float64(rng.IntN(2)) },
		"few values": func(int, int) float64 { return float64(rng.IntN(5)) },
		"sorted":     func(i, _ int) float64 { return float64(i) },
		"reversed":   func(i, n int) float64 { return float64(n - i) },
		"organ pipe": func(i, n int) float64 { return float64(min(i, n-i)) },
		"spiky bursts": func(i, _ int) float64 {
			if i%37 == 0 {
				return 100
			}
			return 1
		},
	}
	for name, g := range gen {
		for _, n := range []int{1, 2, 13, 100, 1001} {
			for _, rounds := range []int{-1, 0, 1} {
				x := make([]float64, n)
				for i := range x {
					x[i] = g(i, n)
				}
				want := slices.Clone(x)
				slices.Sort(want)
				for _, k := range []int{0, n / 3, n / 2, n - 1} {
					s := slices.Clone(x)
					if rounds < 0 {
						potSelect(s, k)
					} else {
						potSelectRounds(s, k, rounds)
					}
					ok := s[k] == want[k]
					for i, v := range s {
						ok = ok && (i >= k || v <= s[k]) && (i <= k || v >= s[k])
					}
					sorted := slices.Clone(s)
					slices.Sort(sorted)
					if !ok || !slices.Equal(sorted, want) {
						t.Fatalf("%s n=%d k=%d rounds=%d: s[k] = %v, want %v, or order/multiset broken", name, n, k, rounds, s[k], want[k])
					}
				}
			}
		}
	}
}

// TestHighWaterMatchesSortedOracle recomputes threshold, excess count and fallback level from a
// full sort on inputs with and without ties: the selection must give bit-identical answers.
func TestHighWaterMatchesSortedOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 9))
	for trial := range 200 {
		n := 1 + rng.IntN(400)
		x := make([]float64, n)
		levels := 1 + rng.IntN(30) // few levels: many ties
		for i := range x {
			if trial%2 == 0 {
				x[i] = float64(rng.IntN(levels))
			} else {
				x[i] = rng.ExpFloat64()
			}
		}
		cfg := DefaultPOTConfig()
		cfg.MinExcesses = 1 + rng.IntN(12)
		res, err := HighWater(x, cfg)
		if err != nil {
			t.Fatal(err)
		}
		thr := potQuantile7(x, 1-cfg.Tau)
		var nt int
		for _, v := range x {
			if v > thr {
				nt++
			}
		}
		if res.Threshold != thr || res.Excesses != nt || res.N != n {
			t.Fatalf("trial %d: got t=%v N_t=%d N=%d, want %v %d %d", trial, res.Threshold, res.Excesses, res.N, thr, nt, n)
		}
		if res.Fallback && res.Z != potQuantile7(x, 1-cfg.Q) {
			t.Fatalf("trial %d: fallback z=%v, want %v", trial, res.Z, potQuantile7(x, 1-cfg.Q))
		}
		if !res.Fallback && !(res.Z > res.Threshold) {
			t.Fatalf("trial %d: fitted z=%v not above the threshold %v (%+v)", trial, res.Z, res.Threshold, res)
		}
	}
}
