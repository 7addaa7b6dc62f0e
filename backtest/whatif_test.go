package backtest

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"math"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/trace"
)

// TestPolicyOptionsDedupe: the configured policy comes first and is marked; a policy of the
// list that is the same one under another name (budget is auto-budget) or a repeat is
// left out, and different ones stay.
func TestPolicyOptionsDedupe(t *testing.T) {
	for _, tc := range []struct {
		algorithm, model string
		list             []string
		want             string
	}{
		{"auto-budget", "auto", []string{"hpa", "budget", "debi"}, "auto-budget,hpa,debi"},
		{"budget", "", []string{"hpa", "auto-budget", "naive-budget"}, "budget,hpa,naive-budget"},
		{"budget", "", []string{"holtwinters-budget"}, "budget,holtwinters-budget"},
		{"hpa", "", []string{"hpa", "HPA", "apa"}, "hpa,apa"},
		// debi is holtwinters-debi (the default model): the first of them stays.
		{"naive-debi", "naive", []string{"debi", "holtwinters-debi"}, "naive-debi,debi"},
	} {
		p := &config.Policy{Algorithm: tc.algorithm, Model: tc.model, History: 100}
		o := DefaultOptions()
		o.Policies = tc.list
		o, name := PolicyOptions(p, o, 5*time.Minute, 1, 1000)
		if got := strings.Join(o.Policies, ","); got != tc.want || o.Configured != name || name != strings.ToLower(tc.algorithm) {
			t.Errorf("%s with %v: policies %s, configured %q; want %s, %s", tc.algorithm, tc.list, got, o.Configured, tc.want, tc.algorithm)
		}
	}
}

