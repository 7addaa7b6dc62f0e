package backtest

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/debi-scaler/debi/policy"
)

// MinForecastCoverage is the least share of the scored time a policy's model must have forecast
// for its figures to count in the recommendation: below it the row mostly shows its fallback
// rule, not the policy.
const MinForecastCoverage = 0.5

// Recommendation is the what-if's answer to "what should I run?", computed once from a trace's
// result and read by every format: what ran, the cheapest fixed HPA target of the sweep that
// keeps the overload budget on this history, what the budget policy does, and one sentence
// that says which to choose and what it saves against what ran.
type Recommendation struct {
	Trace string
	// Range is how much of the requested range was scored (nil outside a what-if's replay of
	// Prometheus's history).
	Range *ScoredRange
	// Against is the row the savings are measured against: ActualPolicy (what ran) or, with no
	// recorded replicas, "hpa". AgainstCost and AgainstOverload are its figures (NaN without it),
	// AgainstEpisodes and AgainstLongest its overload episodes and the longest one's duration
	// (Metrics.OverloadEpisodes).
	Against         string
	AgainstCost     float64
	AgainstOverload float64
	AgainstEpisodes int
	AgainstLongest  time.Duration
	// AgainstAlerts, TargetAlerts and PolicyAlerts are the firings of debi's overload-budget
	// alerts at the budget (Metrics.Pages, Metrics.Tickets) on the baseline, the target and the
	// budget policy: what an on-call with debi's rules would have had on each.
	AgainstAlerts, TargetAlerts, PolicyAlerts Alerts
	// Budget is the overload budget (--budget.overload-budget) and Unavoidable the trace's
	// overload no policy avoids: a target keeps the budget when its overload less the
	// unavoidable share is at most the budget.
	Budget, Unavoidable float64
	// CurrentTarget is the HPA target the sentence raises or lowers: the workload's own HPA's
	// where the what-if found it (Options.HPA), else the configured scaling.target; 0 (the
	// sentence sets a target) where the what-if looked for the workload's HPA and found none.
	CurrentTarget float64
	// HPA says what the hpa row is (Options.HPALabel; "" outside a what-if).
	HPA string
	// Target is the cheapest sweep target that keeps the budget (0: none does; Targets are the
	// sweep's, for the sentence that says so), with its cost, overload and saving (1 − cost over
	// AgainstCost).
	Target                                   float64
	Targets                                  []float64
	TargetCost, TargetOverload, TargetSaving float64
	// Policy is the budget policy's row ("" when none ran), with its figures. PolicyCoverage is
	// its forecast_coverage: below MinForecastCoverage it has no role and no figure.
	Policy                                                      string
	PolicyCost, PolicyOverload, PolicyFloorClosed, PolicySaving float64
	PolicyCoverage                                              float64
	// Hold is the budget policy replayed under scaling.budget.idle hold (TraceResult.IdleHold;
	// nil where it was not): its row and, where it pages less, a sentence that says so.
	Hold *VariantRow
	// Naive is the budget policy replayed with the model naive (TraceResult.Naive; nil where it
	// was not): its row and, where it costs less without more overload or pages, a sentence.
	Naive    *VariantRow
	Sentence string
}

// VariantRow is the what-if's budget policy replayed under another setting: its cost, overload
// and alerts, and its saving against the baseline.
type VariantRow struct {
	Cost, Overload, Saving float64
	Alerts                 Alerts
}

