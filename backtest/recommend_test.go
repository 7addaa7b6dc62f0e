package backtest

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/trace"
)

// recommendTrace is a what-if's result by hand: what ran costs 100 at 0.80 % overload, the
// sweep's 0.80 is the cheapest target within a 1 % budget (74, 0.45 %: 0.90 is cheaper but
// overloads 2 %), so it saves 1 − 74/100 = 26 %; the budget policy costs budgetCost at
// budgetOverload, having forecast coverage of the scored time.
func recommendTrace(budgetCost, budgetOverload, coverage float64) TraceResult {
	return TraceResult{Trace: "web (7d to 2026-11-24 00:00)", Frontier: []FrontierPoint{
		{Target: 0.5, Cost: 100, OverloadFraction: 0.002},
		{Target: 0.7, Cost: 80, OverloadFraction: 0.006},
		{Target: 0.8, Cost: 74, OverloadFraction: 0.0045},
		{Target: 0.9, Cost: 70, OverloadFraction: 0.02},
	}, Runs: []Run{
		{Metrics: Metrics{Policy: ActualPolicy, Cost: 100, OverloadFraction: 0.008, OverloadEpisodes: 3, LongestOverload: 240, ForecastCoverage: math.NaN(), FloorClosed: math.NaN()}},
		{Metrics: Metrics{Policy: "auto-budget", Cost: budgetCost, OverloadFraction: budgetOverload, ForecastCoverage: coverage, FloorClosed: 0.4}},
		{Metrics: Metrics{Policy: "hpa", Cost: 90, OverloadFraction: 0.003, ForecastCoverage: math.NaN(), FloorClosed: math.NaN()}},
		{Metrics: Metrics{Policy: OraclePolicy, Cost: 50, ForecastCoverage: math.NaN(), FloorClosed: math.NaN()}},
	}}
}

func recommendOptions(current float64) Options {
	o := DefaultOptions()
	o.Calibration.Budget = 0.01
	o.Params.Target = current
	o.Configured = "auto-budget"
	return o
}

