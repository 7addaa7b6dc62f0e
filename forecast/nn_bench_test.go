package forecast

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/trace"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// nnStepFLOP counts the multiply-adds of one training step's gemms (2 flops each): per
// direction and time step, the forward [B×(1+H)]·[(1+H)×4H], the weight gradient
// [(1+H)×B]·[B×4H] and the hidden-state gradient
// [B×4H]·[4H×H]. Elementwise work is not
// counted, so the effective rate is comparable with a bare dgemm's.
func nnStepFLOP(B, L, H, nDir int) float64 {
	fwd := 2.0 * float64(B) * float64(1+H) * float64(4*H)
	wgrad := fwd
	hgrad := 2.0 * float64(B) * float64(4*H) * float64(H)
	return float64(nDir) * float64(L) * (fwd + wgrad + hgrad)
}

// BenchmarkLSTMTrainStep times one forward, backward and Adam step on a batch of windows with
// the paper's shapes (B 64, L 30, H 100): ≈0.92 GFLOP for the BiLSTM.
func BenchmarkLSTMTrainStep(b *testing.B) {
	for _, bidir := range []bool{false, true} {
		name := map[bool]string{false: "lstm", true: "bilstm"}[bidir]
		b.Run(fmt.Sprintf("%s/B64-L30-H100", name), func(b *testing.B) {
			const B, L, H = 64, 30, 100
			m, err := nnNew(Config{Window: L, Hidden: H, BatchSize: B}, bidir)
			if err != nil {
				b.Fatal(err)
			}
			s := m.nnScratch(B)
			r := rand.New(rand.NewPCG(1, 1))
			for i := range s.x {
				s.x[i] = nnReal(r.NormFloat64() * 0.05)
			}
			for i := range s.y {
				s.y[i] = nnReal(r.NormFloat64() * 0.05)
			}
			b.ResetTimer()
			for b.Loop() {
				m.nnLossGrad(s, B, true)
				m.nnAdamStep(s.grads)
			}
			flop := nnStepFLOP(B, L, H, m.nDir)
			b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flop/1e9, "GFLOP/op")
		})
	}
}

// BenchmarkDgemm measures gonum's own dgemm on the three shapes of a training step, the
// yardstick for the training step's effective rate.
func BenchmarkDgemm(b *testing.B) {
	const B, H = 64, 100
	shapes := []struct {
		name    string
		m, n, k int
		tA, tB  blas.Transpose
	}{
		{"fwd_64x101x400", B, 4 * H, 1 + H, blas.NoTrans, blas.NoTrans},
		{"wgrad_101x400x64", 1 + H, 4 * H, B, blas.Trans, blas.NoTrans},
		{"hgrad_64x100x400", B, H, 4 * H, blas.NoTrans, blas.Trans},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(2, 2))
			mk := func(rows, cols int) blas64.General {
				d := make([]float64, rows*cols)
				for i := range d {
					d[i] = r.Float64()
				}
				return blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: d}
			}
			var a, bb blas64.General
			if sh.tA == blas.Trans {
				a = mk(sh.k, sh.m)
			} else {
				a = mk(sh.m, sh.k)
			}
			if sh.tB == blas.Trans {
				bb = mk(sh.n, sh.k)
			} else {
				bb = mk(sh.k, sh.n)
			}
			c := mk(sh.m, sh.n)
			for b.Loop() {
				blas64.Gemm(sh.tA, sh.tB, 1, a, bb, 1, c)
			}
			flop := 2.0 * float64(sh.m*sh.n*sh.k)
			b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkPredict times single-window inference with the default shapes; it must stay
// under 1 ms and allocate nothing.
func BenchmarkPredict(b *testing.B) {
	h := nnSine(760, 9)
	for _, name := range []string{"lstm", "bilstm"} {
		b.Run(name, func(b *testing.B) {
			f, err := New(name, Config{MaxIterations: 1, TimeBudget: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Fit(context.Background(), h); err != nil {
				b.Fatal(err)
			}
			dst := make([]float64, 1)
			b.ReportAllocs()
			for b.Loop() {
				if err := f.Predict(h, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLSTMWarmRetrain measures what warm starting buys on a real trace (the embedded
// Google cell trace, 5-minute steps). A model is first trained cold on 760 steps with the
// default cold budget; then, one retrain period (nnBenchShift steps) later, a Clone is
// retrained warm with the default warm budget, and a fresh model is trained long (until
// early stopping or nnBenchLong) on the same 760 steps. Both validation losses are on the same
// validation windows and scaling, so their ratio says how close the cheap warm retrain gets
// to a long run. It is slow (minutes): run it alone with -benchtime=1x.
func BenchmarkLSTMWarmRetrain(b *testing.B) {
	const nnBenchShift = 12 // one hour of 5-minute steps
	const nnBenchLong = 10 * time.Minute
	traces, err := trace.Embedded()
	if err != nil {
		b.Fatal(err)
	}
	var x []float64
	for _, tr := range traces {
		if strings.HasPrefix(tr.Name, "google2019") {
			x = tr.Values
		}
	}
	if len(x) < 2000 {
		b.Skip("google trace not embedded")
	}
	first := x[1000 : 1000+760]
	second := x[1000+nnBenchShift : 1000+nnBenchShift+760]
	for _, name := range []string{"lstm", "bilstm"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ctx := context.Background()
				m, _ := New(name, Config{Seed: 1})
				cold, err := m.Fit(ctx, first)
				if err != nil {
					b.Fatal(err)
				}
				warm := m.Clone()
				wrep, err := warm.Fit(ctx, second)
				if err != nil {
					b.Fatal(err)
				}
				long, _ := New(name, Config{Seed: 1, TimeBudget: nnBenchLong})
				lrep, err := long.Fit(ctx, second)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("%s cold: %d it %.1fs val %.4g (%s); warm: %d it %.1fs val %.4g (%s); long: %d it %.1fs val %.4g (%s); warm/long %.3f",
					name, cold.Iterations, cold.Duration.Seconds(), cold.ValidationLoss, cold.StopReason,
					wrep.Iterations, wrep.Duration.Seconds(), wrep.ValidationLoss, wrep.StopReason,
					lrep.Iterations, lrep.Duration.Seconds(), lrep.ValidationLoss, lrep.StopReason,
					wrep.ValidationLoss/lrep.ValidationLoss)
				b.ReportMetric(nnZeroLoss(second, 30), "naive-val")
				b.ReportMetric(wrep.ValidationLoss, "warm-val")
				b.ReportMetric(lrep.ValidationLoss, "long-val")
				b.ReportMetric(wrep.ValidationLoss/lrep.ValidationLoss, "warm/long")
				b.ReportMetric(wrep.Duration.Seconds(), "warm-s")
				b.ReportMetric(lrep.Duration.Seconds(), "long-s")
			}
		})
	}
}

// nnZeroLoss is the validation loss of forecasting "no change" (a zero difference) with the
// split and scaling Fit uses: the level any useful model must beat.
func nnZeroLoss(history []float64, L int) float64 {
	m := &nnModel{L: L}
	d := m.nnPrepare(history)
	nWin := len(d) - L
	nVal := max(1, nWin/10)
	sum := 0.0
	for k := nWin - nVal; k < nWin; k++ {
		sum += d[k+L] * d[k+L]
	}
	return sum / float64(nVal)
}