// Recommend reads the recommendation off a what-if's trace result (finished: its ratios and
// frontier filled) under the options it ran with.
func Recommend(tr TraceResult, o Options) *Recommendation {
	r := &Recommendation{Trace: tr.Trace, Range: tr.Range, Budget: o.Calibration.Budget, Unavoidable: tr.Unavoidable, CurrentTarget: o.Params.Target, HPA: o.HPALabel(),
		AgainstCost: math.NaN(), AgainstOverload: math.NaN(), TargetCost: math.NaN(), TargetOverload: math.NaN(), TargetSaving: math.NaN(),
		PolicyCost: math.NaN(), PolicyOverload: math.NaN(), PolicyFloorClosed: math.NaN(), PolicySaving: math.NaN(), PolicyCoverage: math.NaN()}
	if h := o.HPA; h != nil {
		r.CurrentTarget = 0
		if h.Yours {
			r.CurrentTarget = h.Target
		}
	}
	var hpa, actual *Run
	for i := range tr.Runs {
		switch run := &tr.Runs[i]; run.Policy {
		case ActualPolicy:
			actual = run
		case "hpa":
			hpa = run
		}
	}
	against := actual
	if against == nil {
		against = hpa
	}
	if against != nil {
		r.Against, r.AgainstCost, r.AgainstOverload = against.Policy, against.Cost, against.OverloadFraction
		r.AgainstEpisodes, r.AgainstLongest = against.OverloadEpisodes, time.Duration(against.LongestOverload*float64(time.Second))
		r.AgainstAlerts = Alerts{against.Pages, against.Tickets}
	}
	saving := func(cost float64) float64 {
		if !(r.AgainstCost > 0) {
			return math.NaN()
		}
		return 1 - cost/r.AgainstCost
	}
	for _, p := range tr.Frontier {
		r.Targets = append(r.Targets, p.Target)
		if r.keeps(p.OverloadFraction) && (r.Target == 0 || p.Cost < r.TargetCost) {
			r.Target, r.TargetCost, r.TargetOverload = p.Target, p.Cost, p.OverloadFraction
			r.TargetAlerts = Alerts{p.Pages, p.Tickets}
		}
	}
	r.TargetSaving = saving(r.TargetCost)
	if b := budgetRun(tr.Runs, o); b != nil {
		r.Policy, r.PolicyCost, r.PolicyOverload, r.PolicyFloorClosed = b.Policy, b.Cost, b.OverloadFraction, b.FloorClosed
		r.PolicySaving, r.PolicyCoverage = saving(b.Cost), b.ForecastCoverage
		r.PolicyAlerts = Alerts{b.Pages, b.Tickets}
		row := func(v *Run) *VariantRow {
			if v == nil || v.Policy != b.Policy {
				return nil
			}
			return &VariantRow{Cost: v.Cost, Overload: v.OverloadFraction, Saving: saving(v.Cost), Alerts: Alerts{v.Pages, v.Tickets}}
		}
		r.Hold, r.Naive = row(tr.IdleHold), row(tr.Naive)
	}
	r.Sentence = r.sentence(o.DebiModel)
	return r
}

// keeps says an overload fraction keeps the budget: its avoidable part is at most the budget
// (a part in a million of the scored time allowed for rounding). A fixed target is held to it:
// it is chosen on this history, knowing its overload there.
func (r *Recommendation) keeps(overload float64) bool {
	return overload-r.Unavoidable <= r.Budget+1e-6
}

// policyKeeps says the budget policy counts and keeps its promise on this history: its avoidable
// overload within BandHigh × the budget. It aims at the budget without knowing the history, so a
// run that spends exactly its budget in expectation lands above it about as often as below (the
// backtest's band_miss_chance); held to the budget itself it would be ruled out half the time.
func (r *Recommendation) policyKeeps() bool {
	return r.PolicyCounts() && r.PolicyOverload-r.Unavoidable <= BandHigh*r.Budget+1e-6
}

// PolicyCounts says the budget policy has a role in the recommendation: it ran and its model
// forecast at least MinForecastCoverage of the scored time.
func (r *Recommendation) PolicyCounts() bool {
	return r.Policy != "" && !(r.PolicyCoverage < MinForecastCoverage)
}

// budgetRun is the budget policy's row: the configured policy when it is one, else the plain
// budget, else the first other budget policy (nil when none ran).
func budgetRun(runs []Run, o Options) *Run {
	isBudget := func(name string) bool {
		s, err := policy.Parse(name, o.DebiModel)
		return err == nil && s.Algorithm == "budget"
	}
	var first *Run
	for i := range runs {
		run := &runs[i]
		if !isBudget(run.Policy) {
			continue
		}
		if run.Policy == o.Configured {
			return run
		}
		if first == nil || run.Policy == "budget" {
			first = run
		}
	}
	return first
}

