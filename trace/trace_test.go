package trace

import (
	"strings"
	"testing"
)

func TestEmbedded(t *testing.T) {
	ts, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 {
		t.Fatalf("want 3 embedded traces, got %d", len(ts))
	}
	classes := map[string]bool{}
	for _, tr := range ts {
		if tr.StepMinutes != 5 || len(tr.Values) < 8000 {
			t.Errorf("%s: step %d, %d values", tr.Name, tr.StepMinutes, len(tr.Values))
		}
		classes[tr.Class] = true
	}
	if !classes["periodic"] || !classes["smooth"] || !classes["bursty"] {
		t.Errorf("embedded traces should cover every class, got %v", classes)
	}
	if !strings.Contains(Attribution(), "CC-BY-4.0") {
		t.Error("attribution text missing")
	}
}

func TestParseErrorsNameLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not a number", "minute,value\n0,1\n1,abc\n", "f.csv:3: value \"abc\" is not a number"},
		{"NaN", "0,1\n1,NaN\n", "f.csv:2: value is NaN"},
		{"Inf", "0,1\n1,+Inf\n", "f.csv:2: value is +Inf"},
		{"negative", "0,1\n1,-3\n", "f.csv:2: value -3 is negative"},
		{"three fields", "0,1\n1,2,3\n", "f.csv:2: want 2 comma-separated fields"},
		{"gap", "0,1\n5,1\n10,1\n20,1\n", "f.csv:4: minute 20 breaks the step of 5"},
		{"backwards", "0,1\n5,1\n5,1\n", "f.csv:3: minute 5 does not advance"},
		{"empty", "minute,value\n", "f.csv: no data rows"},
		{"bad minute", "0,1\nx1,2\n", "f.csv:2: minute \"x1\" is not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), "f.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	tr, err := Parse(strings.NewReader("minute,value\n0,1.5\n5,2\n10,0\n"), "/x/my_trace.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "my_trace" || tr.StepMinutes != 5 || len(tr.Values) != 3 || tr.Values[0] != 1.5 {
		t.Fatalf("got %+v", tr)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("minute,value\n0,1\n1,2\n")
	f.Add("0,NaN\n")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := Parse(strings.NewReader(s), "fuzz.csv")
		if err == nil && len(tr.Values) == 0 {
			t.Fatal("no error but no values")
		}
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz.csv") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
