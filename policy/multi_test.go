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
