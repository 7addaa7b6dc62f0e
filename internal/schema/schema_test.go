package schema

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

type sample struct {
	F  float64
	D  time.Duration
	I  int
	I3 int32
	I6 int64
	S  string
}

var sampleTable = []Param[sample]{
	{Key: "f", Float: func(s *sample) *float64 { return &s.F }, OK: func(v float64) bool { return Finite(v) && v > 0 }, Want: "must be above 0"},
	{Key: "d", Dur: func(s *sample) *time.Duration { return &s.D }},
	{Key: "i", Int: func(s *sample) *int { return &s.I }, OK: func(v float64) bool { return v >= 1 }, Want: "must be at least 1",
		Cross: func(s sample, valid map[string]bool) error {
			if valid["f"] && float64(s.I) < s.F {
				return errors.New("i must not be below f")
			}
			return nil
		}},
	{Key: "i3", Int32: func(s *sample) *int32 { return &s.I3 }},
	{Key: "i6", Int64: func(s *sample) *int64 { return &s.I6 }},
	{Key: "s", Str: func(s *sample) *string { return &s.S }, Enum: []string{"a", "b"}},
}

// TestErrors: the rows' own checks in the table's order, an enum's values quoted, a Cross check
// run only when the row's own check passed and told which rows before it were valid.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		s    sample
		want string
	}{
		{sample{F: 1, I: 2, S: "a"}, "[]"},
		{sample{F: 0, I: 0, S: "c"}, `[f must be above 0, got 0 i must be at least 1, got 0 s must be "a" or "b", got "c"]`},
		{sample{F: 3, I: 2, S: "b"}, "[i must not be below f]"}, // f valid: the cross check runs
		{sample{F: -3, I: 2, S: "b"}, "[f must be above 0, got -3]"},
	} {
		if got := fmt.Sprint(Errors(sampleTable, tc.s, nil)); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.s, got, tc.want)
		}
	}
	keepI := func(d Param[sample]) bool { return d.Key == "i" }
	if got := fmt.Sprint(Errors(sampleTable, sample{F: 3, I: 2}, keepI)); got != "[]" {
		t.Errorf("f not kept, so not valid for i's cross check: %s", got)
	}
}

// TestAccessors: SetValue and Value reach the row's field, whatever its type.
func TestAccessors(t *testing.T) {
	for _, d := range sampleTable {
		var s sample
		if d.Str != nil {
			*d.Str(&s) = "b"
			if d.String(&s) != `"b"` {
				t.Errorf("%s: %s", d.Key, d.String(&s))
			}
			continue
		}
		d.SetValue(&s, 7)
		if d.Value(&s) != 7 || d.String(&s) == "0" || s == (sample{}) {
			t.Errorf("%s: value %v, string %s, %+v", d.Key, d.Value(&s), d.String(&s), s)
		}
	}
	if d, ok := ByKey(sampleTable, "i3"); !ok || d.Key != "i3" {
		t.Error("ByKey")
	}
	if (Param[sample]{Key: "scale_up_percent", ES: true}).ESKey() != "scaleuppercent" {
		t.Error("ESKey")
	}
}
