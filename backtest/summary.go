package backtest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// PaperClaims are the DEBI-HPA paper's headline figures, DEBI against HPA per load class: cost
// change and utilization change (percentage points).
var PaperClaims = map[string]struct{ Cost, Utilization float64 }{
	"periodic": {-47, 30.8},
	"smooth":   {-41, 21.7},
	"bursty":   {-36, 18.6},
}

// ClassRow is one policy's figures over the traces of one class: medians of the ratios, means
// of the rest.
type ClassRow struct {
	Class, Policy string
	Traces        int
	FrontierRatio float64 // median frontier ratio
	// Clamped says a trace's frontier ratio in the median lay outside the envelope (its
	// nearest end used): printed with a *, as --format full does.
	Clamped bool
	// FloorClosed is the median of the traces' floor_closed over those where it is defined,
	// FloorTraces their number (the class's Traces when defined on every one).
	FloorClosed   float64
	FloorTraces   int
	GapClosed     float64 // median gap closed
	GapAtOverload float64 // median gap at the policy's own overload
	Overload      float64 // mean overload time, percent
	CostChange    float64 // mean of (cost_ratio − 1), percent
	// ActualChange is the mean of (actual_ratio − 1), percent: the cost against what ran (NaN
	// without an actual row).
	ActualChange float64
	// UtilizationDelta is the mean of (utilization − hpa utilization), percentage points.
	UtilizationDelta float64
	ActionsPerDay    float64 // mean scaling actions per day
}

// Summary summarises every policy's figures per trace class (traces of unknown class are
// grouped as "other").
func (rep *Report) Summary() []ClassRow { return summarize(rep.Traces, rep.Options.Policies) }

func summarize(traces []TraceResult, policies []string) []ClassRow {
	type acc struct {
		front, floor, gap, gapx   []float64
		over, cost, util, actions float64
		actual                    float64
		clamped                   bool
	}
	sums := map[[2]string]*acc{}
	for _, tr := range traces {
		class := tr.Class
		if class == "" {
			class = "other"
		}
		hpaUtil := math.NaN()
		for _, r := range tr.Runs {
			if r.Policy == "hpa" {
				hpaUtil = r.Utilization
			}
		}
		for _, r := range tr.Runs {
			k := [2]string{class, r.Policy}
			a := sums[k]
			if a == nil {
				a = &acc{}
				sums[k] = a
			}
			a.front = append(a.front, r.FrontierRatio)
			a.gap = append(a.gap, r.GapClosed)
			if !math.IsNaN(r.FloorClosed) {
				a.floor = append(a.floor, r.FloorClosed)
			}
			a.gapx = append(a.gapx, r.GapAtOverload)
			a.over += 100 * r.OverloadFraction
			a.cost += 100 * (r.CostRatio - 1)
			a.actual += 100 * (r.ActualRatio - 1)
			a.clamped = a.clamped || r.FrontierClamped
			a.util += 100 * (r.Utilization - hpaUtil)
			a.actions += r.ActionsPerDay
		}
	}
	order := map[string]int{}
	for i, p := range policies {
		order[strings.ToLower(p)] = i
	}
	if _, ok := order[OraclePolicy]; !ok {
		order[OraclePolicy] = len(policies)
	}
	if _, ok := order[ActualPolicy]; !ok {
		order[ActualPolicy] = -1 // what ran comes first
	}
	classOrder := map[string]int{"periodic": 0, "smooth": 1, "bursty": 2}
	var rows []ClassRow
	for k, a := range sums {
		n := float64(len(a.front))
		rows = append(rows, ClassRow{Class: k[0], Policy: k[1], Traces: len(a.front), FrontierRatio: median(a.front),
			FloorClosed: median(a.floor), FloorTraces: len(a.floor),
			GapClosed: median(a.gap), GapAtOverload: median(a.gapx), Overload: a.over / n, CostChange: a.cost / n, UtilizationDelta: a.util / n,
			ActualChange: a.actual / n, Clamped: a.clamped,
			ActionsPerDay: a.actions / n})
	}
	sort.Slice(rows, func(i, j int) bool {
		ci, cj := classRank(classOrder, rows[i].Class), classRank(classOrder, rows[j].Class)
		if ci != cj {
			return ci < cj
		}
		return order[rows[i].Policy] < order[rows[j].Policy]
	})
	return rows
}

