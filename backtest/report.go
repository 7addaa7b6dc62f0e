package backtest

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Formats of Write: "summary" (the default screen: the per-class summary, 100 columns),
// "full" (every figure of every run, wide), "markdown", "csv", "json", and "report" (the
// Markdown of docs/results.md: per-class summary, start-up sweep, every trace).
var Formats = []string{"summary", "full", "markdown", "csv", "json", "report"}

var columns = []string{"trace", "class", "policy", "cost", "cost_ratio", "frontier_ratio", "floor_closed", "gap_closed", "gap_at_overload", "utilization",
	"overload", "unserved", "actions_per_day", "mean_replicas", "zero_share", "cold_overload", "under_share", "under_pods", "over_share", "over_pods",
	"forecast_coverage", "budget_headroom", "train_seconds", "decide_seconds", "ticks_per_second"}

// Indices in columns (and row) of the cells the csv format writes differently.
const (
	colFrontier    = 5
	colFloorClosed = 6
)

// TicksPerSecond is the policy's decision rate: scored ticks over the run's time.
func (r Run) TicksPerSecond() float64 {
	s := r.TrainSeconds + r.DecideSeconds
	if s <= 0 {
		return math.NaN()
	}
	return float64(r.Ticks) / s
}

func (r Run) row(tr TraceResult) []string {
	fr := f3(r.FrontierRatio)
	if r.FrontierClamped {
		fr += "*"
	}
	return []string{tr.Trace, tr.Class, r.Policy, fmt.Sprintf("%.0f", r.Cost), f3(r.CostRatio), fr, f3(r.FloorClosed), f3(r.GapClosed), f3(r.GapAtOverload),
		pct(r.Utilization), pct2(r.OverloadFraction), fmt.Sprintf("%.2f", r.Unserved), fmt.Sprintf("%.1f", r.ActionsPerDay),
		fmt.Sprintf("%.2f", r.MeanReplicas), pct(r.ZeroShare), pct2(r.ColdOverload), pct(r.UnderShare), fmt.Sprintf("%.3f", r.UnderPods), pct(r.OverShare),
		fmt.Sprintf("%.2f", r.OverPods), pctOrDash(r.ForecastCoverage), f3(r.BudgetHeadroom), fmt.Sprintf("%.2f", r.TrainSeconds),
		fmt.Sprintf("%.3f", r.DecideSeconds), fmt.Sprintf("%.0f", r.TicksPerSecond())}
}

func f3(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

func pct2(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) + "%" }

func pctOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return pct(v)
}

// Write prints the report in one of Formats.
func (rep *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.jsonView())
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(append([]string{"startup_delay"}, columns...)); err != nil {
			return err
		}
		for _, set := range rep.sets() {
			for _, tr := range set.Traces {
				for _, r := range tr.Runs {
					row := r.row(tr)
					row[colFrontier] = strings.TrimSuffix(row[colFrontier], "*")
					if math.IsNaN(r.FloorClosed) {
						row[colFloorClosed] = "" // undefined: an empty cell, not a number
					}
					if err := cw.Write(append([]string{set.Delay.String()}, row...)); err != nil {
						return err
					}
				}
			}
		}
		cw.Flush()
		return cw.Error()
	case "markdown":
		if rep.Recommendation != nil {
			rep.Recommendation.writeMarkdown(w)
		}
		fmt.Fprintf(w, "%s\n\n", rep.caption())
		rep.writeTraceMarkdown(w, rep.Traces)
		fmt.Fprintf(w, "\n%s\n", footnote)
		return nil
	case "report":
		rep.writeReport(w)
		return nil
	case "full":
		if rep.Recommendation != nil {
			rep.Recommendation.writeText(w)
		}
		fmt.Fprintln(w, wrap(rep.caption(), 100))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(columns, "\t")+"\t")
		for _, tr := range rep.Traces {
			for _, r := range tr.Runs {
				fmt.Fprintln(tw, strings.Join(r.row(tr), "\t")+"\t")
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, wrap(footnote, 100))
		rep.writeNotes(w)
		return nil
	case "summary", "table", "":
		return rep.WriteScreen(w)
	}
	return fmt.Errorf("format: %q is not one of %s", format, strings.Join(Formats, ", "))
}

// sets returns the main run and every start-up sweep run, each with its delay.
func (rep *Report) sets() []StartupResult {
	out := []StartupResult{{Delay: rep.Options.StartupDelay, Traces: rep.Traces}}
	return append(out, rep.Startup...)
}

func (rep *Report) writeTraceMarkdown(w io.Writer, traces []TraceResult) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
	for _, tr := range traces {
		for _, r := range tr.Runs {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r.row(tr), " | "))
		}
	}
}

