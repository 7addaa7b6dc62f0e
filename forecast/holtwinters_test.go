package forecast

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// hwSeries returns y_t = base + slope·t + amp·sin(2πt/m) + 0.5·amp·cos(4πt/m) + noise·ε_t, ε
// standard normal with a fixed seed. Both harmonics sum to zero over a season, so the series is
// exactly additive level + trend + seasonal.
func hwSeries(n, m int, base, slope, amp, noise float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	y := make([]float64, n)
	for t := range y {
		ph := 2 * math.Pi * float64(t) / float64(m)
		y[t] = base + slope*float64(t) + amp*math.Sin(ph) + 0.5*amp*math.Cos(2*ph) + noise*rng.NormFloat64()
	}
	return y
}

func hwMustNew(t testing.TB, name string, cfg Config) Forecaster {
	t.Helper()
	m, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHoltWintersNoiseless checks that a noiseless additive series is reproduced exactly: the
// two-season initialisation recovers level, trend and profile exactly (see hwFilter), every
// one-step error is zero, so every (α, β, γ) forecasts the continuation of the series.
func TestHoltWintersNoiseless(t *testing.T) {
	const m, n, h = 12, 72, 30
	full := hwSeries(n+h, m, 20, 0.5, 3, 0, 1)
	history, future := full[:n], full[n:]
	for _, fit := range []bool{false, true} {
		name := "default params"
		if fit {
			name = "fitted"
		}
		t.Run(name, func(t *testing.T) {
			model := hwMustNew(t, "holtwinters", Config{Season: m})
			if fit {
				rep, err := model.Fit(context.Background(), history)
				if err != nil {
					t.Fatal(err)
				}
				if rep.TrainLoss > 1e-20 || rep.StopReason != StopConverged {
					t.Errorf("Fit = %+v: want zero loss, converged", rep)
				}
			}
			dst := make([]float64, h)
			if err := model.Predict(history, dst); err != nil {
				t.Fatal(err)
			}
			for i := range dst {
				if math.Abs(dst[i]-future[i]) > 1e-9 {
					t.Fatalf("h=%d: forecast %.12g, truth %.12g", i+1, dst[i], future[i])
				}
			}
		})
	}
}

// TestHoltWintersBeatsNaive compares forecast errors over the next season, from several origins,
// on a noisy seasonal series: the seasonal swing (amplitude 10) dwarfs the noise (σ = 1), so a
// model that learns the profile must beat the last value by a wide margin.
func TestHoltWintersBeatsNaive(t *testing.T) {
	const m = 24
	y := hwSeries(m*14, m, 50, 0.05, 10, 1, 2)
	hw := hwMustNew(t, "holtwinters", Config{Season: m})
	naive := hwMustNew(t, "naive", Config{})
	var seHW, seNaive float64
	dstHW, dstNaive := make([]float64, m), make([]float64, m)
	for origin := m * 10; origin < m*13; origin += m / 2 {
		history := y[:origin]
		if _, err := hw.Fit(context.Background(), history); err != nil {
			t.Fatal(err)
		}
		if err := hw.Predict(history, dstHW); err != nil {
			t.Fatal(err)
		}
		if err := naive.Predict(history, dstNaive); err != nil {
			t.Fatal(err)
		}
		for i := range m {
			truth := y[origin+i]
			seHW += (dstHW[i] - truth) * (dstHW[i] - truth)
			seNaive += (dstNaive[i] - truth) * (dstNaive[i] - truth)
		}
	}
	// The naive error is about the seasonal swing (RMSE of order 8 here); Holt–Winters should
	// approach the noise level, σ = 1. Require a factor of 3 to keep the test robust.
	t.Logf("sum of squared errors: holtwinters %.1f, naive %.1f", seHW, seNaive)
	if !(seHW*9 < seNaive) {
		t.Errorf("sum of squared errors: holtwinters %.1f, naive %.1f; want holtwinters 3× better in RMSE", seHW, seNaive)
	}
}

// TestHoltWintersWarmStart checks that a second Fit on a slightly longer history, starting from
// the first fit's parameters, needs fewer iterations than the cold start.
func TestHoltWintersWarmStart(t *testing.T) {
	const m = 24
	y := hwSeries(m*10, m, 50, 0.05, 10, 1, 3)
	model := hwMustNew(t, "holtwinters", Config{Season: m})
	cold, err := model.Fit(context.Background(), y[:len(y)-3])
	if err != nil {
		t.Fatal(err)
	}
	warm, err := model.Fit(context.Background(), y)
	if err != nil {
		t.Fatal(err)
	}
	if cold.StopReason != StopConverged || warm.StopReason != StopConverged {
		t.Errorf("stop reasons %q, %q; want converged", cold.StopReason, warm.StopReason)
	}
	if !(warm.Iterations < cold.Iterations) {
		t.Errorf("warm start took %d iterations, cold start %d: want fewer", warm.Iterations, cold.Iterations)
	}
	if !(warm.TrainLoss > 0) || warm.TrainLoss > 2 {
		t.Errorf("train MSE %v: want near the noise variance 1", warm.TrainLoss)
	}
	a, b, g := model.(*hwModel).Params()
	for _, p := range []float64{a, b, g} {
		if !(p >= 0 && p <= 1) {
			t.Errorf("parameters %v, %v, %v: want all in [0, 1]", a, b, g)
		}
	}
	t.Logf("cold %d iterations (%v), warm %d (%v), α=%.3f β=%.3f γ=%.3f", cold.Iterations, cold.Duration, warm.Iterations, warm.Duration, a, b, g)
}

// TestHoltWintersStops checks each stop reason the optimiser can give.
func TestHoltWintersStops(t *testing.T) {
	const m = 24
	y := hwSeries(m*6, m, 50, 0.05, 10, 1, 4)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"max iterations", Config{Season: m, MaxIterations: 3}, StopMaxIterations},
		{"time budget", Config{Season: m, TimeBudget: time.Nanosecond}, StopTimeBudget},
		{"converged", Config{Season: m}, StopConverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := hwMustNew(t, "holtwinters", tc.cfg).Fit(context.Background(), y)
			if err != nil {
				t.Fatal(err)
			}
			if rep.StopReason != tc.want || rep.Model != "holtwinters" || rep.Iterations < 1 || rep.Duration <= 0 {
				t.Errorf("Fit = %+v, want stop reason %q", rep, tc.want)
			}
			if tc.cfg.MaxIterations > 0 && rep.Iterations != tc.cfg.MaxIterations {
				t.Errorf("%d iterations, want %d", rep.Iterations, tc.cfg.MaxIterations)
			}
		})
	}
}

