package forecast

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nnTiny builds a small network whose gradients can be checked numerically in milliseconds.
func nnTiny(t testing.TB, bidir bool, cfg Config) *nnModel {
	t.Helper()
	m, err := nnNew(cfg, bidir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLSTMGradients checks every analytic gradient (input and recurrent weights of each gate,
// biases, output layer, both directions) against central finite differences. The weights are
// drawn wider than the default init so that every gate is away from zero and saturation, and
// the check would catch a wrong sign or a missing term in any of them.
func TestLSTMGradients(t *testing.T) {
	for _, bidir := range []bool{false, true} {
		name := map[bool]string{false: "lstm", true: "bilstm"}[bidir]
		t.Run(name, func(t *testing.T) {
			const B, L, H = 3, 4, 3
			m := nnTiny(t, bidir, Config{Window: L, Hidden: H, Seed: 7})
			r := rand.New(rand.NewPCG(1, 2))
			for i := range m.params {
				m.params[i] = nnReal(r.Float64() - 0.5)
			}
			s := m.nnScratch(B)
			for i := range s.x {
				s.x[i] = nnReal(2*r.Float64() - 1)
			}
			for i := range s.y {
				s.y[i] = nnReal(r.Float64() - 0.5)
			}
			m.nnLossGrad(s, B, true)
			analytic := slices.Clone(s.grads)

			type block struct {
				name     string
				from, to int
			}
			var blocks []block
			for d := 0; d < m.nDir; d++ {
				dn := []string{"fwd", "bwd"}[d]
				G := 4 * H
				blocks = append(blocks,
					block{dn + " W input row", m.nnWOff(d), m.nnWOff(d) + G},
					block{dn + " W recurrent", m.nnWOff(d) + G, m.nnBOff(d)},
					block{dn + " bias", m.nnBOff(d), m.nnBOff(d) + G})
			}
			blocks = append(blocks,
				block{"output weights", m.nnWyOff(), m.nnByOff()},
				block{"output bias", m.nnByOff(), m.nnByOff() + 1})
			covered := 0
			for _, bl := range blocks {
				t.Run(bl.name, func(t *testing.T) {
					for i := bl.from; i < bl.to; i++ {
						p := m.params[i]
						up, dn := p+nnGradEps, p-nnGradEps
						m.params[i] = up
						lp := m.nnLossGrad(s, B, false)
						m.params[i] = dn
						lm := m.nnLossGrad(s, B, false)
						m.params[i] = p
						num := (lp - lm) / float64(up-dn)
						a := float64(analytic[i])
						if diff := math.Abs(num - a); diff > nnGradAbsTol+nnGradRelTol*math.Abs(num) {
							t.Errorf("param %d: analytic %.10g, numeric %.10g", i, a, num)
						}
					}
				})
				covered += bl.to - bl.from
			}
			if covered != len(m.params) {
				t.Fatalf("blocks cover %d of %d parameters", covered, len(m.params))
			}
		})
	}
}

// nnSine is a noisy daily-like sine: learnable, and not trivially constant.
func nnSine(n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = 10 + 5*math.Sin(2*math.Pi*float64(i)/24) + 0.2*r.NormFloat64()
	}
	return out
}

// TestLSTMFitImproves shows that training lowers the validation loss, that the report says
// why training stopped, and that the forecast of a sine beats the last-value forecast.
func TestLSTMFitImproves(t *testing.T) {
	for _, bidir := range []bool{false, true} {
		t.Run(map[bool]string{false: "lstm", true: "bilstm"}[bidir], func(t *testing.T) {
			m := nnTiny(t, bidir, Config{Window: 12, Hidden: 8, MaxIterations: 400, LearningRate: 1e-2, BatchSize: 32, Seed: 3, TimeBudget: time.Minute})
			h := nnSine(300, 1)
			rep, err := m.Fit(context.Background(), h[:280])
			if err != nil {
				t.Fatal(err)
			}
			if rep.StopReason == "" || rep.Iterations == 0 || rep.Model != m.Name() {
				t.Fatalf("report %+v", rep)
			}
			if rep.StopReason != StopMaxIterations && rep.StopReason != StopEarlyStopping {
				t.Errorf("stop reason %q, want max-iterations or early-stopping", rep.StopReason)
			}
			// Mean absolute error over the next 12 steps: the last-value forecast of a sine
			// of amplitude 5 and period 24 is off by ≈3 on average; the model must do better.
			dst := make([]float64, 12)
			if err := m.Predict(h[:280], dst); err != nil {
				t.Fatal(err)
			}
			var mae, naive float64
			for i, v := range dst {
				mae += math.Abs(v - h[280+i])
				naive += math.Abs(h[279] - h[280+i])
			}
			if mae >= naive {
				t.Errorf("model MAE %.3f not below naive %.3f", mae/12, naive/12)
			}
		})
	}
}

// TestLSTMStops covers the stop reasons that do not depend on the data: the iteration cap,
// the time budget and cancellation, which must also return the context's error.
func TestLSTMStops(t *testing.T) {
	h := nnSine(120, 2)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		cfg     Config
		ctx     context.Context
		want    string
		wantErr bool
	}{
		{"max-iterations", Config{Window: 6, Hidden: 4, MaxIterations: 3, TimeBudget: time.Minute}, context.Background(), StopMaxIterations, false},
		{"time-budget", Config{Window: 6, Hidden: 4, TimeBudget: time.Nanosecond}, context.Background(), StopTimeBudget, false},
		{"canceled", Config{Window: 6, Hidden: 4, TimeBudget: time.Minute}, canceled, StopCanceled, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := nnTiny(t, true, tc.cfg)
			rep, err := m.Fit(tc.ctx, h)
			if rep.StopReason != tc.want {
				t.Errorf("stop reason %q, want %q", rep.StopReason, tc.want)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, context.Canceled) {
				t.Errorf("err %v does not wrap context.Canceled", err)
			}
		})
	}
}

