package scaling

import (
	"testing"
	"time"
)

// fixedRule answers n with reason r whatever the input.
type fixedRule struct {
	n int32
	r string
}

func (fixedRule) Name() string                  { return "fixed" }
func (fixedRule) Reads() Inputs                 { return InputLoad }
func (f fixedRule) Recommend(in Input) Decision { return Decision{Replicas: f.n, Reason: f.r} }

// TestDecide is the composition's rule at the size the bounds were computed at and at others.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name       string
		rule       int32
		cur        int32
		b          Bounds
		want       int32
		wantReason string
	}{
		{"within the bounds: the rule", 6, 4, Bounds{Lo: 4, Hi: 8, At: 4}, 6, ReasonScaleUp},
		{"above the ceiling: rate-limited", 20, 4, Bounds{Lo: 4, Hi: 8, At: 4}, 8, ReasonRateLimited},
		{"below the floor: stabilized", 2, 4, Bounds{Lo: 4, Hi: 8, At: 4}, 4, ReasonStabilized},
		// The operator's case: bounds [4, 8] at 4, someone scaled to 12, the load asks 20.
		{"outside resize up, load asks more: hold, never 12 → 8", 20, 12, Bounds{Lo: 4, Hi: 8, At: 4}, 12, ReasonSizeChanged},
		{"outside resize up, load asks less: hold", 5, 12, Bounds{Lo: 4, Hi: 8, At: 4}, 12, ReasonSizeChanged},
		{"outside resize down, load asks more: up within the old ceiling", 20, 3, Bounds{Lo: 8, Hi: 16, At: 10}, 16, ReasonSizeChanged},
		{"outside resize down, load asks a little more: the rule", 5, 3, Bounds{Lo: 8, Hi: 16, At: 10}, 5, ReasonScaleUp},
		{"outside resize down, load asks less: hold", 2, 3, Bounds{Lo: 1, Hi: 16, At: 10}, 3, ReasonSizeChanged},
		{"stateless maximum at another size: free scale-up", 30, 12, Bounds{Lo: 1, Hi: 50, At: 4}, 30, ReasonScaleUp},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ReasonTolerance
			switch {
			case c.rule > c.cur:
				r = ReasonScaleUp
			case c.rule < c.cur:
				r = ReasonScaleDown
			}
			d := Decide(fixedRule{c.rule, r}, Input{Time: time.Unix(0, 0), Current: c.cur, Ready: c.cur, W: 1}, c.b)
			if d.Replicas != c.want || d.Reason != c.wantReason {
				t.Errorf("Decide(rule %d, current %d, %+v) = %d (%s), want %d (%s)", c.rule, c.cur, c.b, d.Replicas, d.Reason, c.want, c.wantReason)
			}
			if c.rule > c.cur && d.Replicas < c.cur {
				t.Errorf("scaled down to %d from %d while the load asks %d", d.Replicas, c.cur, c.rule)
			}
		})
	}
	for _, b := range []Bounds{{Lo: 5, Hi: 4, At: 4}, {Lo: -1, Hi: 4, At: 4}, {Lo: 1, Hi: 4, At: -2}} {
		if b.Validate() == nil {
			t.Errorf("%+v validated", b)
		}
	}
}

// TestReads: every registered algorithm declares what it reads, and the declaration follows its
// parameters (debi's window term only while the window is on).
func TestReads(t *testing.T) {
	p := DefaultParams()
	want := map[string]Inputs{"hpa": InputLoad | InputReady, "apa": InputLoad, "debi": InputLoad | InputWindow,
		"budget": InputLoad | InputNow | InputDown}
	for _, name := range Names() {
		a, err := New(name, p)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("algorithm %s: no expectation (a new algorithm: add it here)", name)
			continue
		}
		if got := a.Reads(); got != w || RuleOf(a).Reads() != w {
			t.Errorf("%s reads %v (rule %v), want %v", name, got, RuleOf(a).Reads(), w)
		}
	}
	p.Window = 0
	if a, _ := New("debi", p); a.Reads() != InputLoad {
		t.Errorf("debi without window reads %v", a.Reads())
	}
}
