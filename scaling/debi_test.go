package scaling

import (
	"math"
	"math/rand/v2"
	"testing"
)

// algorithm2Loop is the paper's Algorithm 2 as a loop (METHOD §5), kept as the test oracle of
// the closed form. It includes N_max, which the paper's range(N_min+1, N_max) missed.
func algorithm2Loop(w float64, n int32, p Params) int32 {
	if n >= p.MinReplicas && n <= p.MaxReplicas && math.Abs(w/DynamicTarget(n, p)-1) <= p.Tolerance {
		return n
	}
	l := w * float64(max(n, 1))
	if l <= p.Lower*float64(p.MinReplicas) {
		return p.MinReplicas
	}
	best, bestDiff := int32(-1), math.Inf(1)
	for k := p.MinReplicas + 1; k <= p.MaxReplicas; k++ { // [fix]: <= N_max
		diff := math.Abs(DynamicTarget(k, p)*float64(k) - l)
		if diff <= bestDiff+1e-12 { // ties go to the larger k
			best, bestDiff = k, diff
		}
	}
	if best < 0 {
		return p.MaxReplicas
	}
	return best
}

func TestDynamicTarget(t *testing.T) {
	p := DefaultParams() // lower 0.3, upper 0.7, min 1 → B = 0.4
	for _, tc := range []struct {
		n    int32
		want float64
	}{
		{1, 0.3},       // U(N_min) = U_lower by construction
		{2, 0.5},       // 0.7 − 0.4/2
		{4, 0.6},       // 0.7 − 0.4/4
		{50, 0.692},    // 0.7 − 0.4/50
		{1000, 0.6996}, // → U_upper
	} {
		if got := DynamicTarget(tc.n, p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("U(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	p.MinReplicas = 3 // B = 1.2, U(3) = 0.7 − 0.4 = 0.3
	if got := DynamicTarget(3, p); math.Abs(got-0.3) > 1e-12 {
		t.Errorf("U(N_min=3) = %v, want 0.3", got)
	}
}

func TestAlgorithm2Cases(t *testing.T) {
	p := DefaultParams()
	for _, tc := range []struct {
		name   string
		w      float64
		n      int32
		want   int32
		reason string
	}{
		// U(4) = 0.6; W = 0.63 → |0.63/0.6 − 1| = 0.05 ≤ 0.1: keep 4.
		{"tolerance", 0.63, 4, 4, ReasonTolerance},
		// L = 0.2·1 = 0.2 ≤ U_lower·N_min = 0.3 → N_min.
		{"light load to min", 0.2, 1, 1, ReasonMinReplicas},
		// L = 0.05·4 = 0.2 ≤ 0.3 → N_min even from 4 pods.
		{"scale in to min", 0.05, 4, 1, ReasonMinReplicas},
		// L = 0.9·10 = 9; (L+B)/U_upper = 9.4/0.7 = 13.43 → 13.
		{"scale out", 0.9, 10, 13, ReasonScaleUp},
		// L = 0.2·10 = 2; 2.4/0.7 = 3.43 → 3.
		{"scale in", 0.2, 10, 3, ReasonScaleDown},
		// L = 40·1 = 40; 40.4/0.7 = 57.7 → clamp to N_max = 50.
		{"clamp at max", 40, 1, 50, ReasonMaxReplicas},
		// L = 0.35·1 = 0.35 > 0.3; 0.75/0.7 = 1.07 → 1, but the search starts at N_min+1 = 2.
		{"just above the lower bound", 0.35, 1, 2, ReasonScaleUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, reason := Algorithm2(tc.w, tc.n, p)
			if got != tc.want || reason != tc.reason {
				t.Errorf("Algorithm2(%v, %d) = %d (%s), want %d (%s)", tc.w, tc.n, got, reason, tc.want, tc.reason)
			}
		})
	}
}

// TestAlgorithm2NMaxFix is METHOD §5.3's [fix]: the paper's range(N_min+1, N_max) stops at
// N_max−1, so a load that needs exactly N_max replicas got N_max−1.
func TestAlgorithm2NMaxFix(t *testing.T) {
	p := DefaultParams()
	p.MaxReplicas = 10
	// n = 10 is the optimum when (L+B)/U_upper = 10 → L = 0.7·10 − 0.4 = 6.6; from N = 6,
	// W = 6.6/6 = 1.1 (outside the tolerance band of U(6) = 0.633).
	w := 6.6 / 6
	got, _, _ := Algorithm2(w, 6, p)
	if got != 10 {
		t.Fatalf("Algorithm2 = %d, want N_max = 10", got)
	}
	// The paper's literal loop would have answered 9.
	paper := int32(-1)
	best := math.Inf(1)
	for k := p.MinReplicas + 1; k < p.MaxReplicas; k++ {
		if d := math.Abs(DynamicTarget(k, p)*float64(k) - w*6); d <= best {
			paper, best = k, d
		}
	}
	if paper != 9 {
		t.Fatalf("paper's loop = %d; the test no longer shows the bug it guards", paper)
	}
}

// TestAlgorithm2MatchesLoop checks the closed form against the paper's loop on many random
// inputs, bounds and sizes.
func TestAlgorithm2MatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		p := DefaultParams()
		p.MinReplicas = int32(1 + r.IntN(5))
		p.MaxReplicas = p.MinReplicas + int32(r.IntN(60))
		p.Lower = 0.1 + 0.4*r.Float64()
		p.Upper = p.Lower + 0.05 + (0.95-p.Lower)*r.Float64()
		p.Tolerance = 0.2 * r.Float64()
		n := int32(r.IntN(int(p.MaxReplicas) + 3))
		w := 3 * r.Float64() * r.Float64()
		got, _, _ := Algorithm2(w, n, p)
		want := algorithm2Loop(w, n, p)
		if got != want {
			// A tie within floating-point noise may round either way; accept only that.
			l := w * float64(max(n, 1))
			b := (p.Upper - p.Lower) * float64(p.MinReplicas)
			dg := math.Abs(p.Upper*float64(got) - b - l)
			dw := math.Abs(p.Upper*float64(want) - b - l)
			if math.Abs(dg-dw) > 1e-9 {
				t.Fatalf("case %d: W=%v N=%d params=%+v: closed form %d, loop %d", i, w, n, p, got, want)
			}
		}
	}
}

