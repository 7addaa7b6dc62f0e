package forecast

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestFallback: the fallback forecasts until the primary has its history and is fitted, is
// refitted each time the history doubles meanwhile, and is not used after; a fallback that needs
// as much history as the primary is refused.
func TestFallback(t *testing.T) {
	ctx := context.Background()
	hw, err := New("holtwinters", Config{Season: 24})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := New("arima", Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewFallback(hw, ar)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "holtwinters" || m.MinHistory() != ar.MinHistory() || m.Needs() != 48 {
		t.Fatalf("name %q, min history %d, needs %d; want holtwinters, %d, 48", m.Name(), m.MinHistory(), m.Needs(), ar.MinHistory())
	}
	series := make([]float64, 60)
	for i := range series {
		series[i] = 10 + 3*math.Sin(2*math.Pi*float64(i)/24) + 0.1*float64(i%5)
	}
	// The fit schedule while the primary waits: at MinHistory, then at each doubling.
	var fits []int
	for n := 1; n <= len(series); n++ {
		if !m.WantsFit(n) {
			continue
		}
		fits = append(fits, n)
		if _, err := m.Fit(ctx, series[:n]); err != nil {
			t.Fatalf("fit at %d: %v", n, err)
		}
	}
	if want := []int{24, 48}; len(fits) != len(want) || fits[0] != want[0] || fits[1] != want[1] {
		t.Fatalf("fits at %v, want %v (the fallback at 24, the primary at 48, none after)", fits, want)
	}
	if m.Active() != "holtwinters" {
		t.Fatalf("active %q after the primary's fit", m.Active())
	}
	got, want := make([]float64, 3), make([]float64, 3)
	if err := m.Predict(series, got); err != nil {
		t.Fatal(err)
	}
	if err := hw.Predict(series, want); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("fitted primary: forecast %v, want the primary's %v", got, want)
		}
	}

	// Before the primary's history: the fallback's forecast.
	m2, _ := NewFallback(mustNew(t, "holtwinters", Config{Season: 24}), mustNew(t, "arima", Config{}))
	if _, err := m2.Fit(ctx, series[:30]); err != nil {
		t.Fatal(err)
	}
	if m2.Active() != "arima" || m2.WantsFit(40) || !m2.WantsFit(60) {
		t.Fatalf("after a fallback fit at 30: active %q, wants a fit at 40 %v, at 60 %v; want arima, false, true", m2.Active(), m2.WantsFit(40), m2.WantsFit(60))
	}
	ref := m2.fallback.Clone()
	if err := m2.Predict(series[:30], got); err != nil {
		t.Fatal(err)
	}
	if err := ref.Predict(series[:30], want); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] || math.IsNaN(got[i]) {
			t.Fatalf("waiting: forecast %v, want the fallback's %v", got, want)
		}
	}
	// A clone is independent: fitting it does not fit the original.
	c := m2.Clone().(*Fallback)
	if _, err := c.Fit(ctx, series); err != nil {
		t.Fatal(err)
	}
	if c.Active() != "holtwinters" || m2.Active() != "arima" {
		t.Fatalf("clone %q, original %q after fitting the clone", c.Active(), m2.Active())
	}

	if _, err := NewFallback(mustNew(t, "arima", Config{}), mustNew(t, "holtwinters", Config{Season: 24})); err == nil ||
		!strings.Contains(err.Error(), "never forecast first") {
		t.Fatalf("a fallback that needs more history than the primary: %v", err)
	}
	if _, err := NewFallback(nil, ar); err == nil {
		t.Fatal("a missing primary was accepted")
	}
}

func mustNew(t *testing.T, name string, cfg Config) Forecaster {
	t.Helper()
	f, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
