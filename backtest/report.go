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
)

// Formats of Write.
var Formats = []string{"table", "markdown", "json", "csv", "summary", "report"}

var columns = []string{"trace", "class", "policy", "cost", "cost_ratio", "frontier_ratio", "utilization",
	"overload_steps", "overload_fraction", "unserved", "hot_steps", "scale_actions", "mean_replicas",
	"train_seconds", "decide_seconds"}

func (r Run) row(tr TraceResult) []string {
	fr := f3(r.FrontierRatio)
	if r.FrontierClamped {
		fr += "*"
	}
	return []string{tr.Trace, tr.Class, r.Policy, fmt.Sprintf("%.0f", r.Cost), f3(r.CostRatio), fr,
		pct(r.Utilization), strconv.Itoa(r.OverloadSteps), pct(r.OverloadFraction), fmt.Sprintf("%.1f", r.Unserved),
		strconv.Itoa(r.HotSteps), strconv.Itoa(r.ScaleActions), fmt.Sprintf("%.2f", r.MeanReplicas),
		fmt.Sprintf("%.2f", r.TrainSeconds), fmt.Sprintf("%.3f", r.DecideSeconds)}
}

func f3(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

// Write prints the report in one of Formats.
func (rep *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.jsonView())
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(columns); err != nil {
			return err
		}
		for _, tr := range rep.Traces {
			for _, r := range tr.Runs {
				row := r.row(tr)
				row[5] = strings.TrimSuffix(row[5], "*")
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
		cw.Flush()
		return cw.Error()
	case "markdown":
		fmt.Fprintf(w, "%s\n\n", rep.caption())
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
		for _, tr := range rep.Traces {
			for _, r := range tr.Runs {
				fmt.Fprintf(w, "| %s |\n", strings.Join(r.row(tr), " | "))
			}
		}
		fmt.Fprintf(w, "\n%s\n", footnote)
		return nil
	case "summary":
		return rep.WriteSummary(w)
	case "report":
		// The per-class summary, then every trace's rows (docs/results.md).
		if err := rep.WriteSummary(w); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n### Per trace\n\n")
		return rep.Write(w, "markdown")
	case "table", "":
		fmt.Fprintln(w, rep.caption())
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
		fmt.Fprintln(w, footnote)
		return nil
	}
	return fmt.Errorf("format: %q is not one of %s", format, strings.Join(Formats, ", "))
}

const footnote = "cost = R·ΣN (core-steps); cost_ratio is to hpa; frontier_ratio is to the HPA-target envelope at equal overload (* = outside the envelope, nearest end used); overload = D > u_sla·Nr·R."

func (rep *Report) caption() string {
	o := rep.Options
	scale := fmt.Sprintf("demand scaled so each trace's p99 = %.0f%% of max_replicas·R", 100*o.PeakUtilization)
	if o.Scale > 0 {
		scale = fmt.Sprintf("demand = trace × %g", o.Scale)
	}
	return fmt.Sprintf("debi backtest: R=%g cores, replicas %d–%d, HPA target %g, tolerance %g, bounds %g–%g, rounding %s, "+
		"start-up delay %d step(s), warm-up %d, u_sla %g, lead %d, history %d, retrain every %d, EVT τ=%g q=%g (%s); %s.",
		o.Request, o.Params.MinReplicas, o.Params.MaxReplicas, o.Params.Target, o.Params.Tolerance, o.Params.Lower, o.Params.Upper,
		o.Params.Rounding, o.StartupDelay, o.Warmup, o.SLAUtilization, o.LeadSteps, o.History, o.Retrain, o.POT.Tau, o.POT.Q, o.POT.Method, scale)
}

// jsonView replaces NaN and infinities (which JSON cannot carry) by null.
func (rep *Report) jsonView() any {
	b, _ := json.Marshal(struct {
		Options Options `json:"parameters"`
	}{rep.Options})
	var params map[string]any
	_ = json.Unmarshal(b, &params)
	traces := make([]map[string]any, 0, len(rep.Traces))
	for _, tr := range rep.Traces {
		runs := make([]map[string]any, 0, len(tr.Runs))
		for _, r := range tr.Runs {
			runs = append(runs, map[string]any{
				"policy": r.Policy, "cost": num(r.Cost), "cost_ratio": num(r.CostRatio),
				"frontier_ratio": num(r.FrontierRatio), "frontier_clamped": r.FrontierClamped,
				"utilization": num(r.Utilization), "overload_steps": r.OverloadSteps,
				"overload_fraction": num(r.OverloadFraction), "unserved": num(r.Unserved),
				"hot_steps": r.HotSteps, "scale_actions": r.ScaleActions, "mean_replicas": num(r.MeanReplicas),
				"train_seconds": num(r.TrainSeconds), "decide_seconds": num(r.DecideSeconds),
				"trainings": r.Trainings, "train_stops": r.TrainStops, "steps": r.Steps,
			})
		}
		traces = append(traces, map[string]any{
			"trace": tr.Trace, "class": tr.Class, "steps": tr.Steps, "scale": num(tr.Scale),
			"runs": runs, "frontier": tr.Frontier, "sweep_error": tr.SweepFailed,
		})
	}
	return map[string]any{"parameters": params["parameters"], "traces": traces}
}

func num(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}
