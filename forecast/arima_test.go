package forecast

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// arSimulate draws n points of an ARIMA process x_t with constant c, AR coefficients phi and
// MA coefficients theta on the d-times differenced series, after a burn-in of 200 steps.
func arSimulate(n, d int, c float64, phi, theta []float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 3))
	burn := 200
	w := make([]float64, n+burn)
	e := make([]float64, n+burn)
	for t := range w {
		e[t] = r.NormFloat64()
		v := c + e[t]
		for i, f := range phi {
			if t-1-i >= 0 {
				v += f * w[t-1-i]
			}
		}
		for j, th := range theta {
			if t-1-j >= 0 {
				v += th * e[t-1-j]
			}
		}
		w[t] = v
	}
	w = w[burn:]
	if d == 0 {
		for i := range w {
			w[i] += 100
		}
		return w
	}
	x := make([]float64, n)
	level := 100.0
	for i, v := range w {
		level += v
		x[i] = level
	}
	return x
}

// TestARIMAGradient checks the CSS gradient recursion against central differences on a full
// ARMA(2,2) with d = 1.
func TestARIMAGradient(t *testing.T) {
	x := arSimulate(200, 1, 0.1, []float64{0.5, -0.2}, []float64{0.3, 0.1}, 1)
	mean, scale := arStandardise(x)
	z := make([]float64, len(x))
	for i, v := range x {
		z[i] = (v - mean) / scale
	}
	a := arNewCSS(z, arOrder{2, 1, 2})
	p := []float64{0.05, 0.4, -0.1, 0.2, 0.15}
	g := make([]float64, len(p))
	a.eval(p, g)
	for i := range p {
		const eps = 1e-6
		old := p[i]
		p[i] = old + eps
		fp := a.eval(p, nil)
		p[i] = old - eps
		fm := a.eval(p, nil)
		p[i] = old
		num := (fp - fm) / (2 * eps)
		if math.Abs(num-g[i]) > 1e-6+1e-5*math.Abs(num) {
			t.Errorf("coef %d: analytic %.8g, numeric %.8g", i, g[i], num)
		}
	}
}

// TestARIMARecoversOrder fits simulated processes with a known order. AIC should pick the
// true d, and the coefficients of the true order should come back within sampling error
// (standard error ≈ 1/√n ≈ 0.036 for n = 760; tolerance 0.1 ≈ 3 s.e.).
func TestARIMARecoversOrder(t *testing.T) {
	tests := []struct {
		name       string
		d          int
		c          float64
		phi, theta []float64
		checkCoef  bool
	}{
		{"AR(1) phi=0.7", 0, 0, []float64{0.7}, nil, false},
		{"MA(1) theta=0.5", 0, 0, nil, []float64{0.5}, true},
		// A trend of 0.5 per step under unit noise: no stationary model can follow it.
		{"drifting ARIMA(1,1,0)", 1, 0.5, []float64{0.5}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := arSimulate(760, tc.d, tc.c, tc.phi, tc.theta, 11)
			m, _ := arNew(Config{})
			rep, err := m.Fit(context.Background(), x)
			if err != nil {
				t.Fatal(err)
			}
			if rep.StopReason != StopConverged || rep.Iterations != 24 {
				t.Errorf("report %+v: want all 24 orders tried", rep)
			}
			if m.order.d != tc.d {
				t.Errorf("chose %v, want d=%d", m.order, tc.d)
			}
			if !tc.checkCoef || m.order.p != len(tc.phi) || m.order.q != len(tc.theta) {
				if m.order.p < len(tc.phi) || m.order.q < len(tc.theta) {
					t.Errorf("chose %v, smaller than the true order", m.order)
				}
				return
			}
			got := m.coef[1:]
			want := append(append([]float64(nil), tc.phi...), tc.theta...)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 0.1 {
					t.Errorf("coef %d = %.3f, want %.3f", i, got[i], want[i])
				}
			}
		})
	}
}

// TestARIMAForecast checks multi-step forecasts of fixed models against their closed forms,
// independently of order selection, then a fitted constant series and zero allocations.
func TestARIMAForecast(t *testing.T) {
	x := arSimulate(300, 0, 0, []float64{0.7}, nil, 4)
	last := x[len(x)-1]
	tests := []struct {
		name string
		m    arModel
		want func(h int) float64
	}{
		// AR(1) with standardised mean μz = c/(1−φ) forecasts μ + φ^h (x_n − μ): far-ahead
		// forecasts return to the mean.
		{"AR(1)", arModel{order: arOrder{1, 0, 0}, coef: []float64{0.3, 0.6}, mean: 100, scale: 2},
			func(h int) float64 {
				mu := 100 + 2*0.3/(1-0.6)
				return mu + math.Pow(0.6, float64(h))*(last-mu)
			}},
		// Random walk with drift c: the level moves by c·scale per step.
		{"ARIMA(0,1,0) drift", arModel{order: arOrder{0, 1, 0}, coef: []float64{0.25}, mean: 100, scale: 2},
			func(h int) float64 { return last + float64(h)*0.25*2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			m.fitted = true
			dst := make([]float64, 30)
			if err := m.Predict(x, dst); err != nil {
				t.Fatal(err)
			}
			for h := 1; h <= len(dst); h++ {
				if want := tc.want(h); math.Abs(dst[h-1]-want) > 1e-9 {
					t.Fatalf("h=%d: forecast %.9f, want %.9f", h, dst[h-1], want)
				}
			}
			allocs := testing.AllocsPerRun(20, func() { _ = m.Predict(x, dst) })
			if allocs != 0 {
				t.Errorf("Predict allocates %.1f times per call, want 0", allocs)
			}
		})
	}
	// MA(1): only the first step sees the last shock; from h = 2 on the forecast is the mean.
	t.Run("MA(1)", func(t *testing.T) {
		m := arModel{order: arOrder{0, 0, 1}, coef: []float64{0, 0.5}, mean: 100, scale: 1, fitted: true}
		dst := make([]float64, 4)
		if err := m.Predict(x, dst); err != nil {
			t.Fatal(err)
		}
		if dst[0] == 100 || dst[1] != 100 || dst[3] != 100 {
			t.Errorf("MA(1) forecasts %v: want a shock at h=1 and the mean 100 after", dst)
		}
	})
	t.Run("constant", func(t *testing.T) {
		constant := make([]float64, 100)
		for i := range constant {
			constant[i] = 3.5
		}
		c, _ := arNew(Config{})
		if _, err := c.Fit(context.Background(), constant); err != nil {
			t.Fatal(err)
		}
		dst := make([]float64, 3)
		if err := c.Predict(constant, dst); err != nil {
			t.Fatal(err)
		}
		for _, v := range dst {
			if math.Abs(v-3.5) > 1e-9 {
				t.Fatalf("constant series forecast %v, want 3.5", dst)
			}
		}
	})
}