func TestAlgorithm2RoundingCeil(t *testing.T) {
	p := DefaultParams()
	// L = 0.9·10 = 9; (9+0.4)/0.7 = 13.43: nearest 13, ceil 14 (U(13)·13 = 8.7 < 9 would put
	// each pod above its target).
	p.Rounding = RoundCeil
	if got, _, _ := Algorithm2(0.9, 10, p); got != 14 {
		t.Errorf("ceil: got %d, want 14", got)
	}
	// An exact fit needs no extra pod: L = 0.7·5 − 0.4 = 3.1 → (3.1+0.4)/0.7 = 5.
	if got, _, _ := Algorithm2(3.1/2, 2, p); got != 5 {
		t.Errorf("ceil exact: got %d, want 5", got)
	}
}

func TestDebiWindowNeverBelowObserved(t *testing.T) {
	a, err := New("DEBI", DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	// The forecast says 0.2 (→ 3 replicas from 10), but the last 5 minutes averaged 0.9
	// (→ 13): the window wins.
	d := a.Recommend(Input{Current: 10, Ready: 10, W: 0.2, WindowW: 0.9})
	if d.Replicas != 13 || d.Reason != ReasonWindow {
		t.Fatalf("got %+v, want 13 replicas by the window", d)
	}
	d = a.Recommend(Input{Current: 10, Ready: 10, W: 0.2, WindowW: math.NaN()})
	if d.Replicas != 3 {
		t.Fatalf("without window data got %d, want 3", d.Replicas)
	}
}

func TestEffectiveLoad(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name       string
		w1, w2, w3 float64
		want       float64
	}{
		{"forecast below high-water", 0.4, 0.6, 0.8, 0.6},
		{"forecast above high-water is capped", 0.4, 0.9, 0.7, 0.7},
		{"observed above both wins", 0.95, 0.6, 0.8, 0.95},
		{"no forecast: high-water vs observed", 0.4, nan, 0.7, 0.7},
		{"no high-water: forecast vs observed", 0.4, 0.5, nan, 0.5},
		{"neither: observed", 0.4, nan, nan, 0.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EffectiveLoad(tc.w1, tc.w2, tc.w3); got != tc.want {
				t.Errorf("EffectiveLoad = %v, want %v", got, tc.want)
			}
		})
	}
	if !math.IsNaN(EffectiveLoad(nan, 0.5, 0.6)) {
		t.Error("no observation must give NaN")
	}
}
