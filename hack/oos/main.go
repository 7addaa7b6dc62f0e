// Command oos writes the out-of-sample section of docs/results-budget.md (make results-oos) from
// the JSON reports of hack/oos-runs.sh: the collection's traces split into two fixed halves
// (trace.Halves: stratified by class, alternating by file name), a candidate setting of the
// budget policy chosen on each half and reported on the other, under both demand models, and
// the decomposition of the oracle's saving by the clairvoyant diagnostics, and the floor no
// schedule can beat with the share of its saving budget captures (floor_closed).
//
// The choice on a half: among the default and the candidates that beat it on that half under
// each demand model separately (a lower mean of the three class medians of frontier_ratio, and
// no more traces whose overload leaves the 0.5–1.5× band of the budget), the one with the lowest
// of those means averaged over the two demand models. A choice other than the default wins out
// of sample when it beats the default in the same way on the other half.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/trace"
)

var demands = []string{"linear", "step"}

var classes = []string{"periodic", "smooth", "bursty"}

// run is one policy's figures on one trace (a subset of the backtest's JSON; a figure that is
// null or absent there is NaN here, not 0).
type run struct {
	Policy        string  `json:"policy"`
	FrontierRatio float64 `json:"frontier_ratio"`
	Clamped       bool    `json:"frontier_clamped"`
	GapClosed     float64 `json:"gap_closed"`
	FloorClosed   float64 `json:"floor_closed"`
	Overload      float64 `json:"overload_fraction"`
	ActionsPerDay float64 `json:"actions_per_day"`
	MeanReplicas  float64 `json:"mean_replicas"`
	Cost          float64 `json:"cost"`
	Bound         float64 `json:"frontier_bound"`
	Episodes      int     `json:"overload_episodes"`
	MissChance    float64 `json:"band_miss_chance"`
}

// point is one fixed HPA target of a trace's cost-at-equal-overload frontier.
type point struct {
	Target   float64 `json:"target"`
	Cost     float64 `json:"cost"`
	Overload float64 `json:"overload_fraction"`
}

type traceResult struct {
	Trace       string  `json:"trace"`
	Class       string  `json:"class"`
	Unavoidable float64 `json:"unavoidable_overload"`
	OracleFR    float64 `json:"oracle_frontier_ratio"`
	Floor       float64 `json:"frontier_floor"`
	Runs        []run   `json:"runs"`
	Frontier    []point `json:"frontier"`
}

// UnmarshalJSON reads a run with its ratios NaN where the JSON has null (the backtest's
// undefined) or nothing: a missing ratio must not read as 0.
func (r *run) UnmarshalJSON(b []byte) error {
	type plain run
	nan := math.NaN()
	p := plain{FrontierRatio: nan, GapClosed: nan, FloorClosed: nan, Bound: nan, MissChance: nan}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = run(p)
	return nil
}

// UnmarshalJSON reads a trace with its oracle ratio and floor NaN where the JSON has null or
// nothing.
func (t *traceResult) UnmarshalJSON(b []byte) error {
	type plain traceResult
	p := plain{OracleFR: math.NaN(), Floor: math.NaN()}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = traceResult(p)
	return nil
}

// floorClosed is r's floor_closed as the backtest computes it, from the run's frontier ratio
// and the floor at its own overload (backtest.FloorClosed), not read from the field: a report
// kept in the cache from before issue 31's twelfth round wrote it against the band's lowest
// floor (now floor_closed_band), and reads as the backtest does now. NaN without the bound.
func (t traceResult) floorClosed(r run) float64 {
	return backtest.FloorClosed(r.FrontierRatio, r.Bound)
}

func (t traceResult) run(p string) (run, bool) {
	for _, r := range t.Runs {
		if r.Policy == p {
			return r, true
		}
	}
	return run{}, false
}

type report struct {
	Traces []traceResult `json:"traces"`
}

// results: candidate → demand → trace name → result.
type results map[string]map[string]map[string]traceResult

