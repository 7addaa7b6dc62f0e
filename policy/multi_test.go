package policy

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/debi-scaler/debi/scaling"
)

func multiConfig(t *testing.T, name string, request float64) Config {
	t.Helper()
	spec, err := Parse(name, "naive")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig(spec)
	c.Request, c.Step, c.History, c.Retrain = request, time.Minute, 30, 5
	c.Params.MinReplicas, c.Params.MaxReplicas = 1, 40
	c.Params.ScaleUpPercent = 1000 // the HPA's rate limit out of the way of the counts below
	return c
}

// TestMultiOneMetricIsRunner: a policy with one metric decides as a Runner step by step (the
// same replica counts, reasons and bounds), for a stateless and two stateful algorithms.
func TestMultiOneMetricIsRunner(t *testing.T) {
	for _, alg := range []string{"naive-debi", "hpa", "naive-budget"} {
		t.Run(alg, func(t *testing.T) {
			r, err := New(multiConfig(t, alg, 0.5))
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewMulti([]Config{multiConfig(t, alg, 0.5)}, []string{"cpu"})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1_700_000_000, 0)
			cur := int32(2)
			for i := range 120 {
				ts := t0.Add(time.Duration(i) * 15 * time.Second)
				d := 1 + 0.8*math.Sin(float64(i)/9)
				want, werr := r.Step(context.Background(), Observation{Time: ts, Demand: d, Current: cur, Ready: cur})
				got, gerr := m.Step(context.Background(), ts, []float64{d}, cur, cur)
				if (werr == nil) != (gerr == nil) || got.Decision != want.Decision || got.Floor != want.Floor || got.Ceiling != want.Ceiling ||
					got.Results[0].W != want.W {
					t.Fatalf("step %d: multi %+v (%v), runner %+v (%v)", i, got.Decision, gerr, want.Decision, werr)
				}
				cur = want.Decision.Replicas
			}
		})
	}
}

// TestMultiLargestCount: with two metrics the decision is the larger of the two counts, each
// the rule's on its own metric, and the deciding metric follows the load mix.
func TestMultiLargestCount(t *testing.T) {
	// hpa at target 0.5: metric a (cores, 1 per pod) and b (rps, 100 per pod).
	m, err := NewMulti([]Config{multiConfig(t, "hpa", 1), multiConfig(t, "hpa", 100)}, []string{"cpu", "rps"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	// At 4 replicas: cpu 2 cores → ceil(4·(2/4)/0.5) = 4; rps 600 → ceil(4·(600/400)/0.5) = 12.
	res, err := m.Step(context.Background(), t0, []float64{2, 600}, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Replicas != 12 || res.Metric != 1 || res.Results[0].Decision.Replicas != 4 || res.Results[1].Decision.Replicas != 12 {
		t.Fatalf("decision %+v by metric %d; per metric %d, %d", res.Decision, res.Metric, res.Results[0].Decision.Replicas, res.Results[1].Decision.Replicas)
	}
	// At 12 replicas, cpu 9 cores → ceil(12·(9/12)/0.5) = 18; rps 600 → 12: cpu decides.
	res, err = m.Step(context.Background(), t0.Add(15*time.Second), []float64{9, 600}, 12, 12)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Replicas != 18 || res.Metric != 0 {
		t.Fatalf("decision %+v by metric %d, want 18 by cpu", res.Decision, res.Metric)
	}
}

// TestMultiMissingMetric: a metric without data never lets the others scale down (the HPA's
// rule), and lets them scale up.
func TestMultiMissingMetric(t *testing.T) {
	m, err := NewMulti([]Config{multiConfig(t, "naive-debi", 1), multiConfig(t, "naive-debi", 100)}, []string{"cpu", "rps"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	// cpu 0.1 cores at 10 replicas would scale down; rps missing: hold at 10.
	res, err := m.Step(context.Background(), t0, []float64{0.1, math.NaN()}, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Replicas != 10 || res.Decision.Reason != scaling.ReasonMetricMissing || res.Metric != 0 || res.Errs[1] == nil {
		t.Fatalf("with rps missing: %+v by %d, errs %v", res.Decision, res.Metric, res.Errs)
	}
	// cpu 20 cores at 10 replicas asks for more: it scales up although rps is missing.
	res, _ = m.Step(context.Background(), t0.Add(2*time.Minute), []float64{20, math.NaN()}, 10, 10)
	if res.Decision.Replicas <= 10 {
		t.Fatalf("scale-up with a metric missing: %+v", res.Decision)
	}
	// Both missing: ErrNoData, the current size.
	m2, _ := NewMulti([]Config{multiConfig(t, "hpa", 1), multiConfig(t, "hpa", 100)}, []string{"cpu", "rps"})
	res, err = m2.Step(context.Background(), t0, []float64{math.NaN(), math.NaN()}, 7, 7)
	if err == nil || res.Decision.Replicas != 7 || res.Metric != -1 {
		t.Fatalf("no metric: %+v %v", res, err)
	}
}

// TestMultiJointCalibration: with the joint calibration (the default) every metric's level
// moves on the policy's misses, so that a miss of the second metric alone lowers the first
// one's level too and the two levels stay one; calibrated per metric, the first metric's level
// never sees the second's misses. The world is fixed at 2 ready pods: cpu (1 core per pod)
// stays at 1 core, never above u_sla·2·1 = 1.8; rps (100 per pod) runs at 100 with a burst to
// 300 (above 180) for 4 ticks of every 40.
func TestMultiJointCalibration(t *testing.T) {
	for _, joint := range []bool{true, false} {
		m, err := NewMulti([]Config{multiConfig(t, "naive-budget", 1), multiConfig(t, "naive-budget", 100)}, []string{"cpu", "rps"})
		if err != nil {
			t.Fatal(err)
		}
		if !joint {
			m.SetJointCalibration(false)
		}
		t0 := time.Unix(1_700_000_000, 0)
		var cpuAlpha, rpsAlpha float64
		misses := 0
		for i := range 400 {
			rps := 100.0
			if i%40 >= 36 {
				rps = 300
			}
			res, err := m.Step(context.Background(), t0.Add(time.Duration(i)*15*time.Second), []float64{1, rps}, 2, 2)
			if err != nil {
				t.Fatal(err)
			}
			cpuAlpha, rpsAlpha = res.Results[0].Budget.Alpha, res.Results[1].Budget.Alpha
			if joint && cpuAlpha != rpsAlpha {
				t.Fatalf("joint, tick %d: levels cpu %v, rps %v: want one level", i, cpuAlpha, rpsAlpha)
			}
			if ex, _ := m.Runner(1).calUp.Exceeded(); ex > misses {
				misses = ex
			}
		}
		// The bursts are misses: 4 of every 40 ticks, 10 % against a 1 % budget, so the level
		// that sees them falls far below the budget, the one that does not rises above it.
		if misses == 0 {
			t.Fatal("no burst was a miss: the test's world is wrong")
		}
		budget := multiConfig(t, "naive-budget", 1).Calibration.Budget
		switch {
		case joint && !(cpuAlpha < budget):
			t.Errorf("joint: cpu's level %v did not fall below the budget %v on rps's misses", cpuAlpha, budget)
		case !joint && !(cpuAlpha > budget && rpsAlpha < budget):
			t.Errorf("per metric: levels cpu %v, rps %v; want cpu above the budget %v (no misses of its own), rps below", cpuAlpha, rpsAlpha, budget)
		}
	}
}