func (rep *Report) writeNotes(w io.Writer) {
	for _, n := range rep.Notes {
		fmt.Fprintln(w, wrap("note: "+n, 100))
	}
}

const footnote = "cost = R·∫N dt (core-hours); cost_ratio is to hpa; frontier_ratio is cost over the " +
	"HPA-target envelope's at equal overload (* = outside the envelope, nearest end used); floor_closed = " +
	"(1 − frontier_ratio)/(1 − frontier_bound), the share of the saving possible at the policy's own overload " +
	"(frontier_bound: the lowest frontier ratio any schedule can have there, hindsight and start-up counted) " +
	"that the policy captures (0 = the best fixed target, 1 = the floor; - where the floor saves under 1 %); " +
	"floor_closed_band (json) the same against frontier_floor, the lowest bound in 0.5–1.5× the budget; gap_closed = " +
	"(1 − frontier_ratio)/(1 − oracle's); gap_at_overload = (E − cost)/(E − oracle's cost) with E the " +
	"envelope's cost at the policy's own overload; overload = share of time with D > u_sla·Nr·R; under/over = " +
	"SPEC RG provisioning against the oracle's need ceil(D/(u_sla·R)): share of time and mean pods; " +
	"budget_headroom = the budget policy's mean calibrated headroom over its forecast, in pods."

func (rep *Report) caption() string {
	o := rep.Options
	scale := fmt.Sprintf("demand scaled so the p99 of each trace's warm-up = %.0f%% of max_replicas·R", 100*o.PeakUtilization)
	if o.Scale > 0 {
		scale = fmt.Sprintf("demand = trace × %g", o.Scale)
	}
	horizon := "h = ceil((decision + start-up delay)/period) + 1"
	if o.Horizon > 0 {
		horizon = fmt.Sprintf("h = %d samples", o.Horizon)
	}
	if h := o.HPA; h != nil && h.Yours {
		scale += fmt.Sprintf("; the hpa row: your HPA %s, target %g, replicas %d–%d", h.Name, h.Target, h.MinReplicas, h.MaxReplicas)
	}
	return fmt.Sprintf("debi backtest: sync every %s, observation = mean demand over %s (%s between samples), "+
		"start-up delay %s%s, decision delay %s; R=%g cores, replicas %d–%d, HPA target %g (%s), tolerance %g, "+
		"debi bounds %g–%g (%s), window %s; u_sla %g; warm-up %d samples; forecast %s, W2 = largest forecast over it; "+
		"history %d samples, retrain every %s, season %s; EVT τ=%g q=%g (%s); %s.",
		durationText(o.Tick), durationText(o.MetricWindow), o.Demand, durationText(o.StartupDelay), spreadText(o.StartupSpread), durationText(o.DecisionDelay), o.Request, o.Params.MinReplicas, o.Params.MaxReplicas,
		o.Params.Target, behaviorText(o), o.Params.Tolerance, o.Params.Lower, o.Params.Upper, o.Params.Rounding, durationText(o.Params.Window),
		o.SLAUtilization, o.Warmup, horizon, o.History, durationText(o.Retrain), durationText(o.Season), o.POT.Tau, o.POT.Q, o.POT.Method, scale)
}

// spreadText says how start-ups vary beyond the start-up delay, where they do.
func spreadText(s time.Duration) string {
	if s <= 0 {
		return ""
	}
	return " plus an exponential extra with 0.9 quantile " + durationText(s) + " (policies size for both)"
}

func behaviorText(o Options) string {
	if o.Params.HPABehavior == "none" {
		return "no behavior field, as kubectl autoscale creates: scale-up ≤ max(2·N, 4) per sync, " + o.Params.ScaleDownStabilization.String() + " scale-down stabilisation"
	}
	return "behavior = the API defaults"
}

// wrap breaks s into lines of at most width columns at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		n := len([]rune(word))
		if i > 0 {
			if line+1+n > width {
				b.WriteString("\n")
				line = 0
			} else {
				b.WriteString(" ")
				line++
			}
		}
		b.WriteString(word)
		line += n
	}
	return b.String()
}

