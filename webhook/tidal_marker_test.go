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
		if got := alreadyApplied(v, 8, ps); got != want {
			t.Errorf("alreadyApplied(%q, 8) = %v, want %v", v, got, want)
		}
	}
	if v := appliedValue(3, 8, ps); v != "3/8/web/shop/Deployment/web" || !alreadyApplied(v, 8, ps) {
		t.Errorf("appliedValue = %q", v)
	}
}
