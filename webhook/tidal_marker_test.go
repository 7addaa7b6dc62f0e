package webhook

import (
	"testing"

	"github.com/debi-scaler/debi/config"
)

// TestAlreadyApplied: the debi.io/applied record matches a count and a binding, not a
// generation.
func TestAlreadyApplied(t *testing.T) {
	ps := &policyState{pol: &config.Policy{Name: "web", Target: config.Target{Namespace: "shop", Kind: "Deployment", Name: "web"}}}
	for v, want := range map[string]bool{
		"1/8/web/shop/Deployment/web":  true,
		"7/8/web/shop/Deployment/web":  true, // the generation is not compared
		"1/9/web/shop/Deployment/web":  false,
		"1/8/api/shop/Deployment/web":  false,
		"1/8/web/shop/StatefulSet/web": false,
		"1/8/web/other/Deployment/web": false,
		"x/8/web/shop/Deployment/web":  false,
		"8/web":                        false,
		"":                             false,
	} {
		if got := alreadyApplied(v, 8, ps, ""); got != want {
			t.Errorf("alreadyApplied(%q, 8) = %v, want %v", v, got, want)
		}
	}
	if v := appliedValue(3, 8, ps, ""); v != "3/8/web/shop/Deployment/web" || !alreadyApplied(v, 8, ps, "") {
		t.Errorf("appliedValue = %q", v)
	}
}

// TestAlreadyAppliedFiring: a rule that fires again (a new status.lastScheduleTime) at the same
// count is a change; the same firing replayed is not; a record without a firing time (written
// before it was recorded) matches any.
func TestAlreadyAppliedFiring(t *testing.T) {
	ps := &policyState{pol: &config.Policy{Name: "web", Target: config.Target{Namespace: "shop", Kind: "Deployment", Name: "web"}}}
	const mon, tue = "2026-11-30T08:00:00Z", "2026-12-01T08:00:00Z"
	v := appliedValue(1, 10, ps, mon)
	if v != "1/10/web/shop/Deployment/web@"+mon {
		t.Fatalf("appliedValue = %q", v)
	}
	for _, tc := range []struct {
		v, fired string
		want     bool
	}{
		{v, mon, true},
		{v, tue, false},
		{v, "", false},
		{"1/10/web/shop/Deployment/web", tue, true},
		{"1/10/web/shop/Deployment/web@" + mon, mon, true},
		{"1/10/api/shop/Deployment/web@" + mon, mon, false},
	} {
		if got := alreadyApplied(tc.v, 10, ps, tc.fired); got != tc.want {
			t.Errorf("alreadyApplied(%q, 10, fired %q) = %v, want %v", tc.v, tc.fired, got, tc.want)
		}
	}
}