// jsonView replaces NaN and infinities (which JSON cannot carry) by null.
func (rep *Report) jsonView() any {
	b, _ := json.Marshal(struct {
		Options Options `json:"parameters"`
	}{rep.Options})
	var params map[string]any
	_ = json.Unmarshal(b, &params)
	view := func(trs []TraceResult) []map[string]any {
		traces := make([]map[string]any, 0, len(trs))
		for _, tr := range trs {
			runs := make([]map[string]any, 0, len(tr.Runs))
			for _, r := range tr.Runs {
				run := map[string]any{
					"policy": r.Policy, "cost": num(r.Cost), "cost_ratio": num(r.CostRatio), "actual_ratio": num(r.ActualRatio),
					"configured":     r.Policy == rep.Options.Configured,
					"frontier_ratio": num(r.FrontierRatio), "frontier_clamped": r.FrontierClamped, "gap_closed": num(r.GapClosed), "gap_at_overload": num(r.GapAtOverload),
					"frontier_bound": num(r.FrontierBound), "floor_closed": num(r.FloorClosed), "floor_closed_band": num(r.FloorClosedBand),
					"utilization": num(r.Utilization), "overload_fraction": num(r.OverloadFraction), "overload_time": num(r.OverloadTime), "unserved": num(r.Unserved),
					"overload_episodes": r.OverloadEpisodes, "longest_overload": num(r.LongestOverload), "band_miss_chance": num(r.BandMissChance),
					"pages": r.Pages, "tickets": r.Tickets,
					"scale_actions": r.ScaleActions, "actions_per_day": num(r.ActionsPerDay), "mean_replicas": num(r.MeanReplicas),
					"zero_share": num(r.ZeroShare), "cold_overload": num(r.ColdOverload),
					"under_share": num(r.UnderShare), "under_pods": num(r.UnderPods), "over_share": num(r.OverShare), "over_pods": num(r.OverPods),
					"forecast_coverage": num(r.ForecastCoverage), "model_history": r.ModelHistory,
					"budget_headroom": num(r.BudgetHeadroom), "budget_level": num(r.BudgetLevel),
					"train_seconds": num(r.TrainSeconds), "decide_seconds": num(r.DecideSeconds), "ticks_per_second": num(r.TicksPerSecond()),
					"trainings": r.Trainings, "train_stops": r.TrainStops, "ticks": r.Ticks, "seconds": r.Seconds,
				}
				if r.MetricOverload != nil {
					run["metric_overload"] = r.MetricOverload
				}
				if r.Policy == "hpa" && rep.Options.HPA != nil {
					// What the row replayed: the workload's HPA, or an HPA at scaling.target.
					hp := rep.Options.hpaParams()
					run["hpa"] = map[string]any{"label": rep.Options.HPALabel(), "yours": rep.Options.HPA.Yours,
						"target": hp.Target, "min_replicas": hp.MinReplicas, "max_replicas": hp.MaxReplicas}
				}
				runs = append(runs, run)
			}
			t := map[string]any{
				"trace": tr.Trace, "class": tr.Class, "samples": tr.Samples, "sample_period": tr.SamplePeriod.String(), "start": startOrNil(tr.Start),
				"scale": num(tr.Scale), "ticks": tr.Ticks, "warmup_time": tr.WarmupTime.String(),
				"oracle_frontier_ratio": num(tr.OracleFrontierRatio), "unavoidable_overload": num(tr.Unavoidable), "unavoidable_overload_time": num(tr.UnavoidableTime),
				"frontier_floor": num(tr.FrontierFloor),
				"runs":           runs, "frontier": tr.Frontier, "sweep_error": tr.SweepFailed, "actual_ready": tr.ActualReady,
			}
			if tr.Metrics != nil {
				t["metrics"] = tr.Metrics
			}
			if r := tr.Range; r != nil {
				t["range"] = map[string]any{"asked": r.Asked.String(), "scored": r.Scored.String(), "warmup": r.Warmup.String(),
					"warmup_before": r.Before.String(), "warmup_inside": r.Inside.String(), "scored_seconds": r.Scored.Seconds(), "asked_seconds": r.Asked.Seconds()}
			}
			traces = append(traces, t)
		}
		return traces
	}
	out := map[string]any{"parameters": params["parameters"], "traces": view(rep.Traces), "notes": rep.Notes}
	if rep.Recommendation != nil {
		out["recommendation"] = rep.Recommendation.jsonView()
	}
	if rep.Coverage != nil {
		var cov []map[string]any
		for _, c := range rep.Coverage {
			cov = append(cov, map[string]any{"series": c.Series, "query": c.Query, "fallback": c.Fallback, "range": c.Range.String(),
				"covered": c.Covered.String(), "from_fallback": c.FromFallback.String(), "missing": c.Missing.String(), "filled": c.Filled.String()})
		}
		out["coverage"] = cov
	}
	var sweep []map[string]any
	for _, s := range rep.Startup {
		sweep = append(sweep, map[string]any{"startup_delay": s.Delay.String(), "traces": view(s.Traces)})
	}
	if sweep != nil {
		out["startup_sweep"] = sweep
	}
	return out
}

func startOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func num(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// durationText prints whole hours and minutes without trailing zeros (2m, not 2m0s).
func durationText(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