// median of the finite values (NaN when none).
func median(v []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func classRank(m map[string]int, c string) int {
	if r, ok := m[c]; ok {
		return r
	}
	return len(m)
}

// WriteScreen prints the default screen, at most 100 columns wide: the parameters, the
// per-class summary with frontier_ratio and floor_closed first (the gaps to the oracle are in
// --format full), the oracle's limit and the floor per trace, the start-up sweep and the notes.
func (rep *Report) WriteScreen(w io.Writer) error {
	if rep.Recommendation != nil {
		rep.Recommendation.writeText(w)
	}
	fmt.Fprintln(w, wrap(rep.caption(), 100))
	fmt.Fprintln(w)
	if len(rep.Coverage) > 0 {
		fmt.Fprintln(w, "History read from Prometheus")
		for _, c := range rep.Coverage {
			fmt.Fprintln(w, wrap("  "+c.String(), 100))
		}
		fmt.Fprintln(w)
	}
	rep.writeClassTable(w, rep.Traces, rep.Options.StartupDelay)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "trace\tclass\tsamples\toracle\tfloor\t>N_max\tenvelope targets")
	for _, tr := range rep.Traces {
		name := tr.Trace
		if len(name) > 32 {
			name = name[:32]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d×%v\t%s\t%s\t%s\t%s\n", name, tr.Class, tr.Samples, durationText(tr.SamplePeriod),
			f3(tr.OracleFrontierRatio), f3(tr.FrontierFloor), pct2(tr.Unavoidable), envelopeText(tr.Frontier))
	}
	tw.Flush()
	for _, s := range rep.Startup {
		fmt.Fprintln(w)
		rep.writeClassTable(w, s.Traces, s.Delay)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap("frontier = cost ÷ the cheapest fixed HPA target at the same overload (< 1 beats every one); "+
		"* = outside the envelope, its nearest end used; "+actualText(rep.Traces)+
		"floor_closed = (1 − frontier)/(1 − the floor at the policy's own overload), the share captured of the saving possible there "+
		"(0 = the best fixed target, 1 = the floor; "+
		"- = the floor saves under 1 %; n=k: the median of the k traces where it is defined); "+
		"overload = share of time above u_sla; oracle = the "+
		"oracle's frontier ratio; floor = the lowest frontier ratio any schedule can have with its avoidable overload in 0.5–1.5× the budget, hindsight and start-up counted (floor_closed reads it at each policy's own overload instead); >N_max = time with demand above u_sla·N_max·R, overload no policy avoids; "+
		"--format full gives every figure of every trace (gap_closed and gap_at_overload: the share of the oracle's saving captured).", 100))
	rep.writeNotes(w)
	return nil
}

// actualText explains the actual row, and where its ready pods come from, when a trace has one.
func actualText(traces []TraceResult) string {
	for _, tr := range traces {
		if tr.ActualReady != "" {
			return "actual = the workload's recorded replicas as they ran, scored like every policy, its ready pods " +
				tr.ActualReady + "; cost/actual = cost against it; "
		}
	}
	return ""
}

// String is the coverage in words.
func (c Coverage) String() string {
	share := 0.0
	if c.Range > 0 {
		share = min(100, 100*float64(c.Covered)/float64(c.Range))
	}
	s := fmt.Sprintf("%s: covered %s of %s (%.0f%%)", c.Series, humanDuration(c.Covered), humanDuration(c.Range), share)
	if c.FromFallback > 0 {
		s += fmt.Sprintf(", %s of it from the raw series (the recording rule had no samples then)", humanDuration(c.FromFallback))
	}
	return s + fmt.Sprintf("; missing %s (not replayed); filled %s (the sample before carried over)", humanDuration(c.Missing), humanDuration(c.Filled))
}

// humanDuration is d in days, hours and minutes (4d10h35m, 0m).
func humanDuration(d time.Duration) string {
	if d <= 0 {
		return "0m"
	}
	var b strings.Builder
	if days := d / (24 * time.Hour); days > 0 {
		fmt.Fprintf(&b, "%dd", days)
		d -= days * 24 * time.Hour
	}
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	return b.String()
}