// policyName is how the sentence names the budget policy: budget for the default model.
func (r *Recommendation) policyName(debiModel string) string {
	if s, err := policy.Parse(r.Policy, debiModel); err == nil && s.Algorithm == "budget" && s.Model == policy.DefaultBudgetModel {
		return "budget"
	}
	return r.Policy
}

// pctText is a share in percent for the sentence, with two decimals ("0.45 %").
func pctText(v float64) string { return fmt.Sprintf("%.2f %%", 100*v) }

// amountText is a saving in whole percent as a verb phrase: "saves 26 %", "costs 4 % more",
// "saves nothing" under half a percent either way (both for "both": "save about", "cost about …
// more", "save nothing").
func amountText(s float64, both bool) string {
	switch {
	case math.Abs(s) < 0.005 && both:
		return "save nothing"
	case math.Abs(s) < 0.005:
		return "saves nothing"
	case s < -0.005 && both:
		return fmt.Sprintf("cost about %.0f %% more", -100*s)
	case s < -0.005:
		return fmt.Sprintf("costs %.0f %% more", -100*s)
	case both:
		return fmt.Sprintf("save about %.0f %%", math.Max(0, 100*s))
	}
	return fmt.Sprintf("saves %.0f %%", math.Max(0, 100*s))
}

// savesText is amountText against a row: "saves 26 % against what ran", "costs 4 % more than
// what ran", "costs the same as what ran" under half a percent either way.
func savesText(s float64, both bool, row string) string {
	if math.Abs(s) < 0.005 {
		if both {
			return "cost the same as " + row
		}
		return "costs the same as " + row
	}
	if s < -0.005 {
		return amountText(s, both) + " than " + row
	}
	return amountText(s, both) + " against " + row
}

// Alerts are the firings of debi's overload-budget alerts on a row: Pages of the page
// (DebiOverloadBudgetBurn, severity page), Tickets of the tickets (DebiOverloadBudgetBurn,
// severity ticket, and DebiOverloadBudgetExhausted).
type Alerts struct{ Pages, Tickets int }

// String is "2 pages and 1 ticket", "no alert".
func (a Alerts) String() string {
	n := func(k int, what string) string {
		if k == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", k, what)
	}
	switch {
	case a.Pages == 0 && a.Tickets == 0:
		return "no alert"
	case a.Tickets == 0:
		return n(a.Pages, "page")
	case a.Pages == 0:
		return n(a.Tickets, "ticket")
	}
	return n(a.Pages, "page") + " and " + n(a.Tickets, "ticket")
}

// column is the table's pages/tickets cell ("2/1").
func (a Alerts) column() string { return fmt.Sprintf("%d/%d", a.Pages, a.Tickets) }

// The verdicts of the recommendation: which row it recommends, and why.
const (
	verdictOnlyPolicy       = iota // no target keeps the budget; the budget policy keeps its band
	verdictNeither                 // no target keeps the budget, and the budget policy does not help
	verdictTargetNoFigure          // the budget policy has no figure (PolicyCounts)
	verdictTargetPolicyOver        // the budget policy overloads beyond its band
	verdictTargetCheaper           // the budget policy costs at least the target
	verdictBoth                    // about the same saving (within a point)
	verdictPolicyCheaper           // the budget policy saves more
)

// verdict is the one decision the sentence (choice) and the alerts it names (chosen) both read.
func (r *Recommendation) verdict() int {
	switch keepsPolicy := r.policyKeeps(); {
	case r.Target == 0 && keepsPolicy:
		return verdictOnlyPolicy
	case r.Target == 0:
		return verdictNeither
	case !r.PolicyCounts():
		return verdictTargetNoFigure
	case !keepsPolicy:
		return verdictTargetPolicyOver
	case r.PolicyCost >= r.TargetCost:
		return verdictTargetCheaper
	case math.IsNaN(r.PolicySaving) || math.Abs(r.PolicySaving-r.TargetSaving) < 0.01:
		return verdictBoth
	}
	return verdictPolicyCheaper
}

