package config

import (
	"strings"
	"testing"
)

// TestLeadTimeAuto: lead_time: auto, in any style, is a lead time left unset (measured), lines
// and columns of every other error stay where they were, and a duration is kept.
func TestLeadTimeAuto(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"block", "policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    lead_time: auto\n"},
		{"flow", "policies:\n  - {name: web, target: {namespace: shop, name: web}, lead_time: auto}\n"},
		{"quoted", "policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    lead_time: \"AUTO\"\n"},
	} {
		c, err := Load([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if p := c.Policies[0]; !p.LeadTimeMeasured || p.LeadTime != DefaultLeadTime {
			t.Errorf("%s: lead_time %v, measured %v; want measured, %v until then", tc.name, p.LeadTime, p.LeadTimeMeasured, DefaultLeadTime)
		}
		if string(c.src) != tc.yaml {
			t.Errorf("%s: the configuration kept is not the file", tc.name)
		}
	}
	c, err := Load([]byte("policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    lead_time: 7m\n"))
	if err != nil || c.Policies[0].LeadTimeMeasured || c.Policies[0].LeadTime.String() != "7m0s" {
		t.Errorf("lead_time: 7m → %v, measured %v (err %v)", c.Policies[0].LeadTime, c.Policies[0].LeadTimeMeasured, err)
	}
	// The line of an error after it is still its own.
	_, err = Load([]byte("policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    lead_time: auto\n    history_stepp: 1m\n"))
	if err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("unknown field after lead_time: auto: %v, want it at line 5", err)
	}
	if _, err := Load([]byte("policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    lead_time: soon\n")); err == nil || !strings.Contains(err.Error(), "lead_time") {
		t.Errorf("lead_time: soon: %v, want an error naming lead_time", err)
	}
}