// TestLSTMEarlyStopping trains on pure noise, where validation loss cannot keep improving,
// with an iteration cap far above what patience allows.
func TestLSTMEarlyStopping(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	h := make([]float64, 200)
	for i := range h {
		h[i] = r.Float64()
	}
	m := nnTiny(t, false, Config{Window: 5, Hidden: 4, MaxIterations: 100000, LearningRate: 1e-2, BatchSize: 64, TimeBudget: time.Minute})
	rep, err := m.Fit(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if rep.StopReason != StopEarlyStopping {
		t.Fatalf("stop reason %q after %d iterations, want early-stopping", rep.StopReason, rep.Iterations)
	}
}

// TestLSTMWarmStartAndClone proves that Fit continues from the current weights (a second Fit
// starts at the first one's validation loss instead of a random network's), that Clone
// deep-copies, and that training a clone leaves the original's forecasts untouched.
func TestLSTMWarmStartAndClone(t *testing.T) {
	h := nnSine(260, 3)
	m := nnTiny(t, true, Config{Window: 8, Hidden: 6, MaxIterations: 150, LearningRate: 1e-2, BatchSize: 32, TimeBudget: time.Minute})
	rep1, err := m.Fit(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	before := make([]float64, 5)
	if err := m.Predict(h, before); err != nil {
		t.Fatal(err)
	}
	c := m.Clone().(*nnModel)
	if &c.params[0] == &m.params[0] || &c.adamM[0] == &m.adamM[0] {
		t.Fatal("Clone shares weight storage")
	}
	// A zero-iteration Fit reports the validation loss of the weights it starts from: warm
	// means the clone starts where the original ended, on the same data.
	c.cfg.MaxIterations = 0
	rep0, err := c.Fit(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rep0.ValidationLoss-rep1.ValidationLoss) > 1e-12 {
		t.Errorf("warm start validation %.6g, want the first fit's %.6g", rep0.ValidationLoss, rep1.ValidationLoss)
	}
	cold := nnTiny(t, true, Config{Window: 8, Hidden: 6, TimeBudget: time.Minute})
	cold.cfg.MaxIterations = 0 // after construction: 0 in a Config means the default
	repCold, _ := cold.Fit(context.Background(), h)
	if !(rep0.ValidationLoss < repCold.ValidationLoss) {
		t.Errorf("warm start %.6g not better than random weights %.6g", rep0.ValidationLoss, repCold.ValidationLoss)
	}
	c.cfg.MaxIterations = 100
	shifted := make([]float64, len(h))
	for i, v := range h {
		shifted[i] = 2*v + 7
	}
	if _, err := c.Fit(context.Background(), shifted); err != nil {
		t.Fatal(err)
	}
	after := make([]float64, 5)
	if err := m.Predict(h, after); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("training the clone changed the original's forecast: %v → %v", before, after)
	}
	if slices.Equal(c.params, m.params) {
		t.Error("clone's weights did not change with training")
	}
}

// TestLSTMPredictEdges: errors before Fit and on short or non-finite history; an exact
// inverse of the scaling and differencing (a constant series forecasts itself); and zero
// allocations per Predict in steady state.
func TestLSTMPredictEdges(t *testing.T) {
	m := nnTiny(t, true, Config{Window: 6, Hidden: 5, MaxIterations: 5, TimeBudget: time.Minute})
	dst := make([]float64, 3)
	if err := m.Predict(nnSine(50, 1), dst); err == nil {
		t.Error("Predict before Fit: want error")
	}
	if _, err := m.Fit(context.Background(), nnSine(10, 1)); !errors.Is(err, ErrShortHistory) {
		t.Errorf("short Fit: err %v, want ErrShortHistory", err)
	}
	constant := make([]float64, 60)
	for i := range constant {
		constant[i] = 42
	}
	if _, err := m.Fit(context.Background(), constant); err != nil {
		t.Fatal(err)
	}
	// Zero out the output layer: the network then predicts a zero difference, and the
	// inverse transform must give back the last value exactly.
	for i := m.nnWyOff(); i < len(m.params); i++ {
		m.params[i] = 0
	}
	if err := m.Predict(constant, dst); err != nil {
		t.Fatal(err)
	}
	for _, v := range dst {
		if v != 42 {
			t.Fatalf("constant series forecast %v, want 42", dst)
		}
	}
	bad := nnSine(50, 1)
	bad[40] = math.NaN()
	if err := m.Predict(bad, dst); err == nil {
		t.Error("NaN history: want error")
	}
	if err := m.Predict(bad[:5], dst); !errors.Is(err, ErrShortHistory) {
		t.Errorf("short Predict: err %v, want ErrShortHistory", err)
	}
	h := nnSine(60, 2)
	allocs := testing.AllocsPerRun(50, func() {
		if err := m.Predict(h, dst); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Predict allocates %.1f times per call, want 0", allocs)
	}
}

// TestLSTMRegistry checks the names, defaults and config validation.
func TestLSTMRegistry(t *testing.T) {
	for _, name := range []string{"lstm", "bilstm"} {
		f, err := New(name, Config{})
		if err != nil {
			t.Fatal(err)
		}
		m := f.(*nnModel)
		if m.Name() != name || m.L != 30 || m.H != 100 || m.cfg.MaxIterations != 10000 || m.cfg.BatchSize != 64 {
			t.Errorf("%s defaults: %+v", name, m.cfg)
		}
		if m.MinHistory() != 41 {
			t.Errorf("%s MinHistory %d, want 30+1+10", name, m.MinHistory())
		}
		if _, err := New(name, Config{Hidden: -1}); err == nil {
			t.Errorf("%s with negative hidden: want error", name)
		}
	}
}

// TestLSTMCloneConcurrent follows the policy runner's pattern: a clone trains in a goroutine
// while the original keeps serving forecasts. Every forecast must stay identical (and under
// -race, no access may be shared).
func TestLSTMCloneConcurrent(t *testing.T) {
	h := nnSine(150, 6)
	m := nnTiny(t, true, Config{Window: 6, Hidden: 5, MaxIterations: 30, TimeBudget: time.Minute})
	if _, err := m.Fit(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 3)
	if err := m.Predict(h, want); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	done := make(chan error)
	go func() {
		_, err := c.Fit(context.Background(), h[20:])
		done <- err
	}()
	got := make([]float64, 3)
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
			running = false
		default:
		}
		if err := m.Predict(h, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("forecast changed while a clone trained: %v → %v", want, got)
		}
	}
}
