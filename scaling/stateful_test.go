package scaling

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestStatefulSplit checks the contract of Stateful on random runs: before every decision, the
// stateful algorithm's answer equals its stateless rule's answer clamped into its bounds. The
// runs mix the algorithm's own resizes with resizes by someone else, loads from idle to triple
// the target, unready pods, and every HPA behaviour and budget setting that changes the state.
func TestStatefulSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type variant struct {
		name      string
		p         func(*Params)
		alg       string
		unapplied bool
	}
	variants := []variant{
		{"hpa/none", func(p *Params) { p.HPABehavior = BehaviorNone }, "hpa", false},
		{"hpa/default", func(p *Params) { p.HPABehavior = BehaviorDefault }, "hpa", false},
		{"hpa/default-slow-down", func(p *Params) {
			p.HPABehavior = BehaviorDefault
			p.ScaleDownPercent, p.ScaleDownPeriod = 20, time.Minute
			p.ScaleUpPods, p.ScaleUpPercent, p.ScaleUpPeriod = 2, 0, time.Minute
		}, "hpa", false},
		{"hpa/default-up-stabilised", func(p *Params) {
			p.HPABehavior = BehaviorDefault
			p.ScaleUpStabilization = time.Minute
		}, "hpa", false},
		{"budget", func(p *Params) {}, "budget", false},
		{"budget/min-saving", func(p *Params) { p.Budget.MinSaving, p.Budget.Hold = 0.2, 3*time.Minute }, "budget", false},
		{"hpa/default/unapplied", func(p *Params) { p.HPABehavior = BehaviorDefault }, "hpa", true},
		{"budget/unapplied", func(p *Params) {}, "budget", true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			checked := 0
			for run := range 200 {
				p := DefaultParams()
				p.MinReplicas = int32(1 + r.IntN(3))
				p.MaxReplicas = p.MinReplicas + int32(r.IntN(30))
				v.p(&p)
				a, err := New(v.alg, p)
				if err != nil {
					t.Fatal(err)
				}
				if v.unapplied {
					a.(Unapplied).SetUnapplied(true)
				}
				st, ok := a.(Stateful)
				if !ok {
					t.Fatalf("%s does not implement Stateful", v.alg)
				}
				rule := st.Rule()
				now := time.Unix(1_700_000_000, 0)
				cur := p.MinReplicas + int32(r.IntN(int(p.MaxReplicas-p.MinReplicas+1)))
				for step := range 120 {
					now = now.Add(time.Duration(5+r.IntN(40)) * time.Second)
					ready := cur
					if cur > 1 && r.IntN(5) == 0 {
						ready = cur - int32(r.IntN(int(cur)))
					}
					w := r.Float64() * 3 * p.Target
					in := Input{Time: now, Current: cur, Ready: ready, W: w, WNow: w * (0.5 + r.Float64()/2), WDown: w * (1 + r.Float64()/2)}
					lo, hi := st.Bounds(in.Time, in.Current)
					if lo > hi {
						t.Fatalf("run %d step %d: bounds [%d, %d] inverted", run, step, lo, hi)
					}
					want := Clamp(rule.Recommend(in).Replicas, lo, hi)
					if b := BoundsOf(a, p, in.Time, in.Current); b.Lo != lo || b.Hi != hi || b.At != in.Current {
						t.Fatalf("BoundsOf %+v, Bounds [%d, %d] at %d", b, lo, hi, in.Current)
					}
					if d := Decide(rule, in, Bounds{Lo: lo, Hi: hi, At: in.Current}); d.Replicas != want {
						t.Fatalf("Decide %d, want %d", d.Replicas, want)
					}
					got := a.Recommend(in)
					if got.Replicas != want {
						t.Fatalf("run %d step %d (%+v, params %+v): Recommend %d (%s), rule %d clamped into [%d, %d] = %d",
							run, step, in, p, got.Replicas, got.Reason, rule.Recommend(in).Replicas, lo, hi, want)
					}
					checked++
					switch r.IntN(6) {
					case 0: // someone else resizes
						cur = p.MinReplicas + int32(r.IntN(int(p.MaxReplicas-p.MinReplicas+1)))
					case 1: // the decision is not applied (yet)
					default:
						cur = got.Replicas
					}
				}
			}
			if checked < 20000 {
				t.Fatalf("checked %d decisions", checked)
			}
		})
	}
}

// TestStatefulBoundsDoNotChangeState: asking for the bounds leaves the next decision as it was.
func TestStatefulBoundsDoNotChangeState(t *testing.T) {
	p := DefaultParams()
	p.MinReplicas, p.MaxReplicas = 1, 20
	now := time.Unix(1_700_000_000, 0)
	for _, name := range []string{"hpa", "budget"} {
		a, _ := New(name, p)
		b, _ := New(name, p)
		for i := range 60 {
			now = now.Add(15 * time.Second)
			w := 0.2 + 0.6*float64(i%7)/7
			in := Input{Time: now, Current: 6, Ready: 6, W: w, WNow: w, WDown: w}
			a.(Stateful).Bounds(now, 6)
			a.(Stateful).Bounds(now.Add(time.Minute), 9)
			if x, y := a.Recommend(in), b.Recommend(in); x != y {
				t.Fatalf("%s step %d: %+v after Bounds, %+v without", name, i, x, y)
			}
		}
	}
}

// TestBudgetBoundsHold: during the quantile rule's hold the lower bound is the current size,
// after it the minimum; the priced rule's hold is in its W, so its bounds never hold.
func TestBudgetBoundsHold(t *testing.T) {
	p := DefaultParams()
	p.MinReplicas, p.MaxReplicas = 2, 20
	t0 := time.Unix(1_700_000_000, 0)
	pr := &Budget{p: p} // the default rule: priced
	pr.Recommend(Input{Time: t0, Current: 8, Ready: 8, W: 0.5, WNow: 0.5, WDown: 0.5})
	if lo, hi := pr.Bounds(t0.Add(time.Minute), 8); lo != 2 || hi != 20 {
		t.Fatalf("priced rule, a minute after a change: bounds [%d, %d], want [2, 20]", lo, hi)
	}
	p.Budget.Rule = RuleQuantile
	b := &Budget{p: p}
	b.Recommend(Input{Time: t0, Current: 8, Ready: 8, W: 0.5, WNow: 0.5, WDown: 0.5})
	if lo, hi := b.Bounds(t0.Add(time.Minute), 8); lo != 8 || hi != 20 {
		t.Fatalf("in the hold: bounds [%d, %d], want [8, 20]", lo, hi)
	}
	if lo, _ := b.Bounds(t0.Add(p.Budget.Hold), 8); lo != 2 {
		t.Fatalf("after the hold (%v): lower bound %d, want min_replicas 2", p.Budget.Hold, lo)
	}
	// A size someone else set restarts the hold.
	if lo, _ := b.Bounds(t0.Add(p.Budget.Hold), 5); lo != 5 {
		t.Fatalf("after an outside resize: lower bound %d, want 5", lo)
	}
}