// TestRecommend: each branch of the sentence, on hand-built results.
func TestRecommend(t *testing.T) {
	noActual := recommendTrace(73.8, 0.0052, 1)
	noActual.Runs = noActual.Runs[1:]
	// Unavoidable overload of 1.5 %: 0.90's 2 % is 0.5 % avoidable, so it keeps the budget.
	unavoidable := recommendTrace(73.8, 0.0052, 1)
	unavoidable.Unavoidable = 0.015
	// What ran cost 60 at 5 % overload: keeping the budget costs 1 − 74/60 = −23 % more.
	overloaded := recommendTrace(73.8, 0.0052, 1)
	overloaded.Runs[0].Cost, overloaded.Runs[0].OverloadFraction = 60, 0.05
	overloaded.Runs[0].OverloadEpisodes, overloaded.Runs[0].LongestOverload = 14, 720
	// One episode of 90 s: its duration, with its seconds.
	once := recommendTrace(73.8, 0.0052, 1)
	once.Runs[0].Cost, once.Runs[0].OverloadFraction = 60, 0.05
	once.Runs[0].OverloadEpisodes, once.Runs[0].LongestOverload = 1, 90
	// The same, with 1.5 % of the scored time above what max_replicas serve: the episodes are
	// of the other 3.5 %, and the sentence says which share they are of.
	partly := recommendTrace(73.8, 0.0052, 1)
	partly.Unavoidable = 0.015
	partly.Runs[0].Cost, partly.Runs[0].OverloadFraction = 60, 0.05
	partly.Runs[0].OverloadEpisodes, partly.Runs[0].LongestOverload = 14, 720
	// costs: budget at budgetCost, the sweep's 0.50 at target050, 0.70 and 0.80 at 120.
	costs := func(budgetCost, target050 float64) TraceResult {
		tr := recommendTrace(budgetCost, 0.0052, 1)
		tr.Frontier[0].Cost, tr.Frontier[1].Cost, tr.Frontier[2].Cost = target050, 120, 120
		return tr
	}
	for _, tc := range []struct {
		name    string
		tr      TraceResult
		budget  float64 // 0: 1 %
		current float64
		target  float64
		want    string
	}{
		// budget 73.8 saves 26.2 %, the target 26 %: both about 26 %.
		{"both", recommendTrace(73.8, 0.0052, 1), 0, 0.6, 0.8,
			"Raise your HPA target to 0.80, or run budget, which picks the level for you: both save about 26 % against what ran (overload 0.45 % / 0.52 %, budget 1 %)."},
		{"lower", recommendTrace(73.8, 0.0052, 1), 0, 0.9, 0.8, "Lower your HPA target to 0.80, or run budget"},
		{"keep", recommendTrace(73.8, 0.0052, 1), 0, 0.8, 0.8, "Keep your HPA target at 0.80, or run budget"},
		// budget 65 saves 35 %, nine points more than the target.
		{"budget cheaper", recommendTrace(65, 0.0052, 1), 0, 0.6, 0.8,
			"Run budget, which picks the level for you: it saves 35 % against what ran, a fixed HPA target of 0.80 saves 26 % (overload 0.52 % / 0.45 %, budget 1 %)."},
		// budget 76 is dearer than the target's 74.
		{"budget no cheaper", recommendTrace(76, 0.0052, 1), 0, 0.6, 0.8,
			"budget saves no more than a fixed target of 0.80 here: set the HPA target, which saves 26 % against what ran (overload 0.45 %, budget's 0.52 %, budget 1 %)."},
		{"budget over the budget", recommendTrace(60, 0.03, 1), 0, 0.6, 0.8,
			"budget overloads 3.00 % here, more than 1.5× the budget: raise your HPA target to 0.80, which saves 26 % against what ran (overload 0.45 %, budget 1 %)."},
		{"budget's model forecast too little", recommendTrace(60, 0.0052, 0.31), 0, 0.6, 0.8,
			"budget's model forecast only 31 % of the scored time: no figure. Raise your HPA target to 0.80: it saves 26 % against what ran (overload 0.45 %, budget 1 %)."},
		// 1.07 %: above the budget, within the band budget keeps; cheaper than the target.
		{"budget in its band, above the budget", recommendTrace(65, 0.0107, 1), 0, 0.6, 0.8,
			"Run budget, which picks the level for you: it saves 35 % against what ran, a fixed HPA target of 0.80 saves 26 % (overload 1.07 % / 0.45 %, budget 1 %). budget's 1.07 % is above the budget but within 1.5× of it, the band budget keeps: a policy that spends exactly its budget lands above it about as often as below."},
		// At what ran's cost (99.8, 0.2 % less): the same, not "saves 0 %"; 0.70 and 0.80 cost
		// 120, so the cheapest target keeping the budget is 0.50 at 110, 10 % more than what ran.
		{"budget at what ran's cost", costs(99.8, 110), 0, 0.6, 0.5,
			"Run budget, which picks the level for you: it costs the same as what ran, a fixed HPA target of 0.50 costs 10 % more (overload 0.52 % / 0.20 %, budget 1 %)."},
		// 0.50 at what ran's cost too: both the same.
		{"both at what ran's cost", costs(99.8, 100), 0, 0.6, 0.5,
			"Lower your HPA target to 0.50, or run budget, which picks the level for you: both cost the same as what ran (overload 0.20 % / 0.52 %, budget 1 %)."},
		// 1.51 %: beyond the band.
		{"budget beyond its band", recommendTrace(60, 0.0151, 1), 0, 0.6, 0.8,
			"budget overloads 1.51 % here, more than 1.5× the budget: raise your HPA target to 0.80"},
		// With 0.2 % of it unavoidable, 1.62 % is 1.42 % avoidable: in the band (and 0.90's 2 %
		// is 1.8 % avoidable, so 0.80 stays the target).
		{"budget in its band, part of it unavoidable", func() TraceResult {
			tr := recommendTrace(65, 0.0162, 1)
			tr.Unavoidable = 0.002
			return tr
		}(), 0, 0.6, 0.8,
			"Run budget, which picks the level for you: it saves 35 % against what ran, a fixed HPA target of 0.80 saves 26 % (overload 1.62 % / 0.45 %, budget 1 %). budget's 1.42 % (its overload less the 0.20 % above what max_replicas serve) is above the budget but within 1.5× of it"},
		// A 0.1 % budget: every target overloads more (0.20 % at least).
		{"no target, budget keeps it", recommendTrace(95, 0.0009, 1), 0.001, 0.6, 0,
			"No fixed HPA target of the sweep (0.50–0.90) keeps the overload within the budget of 0.1 % on this history; run budget, which does and saves 5 % against what ran (overload 0.09 %, budget 0.1 %)."},
		{"no target, budget in its band", recommendTrace(95, 0.0013, 1), 0.001, 0.6, 0,
			"No fixed HPA target of the sweep (0.50–0.90) keeps the overload within the budget of 0.1 % on this history; run budget, which keeps it within 1.5× the budget and saves 5 % against what ran (overload 0.13 %, budget 0.1 %). budget's 0.13 % is above the budget but within 1.5× of it"},
		{"no target, nor budget", recommendTrace(95, 0.005, 1), 0.001, 0.6, 0,
			"No fixed HPA target of the sweep (0.50–0.90) keeps the overload within the budget of 0.1 % on this history, nor does budget (overload 0.50 %): widen --sweep below its lowest target to find one."},
		// Without recorded replicas the saving is against hpa's 90: 1 − 74/90 = 18 %.
		{"no actual row", noActual, 0, 0.6, 0.8,
			"Raise your HPA target to 0.80, or run budget, which picks the level for you: both save about 18 % against the hpa row (overload 0.45 % / 0.52 %, budget 1 %). No replicas were recorded, so what ran is not known: the savings are against the hpa row."},
		{"what ran over the budget", overloaded, 0, 0.6, 0.8,
			"Raise your HPA target to 0.80, or run budget, which picks the level for you: both cost about 23 % more than what ran (overload 0.45 % / 0.52 %, budget 1 %). What ran was overloaded 5.00 % of the scored time, beyond the budget, in 14 episodes, the longest 12m."},
		{"what ran over the budget once", once, 0, 0.6, 0.8,
			"Raise your HPA target to 0.80, or run budget, which picks the level for you: both cost about 23 % more than what ran (overload 0.45 % / 0.52 %, budget 1 %). What ran was overloaded 5.00 % of the scored time, beyond the budget, in one episode of 1m30s."},
		{"what ran over the budget, partly unavoidable", partly, 0, 0.6, 0.9,
			"budget saves no more than a fixed target of 0.90 here: set the HPA target, which costs 17 % more than what ran (overload 2.00 %, budget's 0.52 %, budget 1 %). What ran was overloaded 5.00 % of the scored time, 1.50 % of it with the demand above what max_replicas serve; the other 3.50 % is beyond the budget, in 14 episodes, the longest 12m."},
		// 0.90 keeps the budget once the unavoidable 1.5 % is taken off: 30 % saved.
		{"unavoidable", unavoidable, 0, 0.6, 0.9, "budget saves no more than a fixed target of 0.90 here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := recommendOptions(tc.current)
			if tc.budget > 0 {
				o.Calibration.Budget = tc.budget
			}
			r := Recommend(tc.tr, o)
			if r.Target != tc.target {
				t.Errorf("target %v, want %v", r.Target, tc.target)
			}
			if !strings.HasPrefix(r.Sentence, tc.want) {
				t.Errorf("sentence\n%s\nwant\n%s", r.Sentence, tc.want)
			}
		})
	}
}

