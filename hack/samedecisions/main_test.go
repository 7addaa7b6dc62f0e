package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDiffer: timing fields and allowed new fields are not differences; a changed decision, a
// field only one side has and a run more or fewer are.
func TestDiffer(t *testing.T) {
	parse := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := `{"traces":[{"runs":[{"policy":"hpa","cost":10,"decide_seconds":1}]}]}`
	for _, tc := range []struct {
		name, after string
		added       []string
		want        []string
	}{
		{"timing only", `{"traces":[{"runs":[{"policy":"hpa","cost":10,"decide_seconds":2}]}]}`, nil, nil},
		{"an allowed new column", `{"traces":[{"runs":[{"policy":"hpa","cost":10,"zero_share":0}]}]}`, []string{"zero_share"}, nil},
		{"a new column not allowed", `{"traces":[{"runs":[{"policy":"hpa","cost":10,"zero_share":0}]}]}`, nil, []string{".zero_share: only in the second"}},
		{"a changed cost", `{"traces":[{"runs":[{"policy":"hpa","cost":11}]}]}`, nil, []string{"runs[0].cost: 10, then 11"}},
		{"a run more", `{"traces":[{"runs":[{"policy":"hpa","cost":10},{"policy":"apa","cost":9}]}]}`, nil, []string{"runs: 1 elements, then 2 elements"}},
	} {
		d := differ{added: tc.added}
		d.walk(parse(before), parse(tc.after), "")
		if len(d.out) != len(tc.want) {
			t.Errorf("%s: %q, want %d differences", tc.name, d.out, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(d.out[i], w) {
				t.Errorf("%s: %q, want it to say %q", tc.name, d.out[i], w)
			}
		}
	}
}