func load(cache, name, demand string) (map[string]traceResult, error) {
	b, err := os.ReadFile(filepath.Join(cache, name+"-"+demand+".json"))
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s-%s.json: %w", name, demand, err)
	}
	m := map[string]traceResult{}
	for _, t := range rep.Traces {
		m[t.Trace] = t
	}
	return m, nil
}

// median of the defined (not NaN) values; NaN when none is.
func median(v []float64) float64 {
	var s []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

type score struct {
	medians map[string]float64 // class → median frontier ratio of budget
	mean    float64            // mean of the class medians
	outside int                // traces whose avoidable overload is outside 0.5–1.5× the budget
	above   int                // traces with frontier ratio above 1.02
}

func (s score) ok() bool { return !math.IsNaN(s.mean) }

func scoreOf(res map[string]traceResult, half []string, policy string, budget float64) score {
	s := score{medians: map[string]float64{}, mean: math.NaN()}
	if res == nil {
		return s
	}
	per := map[string][]float64{}
	for _, name := range half {
		t, ok := res[name]
		if !ok {
			return s
		}
		r, ok := t.run(policy)
		if !ok {
			return s
		}
		per[t.Class] = append(per[t.Class], r.FrontierRatio)
		if o := avoidable(t, r); o < 0.5*budget || o > 1.5*budget {
			s.outside++
		}
		if r.FrontierRatio > 1.02 {
			s.above++
		}
	}
	sum, n := 0.0, 0
	for _, c := range classes {
		if v, ok := per[c]; ok {
			s.medians[c] = median(v)
			sum += s.medians[c]
			n++
		}
	}
	if n > 0 {
		s.mean = sum / float64(n)
	}
	return s
}

// avoidable is the overload a size could have avoided: the run's overload less the share of
// time demand exceeded u_sla·N_max·R.
func avoidable(t traceResult, r run) float64 { return math.Max(0, r.Overload-t.Unavoidable) }

func main() { os.Exit(mainErr()) }

func mainErr() int {
	traces := flag.String("traces", "../shared/traces", "trace collection (its index.csv gives the classes and the halves)")
	cache := flag.String("cache", "bin/oos", "directory of hack/oos-runs.sh's JSON reports")
	cands := flag.String("candidates", "hack/oos-candidates.txt", "candidate list (name|flags)")
	budget := flag.Float64("budget", 0.01, "the overload budget the runs used")
	out := flag.String("out", "docs/results-budget.md", "file whose out-of-sample section (between the markers) is replaced")
	inSample := flag.String("in-sample", "", "comma-separated trace names the current default was tuned on (marked in the tables)")
	flag.Parse()
	idx, err := trace.LoadIndex(*traces)
	if err != nil || idx == nil {
		fmt.Fprintln(os.Stderr, "oos: no index.csv in", *traces, err)
		return 1
	}
	a, b := trace.Halves(idx)
	strip := func(v []string) []string {
		o := make([]string, len(v))
		for i, f := range v {
			o[i] = strings.TrimSuffix(f, filepath.Ext(f))
		}
		return o
	}
	halves := map[string][]string{"A": strip(a), "B": strip(b)}
	names, flagsOf, err := readCandidates(*cands)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oos:", err)
		return 1
	}
	res := results{}
	for _, c := range append([]string{"yardstick", "default-b0.005", "default-b0.02"}, names...) {
		res[c] = map[string]map[string]traceResult{}
		for _, d := range demands {
			m, err := load(*cache, c, d)
			if c == "default" && err != nil {
				m, err = load(*cache, "yardstick", d) // the yardstick's budget is the default
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "oos: skipped:", err)
				continue
			}
			res[c][d] = m
		}
	}
	marks := map[string]bool{}
	for _, n := range strings.Split(*inSample, ",") {
		if n = strings.TrimSpace(n); n != "" {
			marks[n] = true
		}
	}
	var sb strings.Builder
	write(&sb, res, halves, names, flagsOf, *budget, marks)
	if err := splice(*out, sb.String()); err != nil {
		fmt.Fprintln(os.Stderr, "oos:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "wrote the out-of-sample section of", *out)
	return 0
}

func readCandidates(name string) (names []string, flags map[string]string, err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	flags = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n, fl, _ := strings.Cut(line, "|")
		names = append(names, n)
		flags[n] = strings.TrimSpace(fl)
	}
	if len(names) == 0 || names[0] != "default" {
		return nil, nil, fmt.Errorf("%s: the first candidate must be default", name)
	}
	return names, flags, sc.Err()
}