// TestARIMAWarmStartAndEdges: a refit on the same data reproduces the fit from the warm
// start; clones are independent; short, non-finite and unfitted inputs fail clearly; a
// canceled context stops the grid.
func TestARIMAWarmStartAndEdges(t *testing.T) {
	x := arSimulate(400, 1, 0.05, []float64{0.4}, []float64{0.3}, 8)
	m, _ := arNew(Config{})
	if err := m.Predict(x, make([]float64, 2)); err == nil {
		t.Error("Predict before Fit: want error")
	}
	if _, err := m.Fit(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	o, coef := m.order, append([]float64(nil), m.coef...)
	c := m.Clone().(*arModel)
	if _, err := c.Fit(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	if c.order != o {
		t.Fatalf("warm refit chose %v, first fit %v", c.order, o)
	}
	for i := range coef {
		if math.Abs(c.coef[i]-coef[i]) > 1e-4 {
			t.Errorf("warm refit coef %d = %.6f, first fit %.6f", i, c.coef[i], coef[i])
		}
	}
	c.coef[0] = 99
	c.warm.get(o)[0] = 99
	if m.coef[0] == 99 || m.warm.get(o)[0] == 99 {
		t.Error("Clone shares coefficient storage")
	}
	if _, err := m.Fit(context.Background(), x[:10]); !errors.Is(err, ErrShortHistory) {
		t.Errorf("short Fit: err %v, want ErrShortHistory", err)
	}
	bad := append([]float64(nil), x...)
	bad[7] = math.Inf(1)
	if _, err := m.Fit(context.Background(), bad); err == nil {
		t.Error("Inf in history: want error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := m.Fit(ctx, x)
	if !errors.Is(err, context.Canceled) || rep.StopReason != StopCanceled {
		t.Errorf("canceled fit: err %v, reason %q", err, rep.StopReason)
	}
	tb, _ := arNew(Config{TimeBudget: time.Nanosecond})
	rep, err = tb.Fit(context.Background(), x)
	if err != nil || rep.StopReason != StopTimeBudget || rep.Iterations != 1 {
		t.Errorf("1 ns budget: err %v, report %+v; want one order then time-budget", err, rep)
	}
}

// TestARIMAPredictKeepsOnlyTheLags: Predict, which keeps the last arMaxP differences, arMaxQ
// shocks and level, gives exactly (bit for bit) what the recursion over arrays as long as the
// history and horizon gives, for every order of the grid.
func TestARIMAPredictKeepsOnlyTheLags(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	x := make([]float64, 200)
	for i := range x {
		x[i] = 50 + 10*math.Sin(float64(i)/7) + rng.NormFloat64()
	}
	full := func(m *arModel, history, dst []float64) {
		n, h := len(history), len(dst)
		z, w, e := make([]float64, n+h), make([]float64, n+h), make([]float64, n+h)
		for i, v := range history {
			z[i] = (v - m.mean) / m.scale
		}
		p, d := m.order.p, m.order.d
		c, phi, theta := m.coef[0], m.coef[1:1+p], m.coef[1+p:]
		for t := range n {
			w[t] = z[t]
			if d == 1 {
				w[t] = 0
				if t > 0 {
					w[t] = z[t] - z[t-1]
				}
			}
		}
		for t := arCond; t < n+h; t++ {
			pred := c
			for i, f := range phi {
				pred += f * w[t-1-i]
			}
			for j, th := range theta {
				pred += th * e[t-1-j]
			}
			if t < n {
				e[t] = w[t] - pred
				continue
			}
			w[t], z[t] = pred, pred
			if d == 1 {
				z[t] = z[t-1] + pred
			}
			dst[t-n] = z[t]*m.scale + m.mean
		}
	}
	for p := 0; p <= arMaxP; p++ {
		for d := 0; d <= arMaxD; d++ {
			for q := 0; q <= arMaxQ; q++ {
				m := &arModel{order: arOrder{p, d, q}, mean: 50, scale: 7, fitted: true}
				m.coef = []float64{0.01}
				for range p + q {
					m.coef = append(m.coef, 0.3*rng.Float64()-0.1)
				}
				for _, n := range []int{arCond + 1, 37, len(x)} {
					got, want := make([]float64, 12), make([]float64, 12)
					if err := m.Predict(x[:n], got); err != nil {
						t.Fatal(err)
					}
					full(m, x[:n], want)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%v on %d points: forecast %d is %v, the full recursion gives %v", m.order, n, i+1, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
