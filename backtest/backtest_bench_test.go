package backtest

import (
	"context"
	"testing"

	"github.com/debi-scaler/debi/trace"
)

// BenchmarkSimulate reports backtest steps per second per policy on the embedded bursty trace
// (steps include model training at every retrain).
func BenchmarkSimulate(b *testing.B) {
	ts, err := trace.Embedded()
	if err != nil {
		b.Fatal(err)
	}
	o := DefaultOptions()
	var demand []float64
	for _, t := range ts {
		if t.Class == "bursty" {
			scale, _ := o.ScaleFor(t.Values)
			for _, v := range t.Values {
				demand = append(demand, v*scale)
			}
		}
	}
	for _, pol := range []string{"hpa", "apa", "debi", "naive-hpa", "holtwinters-hpa", "evt-holtwinters-hpa"} {
		b.Run(pol, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Simulate(context.Background(), demand, pol, o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(demand)*b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