// chosen says which rows the sentence recommends: the target, the budget policy, or both.
func (r *Recommendation) chosen() (target, policy bool) {
	switch r.verdict() {
	case verdictOnlyPolicy, verdictPolicyCheaper:
		return false, true
	case verdictNeither:
		return false, false
	case verdictBoth:
		return true, true
	}
	return true, false
}

// alertsSentence says what debi's overload-budget alerts would have done on the rows the
// sentence recommends, beside what ran, where any of them would have fired: an on-call reads
// the choice in pages as well as in pods. Empty where none fired on any of those rows.
func (r *Recommendation) alertsSentence(debiModel string) string {
	target, policy := r.chosen()
	var rows []string
	fired := false
	if target {
		rows = append(rows, fmt.Sprintf("%s on hpa %.2f", r.TargetAlerts, r.Target))
		fired = fired || r.TargetAlerts != Alerts{}
	}
	if policy {
		rows = append(rows, fmt.Sprintf("%s on %s", r.PolicyAlerts, r.policyName(debiModel)))
		fired = fired || r.PolicyAlerts != Alerts{}
	}
	if len(rows) == 0 {
		return ""
	}
	if r.Against != "" {
		rows = append(rows, fmt.Sprintf("%s on %s", r.AgainstAlerts, map[bool]string{true: "what ran", false: "the hpa row"}[r.Against == ActualPolicy]))
		fired = fired || r.AgainstAlerts != Alerts{}
	}
	if !fired {
		return ""
	}
	last := len(rows) - 1
	list := rows[last]
	if last > 0 {
		list = strings.Join(rows[:last], ", ") + ", against " + rows[last]
	}
	return fmt.Sprintf(" debi's overload-budget alerts at the budget, replayed: %s.", list)
}

func (r *Recommendation) sentence(debiModel string) string {
	s := r.choice(debiModel)
	if _, policy := r.chosen(); policy && !r.keeps(r.PolicyOverload) {
		// Recommended above the budget: say why that is keeping it.
		name := r.policyName(debiModel)
		over := pctText(r.PolicyOverload)
		if pctText(r.Unavoidable) != pctText(0) {
			over = fmt.Sprintf("%s (its overload less the %s above what max_replicas serve)", pctText(r.PolicyOverload-r.Unavoidable), pctText(r.Unavoidable))
		}
		s += fmt.Sprintf(" %s's %s is above the budget but within %g× of it, the band %s keeps: a policy that spends exactly its budget lands above it about as often as below.",
			name, over, BandHigh, name)
	}
	if r.Against != "" && !r.keeps(r.AgainstOverload) {
		who := map[bool]string{true: "What ran", false: "hpa"}[r.Against == ActualPolicy]
		if pctText(r.Unavoidable) == pctText(0) {
			s += fmt.Sprintf(" %s was overloaded %s of the scored time, beyond the budget", who, pctText(r.AgainstOverload))
		} else {
			// The episodes count the overload that more replicas would have served, as the
			// budget does: say which share of the overload that is.
			s += fmt.Sprintf(" %s was overloaded %s of the scored time, %s of it with the demand above what max_replicas serve; the other %s is beyond the budget",
				who, pctText(r.AgainstOverload), pctText(r.Unavoidable), pctText(r.AgainstOverload-r.Unavoidable))
		}
		// How it was felt: the incidents of avoidable overload, and the longest.
		switch {
		case r.AgainstEpisodes == 1:
			s += fmt.Sprintf(", in one episode of %s", durationText(r.AgainstLongest))
		case r.AgainstEpisodes > 1:
			s += fmt.Sprintf(", in %d episodes, the longest %s", r.AgainstEpisodes, durationText(r.AgainstLongest))
		}
		s += "."
	}
	s += r.alertsSentence(debiModel)
	s += r.holdSentence(debiModel)
	s += r.naiveSentence(debiModel)
	if r.Against == "hpa" {
		s += " No replicas were recorded, so what ran is not known: the savings are against the hpa row."
	}
	return s
}

