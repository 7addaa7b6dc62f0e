package backtest

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
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

// world lays a trace's first MaxSteps samples, scaled as RunTraces scales them, on the grid.
func world(t *testing.T, tr trace.Trace, o Options) *World {
	t.Helper()
	vals := tr.Values[:min(o.MaxSteps, len(tr.Values))]
	scale, err := o.ScaleFor(vals)
	if err != nil {
		t.Fatal(err)
	}
	d := make([]float64, len(vals))
	for i, v := range vals {
		d[i] = v * scale
	}
	w, err := NewWorld(d, time.Duration(tr.StepMinutes)*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestNoLookAhead proves that each policy's decision at tick t depends on data up to t only:
// the replicas in force after every tick up to the last unchanged sample are the same when
// every later sample is replaced — and the demand scale, taken from the warm-up, with them.
func TestNoLookAhead(t *testing.T) {
	tr := embedded(t)[0]
	o := quickOptions()
	o.KeepSeries = true
	for _, pol := range []string{"hpa", "apa", "debi", "holtwinters-hpa", "evt-holtwinters-hpa", "seasonal-naive-hpa", "budget", "naive-budget", OraclePolicy} {
		t.Run(pol, func(t *testing.T) {
			base, err := Simulate(context.Background(), world(t, tr, o), pol, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, cut := range []int{800, 1000, 1250} {
				alt := tr
				alt.Values = slices.Clone(tr.Values[:o.MaxSteps])
				for i := cut + 1; i < len(alt.Values); i++ {
					alt.Values[i] = alt.Values[i]*3 + 100 // a future that would change every decision
				}
				// Sample cut is the last one unchanged: the world up to its time is the same.
				last := int(time.Duration(cut) * time.Duration(tr.StepMinutes) * time.Minute / o.Tick)
				got, err := Simulate(context.Background(), world(t, alt, o), pol, o)
				if err != nil {
					t.Fatal(err)
				}
				if pol == OraclePolicy {
					// The oracle is the one policy allowed to look ahead: it must see the change
					// a start-up delay before it.
					k := int(o.StartupDelay/o.Tick) + 1
					if !slices.Equal(base.Series.Replicas[:last-k], got.Series.Replicas[:last-k]) {
						t.Fatalf("oracle decisions more than a start-up delay before sample %d changed", cut)
					}
					continue
				}
				if !slices.Equal(base.Series.Replicas[:last+1], got.Series.Replicas[:last+1]) {
					i := slices.IndexFunc(base.Series.Replicas[:last+1], func(n int32) bool { return false })
					for j := range last + 1 {
						if base.Series.Replicas[j] != got.Series.Replicas[j] {
							i = j
							break
						}
					}
					t.Fatalf("decisions up to sample %d (tick %d) changed when data after it changed: first at tick %d", cut, last, i)
				}
				if slices.Equal(base.Series.Replicas, got.Series.Replicas) {
					t.Fatalf("altering the future after %d changed nothing: the test proves nothing", cut)
				}
			}
		})
	}
	// The demand scale comes from the warm-up alone.
	a, _ := o.ScaleFor(tr.Values[:o.MaxSteps])
	alt := slices.Clone(tr.Values[:o.MaxSteps])
	for i := o.Warmup; i < len(alt); i++ {
		alt[i] *= 10
	}
	if b, _ := o.ScaleFor(alt); a != b {
		t.Fatalf("the demand scale moved (%v → %v) when only data after the warm-up changed", a, b)
	}
}

// TestSamplePeriodFromTrace: a 5-minute trace and the same demand resampled to 1 minute are the
// same world, so the HPA decides the same at every tick — in particular its scale-down waits
// the 300 s stabilisation window in wall-clock time, not 5 samples.
func TestSamplePeriodFromTrace(t *testing.T) {
	five := trace.Trace{Name: "five", StepMinutes: 5}
	for i := range 200 {
		v := 10.0
		if i >= 100 && i < 110 {
			v = 60 // a 50-minute burst
		}
		five.Values = append(five.Values, v)
	}
	one := trace.Trace{Name: "one", StepMinutes: 1}
	for i := 0; i < len(five.Values)-1; i++ {
		for k := range 5 {
			a, b := five.Values[i], five.Values[i+1]
			one.Values = append(one.Values, a+float64(k)/5*(b-a))
		}
	}
	one.Values = append(one.Values, five.Values[len(five.Values)-1])
	o := DefaultOptions()
	o.Warmup, o.Scale, o.KeepSeries = 0, 1, true
	o.Policies = []string{"hpa"}
	var series [][]int32
	for _, tr := range []trace.Trace{five, one} {
		w, err := NewWorld(scaled(tr.Values, 1), time.Duration(tr.StepMinutes)*time.Minute, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(context.Background(), w, "hpa", o)
		if err != nil {
			t.Fatal(err)
		}
		series = append(series, r.Series.Replicas)
	}
	if len(series[0]) != len(series[1]) {
		t.Fatalf("the two worlds have %d and %d ticks: the sample period was not taken from the trace", len(series[0]), len(series[1]))
	}
	for i := range series[0] {
		if series[0][i] != series[1][i] {
			t.Fatalf("tick %d: %d replicas on the 5-minute trace, %d on the 1-minute one", i, series[0][i], series[1][i])
		}
	}
	// The demand falls from 60 at sample 109 (minute 545) to 10 at sample 110 (minute 550).
	// Peak replicas are held until 300 s after the last recommendation of the peak size.
	r := series[0]
	tick := func(m float64) int { return int(m * 60 / 15) }
	peak := r[tick(545)]
	lastPeak := tick(545)
	for i := tick(545); i < len(r) && r[i] == peak; i++ {
		lastPeak = i
	}
	held := time.Duration(lastPeak-tick(546)) * 15 * time.Second
	if held < 4*time.Minute || held > 6*time.Minute {
		t.Fatalf("the HPA held its peak size for %v after the drop; want about the 5-minute stabilisation window", held)
	}
}

func scaled(v []float64, s float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * s
	}
	return out
}

// TestWorld checks the time model: linear interpolation between samples, the observed load as
// the mean over the metric window, and the warm-up in ticks.
func TestWorld(t *testing.T) {
	o := DefaultOptions()
	o.Warmup = 2
	// Samples 0, 60, 0 one minute apart: demand rises 1 core/s, then falls.
	w, err := NewWorld([]float64{0, 60, 0}, time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Inst) != 9 || w.Warm != 8 {
		t.Fatalf("2 minutes at 15 s = 9 ticks, warm-up 2 samples = tick 8; got %d ticks, warm %d", len(w.Inst), w.Warm)
	}
	for i, want := range []float64{0, 15, 30, 45, 60, 45, 30, 15, 0} {
		if math.Abs(w.Inst[i]-want) > 1e-9 {
			t.Errorf("inst[%d] = %v, want %v", i, w.Inst[i], want)
		}
	}
	// At 30 s the window is [0, 30 s]: mean of a ramp 0→30 = 15. At 60 s: [0, 60 s] mean 30. At
	// 90 s: [30 s, 90 s] = ramp 30→60 then 60→30, mean 45.
	for i, want := range map[int]float64{2: 15, 4: 30, 6: 45} {
		if math.Abs(w.Obs[i]-want) > 1e-9 {
			t.Errorf("obs[%d] = %v, want %v", i, w.Obs[i], want)
		}
	}
	o.Demand = DemandStep
	w, _ = NewWorld([]float64{0, 60, 0}, time.Minute, o)
	if w.Inst[3] != 0 || w.Inst[4] != 60 || w.Inst[7] != 60 {
		t.Errorf("step demand: %v", w.Inst)
	}
}

// TestOracleZeroOverload: the oracle orders ahead of the start-up delay, so no tick is
// overloaded while the need fits under max replicas — at every start-up and decision delay.
func TestOracleZeroOverload(t *testing.T) {
	for _, tr := range embedded(t) {
		for _, d := range []struct{ startup, decision time.Duration }{{30 * time.Second, 0}, {2 * time.Minute, 0}, {5 * time.Minute, 0}, {2 * time.Minute, 20 * time.Second}} {
			o := quickOptions()
			o.StartupDelay, o.DecisionDelay = d.startup, d.decision
			r, err := Simulate(context.Background(), world(t, tr, o), OraclePolicy, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.OverloadFraction != 0 || r.Unserved != 0 || r.UnderShare != 0 {
				t.Errorf("%s at %+v: oracle overload %v, unserved %v, under %v; want 0", tr.Name, d, r.OverloadFraction, r.Unserved, r.UnderShare)
			}
			hpa, _ := Simulate(context.Background(), world(t, tr, o), "hpa", o)
			if r.Cost >= hpa.Cost && hpa.OverloadFraction == 0 {
				t.Errorf("%s: the oracle (%v) is not cheaper than hpa (%v) at zero overload", tr.Name, r.Cost, hpa.Cost)
			}
		}
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
	episodes := 0
	defer func() {
		if episodes == 0 {
			t.Error("no run had an overload episode: the episodes were not checked")
		}
	}()
	for _, tr := range rep.Traces {
		for _, f := range tr.Frontier {
			if f.OverloadFraction == 0 && f.Pages+f.Tickets > 0 {
				t.Errorf("%s: target %v has no overload, but %d pages and %d tickets", tr.Trace, f.Target, f.Pages, f.Tickets)
			}
		}
		if len(tr.Runs) != 4 || len(tr.Frontier) != len(o.SweepTargets) {
			t.Fatalf("%s: %d runs (want hpa, apa, debi, oracle), %d frontier points", tr.Trace, len(tr.Runs), len(tr.Frontier))
		}
		if tr.SamplePeriod != 5*time.Minute {
			t.Errorf("%s: sample period %v, want the trace's 5m", tr.Trace, tr.SamplePeriod)
		}
		wantTicks := int(time.Duration(o.MaxSteps-1)*tr.SamplePeriod/o.Tick) + 1
		scored := wantTicks - int(time.Duration(o.Warmup)*tr.SamplePeriod/o.Tick)
		for _, r := range tr.Runs {
			if r.Ticks != scored {
				t.Errorf("%s/%s: scored %d ticks, want %d", tr.Trace, r.Policy, r.Ticks, scored)
			}
			// Cost is R·∫N dt: mean replicas × R × scored hours.
			if want := o.Request * r.MeanReplicas * r.Seconds / 3600; math.Abs(r.Cost-want) > 1e-6*want {
				t.Errorf("%s/%s: cost %v, want R·∫N dt = %v", tr.Trace, r.Policy, r.Cost, want)
			}
			if r.Utilization <= 0 || r.Utilization > 1 {
				t.Errorf("%s/%s: utilization %v out of (0,1]", tr.Trace, r.Policy, r.Utilization)
			}
			if r.Policy == "hpa" && r.CostRatio != 1 {
				t.Errorf("hpa cost ratio %v, want 1", r.CostRatio)
			}
			if r.Policy == OraclePolicy && (r.GapClosed != 1 || r.FrontierRatio != tr.OracleFrontierRatio) {
				t.Errorf("oracle: gap %v, frontier %v vs trace's %v", r.GapClosed, r.FrontierRatio, tr.OracleFrontierRatio)
			}
			if r.Policy == OraclePolicy && !math.IsNaN(r.GapAtOverload) && math.Abs(r.GapAtOverload-1) > 1e-12 {
				t.Errorf("%s: the oracle's gap at its own overload is %v, want 1", tr.Trace, r.GapAtOverload)
			}
			if want := GapClosed(r.FrontierRatio, tr.OracleFrontierRatio); !(r.GapClosed == want || math.IsNaN(want)) {
				t.Errorf("%s/%s: gap_closed %v, want %v", tr.Trace, r.Policy, r.GapClosed, want)
			}
			// floor_closed is computed once, from the run's frontier ratio and the floor at its
			// own overload; floor_closed_band from the trace's floor (TestStartupSweepBounds
			// compares the two in the band).
			if want := FloorClosed(r.FrontierRatio, r.FrontierBound); !(r.FloorClosed == want || math.IsNaN(want) && math.IsNaN(r.FloorClosed)) {
				t.Errorf("%s/%s: floor_closed %v, want %v", tr.Trace, r.Policy, r.FloorClosed, want)
			}
			if want := FloorClosed(r.FrontierRatio, tr.FrontierFloor); !(r.FloorClosedBand == want || math.IsNaN(want) && math.IsNaN(r.FloorClosedBand)) {
				t.Errorf("%s/%s: floor_closed_band %v, want %v", tr.Trace, r.Policy, r.FloorClosedBand, want)
			}
			if r.Policy == "hpa" && !(r.FloorClosed <= 0) && r.FrontierRatio >= 1 {
				t.Errorf("%s: hpa at frontier ratio %v closes %v of the floor's saving, want at most 0", tr.Trace, r.FrontierRatio, r.FloorClosed)
			}
			// No run is cheaper than the bound at its own overload; the oracle, which pays for
			// the start-up delay, is within a few per cent of it at zero overload.
			if !(r.FrontierBound <= r.FrontierRatio*(1+1e-12)) {
				t.Errorf("%s/%s: frontier ratio %v below the bound %v", tr.Trace, r.Policy, r.FrontierRatio, r.FrontierBound)
			}
			if r.Policy == OraclePolicy && !(r.FrontierBound > 0.9*r.FrontierRatio) {
				t.Errorf("%s: the bound %v is not near the oracle's frontier ratio %v", tr.Trace, r.FrontierBound, r.FrontierRatio)
			}
			if want := float64(r.ScaleActions) / (r.Seconds / 86400); math.Abs(r.ActionsPerDay-want) > 1e-9 {
				t.Errorf("%s/%s: actions/day %v, want %v", tr.Trace, r.Policy, r.ActionsPerDay, want)
			}
			// The episodes hold the avoidable overload: at least one where there is any, the
			// longest no longer than all of it and at least their mean.
			tick := o.Tick.Seconds()
			avoidable := (r.OverloadFraction - tr.Unavoidable) * float64(r.Ticks)
			if math.Abs(r.avoidable-avoidable) > 1e-6*float64(r.Ticks) {
				t.Errorf("%s/%s: avoidable overload %v ticks, want the overload less the unavoidable, %v", tr.Trace, r.Policy, r.avoidable, avoidable)
			}
			episodes += r.OverloadEpisodes
			if (r.avoidable > 0) != (r.OverloadEpisodes > 0) || r.LongestOverload > r.avoidable*tick+1e-6 ||
				r.OverloadEpisodes > 0 && r.LongestOverload*float64(r.OverloadEpisodes) < r.avoidable*tick-1e-6 {
				t.Errorf("%s/%s: %v ticks of avoidable overload in %d episodes, the longest %vs", tr.Trace, r.Policy, r.avoidable, r.OverloadEpisodes, r.LongestOverload)
			}
			if r.OverloadFraction == 0 && r.Pages+r.Tickets > 0 {
				t.Errorf("%s/%s: no overload, but %d pages and %d tickets", tr.Trace, r.Policy, r.Pages, r.Tickets)
			}
			if want := BandMissChance(o.Calibration.Budget*float64(r.Ticks), r.avoidable, r.OverloadEpisodes); !(r.BandMissChance == want || math.IsNaN(want) && math.IsNaN(r.BandMissChance)) ||
				r.BandMissChance < 0 || r.BandMissChance > 1 {
				t.Errorf("%s/%s: band_miss_chance %v, want %v", tr.Trace, r.Policy, r.BandMissChance, want)
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
			OracleFrontier *float64         `json:"oracle_frontier_ratio"`
			Runs           []map[string]any `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("json output does not parse: %v", err)
	}
	for _, k := range []string{"policy", "cost", "cost_ratio", "utilization", "overload_fraction", "gap_closed", "floor_closed", "frontier_bound",
		"unserved", "actions_per_day", "gap_at_overload", "under_share", "over_pods", "forecast_coverage", "train_seconds", "decide_seconds", "frontier_ratio", "ticks_per_second"} {
		if _, ok := doc.Traces[0].Runs[0][k]; !ok {
			t.Errorf("json run lacks %q", k)
		}
	}
	if doc.Traces[0].OracleFrontier == nil {
		t.Error("json trace lacks oracle_frontier_ratio")
	}
	if doc.Parameters["request"] != 5.0 {
		t.Errorf("json parameters lack request=5: %v", doc.Parameters)
	}
	for _, f := range []string{"summary", "full", "markdown", "csv", "report"} {
		buf.Reset()
		if err := rep.Write(&buf, f); err != nil || !strings.Contains(buf.String(), "debi") || !strings.Contains(buf.String(), "oracle") {
			t.Errorf("format %s: %v\n%s", f, err, buf.String())
		}
		if !strings.Contains(buf.String(), "floor_closed") {
			t.Errorf("format %s lacks floor_closed", f)
		}
		if f == "markdown" || f == "csv" || f == "report" {
			if !strings.Contains(buf.String(), "gap_closed") {
				t.Errorf("format %s lacks gap_closed", f)
			}
		}
	}
	if err := rep.Write(&buf, "xml"); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestScreenFits: the default screen fits 100 columns and leads with frontier and floor_closed;
// the gaps to the oracle are left to --format full.
func TestScreenFits(t *testing.T) {
	o := quickOptions()
	o.Policies = []string{"hpa", "apa", "evt-holtwinters-hpa", "debi"}
	o.StartupSweep = []time.Duration{30 * time.Second}
	rep, err := RunTraces(context.Background(), embedded(t), o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf, "summary"); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(buf.String(), "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line %d is %d columns: %q", i+1, n, line)
		}
	}
	out := buf.String()
	if !strings.Contains(out, "frontier") || !strings.Contains(out, "floor_closed") || !strings.Contains(out, "start-up 30s") {
		t.Errorf("screen lacks frontier, floor_closed or the start-up sweep:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "class" && (slices.Contains(f, "gap") || slices.Contains(f, "gap@x") || !slices.Contains(f, "floor_closed")) {
			t.Errorf("class table header %q: want floor_closed and no gap to the oracle", line)
		}
	}
	if len(rep.Startup) != 1 || rep.Startup[0].Delay != 30*time.Second || len(rep.Startup[0].Traces[0].Runs) != 5 {
		t.Fatalf("start-up sweep: %+v", rep.Startup)
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
		{"horizon", func(o *Options) { o.Horizon = -1 }},
		{"startup-delay", func(o *Options) { o.StartupDelay = -time.Second }},
		{"demand", func(o *Options) { o.Demand = "cubic" }},
		{"tick", func(o *Options) { o.Tick = 0 }},
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

// TestStartupDelay checks the simulated cluster: a pod added at t serves from t + delay (paid
// for from t); removal is immediate, not-yet-ready pods first.
func TestStartupDelay(t *testing.T) {
	c := newCluster(2, 2*time.Minute, 0)
	if !c.scale(0, 5) || c.scale(0, 5) {
		t.Fatal("scale reports a change only when the size changes")
	}
	if c.spec != 5 || c.ready(time.Minute) != 2 || c.ready(2*time.Minute) != 5 {
		t.Fatalf("spec %d ready(1m) %d ready(2m) %d; want 5, 2, 5", c.spec, c.ready(time.Minute), c.ready(2*time.Minute))
	}
	c.scale(2*time.Minute, 7)
	c.scale(2*time.Minute, 4) // the two starting pods go first, then one ready pod
	if c.ready(3*time.Minute) != 4 || c.ready(time.Hour) != 4 {
		t.Fatalf("after scale-in ready %d, want 4", c.ready(time.Hour))
	}
}

// TestStartupSpread checks start-ups that vary: each pod serves after the delay plus an extra
// whose 0.9 quantile is the spread, never before the delay nor after four times the spread's
// reach, the same for the same order, and a scale-in removes the pods that would serve last.
func TestStartupSpread(t *testing.T) {
	const delay, spread = 2 * time.Minute, time.Minute
	c := newCluster(0, delay, spread)
	c.scale(0, 2000)
	if n := c.ready(delay - time.Nanosecond); n != 0 {
		t.Fatalf("%d pods ready before the start-up delay", n)
	}
	if got := float64(c.ready(delay+spread)) / 2000; math.Abs(got-0.9) > 0.02 {
		t.Fatalf("%.3f of the pods ready at delay + spread, want 0.9", got)
	}
	if n := c.ready(delay + 3*spread); n != 2000 {
		t.Fatalf("%d of 2000 pods ready at delay + 3·spread (the cap)", n)
	}
	median := c.readyAt[1000] - delay
	if want := time.Duration(math.Round(float64(spread) * math.Ln2 / math.Ln10)); (median - want).Abs() > 5*time.Second {
		t.Fatalf("median extra %v, want about %v", median, want)
	}
	d := newCluster(0, delay, spread)
	d.scale(0, 2000)
	if !slices.Equal(c.readyAt, d.readyAt) {
		t.Fatal("the same orders drew different start-ups")
	}
	// Scale in at delay + 30s: the pods not yet ready go first.
	at := delay + 30*time.Second
	ready := c.ready(at)
	c.scale(at, ready)
	if c.ready(at) != ready || c.ready(time.Hour) != ready {
		t.Fatalf("after scaling in to the %d ready pods, %d ready now and %d later", ready, c.ready(at), c.ready(time.Hour))
	}
	if exact := newCluster(0, delay, 0); exact.scale(0, 3) && exact.ready(delay) != 3 {
		t.Fatal("without a spread every pod serves after the delay exactly")
	}
}

// TestStartupSpreadOptions: under a spread the policies size for the 0.9 start-up, the pods of
// a run start later than the least start-up, and the report's caption says how they vary.
func TestStartupSpreadOptions(t *testing.T) {
	o := quickOptions()
	o.StartupSpread, o.KeepSeries = 90*time.Second, true
	tr := embedded(t)[0]
	w := world(t, tr, o)
	spec, err := o.parse("budget")
	if err != nil {
		t.Fatal(err)
	}
	if got := runnerConfig(spec, w, o).LeadTime; got != o.StartupDelay+o.StartupSpread {
		t.Fatalf("policies size for a lead of %v, want the 0.9 start-up %v", got, o.StartupDelay+o.StartupSpread)
	}
	// Every pod of the spread run serves no sooner than the least start-up, and some later: the
	// ready pods trail the spec longer than without the spread.
	trail := func(o Options) int {
		r, err := Simulate(context.Background(), w, "hpa", o)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range r.Series.Ready {
			if r.Series.Ready[i] < r.Series.Replicas[i] {
				n++
			}
		}
		return n
	}
	exact := o
	exact.StartupSpread = 0
	if a, b := trail(exact), trail(o); b <= a {
		t.Fatalf("ticks with pods starting: %d with the spread, %d without", b, a)
	}
	rep := &Report{Options: o}
	if c := rep.caption(); !strings.Contains(c, "0.9 quantile 1m30s") {
		t.Fatalf("the caption does not say how start-ups vary: %s", c)
	}
	bad := DefaultOptions()
	bad.StartupSpread = -time.Second
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "startup-spread") {
		t.Fatalf("a negative spread: %v", err)
	}
}

// TestSeriesStartups: a run's series report every pod that came to serve once, with its
// creation on the tick it was ordered and its start-up at least the delay (exactly the delay
// without a spread); the pods there at the start are not among them.
func TestSeriesStartups(t *testing.T) {
	o := quickOptions()
	o.KeepSeries = true
	tr := embedded(t)[0]
	w := world(t, tr, o)
	for _, spread := range []time.Duration{0, time.Minute} {
		o.StartupSpread = spread
		r, err := Simulate(context.Background(), w, "hpa", o)
		if err != nil {
			t.Fatal(err)
		}
		s := r.Series
		// Each tick's newly ready pods: the ready count's rises (a scale-in removes pods that do
		// not yet serve first, so a rise is always new pods).
		want := 0
		for i := 1; i < len(s.Ready); i++ {
			want += int(max(s.Ready[i]-s.Ready[i-1], 0))
		}
		if want == 0 || len(s.Startups) != want {
			t.Fatalf("spread %v: %d start-ups reported, the ready count rose by %d", spread, len(s.Startups), want)
		}
		longer := 0
		for i, p := range s.Startups {
			up := p.Ready - p.Created
			switch {
			case p.Created%w.Tick != 0 || up < o.StartupDelay:
				t.Fatalf("spread %v: start-up %d created at %v, serving after %v (delay %v)", spread, i, p.Created, up, o.StartupDelay)
			case spread == 0 && up != o.StartupDelay:
				t.Fatalf("start-up %d took %v without a spread, want %v", i, up, o.StartupDelay)
			case i > 0 && p.Ready < s.Startups[i-1].Ready:
				t.Fatalf("spread %v: start-up %d serves at %v, before the one reported before it (%v)", spread, i, p.Ready, s.Startups[i-1].Ready)
			}
			if up > o.StartupDelay {
				longer++
			}
		}
		if spread > 0 && longer == 0 {
			t.Fatalf("with a spread of %v no start-up took longer than %v", spread, o.StartupDelay)
		}
	}
}

// TestStartupFit: the start-ups drawn with StartupFit's delay and spread have the median and
// the 0.9 quantile they were fitted to (where the shape can hold both), and never less than the
// delay.
func TestStartupFit(t *testing.T) {
	for _, tc := range []struct{ median, p90, wantMedian time.Duration }{
		{4 * time.Minute, 5 * time.Minute, 4 * time.Minute},
		{30 * time.Second, time.Minute, 30 * time.Second},
		{time.Minute, 10 * time.Minute, 3 * time.Minute},    // median under 0.3·p90: least start-up 0, p90 kept
		{2 * time.Minute, 2 * time.Minute, 2 * time.Minute}, // no spread
	} {
		delay, spread := StartupFit(tc.median, tc.p90)
		c := newCluster(0, delay, spread)
		c.scale(0, 4000)
		q := func(p float64) time.Duration { return c.readyAt[int(p*float64(len(c.readyAt)))] }
		tol := func(want time.Duration) time.Duration { return max(want/25, time.Second) }
		if got := q(0.5); (got - tc.wantMedian).Abs() > tol(tc.wantMedian) {
			t.Errorf("median %v, 0.9 %v: fitted %v + %v draws a median of %v, want %v", tc.median, tc.p90, delay, spread, got, tc.wantMedian)
		}
		if got := q(0.9); (got - tc.p90).Abs() > tol(tc.p90) {
			t.Errorf("median %v, 0.9 %v: fitted %v + %v draws a 0.9 quantile of %v", tc.median, tc.p90, delay, spread, got)
		}
		if c.readyAt[0] < delay || delay < 0 || spread < 0 {
			t.Errorf("median %v, 0.9 %v: fitted %v + %v, earliest %v", tc.median, tc.p90, delay, spread, c.readyAt[0])
		}
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
	if len(rows) != 9 || rows[0].Class != "periodic" || rows[0].Policy != "hpa" || rows[2].Policy != OraclePolicy || rows[8].Class != "bursty" {
		t.Fatalf("want periodic, smooth, bursty × hpa, apa, oracle in order, got %+v", rows)
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
	for _, want := range []string{"| class | policy |", "### Per trace", "| trace | class | policy |", "oracle frontier ratio"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestBudgetCalibration: the budget policy's realized overload tracks the overload budget it is
// given (METHOD §9: between 0.5× and 1.5× of it) on every embedded trace, at 0.5 %, 1 % and 2 %.
func TestBudgetCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: nine full-trace runs")
	}
	for _, tr := range embedded(t) {
		o := DefaultOptions()
		o.MaxSteps = len(tr.Values)
		w := world(t, tr, o)
		for _, b := range []float64{0.005, 0.01, 0.02} {
			o.Calibration.Budget = b
			r, err := Simulate(context.Background(), w, "budget", o)
			if err != nil {
				t.Fatal(err)
			}
			if r.OverloadFraction < 0.5*b || r.OverloadFraction > 1.5*b {
				t.Errorf("%s, budget %v: realized overload %v", tr.Name, b, r.OverloadFraction)
			}
		}
	}
}

// TestHistoryWarnings: a daily Holt-Winters on one-minute samples needs 2880 samples, more than
// the 760 of the warm-up: the backtest says so before it runs, and the run's forecast coverage
// shows what was missed.
func TestHistoryWarnings(t *testing.T) {
	one := trace.Trace{Name: "one-minute", StepMinutes: 1, Values: make([]float64, 3000)}
	for i := range one.Values {
		one.Values[i] = 10 + float64(i%100)
	}
	o := DefaultOptions()
	o.Policies = []string{"hpa", "holtwinters-hpa", "naive-hpa"}
	w := HistoryWarnings([]trace.Trace{one, embedded(t)[0]}, o)
	if len(w) != 1 || !strings.Contains(w[0], "one-minute/holtwinters-hpa") || !strings.Contains(w[0], "2880") {
		t.Fatalf("warnings %q: want one, for holtwinters on the one-minute trace", w)
	}
	o.Policies = []string{"holtwinters-hpa"}
	o.SweepTargets = []float64{0.5}
	rep, err := RunTraces(context.Background(), []trace.Trace{one}, o)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Traces[0].Runs[0]
	// Scored from sample 760, forecasting from sample 2880 + the horizon: about (3000−2883)/(3000−760).
	if r.ModelHistory != 2880 || r.ForecastCoverage > 0.06 || r.ForecastCoverage < 0.04 {
		t.Fatalf("model history %d, coverage %v; want 2880 and ≈ 5 %%", r.ModelHistory, r.ForecastCoverage)
	}
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "2880") {
		t.Fatalf("report notes %q should say the model waited", rep.Notes)
	}
}

// TestWhatIfRunsTheLiveRunner: the what-if replays the configured policy with the runner the
// live exporter builds (config.Policy.RunnerConfig), even at a replay step other than the
// policy's history_step; the other policies keep the options' runner on the trace's period.
func TestWhatIfRunsTheLiveRunner(t *testing.T) {
	c, err := config.Load([]byte(`
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: budget
    request: 1
    history_step: 5m
    lead_time: 3m
    history: 300
    retrain: 12
`))
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Policies[0]
	live, err := p.RunnerConfig()
	if err != nil {
		t.Fatal(err)
	}
	o, name := PolicyOptions(p, DefaultOptions(), time.Minute, 2, 10000)
	w := &World{Period: time.Minute}
	spec, err := policy.Parse(name, o.DebiModel)
	if err != nil {
		t.Fatal(err)
	}
	got := runnerConfig(spec, w, o)
	if got.Step != live.Step || got.LeadSteps != live.LeadSteps || got.History != live.History || got.Retrain != live.Retrain ||
		got.Params != live.Params || got.LeadTime != live.LeadTime || got.Season != live.Season {
		t.Errorf("what-if runner %+v\nlive runner %+v", got, live)
	}
	if got.Step != 5*time.Minute || got.Request != 2 {
		t.Errorf("step %v request %v, want the history step 5m and the history's request 2", got.Step, got.Request)
	}
	hpa, _ := policy.Parse("hpa", "")
	if other := runnerConfig(hpa, w, o); other.Step != time.Minute {
		t.Errorf("another policy's step %v, want the trace's period", other.Step)
	}
}

// TestNeedBound: needs 2, 4, 8 and 1 pods (demand 1, 2, 4, 0.4 cores at u_sla 0.5, R 1 core,
// at least 1 pod) cost 15 pod-ticks at zero overload; overloading the dearest tick saves 8 − 1,
// the two dearest 7 + 3. Against an envelope flat at 10 pod-ticks the floor over 0–50 %
// overload is 5/10. Pods serve at once here (no start-up delay): TestNeedBoundStartup.
func TestNeedBound(t *testing.T) {
	o := DefaultOptions()
	// The tick count's bound: each tick's own need (under the time count it is read at the
	// smaller end of the interval after it: TestOverloadTimeOracleAndFloor).
	o.Overload = OverloadTick
	o.Request, o.SLAUtilization, o.Params.MinReplicas, o.Params.MaxReplicas = 1, 0.5, 1, 10
	o.StartupDelay = 0
	w := &World{Tick: 15 * time.Second, Inst: []float64{9, 1, 2, 4, 0.4}, Warm: 1} // the first tick is warm-up
	b := w.NeedBound(o, 1)
	unit := 15.0 / 3600
	for _, tc := range []struct{ x, want float64 }{{0, 15}, {0.25, 8}, {0.3, 8}, {0.5, 5}, {1, 4}} {
		if got := b.Cost(tc.x); !(math.Abs(got-tc.want*unit) <= 1e-12) {
			t.Errorf("bound at overload %v: %v core-hours, want %v pod-ticks (%v)", tc.x, got, tc.want, tc.want*unit)
		}
	}
	env := []FrontierPoint{{Target: 0.5, Cost: 10 * unit, OverloadFraction: 0.1}}
	if got := b.Floor(env, 0, 0.5); !(math.Abs(got-0.5) <= 1e-12) {
		t.Errorf("floor over 0–50 %%: %v, want 0.5", got)
	}
	if got := b.Floor(env, 0.2, 0.3); !(math.Abs(got-0.8) <= 1e-12) {
		t.Errorf("floor over 20–30 %% (one overloaded tick of four is the only count inside): %v, want 0.8", got)
	}
	if got := b.Floor(env, 0.3, 0.45); !math.IsNaN(got) {
		t.Errorf("floor over 30–45 %%, where no whole count of four ticks lies: %v, want NaN", got)
	}
}

// TestFloorClosed: (1 − fr)/(1 − floor), undefined (NaN) where the floor saves less than 1 %
// of the envelope or an input is missing, never a huge number.
func TestFloorClosed(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name      string
		fr, floor float64
		want      float64 // NaN: undefined
	}{
		{"half the floor's saving", 0.9, 0.8, 0.5},            // 0.1/0.2
		{"at the floor", 0.8, 0.8, 1},                         // 0.2/0.2
		{"the best fixed target", 1, 0.8, 0},                  // 0/0.2
		{"dearer than the best fixed target", 1.1, 0.8, -0.5}, // −0.1/0.2
		{"below the floor (outside the band)", 0.7, 0.8, 1.5}, // 0.3/0.2
		{"the floor saves exactly 1 %", 0.995, 0.99, 0.5},     // 0.005/0.01
		{"floor 1: nothing to close", 0.9, 1, nan},
		{"the floor saves under 1 %", 0.9, 0.995, nan},
		{"a floor above 1", 0.9, 1.2, nan},
		{"no floor (no sweep)", 0.9, nan, nan},
		{"no frontier ratio", nan, 0.8, nan},
		{"both missing", nan, nan, nan},
		{"an infinite ratio", inf, 0.8, nan},
		{"an infinite floor", 0.9, -inf, nan},
	} {
		got := FloorClosed(tc.fr, tc.floor)
		if math.IsNaN(tc.want) {
			if !math.IsNaN(got) {
				t.Errorf("%s: FloorClosed(%v, %v) = %v, want undefined (NaN)", tc.name, tc.fr, tc.floor, got)
			}
			continue
		}
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: FloorClosed(%v, %v) = %v, want %v", tc.name, tc.fr, tc.floor, got, tc.want)
		}
	}
}

// TestFloorClosedInEveryFormat: every format carries floor_closed from the runs' field: the
// value where it is defined; where it is not, "-" in the text formats, an empty cell in csv,
// null in json; the class median over the defined values only, with their number when fewer
// than the class's traces.
func TestFloorClosedInEveryFormat(t *testing.T) {
	rep := &Report{Options: DefaultOptions()}
	rep.Options.Policies = []string{"hpa", "budget"}
	trace := func(name string, floor, hpaFR, budgetFR float64) TraceResult {
		tr := TraceResult{Trace: name, Class: "bursty", FrontierFloor: floor, OracleFrontierRatio: math.NaN()}
		for _, r := range []struct {
			policy string
			fr     float64
		}{{"hpa", hpaFR}, {"budget", budgetFR}} {
			tr.Runs = append(tr.Runs, Run{Metrics: Metrics{Policy: r.policy, FrontierRatio: r.fr, CostRatio: 1,
				GapClosed: math.NaN(), GapAtOverload: math.NaN(), FloorClosed: FloorClosed(r.fr, floor)}})
		}
		return tr
	}
	rep.Traces = []TraceResult{
		trace("t1", 0.8, 1.2, 0.9), // hpa (1 − 1.2)/0.2 = −1, budget 0.1/0.2 = 0.5
		trace("t2", 1, 1.2, 0.9),   // the floor saves nothing: undefined
		trace("t3", 0.5, 1, 0.6),   // hpa 0, budget 0.4/0.5 = 0.8
	}
	out := func(format string) string {
		t.Helper()
		var buf bytes.Buffer
		if err := rep.Write(&buf, format); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	// want is floor_closed per (trace, policy) in the per-run formats.
	want := map[string]string{"t1/hpa": "-1.000", "t1/budget": "0.500", "t2/hpa": "-", "t2/budget": "-", "t3/hpa": "0.000", "t3/budget": "0.800"}
	// cells finds, in rows of cells, the floor_closed column by its header and checks each run.
	cells := func(format string, rows [][]string, undefined string) {
		t.Helper()
		col, found := -1, 0
		for _, row := range rows {
			if i := slices.Index(row, "floor_closed"); i >= 0 {
				col = i
				continue
			}
			if col < 0 || len(row) <= col || len(row) < 3 {
				continue
			}
			k := row[0] + "/" + row[2]
			if row[0] == "2m0s" { // csv: the start-up delay first
				k = row[1] + "/" + row[3]
			}
			w, ok := want[k]
			if !ok {
				continue
			}
			if w == "-" {
				w = undefined
			}
			if row[col] != w {
				t.Errorf("%s: %s floor_closed %q, want %q", format, k, row[col], w)
			}
			found++
		}
		if col < 0 || found != len(want) {
			t.Errorf("%s: floor_closed column %d, %d of %d runs found", format, col, found, len(want))
		}
	}
	var full [][]string
	for _, l := range strings.Split(out("full"), "\n") {
		full = append(full, strings.Fields(l))
	}
	cells("full", full, "-")
	var md [][]string
	for _, l := range strings.Split(out("markdown"), "\n") {
		md = append(md, strings.Split(strings.Trim(l, "| "), " | "))
	}
	cells("markdown", md, "-")
	csvRows, err := csv.NewReader(strings.NewReader(out("csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	cells("csv", csvRows, "")
	// The report's per-trace table, and its class medians: budget's of 0.5 and 0.8 over the two
	// traces where it is defined, hpa's of −1 and 0.
	report := out("report")
	var rows [][]string
	for _, l := range strings.Split(report, "\n") {
		rows = append(rows, strings.Split(strings.Trim(l, "| "), " | "))
	}
	cells("report", rows, "-")
	for _, w := range []string{"floor closed (median)", "| bursty | budget | 3 | 0.900 | 0.650 n=2 |", "| bursty | hpa | 3 | 1.200 | -0.500 n=2 |", "| frontier floor |", "| t2 | bursty | 0 × 0s | - | 1.000 |"} {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q:\n%s", w, report)
		}
	}
	// The screen: the class medians the same, the floor in the per-trace table.
	screen := out("summary")
	for _, w := range [][]string{{"bursty", "budget", "3", "0.900", "0.650", "n=2"}, {"bursty", "hpa", "3", "1.200", "-0.500", "n=2"}, {"t2", "bursty", "0×0s", "-", "1.000"}} {
		found := false
		for _, l := range strings.Split(screen, "\n") {
			if f := strings.Fields(l); len(f) >= len(w) && slices.Equal(f[:len(w)], w) {
				found = true
			}
		}
		if !found {
			t.Errorf("the screen lacks a line starting %q:\n%s", w, screen)
		}
	}
	// A class where it is defined on no trace: "-", no count.
	rep.Traces = []TraceResult{trace("t2", 1, 1.2, 0.9)}
	if rows := rep.Summary(); rows[0].FloorTraces != 0 || !math.IsNaN(rows[0].FloorClosed) || rows[0].floorText() != "-" {
		t.Errorf("no defined floor_closed: %+v, shown %q", rows[0], rows[0].floorText())
	}
	rep.Traces = []TraceResult{trace("t1", 0.8, 1.2, 0.9), trace("t2", 1, 1.2, 0.9), trace("t3", 0.5, 1, 0.6)}
	// json: the value, or null where undefined (as every NaN of the report).
	var doc struct {
		Traces []struct {
			Trace string           `json:"trace"`
			Runs  []map[string]any `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out("json")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tr := range doc.Traces {
		for _, r := range tr.Runs {
			k := tr.Trace + "/" + r["policy"].(string)
			v, ok := r["floor_closed"]
			switch w := want[k]; {
			case !ok:
				t.Errorf("json: %s has no floor_closed", k)
			case w == "-" && v != nil:
				t.Errorf("json: %s floor_closed %v, want null", k, v)
			case w != "-" && (v == nil || strconv.FormatFloat(v.(float64), 'f', 3, 64) != w):
				t.Errorf("json: %s floor_closed %v, want %s", k, v, w)
			}
		}
	}
}
