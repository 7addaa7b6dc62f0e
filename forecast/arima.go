package forecast

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"
)

func init() {
	Register("arima", func(cfg Config) (Forecaster, error) { return arNew(cfg) })
}

// The order grid searched by Fit, and the number of leading points every candidate conditions
// on. Conditioning all candidates on the same arCond points makes their sums of squares cover
// the same time steps; and because a residual of the differenced model is also the one-step
// error of the level, the sums are in the same units for d = 0 and d = 1, so AIC can compare
// across d.
const (
	arMaxP = 3
	arMaxD = 1
	arMaxQ = 2
	arCond = arMaxP + arMaxD

	// arMaxRoot bounds the modulus of the inverse roots of the AR and MA polynomials of an
	// admissible fit. CSS does not penalise a non-stationary AR or non-invertible MA part,
	// and on a trending series such fits can win AIC by a hair while forecasting nonsense
	// (an AR root at 0.999 on levels is a unit root spelled with more parameters; d = 1 says
	// it better). The margin is that of common auto-ARIMA practice, slightly wider.
	arMaxRoot = 0.99

	// arMinHistory leaves at least 20 residuals for the largest model of the grid.
	arMinHistory = arCond + 20
)

// arOrder is an ARIMA (p, d, q) order.
type arOrder struct{ p, d, q int }

func (o arOrder) String() string { return fmt.Sprintf("ARIMA(%d,%d,%d)", o.p, o.d, o.q) }

// arModel is ARIMA(p,d,q) with a constant, fitted by conditional sum of squares (CSS) on the
// standardised series; the order minimises AIC over p ≤ 3, d ≤ 1, q ≤ 2.
type arModel struct {
	cfg    Config
	order  arOrder
	coef   []float64 // c, φ1..φp, θ1..θq, in standardised units
	mean   float64   // standardisation: z = (x - mean) / scale
	scale  float64
	aic    float64
	fitted bool

	// warm keeps the last solution of every order: a refit on a history shifted by a few
	// steps starts each candidate at its old optimum and needs a few BFGS iterations only.
	warm arWarm
}

// arWarm keeps one solution of each order of the grid, in place (a map of slices would take
// twice the memory of the 24 orders' coefficients themselves).
type arWarm [arMaxD + 1][arMaxP + 1][arMaxQ + 1]struct {
	n int // the number of coefficients kept: 1+p+q once the order has been fitted, else 0
	c [1 + arMaxP + arMaxQ]float64
}

// get is the kept solution of o (nil if there is none), a view of the array.
func (w *arWarm) get(o arOrder) []float64 {
	e := &w[o.d][o.p][o.q]
	return e.c[:e.n]
}

// set keeps x as the solution of o.
func (w *arWarm) set(o arOrder, x []float64) {
	e := &w[o.d][o.p][o.q]
	e.n = copy(e.c[:], x)
}

func arNew(cfg Config) (*arModel, error) {
	if cfg.MaxIterations < 0 {
		return nil, fmt.Errorf("max_iterations %d: must not be negative", cfg.MaxIterations)
	}
	if cfg.TimeBudget < 0 {
		return nil, fmt.Errorf("time_budget %v: must not be negative", cfg.TimeBudget)
	}
	return &arModel{cfg: cfg}, nil
}

// Name returns "arima".
func (m *arModel) Name() string { return "arima" }

// MinHistory is enough for the largest order of the grid to have 20 residuals.
func (m *arModel) MinHistory() int { return arMinHistory }

// Config returns the model's settings; Save stores it.
func (m *arModel) Config() Config { return m.cfg }

// Order returns the selected order and its AIC, for reports.
func (m *arModel) Order() (p, d, q int, aic float64) {
	return m.order.p, m.order.d, m.order.q, m.aic
}

// Clone deep-copies the fitted parameters and the warm-start cache (an array: copied with the model).
func (m *arModel) Clone() Forecaster {
	c := *m
	c.coef = append([]float64(nil), m.coef...)
	return &c
}

// arCSS is the conditional sum of squares objective of one order on the standardised series
// z. Residuals before arCond are taken as zero. It returns the mean squared residual and, if
// grad is not nil, its gradient, from the recursions
//
//	∂e_t/∂c  = −1        − Σ_j θ_j ∂e_{t−j}/∂c
//	∂e_t/∂φ_i = −w_{t−i}  − Σ_j θ_j ∂e_{t−j}/∂φ_i
//	∂e_t/∂θ_k = −e_{t−k}  − Σ_j θ_j ∂e_{t−j}/∂θ_k
type arCSS struct {
	o    arOrder
	w    []float64 // differenced series, aligned with z (w[t] undefined for t < d)
	e    []float64
	de   []float64 // len(e) × k
	nEff int
}

func arNewCSS(z []float64, o arOrder) *arCSS {
	n := len(z)
	w := make([]float64, n)
	copy(w, z)
	if o.d == 1 {
		for t := n - 1; t >= 1; t-- {
			w[t] = z[t] - z[t-1]
		}
		w[0] = 0
	}
	k := 1 + o.p + o.q
	return &arCSS{o: o, w: w, e: make([]float64, n), de: make([]float64, n*k), nEff: n - arCond}
}