const (
	beginMarker = "<!-- results-oos:begin (make results-oos) -->"
	endMarker   = "<!-- results-oos:end -->"
)

// splice replaces the text between the markers of file (or appends the section).
func splice(file, section string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(b)
	block := beginMarker + "\n" + section + endMarker + "\n"
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i >= 0 && j > i {
		s = s[:i] + block + s[j+len(endMarker)+1:]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + block
	}
	return os.WriteFile(file, []byte(s), 0o644)
}

// chanceText is a chance with two significant digits at most three decimals deep ("0.30",
// "0.003", "<0.001"; "-" undefined).
func chanceText(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v < 0.001:
		return "<0.001"
	case v < 0.01:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func f3(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

// medianText is the median of the defined values of v, with their number when some are not
// ("0.512 n=7"); "-" when none is.
func medianText(v []float64) string {
	n := 0
	for _, x := range v {
		if !math.IsNaN(x) {
			n++
		}
	}
	s := f3(median(v))
	if n > 0 && n < len(v) {
		s += fmt.Sprintf(" n=%d", n)
	}
	return s
}

func write(w io.Writer, res results, halves map[string][]string, names []string, flagsOf map[string]string, budget float64, marks map[string]bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	other := map[string]string{"A": "B", "B": "A"}
	p("## Out of sample: chosen on one half, reported on the other\n\n")
	p("The collection's %d traces, split by `trace.Halves` (sorted by class, then by file name, dealt alternately to A and B):\n\n",
		len(halves["A"])+len(halves["B"]))
	p("| half | periodic | smooth | bursty |\n|---|---|---|---|\n")
	for _, h := range []string{"A", "B"} {
		by := map[string][]string{}
		for _, n := range halves[h] {
			c := classOf(res, n)
			by[c] = append(by[c], n+mark(marks, n))
		}
		p("| %s | %s | %s | %s |\n", h, strings.Join(by["periodic"], "<br>"), strings.Join(by["smooth"], "<br>"), strings.Join(by["bursty"], "<br>"))
	}
	if len(marks) > 0 {
		p("\n`°` marks the ten traces the current defaults were tuned on (the in-sample tables above); the other nine are out of sample for every default that was not chosen here.\n")
	}
	p("\n### Candidates (budget %g %%, start-up 2 min): mean of the class medians of `frontier_ratio`, and traces whose avoidable overload leaves 0.5–1.5× the budget\n\n", 100*budget)
	p("A half's choice is the default or a candidate that beats it on that half under each demand model (a lower mean, no more traces out of the band), the lowest of the two demand models' mean; it wins when it beats the default in the same way on the other half.\n\n")
	p("| candidate | flags | A linear | A step | B linear | B step |\n|---|---|---:|---:|---:|---:|\n")
	sc := scores{}
	for _, c := range names {
		sc[c] = map[string]map[string]score{}
		row := fmt.Sprintf("| %s | `%s` |", c, flagsOf[c])
		for _, h := range []string{"A", "B"} {
			sc[c][h] = map[string]score{}
			for _, d := range demands {
				s := scoreOf(res[c][d], halves[h], "budget", budget)
				sc[c][h][d] = s
				if s.ok() {
					row += fmt.Sprintf(" %s (%d out) |", f3(s.mean), s.outside)
				} else {
					row += " not run |"
				}
			}
		}
		p("%s\n", row)
	}
	chosen := map[string]string{}
	p("\n")
	for _, h := range []string{"A", "B"} {
		best := choose(sc, names, h)
		chosen[h] = best
		o := other[h]
		verdict := "the default itself"
		if best == "" {
			best, verdict = "none", "no candidate was run under both demand models"
		}
		if best != "default" && best != "none" {
			wins := beats(sc, best, o)
			var cells []string
			for _, d := range demands {
				s, base := sc[best][o][d], sc["default"][o][d]
				cells = append(cells, fmt.Sprintf("%s %s against %s (%d against %d out of band)", d, f3(s.mean), f3(base.mean), s.outside, base.outside))
			}
			verdict = "loses on " + o
			if wins {
				verdict = "wins on " + o
			}
			verdict += ": " + strings.Join(cells, "; ")
		}
		p("- **Chosen on %s: `%s`** — %s.\n", h, best, verdict)
	}
	// Per-half tables for the default and for each half's choice, on the other half.
	show := []string{"default"}
	for _, h := range []string{"A", "B"} {
		if c := chosen[h]; c != "" && c != "none" && c != "default" && !contains(show, c) {
			show = append(show, c)
		}
	}
	for _, c := range show {
		for _, h := range []string{"A", "B"} {
			what := "the current default"
			if c != "default" {
				what = fmt.Sprintf("`%s` (`%s`)", c, flagsOf[c])
				if chosen[other[h]] == c {
					what += fmt.Sprintf(", chosen on %s: out of sample here", other[h])
				} else {
					what += fmt.Sprintf(", chosen on %s: in sample here", h)
				}
			}
			p("\n### Half %s, %s\n\n", h, what)
			perTrace(w, res[c], halves[h], budget, marks)
		}
	}
	bands(w, res, halves, marks)
	fixedTarget(w, res["default"], halves, budget, marks)
	decomposition(w, res["yardstick"], halves, marks)
	floors(w, res["yardstick"], halves, marks, budget)
}

// floors: per trace, the lowest frontier ratio any schedule can have with its avoidable overload
// in the band (the backtest's frontier_floor), beside budget's frontier ratio and the bound at
// budget's own overload; then the class medians per half, which bound every policy's class
// median from below (each trace's ratio is at least its floor, and a median is monotone).
func floors(w io.Writer, res map[string]map[string]traceResult, halves map[string][]string, marks map[string]bool, budget float64) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n## The floor: what no schedule can beat, hindsight included\n\n")
	if res["linear"] == nil || res["step"] == nil {
		p("not run under both demand models.\n")
		return
	}
	p("A tick that is not overloaded has at least its need `n*(t) = ceil(D/(u_sla·R))` ready; a pod is paid for from its creation and serves two minutes (the start-up delay) later, "+
		"so the spec at each tick holds the need of every tick of the two minutes ahead that is not overloaded, and an overloaded tick costs at least `min_replicas` (a tick above what `max_replicas` serve holds `max_replicas`, as every policy does). "+
		"So at overload x no schedule of sizes, hindsight included, costs less than the cheapest choice of the x overloaded ticks under that rule (`NeedBound`, bounded from below by Lagrangian relaxation; at zero overload it is the oracle's cost). "+
		"`frontier_floor` is that cost over the envelope of fixed targets at x, at its lowest over the avoidable overloads in 0.5–1.5× the budget (%g %%): "+
		"no schedule that keeps the band has a lower `frontier_ratio` on that trace. `frontier_bound` is the same at budget's own overload: no schedule with that overload has a lower `frontier_ratio`. "+
		"`floor_closed = (1 − frontier_ratio)/(1 − frontier_bound)` is the share of the saving over the best fixed target possible at budget's own overload that budget captures "+
		"(0 = the best fixed target, 1 = the floor; `-` where the floor saves under 1 %%); it reads the floor at the overload the frontier ratio is read at, where the band's lowest lies at its lower edge wherever the fixed targets get cheaper with overload faster than the floor does. "+
		"Cells are `--demand linear` / `--demand step`.\n\n", 100*budget)
	p("| trace | half | class | floor in the band | bound at budget's overload | budget's frontier ratio | budget's floor closed | oracle's |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	med := map[string]map[string][2][]float64{"A": {}, "B": {}}
	closed := map[string]map[string][2][]float64{"A": {}, "B": {}}
	for _, h := range []string{"A", "B"} {
		for _, name := range halves[h] {
			tl, ts := res["linear"][name], res["step"][name]
			rl, _ := tl.run("budget")
			rs, _ := ts.run("budget")
			cl, cs := tl.floorClosed(rl), ts.floorClosed(rs)
			p("| %s%s | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |\n", name, mark(marks, name), h, tl.Class,
				f3(tl.Floor), f3(ts.Floor), f3(rl.Bound), f3(rs.Bound), f3(rl.FrontierRatio), f3(rs.FrontierRatio), f3(cl), f3(cs), f3(tl.OracleFR), f3(ts.OracleFR))
			v := med[h][tl.Class]
			v[0], v[1] = append(v[0], tl.Floor), append(v[1], ts.Floor)
			med[h][tl.Class] = v
			c := closed[h][tl.Class]
			c[0], c[1] = append(c[0], cl), append(c[1], cs)
			closed[h][tl.Class] = c
		}
	}
	p("\nClass medians of the floor, the least any policy's class median of `frontier_ratio` can be while it keeps the band (linear / step):\n\n")
	p("| half | periodic | smooth | bursty |\n|---|---:|---:|---:|\n")
	for _, h := range []string{"A", "B"} {
		row := "| " + h + " |"
		for _, c := range classes {
			v := med[h][c]
			row += fmt.Sprintf(" %s / %s |", f3(median(v[0])), f3(median(v[1])))
		}
		p("%s\n", row)
	}
	p("\nClass medians of budget's `floor_closed`, over the traces where it is defined (`n=k` when fewer; linear / step):\n\n")
	p("| half | periodic | smooth | bursty |\n|---|---:|---:|---:|\n")
	for _, h := range []string{"A", "B"} {
		row := "| " + h + " |"
		for _, c := range classes {
			v := closed[h][c]
			row += fmt.Sprintf(" %s / %s |", medianText(v[0]), medianText(v[1]))
		}
		p("%s\n", row)
	}
}

// bands: the default's avoidable overload ÷ the budget at 0.5, 1 and 2 % on every trace.
func bands(w io.Writer, res results, halves map[string][]string, marks map[string]bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	runs := []struct {
		name   string
		budget float64
	}{{"default-b0.005", 0.005}, {"default", 0.01}, {"default-b0.02", 0.02}}
	p("\n### The default's overload against the budget at 0.5 / 1 / 2 %%\n\n")
	p("Avoidable overload (demand above u_sla·N_max·R excluded) ÷ the budget; cells are `--demand linear` / `--demand step`; the band is 0.5–1.5. " +
		"A cell outside it (bold) has beside it the chance that a policy spending exactly the budget, in episodes as long as this run's, lands outside the band on that trace (`band_miss_chance`): " +
		"a miss where that chance is large says more about the trace's length than about the policy.\n\n")
	p("| trace | half | class | 0.5 %% | 1 %% | 2 %% |\n|---|---|---|---:|---:|---:|\n")
	outside, missing := map[string]int{}, 0
	for _, h := range []string{"A", "B"} {
		for _, name := range halves[h] {
			row := fmt.Sprintf("| %s%s | %s | %s |", name, mark(marks, name), h, classOf(res, name))
			for _, r := range runs {
				var cells []string
				for _, d := range demands {
					t, ok := res[r.name][d][name]
					if !ok {
						cells = append(cells, "-")
						missing++
						continue
					}
					b, _ := t.run("budget")
					x := avoidable(t, b) / r.budget
					c := fmt.Sprintf("%.2f", x)
					if x < 0.5 || x > 1.5 {
						c = "**" + c + "**"
						if !math.IsNaN(b.MissChance) {
							c += fmt.Sprintf(" (chance %s)", chanceText(b.MissChance))
						}
						outside[r.name]++
					}
					cells = append(cells, c)
				}
				row += " " + strings.Join(cells, " / ") + " |"
			}
			p("%s\n", row)
		}
	}
	p("\nOutside the band (bold), of %d (trace, demand) cells: %d at 0.5 %%, %d at 1 %%, %d at 2 %%.\n",
		2*(len(halves["A"])+len(halves["B"])), outside["default-b0.005"], outside["default"], outside["default-b0.02"])
	if missing > 0 {
		p("%d cells were not run (`-`).\n", missing)
	}
}

// scores: candidate → half → demand model → score.
type scores map[string]map[string]map[string]score

// beats says whether candidate c beats the default on half h under every demand model: a lower
// mean of the class medians of frontier_ratio and no more traces out of the overload band.
func beats(sc scores, c, h string) bool {
	for _, d := range demands {
		s, base := sc[c][h][d], sc["default"][h][d]
		if !s.ok() || !base.ok() || !(s.mean < base.mean) || s.outside > base.outside {
			return false
		}
	}
	return true
}

// choose is half h's choice: among the default and the candidates that beat it there, the
// lowest mean over the demand models; "" when the default was not run on h.
func choose(sc scores, names []string, h string) string {
	best, bestMean := "", math.Inf(1)
	for _, c := range names {
		if c != "default" && !beats(sc, c, h) {
			continue
		}
		mean := 0.0
		for _, d := range demands {
			s := sc[c][h][d]
			if !s.ok() {
				mean = math.NaN()
				break
			}
			mean += s.mean / float64(len(demands))
		}
		if mean < bestMean {
			best, bestMean = c, mean
		}
	}
	return best
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

func mark(m map[string]bool, n string) string {
	if m[n] {
		return " °"
	}
	return ""
}

func classOf(res results, name string) string {
	for _, byD := range res {
		for _, m := range byD {
			if t, ok := m[name]; ok {
				return t.Class
			}
		}
	}
	return "?"
}

// perTrace is budget's table on one half under both demand models: frontier ratio, floor
// closed, gap closed, avoidable overload against the budget, actions a day against hpa@0.5,
// then class medians.
func perTrace(w io.Writer, res map[string]map[string]traceResult, half []string, budget float64, marks map[string]bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if res["linear"] == nil || res["step"] == nil {
		p("not run under both demand models.\n")
		return
	}
	p("Cells are `--demand linear` / `--demand step`. Floor closed is `(1 − frontier_ratio)/(1 − frontier_bound)`, the share of the saving over the best fixed target at budget's own overload that the floor no schedule can beat there shows possible which budget captures " +
		"(`-` where the floor saves under 1 %%; class medians over the traces where it is defined, `n=k` when fewer). " +
		"Overload is the avoidable share (demand above u_sla·N_max·R excluded) ÷ the budget; actions are budget's per day against hpa@0.5's. " +
		"Episodes are the runs of consecutive ticks with avoidable overload, and the band miss chance beside them the chance that a policy spending exactly the budget, in episodes as long as these, lands outside 0.5–1.5× on this trace (`band_miss_chance`, docs/method.md, \"Episodes\"): a miss where it is large says little about the policy. " +
		"A frontier ratio with a `*` lies outside the sweep's envelope and is read at its nearest end, another overload.\n\n")
	p("| trace | class | frontier ratio | floor closed | gap closed | overload ÷ budget | episodes (band miss chance) | actions/day (hpa@0.5) |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	type agg struct{ fr, floor, gap [2][]float64 }
	by := map[string]*agg{}
	actionsOK, n := 0, 0
	for _, name := range half {
		var fr, floor, gap, ov, ep, act [2]string
		class := ""
		for i, d := range demands {
			t := res[d][name]
			class = t.Class
			r, _ := t.run("budget")
			h, _ := t.run("hpa")
			fr[i] = f3(r.FrontierRatio)
			if r.Clamped {
				fr[i] += "*"
			}
			fc := t.floorClosed(r)
			floor[i] = f3(fc)
			gap[i] = f3(r.GapClosed)
			ov[i] = fmt.Sprintf("%.2f", avoidable(t, r)/budget)
			ep[i] = fmt.Sprintf("%d (%s)", r.Episodes, chanceText(r.MissChance))
			act[i] = fmt.Sprintf("%.0f (%.0f)", r.ActionsPerDay, h.ActionsPerDay)
			if by[class] == nil {
				by[class] = &agg{}
			}
			by[class].fr[i] = append(by[class].fr[i], r.FrontierRatio)
			by[class].floor[i] = append(by[class].floor[i], fc)
			by[class].gap[i] = append(by[class].gap[i], r.GapClosed)
			n++
			if r.ActionsPerDay <= h.ActionsPerDay {
				actionsOK++
			}
		}
		p("| %s%s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |\n", name, mark(marks, name), class, fr[0], fr[1], floor[0], floor[1], gap[0], gap[1], ov[0], ov[1], ep[0], ep[1], act[0], act[1])
	}
	for _, c := range classes {
		a := by[c]
		if a == nil {
			continue
		}
		p("| **median** | %s | **%s / %s** | %s / %s | %s / %s | | | |\n", c, f3(median(a.fr[0])), f3(median(a.fr[1])),
			medianText(a.floor[0]), medianText(a.floor[1]), f3(median(a.gap[0])), f3(median(a.gap[1])))
	}
	p("\nActions at or below hpa@0.5's in %d of %d (trace, demand) cells.\n", actionsOK, n)
}

// decomposition: per trace, the share of the oracle's saving (gap_closed) that budget reaches
// with its own forecaster and with forecasters that know the future smoothed over 1 h, 15 min
// and every sample (0 s).
func decomposition(w io.Writer, res map[string]map[string]traceResult, halves map[string][]string, marks map[string]bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n## Decomposing the gap: budget with a forecaster that knows the slow component\n\n")
	if res["linear"] == nil || res["step"] == nil {
		p("not run under both demand models.\n")
		return
	}
	pols := []string{"budget", "clairvoyant-1h-budget", "clairvoyant-15m-budget", "clairvoyant-0s-budget"}
	p("`gap_closed` (the share of the oracle's saving at equal overload) of `budget` with its own forecast (`auto`) and with `clairvoyant-<d>`, " +
		"a diagnostic forecaster that knows the future demand smoothed over `d` (a centred mean) and nothing finer; `0s` knows every future sample. " +
		"Budget 1 %%, start-up 2 min; cells are `--demand linear` / `--demand step`. " +
		"What `clairvoyant-1h` reaches is what perfect knowledge of the hourly component is worth through this policy; " +
		"the rest of the oracle's saving is noise faster than an hour (and the policy's own margin), which no forecast of that component removes.\n\n")
	p("| trace | half | class | oracle frontier ratio | budget | clairvoyant-1h | clairvoyant-15m | clairvoyant-0s |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	cols := map[string]map[string][2][]float64{}
	for _, h := range []string{"A", "B"} {
		for _, name := range halves[h] {
			tl, ts := res["linear"][name], res["step"][name]
			row := fmt.Sprintf("| %s%s | %s | %s | %s / %s |", name, mark(marks, name), h, tl.Class, f3(tl.OracleFR), f3(ts.OracleFR))
			for _, pol := range pols {
				rl, _ := tl.run(pol)
				rs, _ := ts.run(pol)
				row += fmt.Sprintf(" %s / %s |", f3(rl.GapClosed), f3(rs.GapClosed))
				if cols[tl.Class] == nil {
					cols[tl.Class] = map[string][2][]float64{}
				}
				v := cols[tl.Class][pol]
				v[0], v[1] = append(v[0], rl.GapClosed), append(v[1], rs.GapClosed)
				cols[tl.Class][pol] = v
			}
			p("%s\n", row)
		}
	}
	for _, c := range classes {
		row := fmt.Sprintf("| **median** | | %s | |", c)
		for _, pol := range pols {
			v := cols[c][pol]
			row += fmt.Sprintf(" **%s / %s** |", f3(median(v[0])), f3(median(v[1])))
		}
		p("%s\n", row)
	}
}

// fixedTarget is the yardstick a team without hindsight has: the fixed HPA target chosen on one
// half — the largest (cheapest) target of the sweep whose median avoidable overload there is
// within the budget — run on the other half's traces, beside budget at the same budget.
// frontier_ratio compares budget with the best target of each trace chosen in hindsight; this
// compares it with the target a team would have picked on other load.
func fixedTarget(w io.Writer, res map[string]map[string]traceResult, halves map[string][]string, budget float64, marks map[string]bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	other := map[string]string{"A": "B", "B": "A"}
	p("\n### A fixed HPA target chosen on the other half (no hindsight)\n\n")
	p("`frontier_ratio` compares budget with the best fixed target of each trace, chosen in hindsight. A team picks one target on the load it has seen: here the largest target of the sweep whose median avoidable overload on one half is within the budget (%g %%), run on the other half. Cells are avoidable overload ÷ the budget (in the 0.5–1.5× band or not) and budget's cost ÷ that target's cost.\n\n", 100*budget)
	p("| demand | chosen on | target | traces of the other half in the band: target / budget | per trace: overload ÷ budget, target / budget; budget's cost ÷ target's |\n|---|---|---:|---:|---|\n")
	for _, d := range demands {
		ts := res[d]
		if ts == nil {
			continue
		}
		for _, h := range []string{"A", "B"} {
			target, ok := chooseTarget(ts, halves[h], budget)
			if !ok {
				p("| %s | %s | none | | (no target of the sweep keeps the median within the budget) |\n", d, h)
				continue
			}
			in, inB, n := 0, 0, 0
			var cells []string
			for _, name := range halves[other[h]] {
				t, ok := ts[name]
				if !ok {
					continue
				}
				pt, ok1 := t.at(target)
				r, ok2 := t.run("budget")
				if !ok1 || !ok2 {
					continue
				}
				n++
				o, ob := math.Max(0, pt.Overload-t.Unavoidable)/budget, avoidable(t, r)/budget
				if o >= 0.5 && o <= 1.5 {
					in++
				}
				if ob >= 0.5 && ob <= 1.5 {
					inB++
				}
				cells = append(cells, fmt.Sprintf("%s%s %.2f / %.2f; %s", short(name), mark(marks, name), o, ob, f3(r.Cost/pt.Cost)))
			}
			p("| %s | %s | %.2f | %d / %d of %d | %s |\n", d, h, target, in, inB, n, strings.Join(cells, "<br>"))
		}
	}
}

// chooseTarget is the largest target whose median avoidable overload over half is within budget.
func chooseTarget(ts map[string]traceResult, half []string, budget float64) (float64, bool) {
	var targets []float64
	for _, name := range half {
		if t, ok := ts[name]; ok {
			for _, pt := range t.Frontier {
				if !contains64(targets, pt.Target) {
					targets = append(targets, pt.Target)
				}
			}
		}
	}
	sort.Float64s(targets)
	best, found := 0.0, false
	for _, x := range targets {
		var o []float64
		for _, name := range half {
			if t, ok := ts[name]; ok {
				if pt, ok := t.at(x); ok {
					o = append(o, math.Max(0, pt.Overload-t.Unavoidable))
				}
			}
		}
		if len(o) > 0 && median(o) <= budget {
			best, found = x, true
		}
	}
	return best, found
}

func (t traceResult) at(target float64) (point, bool) {
	for _, pt := range t.Frontier {
		if pt.Target == target {
			return pt, true
		}
	}
	return point{}, false
}

func contains64(v []float64, x float64) bool {
	for _, y := range v {
		if y == x {
			return true
		}
	}
	return false
}

// short is a trace's name without its date range and period suffix, for the dense cells.
func short(name string) string {
	if i := strings.Index(name, "_cpumhz"); i > 0 {
		return name[:i]
	}
	return strings.TrimSuffix(strings.TrimSuffix(name, "_5min"), "_avgcpu")
}
