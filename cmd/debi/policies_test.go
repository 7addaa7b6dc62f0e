package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
)

// TestPolicyForms holds policyForms to policy.Parse: each form parses with every model, the
// forms policy.Parse's own error lists are all there, and the help of --policies (debi backtest
// --help, debi --help-long) names each, and the oracle.
func TestPolicyForms(t *testing.T) {
	for _, f := range policyForms {
		for _, m := range forecast.Names() {
			name := strings.ReplaceAll(f, "<model>", m)
			if _, err := policy.Parse(name, ""); err != nil {
				t.Errorf("form %s: policy.Parse(%q): %v", f, name, err)
			}
			if !strings.Contains(f, "<model>") {
				break
			}
		}
	}
	_, err := policy.Parse("no-such-policy", "")
	if err == nil {
		t.Fatal("policy.Parse accepts no-such-policy")
	}
	m := regexp.MustCompile(`want (.+) with a model in`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("policy.Parse's error no longer lists the forms: %v", err)
	}
	for _, f := range strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ", "), func(r rune) bool { return r == ',' }) {
		if f = strings.TrimSpace(f); !slices.Contains(policyForms, f) {
			t.Errorf("policy.Parse accepts %s, which policyForms (the help of --policies) leaves out", f)
		}
	}

	for _, args := range [][]string{{"backtest", "--help"}, {"--help-long"}} {
		code, out, stderr := runCmd(args...)
		if code != 0 {
			t.Fatalf("debi %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		i := strings.Index(out, "--policies=")
		if i < 0 {
			t.Fatalf("debi %s shows no --policies", strings.Join(args, " "))
		}
		help := out[i+len("--policies="):]
		if j := regexp.MustCompile(`\n\s+-`).FindStringIndex(help); j != nil { // the next flag
			help = help[:j[0]]
		}
		// The text after the default value ("hpa,…,budget"), which would name budget itself.
		if _, after, ok := strings.Cut(help[1:], `"`); help[0] == '"' && ok {
			help = after
		}
		words := strings.FieldsFunc(help, func(r rune) bool { return r == ',' || r == ';' || r == ':' || r == ' ' || r == '\n' })
		for _, f := range append(slices.Clone(policyForms), backtest.OraclePolicy) {
			if !slices.Contains(words, f) {
				t.Errorf("debi %s: the help of --policies does not name %s:\n%s", strings.Join(args, " "), f, help)
			}
		}
	}
}