// holdSentence says what the budget policy would have done under scaling.budget.idle hold,
// where it pages less than as configured: the pages of a policy that meets the first rise after
// a quiet spell at a price the quiet spell lowered (docs/method.md, "The priced rule"). Empty
// otherwise.
func (r *Recommendation) holdSentence(debiModel string) string {
	h := r.Hold
	if h == nil || !r.PolicyCounts() || h.Alerts.Pages >= r.PolicyAlerts.Pages || !(r.PolicyCost > 0) {
		return ""
	}
	cost := "at the same cost"
	switch d := h.Cost/r.PolicyCost - 1; {
	case d >= 0.005:
		cost = fmt.Sprintf("at %.0f %% more cost", 100*d)
	case d <= -0.005:
		cost = fmt.Sprintf("at %.0f %% less cost", -100*d)
	}
	return fmt.Sprintf(" With scaling.budget.idle: hold, which keeps the price through quiet spells, %s would have overloaded %s %s, with %s against %s: set it where the workload idles for hours.",
		r.policyName(debiModel), pctText(h.Overload), cost, h.Alerts, r.PolicyAlerts)
}

// naiveMinSaving is the least share of the budget policy's cost the model naive must save for
// the recommendation to say so: under it the two decide alike.
const naiveMinSaving = 0.02

// naiveSentence says what the budget policy would have done with the model naive, the last
// value, where it costs at least naiveMinSaving less with no more pages and no more overload
// (or within the budget). Empty otherwise.
func (r *Recommendation) naiveSentence(debiModel string) string {
	n := r.Naive
	if n == nil || !r.PolicyCounts() || !(r.PolicyCost > 0) || n.Cost > (1-naiveMinSaving)*r.PolicyCost ||
		n.Alerts.Pages > r.PolicyAlerts.Pages || n.Overload > r.PolicyOverload && !r.keeps(n.Overload) {
		return ""
	}
	return fmt.Sprintf(" With model: naive, the last value, %s would have cost %.0f %% less and overloaded %s, with %s against %s: its forecasts are rougher, but on this history the policy they drive holds fewer pods; set it if the weeks ahead look like these.",
		r.policyName(debiModel), 100*(1-n.Cost/r.PolicyCost), pctText(n.Overload), n.Alerts, r.PolicyAlerts)
}

func (r *Recommendation) choice(debiModel string) string {
	name := r.policyName(debiModel)
	row := "what ran"
	if r.Against == "hpa" {
		row = "the hpa row"
	}
	budget := fmt.Sprintf("budget %g %%", 100*r.Budget)
	verb := "Set your HPA target to"
	switch {
	case r.CurrentTarget <= 0:
	case r.Target > r.CurrentTarget+1e-9:
		verb = "Raise your HPA target to"
	case r.Target < r.CurrentTarget-1e-9:
		verb = "Lower your HPA target to"
	default:
		verb = "Keep your HPA target at"
	}
	// saves is a row's saving against the baseline, or nothing without one.
	saves := func(s float64, lead string) string {
		if math.IsNaN(s) {
			return ""
		}
		return lead + savesText(s, false, row)
	}
	var pre string
	if r.Policy != "" && !r.PolicyCounts() {
		pre = fmt.Sprintf("%s's model forecast only %.0f %% of the scored time: no figure. ", name, 100*r.PolicyCoverage)
	}
	switch r.verdict() {
	case verdictOnlyPolicy:
		does := ", which does and "
		if !r.keeps(r.PolicyOverload) {
			does = fmt.Sprintf(", which keeps it within %g× the budget and ", BandHigh)
		}
		return pre + fmt.Sprintf("No fixed HPA target of the sweep (%s) keeps the overload within the budget of %g %% on this history; run %s%s (overload %s, %s).",
			targetsText(r.Targets), 100*r.Budget, name, saves(r.PolicySaving, does), pctText(r.PolicyOverload), budget)
	case verdictNeither:
		s := pre + fmt.Sprintf("No fixed HPA target of the sweep (%s) keeps the overload within the budget of %g %% on this history", targetsText(r.Targets), 100*r.Budget)
		if r.PolicyCounts() {
			s += fmt.Sprintf(", nor does %s (overload %s)", name, pctText(r.PolicyOverload))
		}
		return s + ": widen --sweep below its lowest target to find one."
	case verdictTargetNoFigure:
		return pre + fmt.Sprintf("%s %.2f%s (overload %s, %s).", verb, r.Target, saves(r.TargetSaving, ": it "), pctText(r.TargetOverload), budget)
	case verdictTargetPolicyOver:
		return fmt.Sprintf("%s overloads %s here, more than %g× the budget: %s %.2f%s (overload %s, %s).",
			name, pctText(r.PolicyOverload), BandHigh, strings.ToLower(verb[:1])+verb[1:], r.Target, saves(r.TargetSaving, ", which "), pctText(r.TargetOverload), budget)
	case verdictTargetCheaper:
		return fmt.Sprintf("%s saves no more than a fixed target of %.2f here: set the HPA target%s (overload %s, %s's %s, %s).",
			name, r.Target, saves(r.TargetSaving, ", which "), pctText(r.TargetOverload), name, pctText(r.PolicyOverload), budget)
	case verdictBoth:
		same := ""
		if !math.IsNaN(r.PolicySaving) {
			same = ": both " + savesText(r.PolicySaving, true, row)
		}
		return fmt.Sprintf("%s %.2f, or run %s, which picks the level for you%s (overload %s / %s, %s).",
			verb, r.Target, name, same, pctText(r.TargetOverload), pctText(r.PolicyOverload), budget)
	}
	return fmt.Sprintf("Run %s, which picks the level for you%s, a fixed HPA target of %.2f %s (overload %s / %s, %s).",
		name, saves(r.PolicySaving, ": it "), r.Target, amountText(r.TargetSaving, false), pctText(r.PolicyOverload), pctText(r.TargetOverload), budget)
}