func (a *arCSS) eval(x, grad []float64) float64 {
	p, q := a.o.p, a.o.q
	k := 1 + p + q
	c, phi, theta := x[0], x[1:1+p], x[1+p:]
	n := len(a.w)
	clear(a.e[:arCond])
	if grad != nil {
		clear(a.de[:arCond*k])
		clear(grad)
	}
	sse := 0.0
	for t := arCond; t < n; t++ {
		pred := c
		for i, f := range phi {
			pred += f * a.w[t-1-i]
		}
		for j, th := range theta {
			pred += th * a.e[t-1-j]
		}
		et := a.w[t] - pred
		a.e[t] = et
		sse += et * et
		if grad == nil {
			continue
		}
		de := a.de[t*k : (t+1)*k]
		de[0] = -1
		for i := range phi {
			de[1+i] = -a.w[t-1-i]
		}
		for j := range theta {
			de[1+p+j] = -a.e[t-1-j]
		}
		for j, th := range theta {
			prev := a.de[(t-1-j)*k : (t-j)*k]
			for l := range de {
				de[l] -= th * prev[l]
			}
		}
		for l, v := range de {
			grad[l] += 2 * et * v
		}
	}
	inv := 1 / float64(a.nEff)
	if grad != nil {
		for l := range grad {
			grad[l] *= inv
		}
	}
	return sse * inv
}

// arFitOrder minimises the CSS of one order from x0 with BFGS. The objective is a polynomial
// in the coefficients that explodes outside the invertible region, so a failed line search is
// not fatal: the best finite point seen is kept.
func arFitOrder(z []float64, o arOrder, x0 []float64, maxIter int) ([]float64, float64) {
	a := arNewCSS(z, o)
	bestF := a.eval(x0, nil)
	bestX := append([]float64(nil), x0...)
	prob := optimize.Problem{
		Func: func(x []float64) float64 {
			f := a.eval(x, nil)
			if math.IsNaN(f) || f > 1e100 {
				return math.Inf(1)
			}
			return f
		},
		Grad: func(g, x []float64) {
			a.eval(x, g)
			for i, v := range g {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					g[i] = 0
				}
			}
		},
	}
	settings := &optimize.Settings{
		GradientThreshold: 1e-9,
		MajorIterations:   maxIter,
		Converger:         &optimize.FunctionConverge{Absolute: 1e-12, Relative: 1e-10, Iterations: 20},
	}
	if len(x0) > 0 {
		res, err := optimize.Minimize(prob, x0, settings, &optimize.BFGS{})
		if res != nil && res.F < bestF && !math.IsInf(res.F, 0) && !math.IsNaN(res.F) {
			bestF = res.F
			copy(bestX, res.X)
		}
		_ = err // a failed line search near the optimum still leaves a usable point
	}
	return bestX, bestF
}

// Fit selects the order by AIC and fits its coefficients by CSS. Each candidate starts from
// its previous solution if there is one (warm start). The time budget (Config.TimeBudget,
// default 10 s) and ctx are checked between candidates; the best model so far is kept.
func (m *arModel) Fit(ctx context.Context, history []float64) (FitReport, error) {
	start := time.Now()
	rep := FitReport{Model: m.Name()}
	if err := CheckHistory(history, m.MinHistory()); err != nil {
		return rep, fmt.Errorf("arima: %w", err)
	}
	budget := m.cfg.TimeBudget
	if budget == 0 {
		budget = 10 * time.Second
	}
	maxIter := m.cfg.MaxIterations
	if maxIter == 0 {
		maxIter = 200
	}
	mean, scale := arStandardise(history)
	z := make([]float64, len(history))
	for i, v := range history {
		z[i] = (v - mean) / scale
	}
	nEff := float64(len(z) - arCond)
	bestAIC := math.Inf(1)
	var bestO arOrder
	var bestX []float64
	reason := StopConverged
	tried := 0
grid:
	for d := 0; d <= arMaxD; d++ {
		for p := 0; p <= arMaxP; p++ {
			for q := 0; q <= arMaxQ; q++ {
				if ctx.Err() != nil {
					reason = StopCanceled
					break grid
				}
				if tried > 0 && time.Since(start) >= budget {
					reason = StopTimeBudget
					break grid
				}
				o := arOrder{p, d, q}
				x0 := m.warm.get(o)
				if len(x0) != 1+p+q {
					x0 = make([]float64, 1+p+q)
				}
				x, f := arFitOrder(z, o, x0, maxIter)
				tried++
				if math.IsNaN(f) || math.IsInf(f, 0) {
					continue
				}
				m.warm.set(o, x)
				if !arAdmissible(x[1:1+p], x[1+p:]) {
					continue
				}
				// AIC of a Gaussian CSS fit; the 1e-300 floor keeps a perfectly fitted
				// (constant or noiseless) series from giving −Inf.
				aic := nEff*math.Log(math.Max(f, 1e-300)) + 2*float64(p+q+2)
				if aic < bestAIC {
					bestAIC, bestO, bestX = aic, o, x
				}
			}
		}
	}
	rep.Iterations = tried
	rep.StopReason = reason
	rep.Duration = time.Since(start)
	if bestX == nil {
		if reason == StopCanceled {
			return rep, fmt.Errorf("arima: fit canceled: %w", ctx.Err())
		}
		return rep, fmt.Errorf("arima: no order of the grid could be fitted")
	}
	m.order, m.coef, m.aic, m.mean, m.scale, m.fitted = bestO, append([]float64(nil), bestX...), bestAIC, mean, scale, true
	f := arNewCSS(z, bestO).eval(bestX, nil)
	rep.TrainLoss = f * scale * scale
	rep.ValidationLoss = math.NaN()
	if reason == StopCanceled {
		return rep, fmt.Errorf("arima: fit canceled after %d orders: %w", tried, ctx.Err())
	}
	return rep, nil
}

