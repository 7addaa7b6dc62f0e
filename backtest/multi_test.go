package backtest

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
	"github.com/debi-scaler/debi/trace"
)

// fixedSize is a decider that always orders n replicas.
func fixedSize(n int32) decider {
	return func(context.Context, int, policy.Observation) (policy.Result, error) {
		return policy.Result{W2: math.NaN(), Decision: scaling.Decision{Replicas: n, Reason: "fixed"}}, nil
	}
}

// TestOverloadSecondMetricOnly: a tick is overloaded when any metric is, so a run whose first
// metric always fits is overloaded exactly when the second one is above u_sla·Nr·R, and the
// report puts every such tick on the second metric. Two replicas of R = 5 carry
// u_sla·2·5 = 9 cores of each metric: cpu stays at 4; rps runs at 4 with samples 20–29 at 20.
func TestOverloadSecondMetricOnly(t *testing.T) {
	o := DefaultOptions()
	o.Overload = OverloadTick // ticks counted (the shares over time: TestOverloadShareMetrics)
	o.Warmup = 2
	cpu, rps := make([]float64, 40), make([]float64, 40)
	for i := range cpu {
		cpu[i], rps[i] = 4, 4
		if i >= 20 && i < 30 {
			rps[i] = 20
		}
	}
	w, err := NewWorldMetrics([]string{"cpu", "rps"}, [][]float64{cpu, rps}, time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	run, err := simulate(context.Background(), w, "fixed", o, 2, fixedSize(2), false, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The expected count, from the world's own rps demand at the scored ticks.
	want := 0
	for _, d := range w.MInst[1][w.Warm:] {
		if d > o.SLAUtilization*2*o.Request {
			want++
		}
	}
	if want == 0 {
		t.Fatal("the second metric never exceeds its capacity: the test's world is wrong")
	}
	mo := run.MetricOverload
	if len(mo) != 2 || mo[0].Metric != "cpu" || mo[0].Ticks != 0 || mo[1].Metric != "rps" || mo[1].Ticks != want || mo[1].Alone != want {
		t.Fatalf("per metric %+v, want cpu 0 and rps %d ticks (all alone)", mo, want)
	}
	if got := run.OverloadFraction * float64(run.Ticks); math.Abs(got-float64(want)) > 1e-9 {
		t.Errorf("overloaded ticks %v, want %d (the second metric's)", got, want)
	}
	if run.Unserved <= 0 || run.UnderShare <= 0 {
		t.Errorf("unserved %v, under-provisioned %v: the second metric's excess must count", run.Unserved, run.UnderShare)
	}
	// The first metric alone is never overloaded at this size.
	one, err := NewWorld(cpu, time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := simulate(context.Background(), one, "fixed", o, 2, fixedSize(2), false, 0, nil)
	if err != nil || r1.OverloadFraction != 0 || r1.MetricOverload != nil {
		t.Fatalf("cpu alone: overload %v, per metric %v, %v", r1.OverloadFraction, r1.MetricOverload, err)
	}
}

// twoMetric is the shipped two-metric trace (trace/testdata/README.md): the embedded Azure
// 2019 and Google 2019 series paired by time index.
func twoMetric(t *testing.T) trace.Trace {
	t.Helper()
	tr, err := trace.LoadFile(filepath.Join("..", "trace", "testdata", "azure2019_google2019_cpu_5min.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// multiWorld lays a multi-metric trace on the grid as RunTraces does.
func multiWorld(t *testing.T, tr trace.Trace, o Options) *World {
	t.Helper()
	_, w, err := metricWorld(tr, time.Duration(tr.StepMinutes)*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestOracleSeveralMetrics: the oracle orders the smallest count that carries every metric:
// no overload on the two-metric trace, and it costs more than an oracle that carries either
// metric alone (each metric's own need is below the joint one at some ticks).
func TestOracleSeveralMetrics(t *testing.T) {
	tr := twoMetric(t)
	o := quickOptions()
	w := multiWorld(t, tr, o)
	both, err := Simulate(context.Background(), w, OraclePolicy, o)
	if err != nil {
		t.Fatal(err)
	}
	if both.OverloadFraction != 0 || both.Unserved != 0 || both.UnderShare != 0 {
		t.Fatalf("oracle on two metrics: overload %v, unserved %v, under %v; want 0", both.OverloadFraction, both.Unserved, both.UnderShare)
	}
	for k, name := range w.Metrics {
		vals := tr.Columns[k][:o.MaxSteps]
		scale, err := o.ScaleFor(vals)
		if err != nil {
			t.Fatal(err)
		}
		d := make([]float64, len(vals))
		for i, v := range vals {
			d[i] = v * scale
		}
		wk, err := NewWorld(d, w.Period, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(context.Background(), wk, OraclePolicy, o)
		if err != nil {
			t.Fatal(err)
		}
		if !(both.Cost > r.Cost) {
			t.Errorf("oracle carrying both metrics costs %v, carrying %s alone %v: want more", both.Cost, name, r.Cost)
		}
	}
}

// TestJointCalibrationKeepsBudget: on the two-metric trace a budget policy calibrated per
// metric spends the budget on each metric, and as the two series' bursts are unrelated in time
// its overload (any metric) runs above 1.5× the budget at budgets of 0.5 % and 1 %; calibrated
// jointly on the policy's overload it stays within 0.5–1.5× at every budget, under linear and
// step demand. At 2 % the levels of both schemes sit near their ceiling (the median of the
// errors, docs/results-budget.md): per-metric calibration cannot spend twice the budget there,
// so the test asks nothing of it at 2 %.
func TestJointCalibrationKeepsBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: twelve full-trace runs")
	}
	tr := twoMetric(t)
	for _, demand := range []string{DemandLinear, DemandStep} {
		o := DefaultOptions()
		o.MaxSteps, o.Demand = len(tr.Values), demand
		w := multiWorld(t, tr, o)
		for _, b := range []float64{0.005, 0.01, 0.02} {
			o.Calibration.Budget = b
			got := map[string]float64{}
			for _, c := range []string{CalibrationJoint, CalibrationPerMetric} {
				o.MetricCalibration = c
				r, err := Simulate(context.Background(), w, "budget", o)
				if err != nil {
					t.Fatal(err)
				}
				got[c] = r.OverloadFraction
			}
			if x := got[CalibrationJoint] / b; x < 0.5 || x > 1.5 {
				t.Errorf("%s demand, budget %v: joint calibration overloads %.4f = %.2f× the budget, want 0.5–1.5×", demand, b, got[CalibrationJoint], x)
			}
			if x := got[CalibrationPerMetric] / b; x <= 1.5 && b < 0.02 {
				t.Errorf("%s demand, budget %v: per-metric calibration overloads %.4f = %.2f× the budget: the pair no longer shows what joint calibration is for", demand, b, got[CalibrationPerMetric], x)
			}
			t.Logf("%s, budget %v: overload joint %.4f, per metric %.4f", demand, b, got[CalibrationJoint], got[CalibrationPerMetric])
		}
	}
}
