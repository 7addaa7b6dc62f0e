package forecast

import (
	"strings"
	"testing"
)

// TestRegistryModels checks that the models of this package register under their names and that
// lookups are case-insensitive.
func TestRegistryModels(t *testing.T) {
	for _, name := range []string{"naive", "NAIVE", " Seasonal-Naive ", "HoltWinters"} {
		t.Run(name, func(t *testing.T) {
			m, err := New(name, Config{Season: 4})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.ToLower(strings.TrimSpace(name)); m.Name() != want {
				t.Errorf("Name() = %q, want %q", m.Name(), want)
			}
			if !Known(name) {
				t.Errorf("Known(%q) = false", name)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		_, err := New("nope", Config{})
		if err == nil {
			t.Fatal("want error")
		}
		for _, want := range []string{`"nope"`, "naive", "seasonal-naive", "holtwinters"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %s", err, want)
			}
		}
	})
}

// TestNaiveHoltWintersPredictAllocs checks that Predict allocates nothing in steady state: it
// runs at every control step of every policy.
func TestNaiveHoltWintersPredictAllocs(t *testing.T) {
	history := hwSeries(760, 288, 50, 0.01, 10, 1, 6)
	dst := make([]float64, 12)
	for _, name := range []string{"naive", "seasonal-naive", "holtwinters"} {
		t.Run(name, func(t *testing.T) {
			m := hwMustNew(t, name, Config{})
			if err := m.Predict(history, dst); err != nil {
				t.Fatal(err)
			}
			if allocs := testing.AllocsPerRun(100, func() { _ = m.Predict(history, dst) }); allocs != 0 {
				t.Errorf("Predict allocates %v times per call, want 0", allocs)
			}
		})
	}
}