// TestRecommendAlerts: the sentence says what debi's overload-budget alerts would have done on
// the rows it recommends, beside what ran, and says nothing of them where none fired there.
func TestRecommendAlerts(t *testing.T) {
	alerts := func(budgetCost float64, ran, target, budget Alerts) TraceResult {
		tr := recommendTrace(budgetCost, 0.0052, 1)
		tr.Runs[0].Pages, tr.Runs[0].Tickets = ran.Pages, ran.Tickets
		tr.Frontier[2].Pages, tr.Frontier[2].Tickets = target.Pages, target.Tickets
		tr.Runs[1].Pages, tr.Runs[1].Tickets = budget.Pages, budget.Tickets
		// A target the sentence does not recommend: its alerts are not named.
		tr.Frontier[0].Pages = 9
		return tr
	}
	for _, tc := range []struct {
		name string
		tr   TraceResult
		want string // the sentence's end; "": no alerts named
	}{
		{"both recommended", alerts(73.8, Alerts{5, 12}, Alerts{1, 0}, Alerts{0, 2}),
			"(overload 0.45 % / 0.52 %, budget 1 %). debi's overload-budget alerts at the budget, replayed: 1 page on hpa 0.80, 2 tickets on budget, against 5 pages and 12 tickets on what ran."},
		{"budget recommended", alerts(65, Alerts{0, 1}, Alerts{3, 3}, Alerts{0, 0}),
			"(overload 0.52 % / 0.45 %, budget 1 %). debi's overload-budget alerts at the budget, replayed: no alert on budget, against 1 ticket on what ran."},
		{"the target recommended", alerts(76, Alerts{2, 0}, Alerts{1, 1}, Alerts{7, 7}),
			"debi's overload-budget alerts at the budget, replayed: 1 page and 1 ticket on hpa 0.80, against 2 pages on what ran."},
		{"none fired where it matters", alerts(65, Alerts{}, Alerts{3, 3}, Alerts{}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Recommend(tc.tr, recommendOptions(0.6))
			switch {
			case tc.want == "" && strings.Contains(r.Sentence, "alerts"):
				t.Errorf("sentence names alerts where none fired on the rows it names:\n%s", r.Sentence)
			case !strings.HasSuffix(r.Sentence, tc.want):
				t.Errorf("sentence\n%s\nwant it to end\n%s", r.Sentence, tc.want)
			}
		})
	}
	if got := (Alerts{1, 2}).String(); got != "1 page and 2 tickets" {
		t.Errorf("Alerts{1, 2} is %q", got)
	}
}

