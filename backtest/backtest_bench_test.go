package backtest

import (
	"context"
	"testing"
	"time"

	"github.com/debi-scaler/debi/trace"
)

// BenchmarkSimulate reports backtest ticks (15 s syncs) per second per policy on the embedded
// bursty trace, model training at every retrain included, and the trace samples per second
// (the old yardstick's "steps").
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
	w, err := NewWorld(demand, 5*time.Minute, o)
	if err != nil {
		b.Fatal(err)
	}
	for _, pol := range []string{"hpa", "apa", "debi", "naive-hpa", "holtwinters-hpa", "evt-holtwinters-hpa", "budget", "naive-budget", OraclePolicy} {
		b.Run(pol, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Simulate(context.Background(), w, pol, o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(w.Inst)*b.N)/b.Elapsed().Seconds(), "ticks/s")
			b.ReportMetric(float64(len(demand)*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