func TestHoltWintersConfig(t *testing.T) {
	if m := hwMustNew(t, "holtwinters", Config{}); m.MinHistory() != 2*288 {
		t.Errorf("default MinHistory = %d, want two seasons of 288", m.MinHistory())
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Season: -2}, "season (-2)"},
		{Config{MaxIterations: -1}, "max_iterations (-1)"},
		{Config{TimeBudget: -time.Second}, "time_budget (-1s)"},
	} {
		if _, err := New("holtwinters", tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): err = %v, want one containing %q", tc.cfg, err, tc.want)
		}
	}
}

// TestHoltWintersClone checks that a clone forecasts like the original and trains independently.
func TestHoltWintersClone(t *testing.T) {
	const m = 12
	y := hwSeries(m*8, m, 30, 0, 5, 1, 5)
	orig := hwMustNew(t, "holtwinters", Config{Season: m})
	if _, err := orig.Fit(context.Background(), y[:m*4]); err != nil {
		t.Fatal(err)
	}
	clone := orig.Clone()
	a1, b1, g1 := orig.(*hwModel).Params()
	d1, d2 := make([]float64, 5), make([]float64, 5)
	if err := orig.Predict(y, d1); err != nil {
		t.Fatal(err)
	}
	if err := clone.Predict(y, d2); err != nil {
		t.Fatal(err)
	}
	if d1[0] != d2[0] || d1[4] != d2[4] {
		t.Errorf("clone forecasts %v, original %v", d2, d1)
	}
	if _, err := clone.Fit(context.Background(), y); err != nil {
		t.Fatal(err)
	}
	if a2, b2, g2 := orig.(*hwModel).Params(); a2 != a1 || b2 != b1 || g2 != g1 {
		t.Error("fitting the clone changed the original's parameters")
	}
	if &orig.(*hwModel).seas[0] == &clone.(*hwModel).seas[0] {
		t.Error("clone shares the scratch buffer")
	}
}

func TestHoltWintersEdges(t *testing.T) { naiveCheckEdges(t, "holtwinters", Config{Season: 4}) }
