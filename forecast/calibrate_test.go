package forecast

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCalibratorMarginGaussian: with log-normal errors of σ = 0.1 and α fixed at b = 1 %, the
// margin is exp(z_0.99·σ) = exp(2.326·0.1) ≈ 1.262, by the empirical quantile and by the POT
// tail alike (within sampling error of 760 errors).
func TestCalibratorMarginGaussian(t *testing.T) {
	for _, method := range []string{QuantileEmpirical, QuantilePOT} {
		cfg := DefaultCalibratorConfig()
		cfg.Gain, cfg.Method, cfg.Errors = 0, method, ErrorsRatio
		cfg = cfg.WithMethodDefaults(false)
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c.Upper(1) != cfg.ColdMargin {
			t.Fatalf("%s: cold margin %v, want %v", method, c.Upper(1), cfg.ColdMargin)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 5000 {
			if err := c.AddError(100*math.Exp(0.1*rng.NormFloat64()), 100); err != nil {
				t.Fatal(err)
			}
		}
		if c.Errors() != cfg.Window {
			t.Fatalf("%s: %d errors kept, want the window %d", method, c.Errors(), cfg.Window)
		}
		if m, want := c.Upper(1), math.Exp(2.326*0.1); math.Abs(m-want) > 0.04 {
			t.Errorf("%s: margin %v, want ≈ %v", method, m, want)
		}
	}
}

// TestCalibratorTracksBudgetUnderDrift: adaptive calibration keeps the realized exceedance near
// the budget although the error spread doubles halfway and the errors are skewed (a GPD tail
// the empirical quantile of 760 points sees only a few of).
func TestCalibratorTracksBudgetUnderDrift(t *testing.T) {
	for _, b := range []float64{0.005, 0.01, 0.02} {
		cfg := DefaultCalibratorConfig()
		cfg.Budget, cfg.Errors = b, ErrorsRatio
		c, _ := NewCalibrator(cfg)
		rng := rand.New(rand.NewPCG(3, 4))
		exceeded, n := 0, 0
		for i := range 100000 {
			sd := 0.05
			if i > 50000 {
				sd = 0.1
			}
			e := sd*rng.NormFloat64() + sd*rng.ExpFloat64()
			actual, forecast := 100*math.Exp(e), 100.0
			if i > 2000 {
				over := actual > forecast*c.Upper(1)
				c.Observe(over)
				n++
				if over {
					exceeded++
				}
			}
			_ = c.AddError(actual, forecast)
		}
		got := float64(exceeded) / float64(n)
		if got < 0.8*b || got > 1.2*b {
			t.Errorf("budget %v: realized exceedance %v", b, got)
		}
	}
}

// TestCalibratorAlpha: α moves down by γ(1−b) on an exceedance and up by γb otherwise, within
// its bounds.
func TestCalibratorAlpha(t *testing.T) {
	cfg := DefaultCalibratorConfig()
	c, _ := NewCalibrator(cfg)
	c.Observe(true)
	if want := 0.01 + 0.005*(0.01-1); math.Abs(c.Alpha()-want) > 1e-15 {
		t.Fatalf("after an exceedance α = %v, want %v", c.Alpha(), want)
	}
	for range 10000 {
		c.Observe(true)
	}
	if c.Alpha() != alphaMin || c.alpha >= 0 {
		t.Fatalf("α = %v (raw %v), want the floor %v read from a raw level below 0", c.Alpha(), c.alpha, alphaMin)
	}
	if e, n := c.Exceeded(); e != 10001 || n != 10001 {
		t.Fatalf("exceeded %d of %d", e, n)
	}
}

func TestCalibratorBadInput(t *testing.T) {
	c, _ := NewCalibrator(DefaultCalibratorConfig())
	for _, p := range [][2]float64{{math.NaN(), 1}, {1, math.Inf(1)}, {-1, 1}, {1, -2}} {
		if err := c.AddError(p[0], p[1]); err == nil {
			t.Errorf("AddError(%v, %v) accepted", p[0], p[1])
		}
	}
	if c.Errors() != 0 {
		t.Fatal("a rejected error was kept")
	}
	// Zeros are not errors of infinite size: 0 against 0 is no error at all.
	_ = c.AddError(10, 10)
	if err := c.AddError(0, 0); err != nil || c.Errors() != 2 {
		t.Fatalf("0 against 0: %v", err)
	}
	for _, tc := range []struct {
		field string
		mut   func(*CalibratorConfig)
	}{
		{"overload_budget", func(c *CalibratorConfig) { c.Budget = 0 }},
		{"calibration_gain", func(c *CalibratorConfig) { c.Gain = -1 }},
		{"error_window", func(c *CalibratorConfig) { c.Window = 3 }},
		{"error_window", func(c *CalibratorConfig) { c.Window = maxWindow + 1 }}, // beyond 16-bit slots
		{"tail_fraction", func(c *CalibratorConfig) { c.Tau = 1 }},
		{"quantile_method", func(c *CalibratorConfig) { c.Method = "magic" }},
		{"min_errors", func(c *CalibratorConfig) { c.MinErrors = 10000 }},
		{"cold_margin", func(c *CalibratorConfig) { c.ColdMargin = 0.5 }},
	} {
		cfg := DefaultCalibratorConfig()
		tc.mut(&cfg)
		if _, err := NewCalibrator(cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}

// BenchmarkCalibrator is one budget decision's model side in steady state: a new error (a new
// sample), an exceedance update and the margin. Must not allocate.
func BenchmarkCalibrator(b *testing.B) {
	cfg := DefaultCalibratorConfig()
	c, _ := NewCalibrator(cfg)
	rng := rand.New(rand.NewPCG(5, 6))
	for range cfg.Window + 1000 { // past the window: every buffer at its size
		_ = c.AddError(100*math.Exp(0.1*rng.NormFloat64()), 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = c.AddError(100*math.Exp(0.1*rng.NormFloat64()), 100)
		c.Observe(i%100 == 0)
		_ = c.Upper(1)
		i++
	}
}

// TestCalibratorLocalScale: under ErrorsLocal the margin follows the recent size of the errors
// (over localSpan, 240 of them): after a long quiet stretch (errors of ±1, a window of them) it is
// a few cores; after a stretch of errors of ±10 it is ten times that, though the kept normalised
// errors are alike.
func TestCalibratorLocalScale(t *testing.T) {
	cfg := DefaultCalibratorConfig()
	cfg.Gain, cfg.Errors = 0, ErrorsLocal
	c, err := NewCalibrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	feed := func(sd float64) {
		for range max(2000, cfg.Window) {
			if err := c.AddError(100+sd*rng.NormFloat64(), 100); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(1)
	quiet := c.Upper(100) - 100
	feed(10)
	loud := c.Upper(100) - 100
	if !(quiet > 1 && quiet < 5) {
		t.Errorf("quiet margin %v cores, want a few (errors ±1)", quiet)
	}
	if r := loud / quiet; r < 7 || r > 13 {
		t.Errorf("loud margin %v is %v× the quiet %v, want ≈ 10×", loud, r, quiet)
	}
}

// TestCalibratorMin: ErrorsMin answers the smaller of the additive and the ratio quantile. With
// errors of ±5 cores at a level of 100, the additive margin is the same at any forecast and the
// ratio one scales with it: at a forecast of 10 the ratio quantile is the smaller, at 1 000 the
// additive one.
func TestCalibratorMin(t *testing.T) {
	mk := func(errs string) *Calibrator {
		cfg := DefaultCalibratorConfig()
		cfg.Gain, cfg.Errors = 0, errs
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	m, a, r := mk(ErrorsMin), mk(ErrorsAdditive), mk(ErrorsRatio)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		x := 100 + 5*rng.NormFloat64()
		for _, c := range []*Calibrator{m, a, r} {
			if err := c.AddError(x, 100); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range []float64{10, 1000} {
		want := math.Min(a.Upper(f), r.Upper(f))
		if got := m.Upper(f); got != want {
			t.Errorf("forecast %v: min quantile %v, want min(additive %v, ratio %v)", f, got, a.Upper(f), r.Upper(f))
		}
	}
	if !(r.Upper(10) < a.Upper(10) && a.Upper(1000) < r.Upper(1000)) {
		t.Errorf("the two sides do not cross: additive %v/%v, ratio %v/%v", a.Upper(10), a.Upper(1000), r.Upper(10), r.Upper(1000))
	}
}

// TestCalibratorNeighbours: with the quantile read from the errors of the nearest forecasts, a
// forecast at the base level (1 core, errors ±0.1) gets the base level's margin, not the one of
// the spikes (100 cores, errors ±20, a fifth of the window) that share the window, and a spike
// the spikes' own; one pool gives both the pooled one.
func TestCalibratorNeighbours(t *testing.T) {
	margins := func(share float64) (base, spike float64) {
		cfg := DefaultCalibratorConfig()
		cfg.Gain, cfg.Neighbours, cfg.Budget = 0, share, 0.05
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range 3 * cfg.Window { // the ring wraps: removals are exercised
			f, sd := 1.0, 0.1
			if i%5 == 0 {
				f, sd = 100, 20
			}
			if err := c.AddError(math.Max(0, f+sd*rng.NormFloat64()), f); err != nil {
				t.Fatal(err)
			}
		}
		return c.Upper(1) - 1, c.Upper(100) - 100
	}
	b, s := margins(0.1)
	if b < 0.12 || b > 0.21 || s < 25 || s > 41 {
		t.Errorf("neighbours 0.1: margin at 1 core %v (want ≈ 1.645·0.1), at 100 cores %v (want ≈ 1.645·20)", b, s)
	}
	if b, s := margins(0); math.Abs(b-s) > 1e-9 || b < 5 {
		t.Errorf("one pool: margins %v and %v, want equal and spike-sized", b, s)
	}
}

// TestCalibratorNeighboursResolveBudget: the neighbours are at least 2/budget, so that the
// budget's quantile can be read from them. Forecasts 1, 1.0025, … 1.9975 with errors of 0.1,
// but 5 at the 151st, 161st and 171st nearest to 1: the margin at 1 core from 40 neighbours (a
// tenth of 400) would be 0.1; at a budget of 1 % they are 200 and the 99 % quantile of 200
// errors is 5 (between the third and second largest); at 4 % they are 50 and it is 0.1 again.
func TestCalibratorNeighboursResolveBudget(t *testing.T) {
	for _, tc := range []struct {
		budget, want float64
	}{{0.01, 5}, {0.04, 0.1}} {
		cfg := DefaultCalibratorConfig()
		cfg.Budget, cfg.Gain, cfg.Neighbours, cfg.Window = tc.budget, 0, 0.1, 400
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Window {
			f, e := 1+float64(i)/400, 0.1
			if i == 150 || i == 160 || i == 170 {
				e = 5
			}
			if err := c.AddError(f+e, f); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.Upper(1) - 1; math.Abs(got-tc.want) > 0.03 {
			t.Errorf("budget %v: margin at 1 core %v, want %v", tc.budget, got, tc.want)
		}
	}
}

// TestCalibratorNeighboursBruteForce: the quantile of the nearest errors equals the one found by
// sorting every kept error by its forecast's distance, on random forecasts with ties, through
// the ring's wrap.
func TestCalibratorNeighboursBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		cfg := DefaultCalibratorConfig()
		cfg.Window, cfg.MinErrors = 10+rng.IntN(60), 2
		cfg.Neighbours = rng.Float64()
		cfg.Budget = 0.02 + 0.4*rng.Float64() // 2/budget of 5–100: the share decides, or the budget does
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type keptErr struct{ f, e float64 }
		var ring []keptErr
		for i := range 3 * cfg.Window {
			f := float64(rng.IntN(8)) // ties on purpose, 0 included
			a := math.Max(0, f+rng.NormFloat64()*(1+f))
			if err := c.AddError(a, f); err != nil {
				t.Fatal(err)
			}
			ring = append(ring, keptErr{f, float64(float32(a - f))}) // kept in single precision
			if len(ring) > cfg.Window {
				ring = ring[1:]
			}
			if c.Errors() != len(ring) {
				t.Fatalf("trial %d step %d: %d errors kept, want %d", trial, i, c.Errors(), len(ring))
			}
			if len(ring) < cfg.MinErrors {
				continue
			}
			q := float64(rng.IntN(9)) + rng.Float64()
			fl := math.Max(c.floor, 1e-12)
			d := func(x float64) float64 { return math.Abs(math.Log(x+fl) - math.Log(q+fl)) }
			s := slices.Clone(ring)
			slices.SortStableFunc(s, func(x, y keptErr) int { return cmp.Compare(d(x.f), d(y.f)) })
			k := min(len(s), max(cfg.MinErrors, int(math.Round(cfg.Neighbours*float64(len(s)))), int(math.Ceil(NeighboursPerBudget/cfg.Budget))))
			for k < len(s) && d(s[k].f) == d(s[k-1].f) { // and every one as near as the k-th
				k++
			}
			var errs []float64
			for _, x := range s[:k] {
				errs = append(errs, x.e)
			}
			slices.Sort(errs)
			want := q + quantileSorted(errs, 1-c.Alpha())
			if got := c.Upper(q); math.Abs(got-math.Max(0, want)) > 1e-9 {
				t.Fatalf("trial %d step %d: Upper(%v) = %v, brute force %v", trial, i, q, got, want)
			}
		}
	}
}

// TestCalibratorClassesBruteForce: with errors of two classes, UpperAtOf reads the nearest
// errors of the class asked alone, each class keeping its own last Window errors, and falls back to every error while the class has fewer than MinErrors; UpperAt reads
// every error. Forecasts and errors repeat (whole numbers, a third of the errors), so that the
// oldest leaves among equals of both classes.
func TestCalibratorClassesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type keptErr struct {
		f, e  float64
		class int
	}
	for trial := range 100 {
		cfg := DefaultCalibratorConfig()
		cfg.Window, cfg.MinErrors = 10+rng.IntN(60), 2+rng.IntN(8)
		cfg.Neighbours = rng.Float64()
		cfg.Budget = 0.02 + 0.4*rng.Float64()
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rings := make([][]keptErr, Classes)
		// One class is rare, so that it spends a while under MinErrors.
		rare := rng.IntN(Classes)
		for i := range 4 * cfg.Window {
			class := 1 - rare
			if rng.IntN(5) == 0 {
				class = rare
			}
			f := float64(rng.IntN(8))
			a := math.Max(0, f+rng.NormFloat64()*(1+f)+3*float64(class))
			if rng.IntN(3) == 0 {
				a = math.Round(a)
			}
			if err := c.AddErrorOf(class, a, f); err != nil {
				t.Fatal(err)
			}
			rings[class] = append(rings[class], keptErr{f, float64(float32(a - f)), class})
			if len(rings[class]) > cfg.Window {
				rings[class] = rings[class][1:]
			}
			if got, want := c.Errors(), len(rings[0])+len(rings[1]); got != want {
				t.Fatalf("trial %d step %d: %d errors kept, want %d", trial, i, got, want)
			}
			q := float64(rng.IntN(9)) + rng.Float64()
			alpha := 0.01 + 0.3*rng.Float64()
			fl := math.Max(c.floor, 1e-12)
			brute := func(ring []keptErr) float64 {
				d := func(x float64) float64 { return math.Abs(math.Log(x+fl) - math.Log(q+fl)) }
				s := slices.Clone(ring)
				slices.SortStableFunc(s, func(x, y keptErr) int { return cmp.Compare(d(x.f), d(y.f)) })
				k := min(len(s), max(cfg.MinErrors, int(math.Round(cfg.Neighbours*float64(len(s)))), int(math.Ceil(NeighboursPerBudget/cfg.Budget))))
				for k < len(s) && d(s[k].f) == d(s[k-1].f) {
					k++
				}
				var errs []float64
				for _, x := range s[:k] {
					errs = append(errs, x.e)
				}
				slices.Sort(errs)
				return math.Max(0, q+quantileSorted(errs, 1-alpha))
			}
			all := append(slices.Clone(rings[0]), rings[1]...)
			if len(all) < cfg.MinErrors {
				continue
			}
			if got, want := c.UpperAt(q, alpha), brute(all); math.Abs(got-want) > 1e-9 {
				t.Fatalf("trial %d step %d: UpperAt(%v) = %v, brute force over both classes %v", trial, i, q, got, want)
			}
			for class := range Classes {
				want := brute(all)
				if len(rings[class]) >= cfg.MinErrors {
					want = brute(rings[class])
				}
				if got := c.UpperAtOf(class, q, alpha); math.Abs(got-want) > 1e-9 {
					t.Fatalf("trial %d step %d: UpperAtOf(%d, %v) = %v, brute force %v (%d of its errors)", trial, i, class, q, got, want, len(rings[class]))
				}
			}
		}
	}
	c, _ := NewCalibrator(DefaultCalibratorConfig())
	if err := c.AddErrorOf(Classes, 1, 1); err == nil {
		t.Error("AddErrorOf: a class out of range was taken")
	}
}

// TestQuantileOf: the quantile by selection equals the one of the sorted values, at every level,
// with ties and a single value.
func TestQuantileOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 5000 {
		v := make([]float64, 1+rng.IntN(300))
		for i := range v {
			v[i] = float64(rng.IntN(20)) - 10 + rng.NormFloat64()*float64(trial%2) // ties when trial is even
		}
		p := []float64{0, 0.5, 0.9, 0.99, 0.995, 1 - 1e-5, 1, rng.Float64()}[trial%8]
		s := slices.Clone(v)
		slices.Sort(s)
		if got, want := quantileOf(slices.Clone(v), p), quantileSorted(s, p); got != want {
			t.Fatalf("trial %d: %d values, p %v: quantileOf %v, sorted %v", trial, len(v), p, got, want)
		}
	}
}

// TestCalibratorUpperOddForecast: a forecast that is not a number has no quantile (NaN, as
// f + q is), and one that is infinite or negative is answered without a panic, by every
// quantile kind; the level-conditioned one once had none for NaN and read before its errors.
func TestCalibratorUpperOddForecast(t *testing.T) {
	for _, share := range []float64{0, DefaultNeighbours} {
		cfg := DefaultCalibratorConfig()
		cfg.Neighbours = share
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			_ = c.AddError(float64(i%7), float64(i%5))
		}
		if u := c.Upper(math.NaN()); !math.IsNaN(u) {
			t.Errorf("neighbours %v: Upper(NaN) = %v, want NaN", share, u)
		}
		for _, f := range []float64{math.Inf(1), -3, 0, 1e300} {
			if u := c.Upper(f); math.IsNaN(u) || u < 0 {
				t.Errorf("neighbours %v: Upper(%v) = %v, want a number ≥ 0", share, f, u)
			}
		}
	}
}

// TestPricedUpperAtOfBruteForce: the priced bound equals the cheapest of UpperAtOf's bounds at
// the levels 1/λ, 2/λ, 4/λ, … ½ (its margin in units plus λ times the level), for each class,
// with and without neighbours, cold and warm.
func TestPricedUpperAtOfBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 60 {
		cfg := DefaultCalibratorConfig()
		cfg.Window, cfg.MinErrors = 20+rng.IntN(200), 5+rng.IntN(20)
		cfg.Neighbours = []float64{0, 0.125, rng.Float64()}[trial%3]
		cfg.Budget = 0.005 + 0.1*rng.Float64()
		c, err := NewCalibrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 * cfg.Window {
			class := rng.IntN(Classes)
			f := float64(rng.IntN(20))
			a := math.Max(0, f+rng.NormFloat64()*(1+float64(class)))
			if rng.IntN(30) == 0 {
				a += 20 + 20*rng.Float64() // a rare tall error
			}
			if err := c.AddErrorOf(class, a, f); err != nil {
				t.Fatal(err)
			}
			if i%7 != 0 {
				continue
			}
			q := float64(rng.IntN(20)) + rng.Float64()
			lambda := math.Exp(rng.Float64() * math.Log(4/cfg.Budget))
			unit := 0.25 + 4*rng.Float64()
			for class := range Classes {
				want, cost := math.NaN(), math.Inf(1)
				for a := 1 / lambda; ; a *= 2 {
					u := c.UpperAtOf(class, q, a)
					if x := math.Max(0, u-q) + lambda*unit*a; x < cost {
						want, cost = u, x
					}
					if 2*a > alphaMax {
						break
					}
				}
				if got := c.PricedUpperAtOf(class, q, lambda, unit); math.Abs(got-want) > 1e-9 {
					t.Fatalf("trial %d step %d class %d: PricedUpperAtOf(%v, λ %v, unit %v) = %v, cheapest of the levels %v", trial, i, class, q, lambda, unit, got, want)
				}
			}
		}
	}
}

// TestPricedUpperAtOfTail: of 200 errors, three are a spike's onset 50 pods tall. At a price of
// 100 pod-ticks an overloaded tick the level doubles past them (a margin of 50 pods costs more
// than the 1 % of ticks it covers), where the level 1/λ alone covers them; at 10⁴ they are worth
// covering.
func TestPricedUpperAtOfTail(t *testing.T) {
	cfg := DefaultCalibratorConfig()
	cfg.Window = 200
	c, err := NewCalibrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		a := 10.0 + 0.01*float64(i%5)
		if i == 50 || i == 100 || i == 150 {
			a = 60
		}
		if err := c.AddErrorOf(0, a, 10); err != nil {
			t.Fatal(err)
		}
	}
	if u := c.UpperAtOf(0, 10, 0.01); u < 50 {
		t.Fatalf("UpperAtOf at 1 %% = %v: the tall errors are not in the test's tail", u)
	}
	if u := c.PricedUpperAtOf(0, 10, 100, 1); u > 10.1 {
		t.Errorf("PricedUpperAtOf at λ 100 = %v, want the spike's onset left uncovered (about 10.04)", u)
	}
	if u := c.PricedUpperAtOf(0, 10, 1e4, 1); u < 50 {
		t.Errorf("PricedUpperAtOf at λ 10⁴ = %v, want the spike's onset covered (above 50)", u)
	}
}

// TestCalibratorLargestWindow: at the largest window an error store's 16-bit slots index (two
// classes of 2¹⁵), the rings wrap and every error is still found when it leaves.
func TestCalibratorLargestWindow(t *testing.T) {
	cfg := DefaultCalibratorConfig()
	cfg.Window = maxWindow
	c, err := NewCalibrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2*maxWindow + 1000 {
		f := float64(i % 97)
		if err := c.AddErrorOf(i%2, f+float64(i%13), f); err != nil {
			t.Fatal(err)
		}
	}
	if c.Errors() != 2*maxWindow || c.byF.count(0) != maxWindow || c.byF.count(1) != maxWindow {
		t.Fatalf("%d errors kept (%d and %d by class), want %d of each class", c.Errors(), c.byF.count(0), c.byF.count(1), maxWindow)
	}
	for i := 1; i < c.byF.len(); i++ {
		if cmpFcError(c.byF.at(i-1), c.byF.at(i)) > 0 {
			t.Fatalf("kept errors out of order at %d: %v then %v", i, c.byF.at(i-1), c.byF.at(i))
		}
	}
}

// TestFallingQuantiles: the quantiles read by selection at falling levels (and one that rises)
// are quantileSorted's of the sorted errors to the last bit, on errors with many ties.
func TestFallingQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 500 {
		v := make([]float64, 1+rng.IntN(300))
		for i := range v {
			v[i] = float64(rng.IntN(40)) / 4
			if rng.IntN(3) == 0 {
				v[i] = rng.NormFloat64()
			}
		}
		sorted := slices.Sorted(slices.Values(v))
		q := fallingQuantiles{v: slices.Clone(v), bound: len(v), at: -1}
		p := 1 - rng.Float64()/float64(len(v))
		for range 12 {
			if got, want := q.quantile(p), quantileSorted(sorted, p); got != want {
				t.Fatalf("trial %d, %d errors: the quantile at %v is %v, sorted %v", trial, len(v), p, got, want)
			}
			if rng.IntN(8) == 0 {
				p = min(1, p+rng.Float64()/4) // a level that rises
			} else {
				p = max(0, p-rng.Float64()/4)
			}
		}
	}
}
