package forecast

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkHoltWintersFit measures a cold-start fit and a warm refit (one new point) on a day
// of 5-minute samples (season 288) with the method's default window (760 steps) and a longer one.
func BenchmarkHoltWintersFit(b *testing.B) {
	for _, n := range []int{760, 2880} {
		history := hwSeries(n+1, 288, 50, 0.01, 10, 1, 8)
		proto := hwMustNew(b, "holtwinters", Config{})
		b.Run(fmt.Sprintf("cold/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var iters int
			for b.Loop() {
				rep, err := proto.Clone().Fit(context.Background(), history[:n])
				if err != nil {
					b.Fatal(err)
				}
				iters += rep.Iterations
			}
			b.ReportMetric(float64(iters)/float64(b.N), "iters/op")
		})
		warmed := proto.Clone()
		if _, err := warmed.Fit(context.Background(), history[:n]); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("warm/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var iters int
			for b.Loop() {
				rep, err := warmed.Clone().Fit(context.Background(), history[1:])
				if err != nil {
					b.Fatal(err)
				}
				iters += rep.Iterations
			}
			b.ReportMetric(float64(iters)/float64(b.N), "iters/op")
		})
	}
}

// BenchmarkHoltWintersPredict measures one forecast of 12 steps, which re-runs the filter over
// the whole history.
func BenchmarkHoltWintersPredict(b *testing.B) {
	for _, n := range []int{760, 2880} {
		history := hwSeries(n, 288, 50, 0.01, 10, 1, 9)
		m := hwMustNew(b, "holtwinters", Config{})
		dst := make([]float64, 12)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Predict(history, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
