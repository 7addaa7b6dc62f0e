package forecast

import (
	"context"
	"math"
	"testing"
)

// stubModel forecasts the last value plus slope per step ahead.
type stubModel struct {
	name  string
	slope float64
	min   int
}

func (m *stubModel) Name() string      { return m.name }
func (m *stubModel) MinHistory() int   { return m.min }
func (m *stubModel) Clone() Forecaster { c := *m; return &c }
func (m *stubModel) Fit(context.Context, []float64) (FitReport, error) {
	return FitReport{Model: m.name, StopReason: StopClosedForm}, nil
}
func (m *stubModel) Predict(h []float64, dst []float64) error {
	for i := range dst {
		dst[i] = h[len(h)-1] + m.slope*float64(i+1)
	}
	return nil
}

// TestAutoChoosesByRecentError: on a line rising one per point, the model that extends it is
// exact at every horizon (its error stays 0: each forecast is scored against the point it
// forecast, not one beside it) and is chosen once scored enough, over the last value (first in
// the order, error 1–3 by horizon); the choice follows a history passed as a sliding window, as
// the policy keeps it, and a history that does not continue the last is no panic.
func TestAutoChoosesByRecentError(t *testing.T) {
	last, trend := &stubModel{name: "last", min: 1}, &stubModel{name: "trend", slope: 1, min: 5}
	a, err := NewAuto(Config{Season: 50}, last, trend)
	if err != nil {
		t.Fatal(err)
	}
	if a.MinHistory() != 1 || a.Needs() != 5 {
		t.Fatalf("MinHistory %d, Needs %d: want 1 and 5", a.MinHistory(), a.Needs())
	}
	var hist []float64
	dst := make([]float64, 3)
	for n := 1; n <= 200; n++ {
		hist = append(hist, float64(n))
		window := hist[max(0, len(hist)-20):]
		if a.WantsFit(len(window)) {
			if _, err := a.Fit(context.Background(), window); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Predict(window, dst); err != nil {
			t.Fatal(err)
		}
		switch {
		case n < 5:
			if a.Active() != "last" {
				t.Fatalf("point %d: %s forecast before trend had its history", n, a.Active())
			}
		case n > 5+autoMinScored+3:
			if a.Active() != "trend" {
				t.Fatalf("point %d: chose %s (errors %v)", n, a.Active(), a.err)
			}
			if dst[2] != float64(n+3) {
				t.Fatalf("point %d: forecast %v, want trend's", n, dst)
			}
		}
	}
	if a.err[1] != 0 || !(math.Abs(a.err[0]-2) < 0.01) {
		t.Errorf("errors %v: want trend's 0 and last's 2 (the mean of 1, 2, 3)", a.err)
	}
	c := a.Clone().(*Auto)
	if err := a.Predict([]float64{7, 7, 7, 7, 7, 7}, dst); err != nil { // does not continue
		t.Fatal(err)
	}
	if c.pos == a.pos || c.tail[len(c.tail)-1] == 7 {
		t.Error("the clone shares the original's state")
	}
	if _, err := NewAuto(Config{}); err == nil {
		t.Error("no model: no error")
	}
}

// TestAutoRegistered: "auto" builds Holt-Winters, ARIMA and the last value; it forecasts from
// the last value's history on, keeps Holt-Winters' two seasons, and asks for a fit when
// Holt-Winters has them.
func TestAutoRegistered(t *testing.T) {
	f, err := New("auto", Config{Season: 24})
	if err != nil {
		t.Fatal(err)
	}
	a := f.(*Auto)
	if a.MinHistory() != 1 || a.Needs() != 48 {
		t.Fatalf("MinHistory %d, Needs %d: want 1 and 48", a.MinHistory(), a.Needs())
	}
	h := make([]float64, 48)
	for i := range h {
		h[i] = 10 + math.Sin(2*math.Pi*float64(i)/24)
	}
	if _, err := a.Fit(context.Background(), h[:30]); err != nil {
		t.Fatal(err)
	}
	if !a.WantsFit(48) || a.WantsFit(30) {
		t.Errorf("WantsFit(48) %v, WantsFit(30) %v: want a fit when Holt-Winters has two seasons only", a.WantsFit(48), a.WantsFit(30))
	}
	dst := make([]float64, 2)
	if err := a.Predict(h[:30], dst); err != nil || math.IsNaN(dst[0]) {
		t.Fatalf("forecast %v, err %v", dst, err)
	}
}

// TestAutoFlatHistory: on a flat stretch every shift of the history matches the last call's, and
// one new point a call is still counted (a stretch at zero, an idle workload, must not stop the
// scoring nor misalign it): the position advances once a call through the cap, and a model that
// forecasts the flat value has no error; the same history passed twice counts none.
func TestAutoFlatHistory(t *testing.T) {
	a, err := NewAuto(Config{Season: 50}, &stubModel{name: "last", min: 1}, &stubModel{name: "trend", slope: 1, min: 1})
	if err != nil {
		t.Fatal(err)
	}
	window := make([]float64, 20)
	dst := make([]float64, 3)
	if _, err := a.Fit(context.Background(), window); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := a.Predict(window, dst); err != nil {
			t.Fatal(err)
		}
	}
	if a.pos != 99 || a.err[0] != 0 || a.scored[0] == 0 || a.Active() != "last" {
		t.Errorf("position %d (want 99), errors %v scored %v, active %s: want the last value, exact", a.pos, a.err, a.scored, a.Active())
	}
	moved := append(window[1:], 1)
	if err := a.Predict(moved, dst); err != nil {
		t.Fatal(err)
	}
	if err := a.Predict(moved, dst); err != nil {
		t.Fatal(err)
	}
	if a.pos != 100 {
		t.Errorf("position %d after one new point passed twice, want 100", a.pos)
	}
}
