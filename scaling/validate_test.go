package scaling

import (
	"errors"
	"strings"
	"testing"
	"time"
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

// TestParamsValidateEveryField checks that Params.Validate reports one error per bad field,
// those of Budget included, in the order of the checks: the first is the one Validate returned
// when it stopped at the first bad field, and each is the error of its field alone.
func TestParamsValidateEveryField(t *testing.T) {
	muts := []struct {
		field string
		mut   func(*Params)
	}{
		{"min_replicas", func(p *Params) { p.MinReplicas = -1 }},
		{"tolerance", func(p *Params) { p.Tolerance = 1.5 }},
		{"scale_down_percent", func(p *Params) { p.ScaleDownPercent = 150 }},
		{"budget.u_sla", func(p *Params) { p.Budget.SLAUtilization = 2 }},
		{"budget.hold", func(p *Params) { p.Budget.Hold = -time.Minute }},
	}
	p := DefaultParams()
	for _, m := range muts {
		m.mut(&p)
	}
	err := p.Validate()
	if err == nil {
		t.Fatal("Validate accepted params with five bad fields")
	}
	errs := joinedErrors(t, err)
	if len(errs) != len(muts) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(muts), err)
	}
	// The error Validate returned before it reported every field.
	if got, want := errs[0].Error(), "min_replicas must not be negative, got -1"; got != want {
		t.Errorf("first error %q, want %q", got, want)
	}
	for i, m := range muts {
		if !strings.HasPrefix(errs[i].Error(), m.field+" ") {
			t.Errorf("error %d = %q, want it to start with the field %s", i, errs[i], m.field)
		}
		alone := DefaultParams()
		m.mut(&alone)
		if err := alone.Validate(); err == nil || err.Error() != errs[i].Error() {
			t.Errorf("%s alone: %v, want %q", m.field, err, errs[i])
		}
	}
	if _, err := New("hpa", p); err == nil || !strings.Contains(err.Error(), "budget.hold") {
		t.Errorf("New: %v, want every error", err)
	}
}

// TestParamsValidateOneErrorAsIs checks that a single bad field gives its error as it is, not
// a join of one.
func TestParamsValidateOneErrorAsIs(t *testing.T) {
	p := DefaultParams()
	p.Rounding = "up"
	err := p.Validate()
	if _, joined := err.(interface{ Unwrap() []error }); joined || err == nil || !strings.HasPrefix(err.Error(), "rounding ") {
		t.Errorf("Validate = %v (%T), want the rounding error alone", err, err)
	}
	b := DefaultBudgetParams()
	b.MinSaving = 1
	if err := b.Validate(); err == nil || err.Error() != "budget.min_saving must be in [0, 1), got 1" {
		t.Errorf("BudgetParams.Validate = %v", err)
	}
}

// TestParamsValidateNoEcho checks that a check resting on a field already found bad is skipped:
// max_replicas against an invalid min_replicas, upper against an invalid lower.
func TestParamsValidateNoEcho(t *testing.T) {
	p := DefaultParams()
	p.MinReplicas, p.MaxReplicas = -1, -1
	p.Lower, p.Upper = -1, -2
	errs := joinedErrors(t, p.Validate())
	if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "min_replicas ") || !strings.HasPrefix(errs[1].Error(), "lower ") {
		t.Errorf("got %q, want the min_replicas and lower errors only", errs)
	}
}

// TestBudgetParamsValidateEveryField checks that BudgetParams.Validate reports one error per bad
// field, u_sla first as before.
func TestBudgetParamsValidateEveryField(t *testing.T) {
	b := BudgetParams{SLAUtilization: 0, Hold: -time.Second, MinSaving: -0.5, Rule: "cheap", Idle: "spend"}
	err := b.Validate()
	errs := joinedErrors(t, err)
	want := []string{"budget.u_sla must be in (0, 1], got 0", "budget.hold must not be negative, got -1s", "budget.min_saving must be in [0, 1), got -0.5", `budget.rule must be "quantile" or "priced", got "cheap"`, `budget.idle must be "earn" or "hold", got "spend"`}
	if len(errs) != len(want) {
		t.Fatalf("got %q, want %q", errs, want)
	}
	for i, w := range want {
		if errs[i].Error() != w {
			t.Errorf("error %d = %q, want %q", i, errs[i], w)
		}
	}
	if err.Error() != strings.Join(want, "\n") || !errors.Is(err, errs[1]) {
		t.Errorf("Validate = %q, want the errors newline-separated", err)
	}
}

// TestPrefixErrors: every error of a joined one gets the prefix, a single one too.
func TestPrefixErrors(t *testing.T) {
	p := DefaultParams()
	p.MinReplicas, p.Tolerance = -1, 1.5
	err := PrefixErrors("scaling: ", p.Validate())
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "scaling: min_replicas") || !strings.HasPrefix(lines[1], "scaling: tolerance") {
		t.Fatalf("prefixed %q", err)
	}
	if err := PrefixErrors("x.", errors.New("y")); err.Error() != "x.y" {
		t.Fatalf("single: %q", err)
	}
	if PrefixErrors("x", nil) != nil {
		t.Fatal("nil must stay nil")
	}
}
