package scaling

import (
	"testing"
	"time"
)

// BenchmarkAlgorithm2 is one closed-form Algorithm 2 decision.
func BenchmarkAlgorithm2(b *testing.B) {
	p := DefaultParams()
	var sink int32
	for i := 0; b.Loop(); i++ {
		n, _, _ := Algorithm2(0.2+float64(i%100)/50, int32(1+i%50), p)
		sink += n
	}
	_ = sink
}

// BenchmarkAlgorithm2Loop is the paper's loop, for the ratio against the closed form.
func BenchmarkAlgorithm2Loop(b *testing.B) {
	p := DefaultParams()
	var sink int32
	for i := 0; b.Loop(); i++ {
		sink += algorithm2Loop(0.2+float64(i%100)/50, int32(1+i%50), p)
	}
	_ = sink
}

// BenchmarkHPA is one HPA decision with its stabilisation window full (5 minutes of 15 s steps).
func BenchmarkHPA(b *testing.B) {
	h := NewHPA(DefaultParams())
	now := time.Unix(0, 0)
	n := int32(10)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(15 * time.Second)
		d := h.Recommend(Input{Time: now, Current: n, Ready: n, W: 0.3 + float64(i%10)/20})
		n = d.Replicas
	}
}

// BenchmarkHPABounds is one step of an HPA-compatible policy as the exporter's runner takes it:
// the bounds of the state (BoundsOf, two probes of it), the decision composed, and the state
// advanced.
func BenchmarkHPABounds(b *testing.B) {
	p := DefaultParams()
	h := NewHPA(p)
	rule := RuleOf(h)
	now := time.Unix(0, 0)
	n := int32(10)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(15 * time.Second)
		in := Input{Time: now, Current: n, Ready: n, W: 0.3 + float64(i%10)/20}
		d := Decide(rule, in, BoundsOf(h, p, now, n))
		h.Recommend(in)
		n = d.Replicas
	}
}

// BenchmarkStabilize aggregates a 60 s window of 15 s samples with the outlier filter.
func BenchmarkStabilize(b *testing.B) {
	m, _ := MetricsPolicy{Aggregation: AggP90, OutlierFilter: true}.Normalize()
	now := time.Unix(600, 0)
	var s []Sample
	for i := 0; i < 40; i++ {
		s = append(s, Sample{Time: now.Add(-time.Duration(i) * 15 * time.Second), Value: float64(i % 7)})
	}
	scratch := make([]float64, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		m.Stabilize(s, now, scratch)
	}
}

// BenchmarkDecide is the one composition on budget's rule, with and without the scale-to-zero
// step (min_replicas 0: idle, woken and running inputs in turn), for the ratio between them.
func BenchmarkDecide(b *testing.B) {
	for _, min := range []int32{1, 0} {
		b.Run(map[int32]string{1: "min1", 0: "min0"}[min], func(b *testing.B) {
			p := DefaultParams()
			p.MinReplicas = min
			alg, err := New("budget", p)
			if err != nil {
				b.Fatal(err)
			}
			rule := RuleOf(alg)
			t := time.Unix(0, 0)
			var sink int32
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				cur := int32(i % 3) // 0: at zero
				in := Input{Time: t, Current: cur, Ready: cur, W: 0.5 + float64(i%7)/10, WNow: 0.4, WDown: 0.6, Idle: float64(i%5) * 100}
				sink += Decide(rule, in, p.WithZero(Bounds{Lo: 0, Hi: 50, At: cur})).Replicas
			}
			_ = sink
		})
	}
}