// TestRecommendationInEveryFormat: a what-if's report prints the block first in the text
// formats and Markdown, and carries it as the recommendation object in JSON.
func TestRecommendationInEveryFormat(t *testing.T) {
	o := recommendOptions(0.6)
	tr := recommendTrace(73.8, 0.0052, 1)
	tr.Runs[0].Pages, tr.Runs[0].Tickets = 2, 5
	tr.Frontier[2].Tickets = 1
	rep := &Report{Options: o, Traces: []TraceResult{tr}, Recommendation: Recommend(tr, o)}
	for format, want := range map[string][]string{
		"summary":  {"Recommendation for web", "cheapest target keeping 1%", "hpa 0.80", "-26.0%", "→ Raise your HPA target to 0.80", "pages/tickets", "0.80%     2/5"},
		"full":     {"Recommendation for web", "→ Raise your HPA target"},
		"markdown": {"**Recommendation for web (7d to 2026-11-24 00:00):** Raise your HPA target", "| what ran (actual) | actual | 100.0 | 0.80% | 2/5 |", "| hpa 0.80 | 74.0 | 0.45% | 0/1 |"},
		"report":   {"**Recommendation for web"},
		"json":     {`"recommendation": {`, `"target": 0.8`, `"against": "actual"`, `"sentence": "Raise your HPA target to 0.80`, `"floor_closed": 0.4`, `"against_overload_episodes": 3`, `"against_longest_overload": 240`, `"against_pages": 2`, `"against_tickets": 5`, `"target_tickets": 1`, `"in_band": true`},
	} {
		var b bytes.Buffer
		if err := rep.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %q:\n%s", format, w, b.String())
			}
		}
		if format != "json" && !strings.HasPrefix(strings.TrimPrefix(b.String(), "**"), "Recommendation") {
			t.Errorf("%s does not start with the recommendation:\n%.300s", format, b.String())
		}
	}
	// Not a what-if: no block.
	rep.Recommendation = nil
	var b bytes.Buffer
	if err := rep.Write(&b, "summary"); err != nil || strings.Contains(b.String(), "Recommendation") {
		t.Errorf("a backtest of traces has a recommendation (%v):\n%.300s", err, b.String())
	}
}