// targetsText is the sweep's range ("0.30–0.90").
func targetsText(ts []float64) string {
	if len(ts) == 0 {
		return "none"
	}
	lo, hi := ts[0], ts[0]
	for _, t := range ts {
		lo, hi = math.Min(lo, t), math.Max(hi, t)
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// againstLabel names the baseline row in the tables.
func (r *Recommendation) againstLabel() string {
	if r.Against == "hpa" {
		return "hpa (no recorded replicas)"
	}
	return "what ran (actual)"
}

// rows are the block's lines: label, policy, cost, overload, pages/tickets, saving, floor_closed.
func (r *Recommendation) rows() [][]string {
	saving := func(s float64) string {
		if math.IsNaN(s) {
			return "-"
		}
		return fmt.Sprintf("%+.1f%%", -100*s)
	}
	var out [][]string
	if r.Against != "" {
		out = append(out, []string{r.againstLabel(), r.Against, fmt.Sprintf("%.1f", r.AgainstCost), pct2(r.AgainstOverload), r.AgainstAlerts.column(), "", ""})
	}
	if r.Target > 0 {
		out = append(out, []string{fmt.Sprintf("cheapest target keeping %g%%", 100*r.Budget), fmt.Sprintf("hpa %.2f", r.Target),
			fmt.Sprintf("%.1f", r.TargetCost), pct2(r.TargetOverload), r.TargetAlerts.column(), saving(r.TargetSaving), ""})
	} else {
		out = append(out, []string{fmt.Sprintf("cheapest target keeping %g%%", 100*r.Budget), "none of " + targetsText(r.Targets), "-", "-", "-", "-", ""})
	}
	switch {
	case r.PolicyCounts():
		out = append(out, []string{"the budget policy", r.Policy, fmt.Sprintf("%.1f", r.PolicyCost), pct2(r.PolicyOverload), r.PolicyAlerts.column(), saving(r.PolicySaving), f3(r.PolicyFloorClosed)})
	case r.Policy != "":
		out = append(out, []string{"the budget policy", r.Policy, "-", "-", "-", "-", fmt.Sprintf("forecast %.0f%%", 100*r.PolicyCoverage)})
	}
	if h := r.Hold; h != nil && r.PolicyCounts() {
		out = append(out, []string{"  with idle: hold", r.Policy, fmt.Sprintf("%.1f", h.Cost), pct2(h.Overload), h.Alerts.column(), saving(h.Saving), ""})
	}
	if n := r.Naive; n != nil && r.PolicyCounts() {
		out = append(out, []string{"  with model: naive", r.Policy, fmt.Sprintf("%.1f", n.Cost), pct2(n.Overload), n.Alerts.column(), saving(n.Saving), ""})
	}
	return out
}

// writeText prints the block at the top of the text formats.
func (r *Recommendation) writeText(w io.Writer) {
	fmt.Fprintln(w, wrap(fmt.Sprintf("Recommendation for %s (overload budget %g %%)", r.Trace, 100*r.Budget), 100))
	if r.Range != nil {
		fmt.Fprintln(w, wrap(capitalize(r.Range.String())+".", 100))
	}
	if r.HPA != "" {
		fmt.Fprintln(w, wrap(r.HPA+".", 100))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  \tpolicy\tcost\toverload\tpages/tickets\tcost/%s\tfloor_closed\n", r.Against)
	for _, row := range r.rows() {
		fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w, wrap("→ "+r.Sentence, 100))
	fmt.Fprintln(w)
}

// writeMarkdown prints the block at the top of the Markdown formats.
func (r *Recommendation) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "**Recommendation for %s:** %s\n\n", r.Trace, r.Sentence)
	if r.Range != nil {
		fmt.Fprintf(w, "%s.\n\n", capitalize(r.Range.String()))
	}
	if r.HPA != "" {
		fmt.Fprintf(w, "%s.\n\n", r.HPA)
	}
	fmt.Fprintf(w, "| | policy | cost | overload | pages/tickets | cost/%s | floor_closed |\n|---|---|---:|---:|---:|---:|---:|\n", r.Against)
	for _, row := range r.rows() {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}

// jsonView is the recommendation object of the JSON format (null for what is undefined).
func (r *Recommendation) jsonView() map[string]any {
	target := any(nil)
	if r.Target > 0 {
		target = r.Target
	}
	out := map[string]any{
		"trace": r.Trace, "against": r.Against, "against_cost": num(r.AgainstCost), "against_overload": num(r.AgainstOverload),
		"against_overload_episodes": r.AgainstEpisodes, "against_longest_overload": r.AgainstLongest.Seconds(),
		"against_pages": r.AgainstAlerts.Pages, "against_tickets": r.AgainstAlerts.Tickets,
		"overload_budget": r.Budget, "unavoidable_overload": num(r.Unavoidable), "current_target": num(r.CurrentTarget),
		"target": target, "target_cost": num(r.TargetCost), "target_overload": num(r.TargetOverload), "target_saving": num(r.TargetSaving),
		"sentence": r.Sentence,
	}
	if r.Target > 0 {
		out["target_pages"], out["target_tickets"] = r.TargetAlerts.Pages, r.TargetAlerts.Tickets
	}
	if r.Range != nil {
		out["scored"] = r.Range.String()
	}
	if r.HPA != "" {
		out["hpa"] = r.HPA
	}
	if r.Policy != "" {
		p := map[string]any{"policy": r.Policy, "forecast_coverage": num(r.PolicyCoverage), "counts": r.PolicyCounts()}
		if r.PolicyCounts() {
			p["cost"], p["overload"], p["floor_closed"], p["saving"] = num(r.PolicyCost), num(r.PolicyOverload), num(r.PolicyFloorClosed), num(r.PolicySaving)
			p["pages"], p["tickets"] = r.PolicyAlerts.Pages, r.PolicyAlerts.Tickets
			// in_band: held to the band it keeps (policyKeeps), as the sentence holds it.
			p["in_band"] = r.policyKeeps()
		}
		out["budget_policy"] = p
	}
	for key, v := range map[string]*VariantRow{"idle_hold": r.Hold, "model_naive": r.Naive} {
		if v != nil {
			out[key] = map[string]any{"cost": num(v.Cost), "overload": num(v.Overload), "saving": num(v.Saving), "pages": v.Alerts.Pages, "tickets": v.Alerts.Tickets}
		}
	}
	return out
}

// capitalize upper-cases the first letter of a sentence.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