// envelopeText lists the sweep's targets on the envelope, compactly.
func envelopeText(pts []FrontierPoint) string {
	var on []string
	for _, p := range pts {
		if p.OnEnvelope {
			on = append(on, fmt.Sprintf("%g", p.Target))
		}
	}
	switch {
	case len(on) == 0:
		return "-"
	case len(on) <= 4:
		return strings.Join(on, " ")
	}
	return fmt.Sprintf("%d of %d, %s … %s", len(on), len(pts), on[0], on[len(on)-1])
}

func (rep *Report) writeClassTable(w io.Writer, traces []TraceResult, startup time.Duration) {
	fmt.Fprintf(w, "Per class at start-up %v (frontier and floor_closed: medians over the class's traces)\n", durationText(startup))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rows := summarize(traces, rep.Options.Policies)
	actual := slices.ContainsFunc(rows, func(r ClassRow) bool { return r.Policy == ActualPolicy })
	head := "class\tpolicy\ttraces\tfrontier\tfloor_closed\toverload\tcost/hpa\tactions/day\t"
	if actual {
		head += "cost/actual\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		pol := r.Policy
		if len(pol) > 24 {
			pol = pol[:24]
		}
		if rep.Options.Configured != "" && r.Policy == rep.Options.Configured {
			pol = "> " + pol + " (yours)"
		}
		fr := f3(r.FrontierRatio)
		if r.Clamped && fr != "-" {
			fr += "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.2f%%\t%+.1f%%\t%.1f\t", r.Class, pol, r.Traces, fr,
			r.floorText(), r.Overload, r.CostChange, r.ActionsPerDay)
		if actual {
			fmt.Fprintf(tw, "%+.1f%%\t", r.ActualChange)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// floorText is the class median of floor_closed, with the number of traces it is defined on
// when that is fewer than the class's ("0.512 n=2"); "-" when it is defined on none.
func (r ClassRow) floorText() string {
	s := f3(r.FloorClosed)
	if r.FloorTraces > 0 && r.FloorTraces < r.Traces {
		s += fmt.Sprintf(" n=%d", r.FloorTraces)
	}
	return s
}

// writeReport is the Markdown of docs/results.md.
func (rep *Report) writeReport(w io.Writer) {
	if rep.Recommendation != nil {
		rep.Recommendation.writeMarkdown(w)
	}
	fmt.Fprintf(w, "%s\n\n", rep.caption())
	for _, s := range rep.sets() {
		fmt.Fprintf(w, "### Per class, start-up %v\n\n", durationText(s.Delay))
		fmt.Fprintln(w, "| class | policy | traces | frontier ratio (median) | floor closed (median) | gap closed (median) | gap at own overload (median) | overload | cost vs hpa | utilization vs hpa | actions/day | paper (DEBI vs HPA) |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		for _, r := range summarize(s.Traces, rep.Options.Policies) {
			paper := ""
			if c, ok := PaperClaims[r.Class]; ok && strings.HasSuffix(r.Policy, "debi") {
				paper = fmt.Sprintf("cost %+.0f %%, utilization %+.1f pp", c.Cost, c.Utilization)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %.2f %% | %+.1f %% | %+.1f pp | %.1f | %s |\n",
				r.Class, r.Policy, r.Traces, f3(r.FrontierRatio), r.floorText(), f3(r.GapClosed), f3(r.GapAtOverload), r.Overload, r.CostChange, r.UtilizationDelta, r.ActionsPerDay, paper)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "### Per trace, start-up %v\n\n", durationText(rep.Options.StartupDelay))
	fmt.Fprintln(w, "| trace | class | samples | oracle frontier ratio | frontier floor | overload no policy avoids (demand above N_max) | envelope targets |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|")
	for _, tr := range rep.Traces {
		fmt.Fprintf(w, "| %s | %s | %d × %v | %s | %s | %s | %s |\n", tr.Trace, tr.Class, tr.Samples, durationText(tr.SamplePeriod),
			f3(tr.OracleFrontierRatio), f3(tr.FrontierFloor), pct2(tr.Unavoidable), envelopeText(tr.Frontier))
	}
	fmt.Fprintln(w)
	rep.writeTraceMarkdown(w, rep.Traces)
	fmt.Fprintf(w, "\n%s\n", footnote)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\n- %s", n)
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w)
	}
}