// TestScoredRange: the what-if's range arithmetic. A 7-day range at 5 minutes is 2016 steps;
// the policy's history of 760 samples is 63h20m (2d15h20m).
func TestScoredRange(t *testing.T) {
	const step = 5 * time.Minute
	week := 7 * 24 * time.Hour
	rangeStart := time.Date(2026, 11, 17, 0, 0, 0, 0, time.UTC)
	warm := 760 * step
	for _, tc := range []struct {
		name                   string
		traceStart             time.Time
		samples, warmup        int
		scored, before, inside time.Duration
		text                   string
	}{
		// The whole history read before the range: 760 + 2017 samples, the range scored whole.
		{"warm-up before the range", rangeStart.Add(-warm), 760 + 2017, 760, week, warm, 0,
			"scored 7d of the 7d asked, after 2d15h20m of warm-up read from before the range"},
		// Nothing before the range: the warm-up comes out of it, 7d − 63h20m = 4d8h40m scored.
		{"no history before the range", rangeStart, 2017, 760, week - warm, 0, warm,
			"scored 4d8h40m of the 7d asked: 2d15h20m of warm-up came from inside the range (Prometheus had no history before it)"},
		// 100 samples (8h20m) before it: 660 of the warm-up's 760 from inside, 7d − 55h scored.
		{"part of it", rangeStart.Add(-100 * step), 100 + 2017, 760, week - 660*step, 100 * step, 660 * step,
			"scored 4d17h of the 7d asked: 2d7h of warm-up came from inside the range (Prometheus had 8h20m of history before it)"},
		{"no warm-up", rangeStart, 2017, 0, week, 0, 0, "scored 7d of the 7d asked, without a warm-up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScoredRange(week, rangeStart, tc.traceStart, tc.samples, tc.warmup, step)
			if s.Scored != tc.scored || s.Before != tc.before || s.Inside != tc.inside || s.Warmup != time.Duration(tc.warmup)*step {
				t.Errorf("%+v: want scored %v, before %v, inside %v", s, tc.scored, tc.before, tc.inside)
			}
			if s.String() != tc.text {
				t.Errorf("%q\nwant %q", s.String(), tc.text)
			}
		})
	}
	// The report carries it from the recording: the recommendation block says it first.
	o := quickOptions()
	o.Policies, o.SweepTargets, o.Warmup, o.Configured = []string{"hpa"}, []float64{0.5, 0.7}, 100, "hpa"
	tr := embedded(t)[0]
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	period := time.Duration(tr.StepMinutes) * time.Minute
	// 400 samples, 40 of them before a range of the other 360 (minus the last step).
	o.Recorded = map[string]Recorded{tr.Name: {Start: start, RangeStart: start.Add(40 * period), Asked: 359 * period}}
	rep, err := RunTraces(context.Background(), []trace.Trace{{Name: tr.Name, StepMinutes: tr.StepMinutes, Values: tr.Values[:400]}}, o)
	if err != nil {
		t.Fatal(err)
	}
	want := NewScoredRange(359*period, start.Add(40*period), start, 400, 100, period)
	if r := rep.Traces[0].Range; r == nil || *r != want || rep.Recommendation == nil || rep.Recommendation.Range == nil {
		t.Fatalf("range %+v, want %+v (recommendation %+v)", r, want, rep.Recommendation)
	}
	for _, run := range rep.Traces[0].Runs {
		if d := math.Abs(run.Seconds - want.Scored.Seconds()); d > period.Seconds() {
			t.Errorf("%s: scored %v s, the range says %v", run.Policy, run.Seconds, want.Scored)
		}
	}
	var b bytes.Buffer
	if err := rep.Write(&b, "summary"); err != nil || !strings.Contains(strings.Join(strings.Fields(b.String()), " "), capitalize(want.String())+".") {
		t.Errorf("the screen lacks %q (%v):\n%.600s", want.String(), err, b.String())
	}
}

