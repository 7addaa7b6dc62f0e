package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/trace"
)

func embedded(t *testing.T) []trace.Trace {
	t.Helper()
	ts, err := trace.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func quickOptions() Options {
	o := DefaultOptions()
	o.MaxSteps = 1400
	return o
}

// TestNoLookAhead proves that each policy's decision at step t depends on data up to t only:
// the replicas decided at t (in force at t+1) are unchanged when every later demand value is
// replaced.
func TestNoLookAhead(t *testing.T) {
	tr := embedded(t)[0]
	o := quickOptions()
	o.KeepSeries = true
	scale, err := o.ScaleFor(tr.Values[:o.MaxSteps])
	if err != nil {
		t.Fatal(err)
	}
	demand := make([]float64, o.MaxSteps)
	for i := range demand {
		demand[i] = tr.Values[i] * scale
	}
	for _, pol := range []string{"hpa", "apa", "debi", "holtwinters-hpa", "evt-holtwinters-hpa", "seasonal-naive-hpa"} {
		t.Run(pol, func(t *testing.T) {
			base, err := Simulate(context.Background(), demand, pol, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, cut := range []int{800, 1000, 1250} {
				alt := slices.Clone(demand)
				for i := cut + 1; i < len(alt); i++ {
					alt[i] = alt[i]*3 + 100 // a future that would change every decision
				}
				got, err := Simulate(context.Background(), alt, pol, o)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(base.Series.Replicas[:cut+2], got.Series.Replicas[:cut+2]) {
					t.Fatalf("decisions up to step %d changed when data after it changed", cut)
				}
				if slices.Equal(base.Series.Replicas, got.Series.Replicas) {
					t.Fatalf("altering the future after %d changed nothing: the test proves nothing", cut)
				}
			}
		})
	}
}

func TestRunTracesReport(t *testing.T) {
	o := quickOptions()
	o.Policies = []string{"hpa", "apa", "debi"}
	rep, err := RunTraces(context.Background(), embedded(t), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Traces) != 3 {
		t.Fatalf("want 3 traces, got %d", len(rep.Traces))
	}
	for _, tr := range rep.Traces {
		if len(tr.Runs) != 3 || len(tr.Frontier) != len(o.SweepTargets) {
			t.Fatalf("%s: %d runs, %d frontier points", tr.Trace, len(tr.Runs), len(tr.Frontier))
		}
		for _, r := range tr.Runs {
			if r.Steps != o.MaxSteps-o.Warmup {
				t.Errorf("%s/%s: scored %d steps, want %d", tr.Trace, r.Policy, r.Steps, o.MaxSteps-o.Warmup)
			}
			// Cost is R·ΣN: the mean replicas times R times the steps.
			if want := o.Request * r.MeanReplicas * float64(r.Steps); math.Abs(r.Cost-want) > 1e-6*want {
				t.Errorf("%s/%s: cost %v, want R·ΣN = %v", tr.Trace, r.Policy, r.Cost, want)
			}
			if r.Utilization <= 0 || r.Utilization > 1 {
				t.Errorf("%s/%s: utilization %v out of (0,1]", tr.Trace, r.Policy, r.Utilization)
			}
			if r.Policy == "hpa" && r.CostRatio != 1 {
				t.Errorf("hpa cost ratio %v, want 1", r.CostRatio)
			}
		}
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]any `json:"parameters"`
		Traces     []struct {
			Runs []map[string]any `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("json output does not parse: %v", err)
	}
	for _, k := range []string{"policy", "cost", "cost_ratio", "utilization", "overload_steps", "overload_fraction",
		"unserved", "hot_steps", "scale_actions", "train_seconds", "decide_seconds", "frontier_ratio"} {
		if _, ok := doc.Traces[0].Runs[0][k]; !ok {
			t.Errorf("json run lacks %q", k)
		}
	}
	if doc.Parameters["request"] != 5.0 {
		t.Errorf("json parameters lack request=5: %v", doc.Parameters)
	}
	for _, f := range []string{"table", "markdown", "csv"} {
		buf.Reset()
		if err := rep.Write(&buf, f); err != nil || !strings.Contains(buf.String(), "debi") {
			t.Errorf("format %s: %v\n%s", f, err, buf.String())
		}
	}
	if err := rep.Write(&buf, "xml"); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("unknown format: %v", err)
	}
}

func TestEnvelope(t *testing.T) {
	pts := []FrontierPoint{
		{Target: 0.3, Cost: 100, OverloadFraction: 0},
		{Target: 0.5, Cost: 60, OverloadFraction: 0.1},
		{Target: 0.6, Cost: 70, OverloadFraction: 0.15}, // dominated by 0.5
		{Target: 0.7, Cost: 40, OverloadFraction: 0.3},
	}
	env := Envelope(pts)
	if len(env) != 3 || env[1].Target != 0.5 || env[2].Target != 0.7 {
		t.Fatalf("envelope %+v", env)
	}
	for _, tc := range []struct {
		x       float64
		want    float64
		clamped bool
	}{
		{0.05, 80, false}, // halfway between (0,100) and (0.1,60)
		{0.2, 50, false},  // halfway between (0.1,60) and (0.3,40)
		{0.5, 40, true},   // beyond the cheapest end
	} {
		got, cl := EnvelopeCost(env, tc.x)
		if math.Abs(got-tc.want) > 1e-9 || cl != tc.clamped {
			t.Errorf("EnvelopeCost(%v) = %v,%v want %v,%v", tc.x, got, cl, tc.want, tc.clamped)
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		field string
		mut   func(*Options)
	}{
		{"request", func(o *Options) { o.Request = math.NaN() }},
		{"sla-utilization", func(o *Options) { o.SLAUtilization = 2 }},
		{"lead-steps", func(o *Options) { o.LeadSteps = 0 }},
		{"policies", func(o *Options) { o.Policies = []string{"magic"} }},
		{"policies", func(o *Options) { o.Policies = []string{"nosuchmodel-hpa"} }},
		{"evt.q", func(o *Options) { o.POT.Q = 0.3 }},
		{"sweep", func(o *Options) { o.SweepTargets = []float64{1.5} }},
		{"max_replicas", func(o *Options) { o.Params.MaxReplicas = 0 }},
	} {
		o := DefaultOptions()
		tc.mut(&o)
		_, err := RunTraces(context.Background(), embedded(t), o)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v does not name it", tc.field, err)
		}
	}
}

func TestTooShortTrace(t *testing.T) {
	tr := trace.Trace{Name: "short", Values: make([]float64, 500)}
	for i := range tr.Values {
		tr.Values[i] = 1
	}
	_, err := RunTraces(context.Background(), []trace.Trace{tr}, DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "short") || !strings.Contains(err.Error(), "warmup") {
		t.Fatalf("want an error naming the trace and the warm-up, got %v", err)
	}
	zero := trace.Trace{Name: "idle", Values: make([]float64, 1000)}
	_, err = RunTraces(context.Background(), []trace.Trace{zero}, DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "idle") || !strings.Contains(err.Error(), "--scale") {
		t.Fatalf("want an error naming the idle trace and --scale, got %v", err)
	}
}

// TestStartupDelay checks the simulated cluster: pods added at step t are paid for from t+1 and
// ready from t+1+delay; removal is immediate, not-yet-ready pods first.
func TestStartupDelay(t *testing.T) {
	c := newCluster(2, 1)
	c.scale(0, 5)
	if c.spec != 5 || c.ready(1) != 2 || c.ready(2) != 5 {
		t.Fatalf("spec %d ready(1) %d ready(2) %d; want 5, 2, 5", c.spec, c.ready(1), c.ready(2))
	}
	c.scale(2, 7)
	c.scale(2, 4) // the two starting pods go first, then one ready pod
	if c.ready(3) != 4 || c.ready(10) != 4 {
		t.Fatalf("after scale-in ready %d, want 4", c.ready(10))
	}
}

func TestSummary(t *testing.T) {
	o := quickOptions()
	o.Policies = []string{"hpa", "apa"}
	rep, err := RunTraces(context.Background(), embedded(t), o)
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.Summary()
	if len(rows) != 6 || rows[0].Class != "periodic" || rows[0].Policy != "hpa" || rows[5].Class != "bursty" {
		t.Fatalf("want periodic, smooth, bursty × hpa, apa in order, got %+v", rows)
	}
	for _, r := range rows {
		if r.Policy == "hpa" && (r.CostChange != 0 || r.UtilizationDelta != 0) {
			t.Errorf("hpa against itself: %+v", r)
		}
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf, "report"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| class | policy |", "### Per trace", "| trace | class | policy |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