// arStandardise returns the mean and a scale for history. The scale is the standard deviation
// of the first differences (of the series if those are all zero), so that a trending series
// and a stationary one are both well conditioned; 1 for a constant series.
func arStandardise(x []float64) (mean, scale float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	sd := func(diff bool) float64 {
		var s, s2 float64
		n := 0
		for i := range x {
			v := x[i] - mean
			if diff {
				if i == 0 {
					continue
				}
				v = x[i] - x[i-1]
			}
			s += v
			s2 += v * v
			n++
		}
		mu := s / float64(n)
		return math.Sqrt(math.Max(s2/float64(n)-mu*mu, 0))
	}
	scale = sd(true)
	if !(scale > 0) {
		scale = sd(false)
	}
	if !(scale > 0) {
		scale = 1
	}
	return mean, scale
}

// Predict runs the fitted recursion over history to recover the recent shocks, then forecasts
// recursively with future shocks set to zero. It needs arCond+1 points and does not allocate:
// the recursion reads the last arMaxP differences, arMaxQ shocks and level only, so it keeps those
// (a buffer as long as the history, held by every policy, would be its largest state after the
// calibrator's errors).
func (m *arModel) Predict(history []float64, dst []float64) error {
	if !m.fitted {
		return fmt.Errorf("arima: Predict before Fit")
	}
	if err := CheckHistory(history, arCond+1); err != nil {
		return fmt.Errorf("arima: %w", err)
	}
	n, h := len(history), len(dst)
	p, d := m.order.p, m.order.d
	c, phi, theta := m.coef[0], m.coef[1:1+p], m.coef[1+p:]
	var (
		w [arMaxP]float64 // w[i]: the differenced (d = 1) or standardised level at t−1−i
		e [arMaxQ]float64 // e[j]: the shock at t−1−j; zero before arCond and after the history
		z float64         // the standardised level at t−1
	)
	for t := 0; t < n+h; t++ {
		var wt, zt, et float64
		if t < n {
			zt = (history[t] - m.mean) / m.scale
			wt = zt
			if d == 1 {
				wt = 0
				if t > 0 {
					wt = zt - z
				}
			}
		}
		if t >= arCond {
			pred := c
			for i, f := range phi {
				pred += f * w[i]
			}
			for j, th := range theta {
				pred += th * e[j]
			}
			if t < n {
				et = wt - pred
			} else {
				wt, zt = pred, pred // future shock zero
				if d == 1 {
					zt = z + pred
				}
				dst[t-n] = zt*m.scale + m.mean
			}
		}
		copy(w[1:], w[:arMaxP-1])
		copy(e[1:], e[:arMaxQ-1])
		w[0], e[0], z = wt, et, zt
	}
	return nil
}

// arAdmissible reports whether the AR part is stationary and the MA part invertible, with the
// arMaxRoot margin.
func arAdmissible(phi, theta []float64) bool {
	neg := make([]float64, len(theta))
	for i, v := range theta {
		neg[i] = -v
	}
	return arMaxInvRoot(phi) < arMaxRoot && arMaxInvRoot(neg) < arMaxRoot
}

// arMaxInvRoot returns the largest modulus of the inverse roots of 1 − a₁B − … − a_kB^k:
// the eigenvalues of its companion matrix.
func arMaxInvRoot(a []float64) float64 {
	k := len(a)
	switch k {
	case 0:
		return 0
	case 1:
		return math.Abs(a[0])
	}
	c := mat.NewDense(k, k, nil)
	for j, v := range a {
		c.Set(0, j, v)
	}
	for i := 1; i < k; i++ {
		c.Set(i, i-1, 1)
	}
	var eig mat.Eigen
	if !eig.Factorize(c, mat.EigenNone) {
		return math.Inf(1)
	}
	r := 0.0
	for _, v := range eig.Values(nil) {
		r = math.Max(r, math.Hypot(real(v), imag(v)))
	}
	return r
}