// TestGapClosedUndefined: gap_closed and gap_at_overload are undefined ("-", JSON null) where
// the oracle saves under 1 % over the envelope, not a ratio over about zero.
func TestGapClosedUndefined(t *testing.T) {
	// (1 − 1.004)/(1 − 0.9999) = −40: the oracle's 0.01 % saving is no denominator.
	if g := GapClosed(1.004, 0.9999); !math.IsNaN(g) {
		t.Errorf("gap_closed %v with the oracle saving 0.01 %%, want undefined", g)
	}
	// (1 − 0.9)/(1 − 0.8) = 0.5.
	if g := GapClosed(0.9, 0.8); math.Abs(g-0.5) > 1e-12 {
		t.Errorf("gap_closed %v, want 0.5", g)
	}
	tr := TraceResult{Frontier: []FrontierPoint{{Target: 0.5, Cost: 100, OverloadFraction: 0}, {Target: 0.7, Cost: 80, OverloadFraction: 0.01}},
		Runs: []Run{{Metrics: Metrics{Policy: "hpa", Cost: 100.4}}, {Metrics: Metrics{Policy: OraclePolicy, Cost: 99.99}}}}
	finishTrace(&tr, 0.01)
	for _, r := range tr.Runs {
		if !math.IsNaN(r.GapClosed) || !math.IsNaN(r.GapAtOverload) {
			t.Errorf("%s: gap_closed %v, gap_at_overload %v with the oracle 0.01 %% below the envelope; want both undefined", r.Policy, r.GapClosed, r.GapAtOverload)
		}
		if row := r.row(tr); row[7] != "-" || row[8] != "-" {
			t.Errorf("%s: printed %q and %q, want -", r.Policy, row[7], row[8])
		}
	}
}

// TestRecommendIdleHold: where the budget policy replayed under scaling.budget.idle hold pages
// less than as configured, the block has its row and the sentence says what it would have done;
// where it pages as much, the row stays and the sentence says nothing of it.
func TestRecommendIdleHold(t *testing.T) {
	o := recommendOptions(0.6)
	tr := recommendTrace(65, 0.0052, 1)
	tr.Runs[1].Pages, tr.Runs[1].Tickets = 4, 6
	tr.IdleHold = &Run{Metrics: Metrics{Policy: "auto-budget", Cost: 66.3, OverloadFraction: 0.0031, Pages: 1, Tickets: 0}}
	r := Recommend(tr, o)
	if r.Hold == nil || r.Hold.Cost != 66.3 || r.Hold.Alerts != (Alerts{1, 0}) || math.Abs(r.Hold.Saving-0.337) > 1e-9 {
		t.Fatalf("hold row %+v", r.Hold)
	}
	want := " With scaling.budget.idle: hold, which keeps the price through quiet spells, budget would have overloaded 0.31 % at 2 % more cost, with 1 page against 4 pages and 6 tickets: set it where the workload idles for hours."
	if !strings.HasSuffix(r.Sentence, want) {
		t.Errorf("sentence\n%s\nwant it to end\n%s", r.Sentence, want)
	}
	reportHas(t, &Report{Options: o, Traces: []TraceResult{tr}, Recommendation: r}, map[string]string{"summary": "with idle: hold", "markdown": "|   with idle: hold | auto-budget | 66.3 | 0.31% | 1/0 | -33.7% |", "json": `"idle_hold": {`})
	// As many pages under hold: no advice.
	tr.IdleHold.Pages = 4
	if r := Recommend(tr, o); r.Hold == nil || strings.Contains(r.Sentence, "idle: hold") {
		t.Errorf("hold pages as much, yet the sentence advises it (or the row is gone: %+v):\n%s", r.Hold, r.Sentence)
	}
	// Another budget policy's replay is not this row's.
	tr.IdleHold.Policy = "naive-budget"
	if r := Recommend(tr, o); r.Hold != nil {
		t.Errorf("a hold run of another policy became the row: %+v", r.Hold)
	}
}

