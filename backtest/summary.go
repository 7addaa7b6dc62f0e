package backtest

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// PaperClaims are the DEBI-HPA paper's headline figures, DEBI against HPA per load class: cost
// change and utilization change (percentage points).
var PaperClaims = map[string]struct{ Cost, Utilization float64 }{
	"periodic": {-47, 30.8},
	"smooth":   {-41, 21.7},
	"bursty":   {-36, 18.6},
}

// ClassRow is one policy's mean figures over the traces of one class.
type ClassRow struct {
	Class, Policy    string
	Traces           int
	CostChange       float64 // mean of (cost_ratio − 1), percent
	UtilizationDelta float64 // mean of (utilization − hpa utilization), percentage points
	Overload         float64 // mean overload fraction, percent
	FrontierRatio    float64 // mean frontier ratio
	ScaleActions     float64 // mean scale actions per 1,000 scored steps
}

// Summary averages every policy's figures per trace class (traces of unknown class are
// grouped as "other").
func (rep *Report) Summary() []ClassRow {
	type acc struct {
		n                             int
		cost, util, over, front, acts float64
	}
	sums := map[[2]string]*acc{}
	for _, tr := range rep.Traces {
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
			a.n++
			a.cost += 100 * (r.CostRatio - 1)
			a.util += 100 * (r.Utilization - hpaUtil)
			a.over += 100 * r.OverloadFraction
			a.front += r.FrontierRatio
			a.acts += 1000 * float64(r.ScaleActions) / float64(max(r.Steps, 1))
		}
	}
	order := map[string]int{}
	for i, p := range rep.Options.Policies {
		order[p] = i
	}
	classOrder := map[string]int{"periodic": 0, "smooth": 1, "bursty": 2}
	var rows []ClassRow
	for k, a := range sums {
		n := float64(a.n)
		rows = append(rows, ClassRow{Class: k[0], Policy: k[1], Traces: a.n, CostChange: a.cost / n,
			UtilizationDelta: a.util / n, Overload: a.over / n, FrontierRatio: a.front / n, ScaleActions: a.acts / n})
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

func classRank(m map[string]int, c string) int {
	if r, ok := m[c]; ok {
		return r
	}
	return len(m)
}

// WriteSummary prints the per-class table in Markdown with the paper's claims beside the debi
// rows.
func (rep *Report) WriteSummary(w io.Writer) error {
	fmt.Fprintf(w, "%s\n\n", rep.caption())
	fmt.Fprintln(w, "| class | policy | traces | cost vs hpa | utilization vs hpa | overload | frontier ratio | scale actions /1k steps | paper (DEBI vs HPA) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rep.Summary() {
		paper := ""
		if c, ok := PaperClaims[r.Class]; ok && strings.HasSuffix(r.Policy, "debi") {
			paper = fmt.Sprintf("cost %+.0f %%, utilization %+.1f pp", c.Cost, c.Utilization)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %+.1f %% | %+.1f pp | %.1f %% | %s | %.1f | %s |\n",
			r.Class, r.Policy, r.Traces, r.CostChange, r.UtilizationDelta, r.Overload, f3(r.FrontierRatio), r.ScaleActions, paper)
	}
	return nil
}
