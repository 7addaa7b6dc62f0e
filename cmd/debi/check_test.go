package main

import (
	"strings"
	"testing"
)

// TestCheckConfigEveryErrorOfASection: `debi check config` prints every error of a section, not
// the first of each: the fixture has two in global, two in exporter, three in one policy, two
// duplicate names, two second acting policies and four in the webhook section.
func TestCheckConfigEveryErrorOfASection(t *testing.T) {
	const file = "../../config/testdata/check-every-error.yml"
	code, out, stderr := runCmd("check", "config", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"FAILED: " + file + ": 16 error(s)",
		"global.query_timeout (line 5): must be positive, got -1s",
		"global.lookback_delta (line 6): must be at least 1s, got 100ms",
		"exporter.mae_window (line 8): must be positive, got -1",
		"exporter.concurrency (line 9): must be positive, got -2",
		"policies[0].history_step (line 14): must be a positive multiple of global.interval (15s), got 7s",
		"policies[0].lead_time (line 15): must not be negative",
		"policies[0].scaling.target (line 17): target must be in (0, 1], got 2",
		"policies[1].retrain (line 21): must not be negative, got -5",
		`policies[2].name (line 22): "web" is already used by policies[0]`,
		`policies[4].name (line 28): "cart" is already used by policies[3]`,
		"policies[5].target (line 32): shop/Deployment/cart is already scaled by policies[3] (mode act)",
		"policies[6].target (line 35): shop/Deployment/api is already scaled by policies[1] (mode act)",
		"webhook.max_body_bytes (line 40): must be at least 1024, got 10",
		"webhook.decision_timeout (line 41): must be positive, got -1s",
		`webhook.policies[0].name (line 43): no policy named "nosuch" in policies[]`,
		`webhook.policies[0].mode (line 43): must be one of act, hpa-floor, shadow, got "maybe"`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("output lacks %q:\n%s%s", want, out, stderr)
		}
	}
}