// TestRecommendNaive: where the budget policy replayed with the model naive costs at least 2 %
// less, with no more pages and no more overload than as configured (or within the budget), the
// block has its row and the sentence says what it would have done; where it saves less, pages
// more or overloads beyond both, the row stays and the sentence says nothing of it.
func TestRecommendNaive(t *testing.T) {
	o := recommendOptions(0.6)
	tr := recommendTrace(65, 0.0052, 1)
	tr.Runs[1].Pages, tr.Runs[1].Tickets = 2, 3
	// More overload than as configured (0.61 % against 0.52 %), but within the 1 % budget.
	tr.Naive = &Run{Metrics: Metrics{Policy: "auto-budget", Cost: 58.5, OverloadFraction: 0.0061, Pages: 1, Tickets: 2}}
	r := Recommend(tr, o)
	if r.Naive == nil || r.Naive.Cost != 58.5 || r.Naive.Alerts != (Alerts{1, 2}) || math.Abs(r.Naive.Saving-0.415) > 1e-9 {
		t.Fatalf("naive row %+v", r.Naive)
	}
	want := " With model: naive, the last value, budget would have cost 10 % less and overloaded 0.61 %, with 1 page and 2 tickets against 2 pages and 3 tickets: its forecasts are rougher, but on this history the policy they drive holds fewer pods; set it if the weeks ahead look like these."
	if !strings.HasSuffix(r.Sentence, want) {
		t.Errorf("sentence\n%s\nwant it to end\n%s", r.Sentence, want)
	}
	reportHas(t, &Report{Options: o, Traces: []TraceResult{tr}, Recommendation: r}, map[string]string{"summary": "with model: naive", "markdown": "|   with model: naive | auto-budget | 58.5 | 0.61% | 1/2 | -41.5% |", "json": `"model_naive": {`})
	for _, c := range []struct {
		why  string
		edit func(n *Run)
	}{
		{"saves under 2 %", func(n *Run) { n.Cost = 64 }},
		{"pages more", func(n *Run) { n.Pages = 3 }},
		{"overloads more than as configured and beyond the budget", func(n *Run) { n.OverloadFraction = 0.0105 }},
	} {
		n := *tr.Naive
		c.edit(&n)
		tc := tr
		tc.Naive = &n
		if r := Recommend(tc, o); r.Naive == nil || strings.Contains(r.Sentence, "model: naive") {
			t.Errorf("%s, yet the sentence advises it (or the row is gone: %+v):\n%s", c.why, r.Naive, r.Sentence)
		}
	}
	// Another budget policy's replay is not this row's.
	tr.Naive.Policy = "naive-budget"
	if r := Recommend(tr, o); r.Naive != nil {
		t.Errorf("a naive run of another policy became the row: %+v", r.Naive)
	}
}

// reportHas checks that rep written in each format holds its text.
func reportHas(t *testing.T, rep *Report, want map[string]string) {
	t.Helper()
	for format, w := range want {
		var b bytes.Buffer
		if err := rep.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), w) {
			t.Errorf("%s lacks %q:\n%s", format, w, b.String())
		}
	}
}
