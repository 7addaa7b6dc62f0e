package forecast

import (
	"context"
	"testing"
)

// BenchmarkARIMAFit times the full AIC grid (24 orders) on 760 points: cold from zero
// coefficients, and warm, refitting one retrain period (12 steps) later from the previous
// solutions.
func BenchmarkARIMAFit(b *testing.B) {
	x := arSimulate(800, 1, 0.02, []float64{0.5}, []float64{0.3}, 21)
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			m, _ := arNew(Config{})
			if _, err := m.Fit(context.Background(), x[:760]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		m, _ := arNew(Config{})
		if _, err := m.Fit(context.Background(), x[:760]); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			c := m.Clone()
			if _, err := c.Fit(context.Background(), x[12:772]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkARIMAPredict times a 12-step forecast from 760 points (the residual filter runs
// over the whole history); it must not allocate.
func BenchmarkARIMAPredict(b *testing.B) {
	x := arSimulate(760, 1, 0.02, []float64{0.5}, []float64{0.3}, 21)
	m, _ := arNew(Config{})
	if _, err := m.Fit(context.Background(), x); err != nil {
		b.Fatal(err)
	}
	dst := make([]float64, 12)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Predict(x, dst); err != nil {
			b.Fatal(err)
		}
	}
}
