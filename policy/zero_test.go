package policy

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

// TestRunnerScalesToZero drives a min_replicas 0 hpa policy on a request rate (a wake metric,
// activation 2): busy, then below the activation for scale_to_zero_after (to zero), quiet at
// zero (stays), then a request rate above the activation (woken to one pod, KEDA's 0 → 1), and a
// missing sample at zero (stays: nothing known asks for a pod).
func TestRunnerScalesToZero(t *testing.T) {
	spec, err := Parse("hpa", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(spec)
	cfg.Params.MinReplicas, cfg.Params.ScaleToZeroAfter = 0, 5*time.Minute
	cfg.Request, cfg.Wake, cfg.Activation = 10, true, 2
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	current := int32(3)
	step := func(min int, demand float64) Result {
		t.Helper()
		res, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(min) * time.Minute), Demand: demand, Current: current, Ready: current})
		if err != nil && !math.IsNaN(demand) {
			t.Fatalf("minute %d: %v", min, err)
		}
		current = res.Decision.Replicas
		return res
	}
	if res := step(0, 12); !res.Active || res.Idle != 0 || current != 3 {
		t.Fatalf("busy: active %v idle %v → %d, want active, 0, 3", res.Active, res.Idle, current)
	}
	for m := 1; m < 5; m++ {
		if res := step(m, 1); res.Active || current == 0 {
			t.Fatalf("minute %d, 1 ≤ activation 2: active %v → %d (idle %vs), want idle and still running", m, res.Active, current, res.Idle)
		}
	}
	if res := step(5, 1); current != 0 || res.Decision.Reason != scaling.ReasonIdle || res.Idle != 300 {
		t.Fatalf("idle 5 minutes: → %d (%s, idle %vs), want 0 (%s, 300 s)", current, res.Decision.Reason, res.Idle, scaling.ReasonIdle)
	}
	if res := step(6, 2); current != 0 || res.Idle != 360 {
		t.Fatalf("at zero, demand at the activation: → %d (idle %vs), want 0 (360 s)", current, res.Idle)
	}
	if step(7, math.NaN()); current != 0 {
		t.Fatalf("at zero, missing sample: → %d, want 0", current)
	}
	if res := step(8, 30); current != 1 || res.Decision.Reason != scaling.ReasonWoken {
		t.Fatalf("at zero, demand 30 above the activation: → %d (%s), want 1 (%s: hpa wakes to one pod)", current, res.Decision.Reason, scaling.ReasonWoken)
	}
	if step(9, 30); current != 5 {
		t.Fatalf("one pod, demand 30 at request 10, target 0.5 (6 pods): → %d, want 5 (the HPA's 4 pods per 15 s)", current)
	}
}

// TestMultiNeedsWakeMetric: a min_replicas 0 policy with no metric read from outside the pods
// is refused, since nothing could wake it.
func TestMultiNeedsWakeMetric(t *testing.T) {
	spec, _ := Parse("hpa", "")
	cfg := DefaultConfig(spec)
	cfg.Params.MinReplicas = 0
	if _, err := NewMulti([]Config{cfg}, []string{"cpu"}); err == nil {
		t.Fatal("NewMulti accepted min_replicas 0 with no wake metric")
	}
	cfg2 := cfg
	cfg2.Wake = true
	m, err := NewMulti([]Config{cfg, cfg2}, []string{"cpu", "requests"})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// TestPricedRuleAtMinZero: budget's priced rule of a policy that scales to zero plans at least one
// pod (going to zero is the composition's step, not the plan's): its quantile is never below
// one pod's half, on a load that falls to nothing, and the policy goes to zero only through the
// idle step.
func TestPricedRuleAtMinZero(t *testing.T) {
	r := newRunner(t, "naive-budget", func(c *Config) {
		c.Params.Budget.Rule, c.Params.Budget.Hold = scaling.RulePriced, 0
		c.Params.MinReplicas, c.Params.ScaleToZeroAfter = 0, 2*time.Minute
		c.Step, c.LeadSteps, c.LeadTime = time.Minute, 3, 2*time.Minute
		c.Wake, c.Activation = true, 0
	})
	per := r.cfg.Params.Budget.SLAUtilization * r.cfg.Request
	n := int32(4)
	for i := range 60 { // 15 s ticks: 5 busy minutes, then nothing
		d := 2.0
		if i >= 20 {
			d = 0
		}
		res, err := r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * 15 * time.Second), Demand: d, Current: n, Ready: n})
		if err != nil {
			t.Fatal(err)
		}
		if b := res.Budget; b != nil && b.Quantile < 0.5*per {
			t.Fatalf("tick %d: quantile %v, below one pod's half (%v): the plan went to zero", i, b.Quantile, 0.5*per)
		}
		if res.Decision.Replicas == 0 && res.Decision.Reason != scaling.ReasonIdle {
			t.Fatalf("tick %d: to zero by %s, want only the idle step", i, res.Decision.Reason)
		}
		n = res.Decision.Replicas
	}
	if n != 0 {
		t.Errorf("idle for 10 minutes (scale_to_zero_after 2m): at %d, want 0", n)
	}
}

// TestColdStartNotQuantileMiss: in a policy that scales to zero, a tick overloaded with no pod
// ready (asleep, or woken and starting) is not the budget quantile's miss, so its calibration
// does not observe it; the same tick of a policy with min_replicas 1 is.
func TestColdStartNotQuantileMiss(t *testing.T) {
	for _, min := range []int32{0, 1} {
		r := newRunner(t, "naive-budget", func(c *Config) {
			c.Params.MinReplicas = min
			c.Wake = min == 0
		})
		var res Result
		for i := range 8 {
			var err error
			res, err = r.Step(context.Background(), Observation{Time: t0.Add(time.Duration(i) * time.Minute), Demand: 3, Current: 0, Ready: 0})
			if err != nil {
				t.Fatal(err)
			}
		}
		exceeded, observed := res.Budget.Exceeded, res.Budget.Observed
		if min == 0 && (exceeded != 0 || observed != 0) {
			t.Errorf("min 0: %d of %d ticks with no pod ready observed as the quantile's misses, want none", exceeded, observed)
		}
		if min == 1 && exceeded == 0 {
			t.Errorf("min 1: %d of %d ticks observed as misses, want the overloaded ticks", exceeded, observed)
		}
	}
}
