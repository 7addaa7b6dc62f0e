package forecast

import (
	"strings"
	"testing"
)

// joinedErrors returns the errors Validate joined, failing the test when err is not a join.
func joinedErrors(t *testing.T, err error) []error {
	t.Helper()
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("%v (%T): want an errors.Join of one error per field", err, err)
	}
	return j.Unwrap()
}

// TestCalibratorConfigValidateEveryField checks that CalibratorConfig.Validate reports one error
// per bad field in the order of the checks: the first is the one Validate returned when it
// stopped at the first bad field, and each is the error of its field alone.
func TestCalibratorConfigValidateEveryField(t *testing.T) {
	muts := []struct {
		field string
		mut   func(*CalibratorConfig)
	}{
		{"overload_budget", func(c *CalibratorConfig) { c.Budget = 0.7 }},
		{"quantile_method", func(c *CalibratorConfig) { c.Method = "magic" }},
		{"scoring", func(c *CalibratorConfig) { c.Scoring = "often" }},
		{"cold_margin", func(c *CalibratorConfig) { c.ColdMargin = 0.5 }},
	}
	c := DefaultCalibratorConfig()
	for _, m := range muts {
		m.mut(&c)
	}
	err := c.Validate()
	errs := joinedErrors(t, err)
	if len(errs) != len(muts) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(muts), err)
	}
	if got, want := errs[0].Error(), "overload_budget must be in (0, 0.5), got 0.7"; got != want {
		t.Errorf("first error %q, want %q", got, want)
	}
	for i, m := range muts {
		if !strings.HasPrefix(errs[i].Error(), m.field+" ") {
			t.Errorf("error %d = %q, want it to start with the field %s", i, errs[i], m.field)
		}
		alone := DefaultCalibratorConfig()
		m.mut(&alone)
		if err := alone.Validate(); err == nil || err.Error() != errs[i].Error() {
			t.Errorf("%s alone: %v, want %q", m.field, err, errs[i])
		}
	}
	if _, err := NewCalibrator(c); err == nil || !strings.Contains(err.Error(), "cold_margin") {
		t.Errorf("NewCalibrator: %v, want every error", err)
	}

	// min_errors is checked against error_window only when error_window is valid.
	c = DefaultCalibratorConfig()
	c.Window, c.MinErrors = 5, 30
	if err := c.Validate(); err == nil || err.Error() != "error_window must be in [10, 32768], got 5" {
		t.Errorf("bad window, min_errors above it: %v, want the error_window error alone", err)
	}
	c.MinErrors = 1
	errs = joinedErrors(t, c.Validate())
	if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "error_window ") || !strings.HasPrefix(errs[1].Error(), "min_errors ") {
		t.Errorf("bad window, min_errors 1: %q, want error_window then min_errors", errs)
	}
}

// TestPOTConfigValidateEveryField checks that POTConfig.Validate reports one error per bad field,
// tau first as before, and checks q against tau only when both are valid.
func TestPOTConfigValidateEveryField(t *testing.T) {
	c := POTConfig{Tau: 1.5, Q: 0.9, MinExcesses: 0, Method: "mle"}
	err := c.Validate()
	errs := joinedErrors(t, err)
	want := []string{"tau (1.5)", "min_excesses (0)", `method "mle"`}
	if len(errs) != len(want) {
		t.Fatalf("got %q, want errors starting %q", errs, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want it to start with %q", i, errs[i], w)
		}
	}
	if got, want := errs[0].Error(), "tau (1.5) must be in (0, 1): it is the fraction of points above the threshold"; got != want {
		t.Errorf("first error %q, want %q", got, want)
	}
	if _, err := HighWater([]float64{1, 2, 3}, c); err == nil || !strings.HasPrefix(err.Error(), "high-water config: tau (1.5)") {
		t.Errorf("HighWater: %v", err)
	}

	// With tau valid, q ≥ tau is reported, before the independent errors after it.
	c = POTConfig{Tau: 0.3, Q: 0.4, MinExcesses: 10, Method: "mle"}
	errs = joinedErrors(t, c.Validate())
	if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "q (0.4) must be below tau (0.3)") || !strings.HasPrefix(errs[1].Error(), `method "mle"`) {
		t.Errorf("q above tau and a bad method: %q", errs)
	}
	// One bad field: the error as it is, not a join of one.
	c = DefaultPOTConfig()
	c.Q = 0
	if err := c.Validate(); err == nil || err.Error() != "q (0) must be in (0, 1): it is the probability that load exceeds the high-water level" {
		t.Errorf("q 0: %v", err)
	} else if _, joined := err.(interface{ Unwrap() []error }); joined {
		t.Errorf("q 0: %T, want the error alone", err)
	}
}