// TestActualRow: a recorded trace's actual row replays its recorded replicas: the mean is the
// recording's over the scored time, each change one action, the cost R·∫N dt, and every
// policy's actual_ratio its cost over the actual row's.
func TestActualRow(t *testing.T) {
	o := quickOptions()
	o.Policies = []string{"hpa"}
	o.SweepTargets = []float64{0.5, 0.7}
	o.Warmup = 100
	tr := embedded(t)[0]
	vals := tr.Values[:400]
	reps := make([]float64, len(vals))
	for i := range reps {
		reps[i] = 4
		if i >= 250 && i < 300 { // 50 samples at 6: two actions in the scored part
			reps[i] = 6
		}
	}
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	o.Recorded = map[string]Recorded{tr.Name: {Start: start, Replicas: reps}}
	rep, err := RunTraces(context.Background(), []trace.Trace{{Name: tr.Name, StepMinutes: tr.StepMinutes, Values: vals}}, o)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Traces[0]
	if !res.Start.Equal(start) {
		t.Errorf("start %v, want %v", res.Start, start)
	}
	var actual Run
	for _, r := range res.Runs {
		if r.Policy == ActualPolicy {
			actual = r
		}
	}
	// Scored: samples 100 … 399 at 4 replicas but 250 … 299 at 6, each sample 20 ticks (the
	// last sample one tick): (4·(300−50) + 6·50)/300 in sample units.
	want := (4*250.0 + 6*50) / 300
	if actual.Policy != ActualPolicy || actual.ScaleActions != 2 || math.Abs(actual.MeanReplicas-want) > 0.01 {
		t.Fatalf("actual row %+v: want 2 actions and %v replicas on average", actual.Metrics, want)
	}
	if c := o.Request * actual.MeanReplicas * actual.Seconds / 3600; math.Abs(actual.Cost-c) > 1e-9*c {
		t.Errorf("actual cost %v, want %v", actual.Cost, c)
	}
	for _, r := range res.Runs {
		if r.ActualRatio != r.Cost/actual.Cost {
			t.Errorf("%s: actual_ratio %v, want %v", r.Policy, r.ActualRatio, r.Cost/actual.Cost)
		}
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf, "summary"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "cost/actual") {
		t.Errorf("the screen has no cost/actual column:\n%s", buf.String())
	}
	if res.ActualReady != "modelled from the start-up delay: the policy has no queries.ready_replicas" ||
		!strings.Contains(buf.String(), "its ready pods modelled from the start-up delay") {
		t.Errorf("actual_ready %q; the screen:\n%s", res.ActualReady, buf.String())
	}

	// With recorded ready counts the actual row serves with them, not with modelled pods: none
	// ready, every scored tick with demand is overloaded, whatever the spec.
	none := make([]float64, len(vals))
	o.Recorded = map[string]Recorded{tr.Name: {Start: start, Replicas: reps, Ready: none, ReadyQuery: "max(ready)"}}
	rep, err = RunTraces(context.Background(), []trace.Trace{{Name: tr.Name, StepMinutes: tr.StepMinutes, Values: vals}}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Traces[0].Runs {
		if r.Policy == ActualPolicy && (r.OverloadFraction != 1 || math.Abs(r.MeanReplicas-want) > 0.01) {
			t.Errorf("actual row with no pod ready: overload %v, mean %v replicas; want 1, %v", r.OverloadFraction, r.MeanReplicas, want)
		}
		if r.Policy != ActualPolicy && r.OverloadFraction == 1 {
			t.Errorf("%s: overload 1: the recorded ready counts reached a policy's row", r.Policy)
		}
	}
	if got := rep.Traces[0].ActualReady; got != "recorded (max(ready))" {
		t.Errorf("actual_ready %q, want recorded (max(ready))", got)
	}
	o.Recorded = map[string]Recorded{tr.Name: {Replicas: reps, Ready: none[:10]}}
	if _, err := RunTraces(context.Background(), []trace.Trace{{Name: tr.Name, StepMinutes: tr.StepMinutes, Values: vals}}, o); err == nil {
		t.Error("10 recorded ready counts for 400 samples: no error")
	}
	// Too few recorded counts is an error, not a short actual row.
	o.Recorded = map[string]Recorded{tr.Name: {Replicas: reps[:10]}}
	if _, err := RunTraces(context.Background(), []trace.Trace{{Name: tr.Name, StepMinutes: tr.StepMinutes, Values: vals}}, o); err == nil {
		t.Error("10 recorded counts for 400 samples: no error")
	}
}

// TestScreenMarksClamped: the first screen prints the * of a frontier ratio outside the
// envelope, as --format full does, and only then.
func TestScreenMarksClamped(t *testing.T) {
	rep := &Report{Options: DefaultOptions()}
	rep.Options.Policies = []string{"hpa", "budget"}
	rep.Traces = []TraceResult{{Trace: "t", Class: "bursty", Runs: []Run{
		{Metrics: Metrics{Policy: "hpa", FrontierRatio: 1.2, GapClosed: math.NaN(), GapAtOverload: math.NaN(), CostRatio: 1}},
		{Metrics: Metrics{Policy: "budget", FrontierRatio: 0.8, FrontierClamped: true, GapClosed: math.NaN(), GapAtOverload: math.NaN(), CostRatio: 0.9}},
	}}}
	var screen, full bytes.Buffer
	if err := rep.Write(&screen, "summary"); err != nil {
		t.Fatal(err)
	}
	if err := rep.Write(&full, "full"); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{screen.String(), full.String()} {
		if !strings.Contains(out, "0.800*") || strings.Contains(out, "1.200*") {
			t.Errorf("want 0.800* (clamped) and 1.200 without a star:\n%s", out)
		}
	}
}

// TestFileSafe: plot file names need no quoting in a shell.
func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{
		"web (7d to 2026-11-24 00:00)": "web-7d-to-2026-11-24-00-00",
		"azure_vm2019_total_cpu_5min":  "azure_vm2019_total_cpu_5min",
		"a/b\\c d$e`f'g\"h;i":          "a-b-c-d-e-f-g-h-i",
		"((()))":                       "trace",
		"café ☕":                       "caf",
	} {
		if got := fileSafe(in); got != want {
			t.Errorf("fileSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDatedAxis: a recorded trace's plots label the x axis with dates from its start.
func TestDatedAxis(t *testing.T) {
	start := time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)
	ax := timeAxis{origin: 12, tick: 5 * time.Minute, unit: 24 * time.Hour, label: "days"}.dated(start)
	if ax.label != "time (UTC) from 2026-11-20 07:00" {
		t.Errorf("label %q", ax.label)
	}
	labels := func(hi float64) string {
		var l []string
		for _, tk := range ax.Ticks(0, hi) {
			if tk.Label != "" {
				l = append(l, tk.Label)
			}
		}
		return strings.Join(l, ",")
	}
	// 14 days: a label a day, the date alone; 3 days: every 6 hours, with the time.
	if got := labels(14); !strings.HasPrefix(got, "Nov 20,Nov 21,Nov 22,") || !strings.HasSuffix(got, ",Dec 4") {
		t.Errorf("labels over 14 days: %v", got)
	}
	if got := labels(3); !strings.HasPrefix(got, "Nov 20 07:00,Nov 20 13:00,") {
		t.Errorf("labels over 3 days: %v", got)
	}
	if plain := (timeAxis{unit: time.Hour}).dated(time.Time{}); plain.Ticks(0, 4)[0].Label != "0" {
		t.Errorf("an undated axis labels %q", plain.Ticks(0, 4)[0].Label)
	}
}

// TestOverloadShadeIsShare: a bucket's shading is in proportion to its overloaded share, so a
// bucket with one overloaded tick in 360 is barely tinted and a fully overloaded one is the full
// colour: a bursty trace with a little overload everywhere is not a solid band.
func TestOverloadShadeIsShare(t *testing.T) {
	full := float64(overloadColor.A)
	for _, share := range []float64{0, 1.0 / 360, 0.1, 0.5, 1} {
		if got, want := float64(shadeColor(share).A), share*full; math.Abs(got-want) > 0.5 {
			t.Errorf("share %v: alpha %v, want %v", share, got, want)
		}
	}
	if shadeColor(1.0/360).A >= shadeColor(0.1).A || shadeColor(0.5).A >= shadeColor(1).A {
		t.Error("the shading does not grow with the share")
	}
}

// TestFrontierLabelsDoNotCollide: fourteen policy labels on points a few points apart (a
// frontier where many policies land at the same cost and overload) are placed inside the area
// without any two covering each other.
func TestFrontierLabelsDoNotCollide(t *testing.T) {
	sty := text.Style{Color: color.Black, Font: font.From(plotFont, 9), Handler: plot.DefaultTextHandler}
	l := &labelLayer{}
	for i := range 14 {
		l.add(plotter.XY{X: 100 + float64(i%3), Y: 100 + float64(i%2)}, fmt.Sprintf("holtwinters-budget %d", i), sty, vg.Points(3), i)
	}
	area := vg.Rectangle{Max: vg.Point{X: vg.Points(400), Y: vg.Points(300)}}
	at := func(p plotter.XY) vg.Point { return vg.Point{X: vg.Points(p.X), Y: vg.Points(p.Y)} }
	got := l.place(at, area)
	if len(got) != 14 {
		t.Fatalf("%d labels placed", len(got))
	}
	for i, a := range got {
		if a.box.Min.X < area.Min.X || a.box.Max.X > area.Max.X || a.box.Min.Y < area.Min.Y || a.box.Max.Y > area.Max.Y {
			t.Errorf("%q outside the area: %v", a.item.text, a.box)
		}
		for _, b := range got[:i] {
			if overlap(a.box, b.box) > 0 {
				t.Errorf("%q and %q collide: %v %v", a.item.text, b.item.text, a.box, b.box)
			}
		}
	}
}

// TestYRangeFitsTheData: the replica axis ends 6 % above the highest of the demand in pods and
// every run's replicas, not at max_replicas far above them (marked off the scale then), and
// reaches the bound when the data do.
func TestYRangeFitsTheData(t *testing.T) {
	o := DefaultOptions() // max_replicas 50, R 5, u_sla 0.9
	const n = 100
	demand := make([]float64, n)
	reps := make([]int32, n)
	for i := range demand {
		demand[i], reps[i] = 18, 4 // 18 cores = 4 pods at u_sla·R = 4.5
	}
	reps[50] = 10
	r := Run{Metrics: Metrics{Policy: "hpa"}, Series: &Series{Tick: o.Tick, Demand: demand, Replicas: reps, Ready: reps}}
	v := &traceView{o: o, tr: &TraceResult{Runs: []Run{r}}, demand: demand, perPod: o.SLAUtilization * o.Request, n: n}
	ymax, off := v.yRange(window{from: 0, to: n})
	if math.Abs(ymax-10.6) > 1e-9 || !off {
		t.Errorf("data up to 10 replicas under max 50: y to %v, bound off the scale %v; want 10.6, true", ymax, off)
	}
	reps[60] = 50
	if ymax, off = v.yRange(window{from: 0, to: n}); math.Abs(ymax-53) > 1e-9 || off {
		t.Errorf("data at the max bound 50: y to %v, off %v; want 53, false", ymax, off)
	}
}

// TestWhatIfIdleHold: the what-if of a budget policy under scaling.budget.idle earn replays it
// under hold too. On three business weeks (busy weekdays 08:00–18:00, quiet nights and weekends)
// earn meets each Monday at the floor of its price, while hold keeps the price through the
// weekend: it pages less, and the recommendation says so.
func TestWhatIfIdleHold(t *testing.T) {
	c, err := config.Load([]byte(`
policies:
  - name: office
    target: {namespace: corp, name: office}
    algorithm: budget
    request: 1
    history_step: 5m
    lead_time: 2m
    scaling: {min_replicas: 1, max_replicas: 40}
`))
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float64, 3*7*288)
	for i := range vals {
		day, h := (i/288)%7, float64(i%288)/12
		vals[i] = 0.3 // quiet: one pod at any price
		if day < 5 && h >= 8 && h < 18 {
			// Busy: about 22 pods, ramping over half an hour, with a deterministic ripple.
			vals[i] = 20 * min(1, (h-8)/0.5) * (1 + 0.08*math.Sin(float64(i)*2.3))
		}
	}
	o := DefaultOptions()
	o.Policies = []string{"hpa"}
	o, _ = PolicyOptions(&c.Policies[0], o, 5*time.Minute, 1, len(vals))
	o.Warmup = 760
	if !o.idleHoldVariant() {
		t.Fatal("a budget policy under idle earn: no hold variant")
	}
	rep, err := RunTraces(context.Background(), []trace.Trace{{Name: "office", StepMinutes: 5, Values: vals}}, o)
	if err != nil {
		t.Fatal(err)
	}
	r, tr := rep.Recommendation, rep.Traces[0]
	if tr.IdleHold == nil || r == nil || r.Hold == nil {
		t.Fatalf("no hold row: trace %+v, recommendation %+v", tr.IdleHold, r)
	}
	t.Logf("earn: %v, longest episode %.0f s; hold: %v, overload %.2f %%", r.PolicyAlerts, budgetRun(tr.Runs, o).LongestOverload, r.Hold.Alerts, 100*r.Hold.Overload)
	if !(r.Hold.Alerts.Pages < r.PolicyAlerts.Pages) {
		t.Errorf("hold pages %d times, earn %d: want fewer", r.Hold.Alerts.Pages, r.PolicyAlerts.Pages)
	}
	if !strings.Contains(r.Sentence, "With scaling.budget.idle: hold") {
		t.Errorf("the sentence does not say what hold would have done:\n%s", r.Sentence)
	}
	// A policy already under hold is not replayed again.
	c.Policies[0].Scaling.Budget.Idle = "hold"
	if o2, _ := PolicyOptions(&c.Policies[0], DefaultOptions(), 5*time.Minute, 1, len(vals)); o2.idleHoldVariant() {
		t.Error("a policy under hold gets a hold variant")
	}
}

// TestWhatIfNaive: the what-if of a budget policy with another model replays it with the model
// naive too, and that row is the run of the same policy configured with model: naive; a policy
// already on naive is not replayed again.
func TestWhatIfNaive(t *testing.T) {
	// Two weeks of a daily cycle between 4 and 20 pods' worth, with a deterministic ripple and a
	// step every 7 hours.
	vals := make([]float64, 2*7*288)
	for i := range vals {
		h := float64(i%288) / 12
		vals[i] = 12 - 8*math.Cos(2*math.Pi*h/24) + 1.5*math.Sin(float64(i)*2.3)
		if (i/84)%2 == 1 {
			vals[i] += 3
		}
	}
	run := func(model string) (*Report, Options) {
		c, err := config.Load([]byte(`
policies:
  - name: shop
    target: {namespace: retail, name: shop}
    algorithm: budget
    model: ` + model + `
    request: 1
    history_step: 5m
    lead_time: 2m
    scaling: {min_replicas: 1, max_replicas: 40}
`))
		if err != nil {
			t.Fatal(err)
		}
		o := DefaultOptions()
		o.Policies = []string{"hpa"}
		o, name := PolicyOptions(&c.Policies[0], o, 5*time.Minute, 1, len(vals))
		if name == "" || o.Runner == nil {
			t.Fatalf("model %q: no configured policy (%q)", model, name)
		}
		o.Warmup = 760
		rep, err := RunTraces(context.Background(), []trace.Trace{{Name: "shop", StepMinutes: 5, Values: vals}}, o)
		if err != nil {
			t.Fatal(err)
		}
		return rep, o
	}
	rep, o := run("auto")
	if !o.naiveVariant() {
		t.Fatal("a budget policy on auto: no naive variant")
	}
	r, tr := rep.Recommendation, rep.Traces[0]
	if tr.Naive == nil || r == nil || r.Naive == nil {
		t.Fatalf("no naive row: trace %+v, recommendation %+v", tr.Naive, r)
	}
	own, on := run("naive")
	if on.naiveVariant() {
		t.Error("a policy on naive gets a naive variant")
	}
	b := budgetRun(own.Traces[0].Runs, on)
	if b == nil {
		t.Fatal("no budget run with model: naive")
	}
	t.Logf("auto: cost %.1f, overload %.3f %%; naive: cost %.1f, overload %.3f %%", r.PolicyCost, 100*r.PolicyOverload, r.Naive.Cost, 100*r.Naive.Overload)
	if r.Naive.Cost != b.Cost || r.Naive.Overload != b.OverloadFraction || r.Naive.Alerts != (Alerts{b.Pages, b.Tickets}) {
		t.Errorf("the naive row (cost %v, overload %v, %v) is not the policy configured with model: naive (cost %v, overload %v, %d pages, %d tickets)",
			r.Naive.Cost, r.Naive.Overload, r.Naive.Alerts, b.Cost, b.OverloadFraction, b.Pages, b.Tickets)
	}
	if r.Naive.Cost == r.PolicyCost && r.Naive.Overload == r.PolicyOverload {
		t.Errorf("the naive row equals the configured policy's (cost %v): the model was not changed", r.PolicyCost)
	}
}
