package grafana

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

var update = flag.Bool("update", false, "rewrite the committed dashboards from the generator")

// TestCommittedDashboardsAreFresh fails when grafana/*.json differ from what the Go definitions
// generate: someone edited the JSON by hand or changed the Go without `make dashboards`.
func TestCommittedDashboardsAreFresh(t *testing.T) {
	gen, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		for _, f := range gen {
			if err := os.WriteFile(f.Name, f.JSON, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	onDisk, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range gen {
		names = append(names, f.Name)
		b, err := os.ReadFile(f.Name)
		if err != nil {
			t.Errorf("%s: %v (run `make dashboards`)", f.Name, err)
			continue
		}
		if !bytes.Equal(b, f.JSON) {
			t.Errorf("%s is stale: run `make dashboards` (or go test ./grafana -update)", f.Name)
		}
	}
	if strings.Join(onDisk, ",") != strings.Join(names, ",") {
		t.Errorf("grafana/ holds %v, the generator writes %v: remove the extra files", onDisk, names)
	}
}

// dashboardModel is the part of the JSON model the checks below read.
type dashboardModel struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID      string `json:"refId"`
			Expr       string `json:"expr"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaBuiltins are the variables Grafana itself defines.
var grafanaBuiltins = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true, "__range_s": true, "__range_ms": true, "__interval_ms": true}

// TestDashboardModels checks what Grafana needs and JSON does not enforce: unique uids, panel ids
// and titles, a refId on every query (the SDK leaves it empty), every query on the datasource
// variable, and every $variable defined by the dashboard or by Grafana.
func TestDashboardModels(t *testing.T) {
	files, err := Committed()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("want the policy and the fleet dashboards, got %d files", len(files))
	}
	uids := map[string]string{}
	for _, f := range files {
		t.Run(f.Name, func(t *testing.T) {
			var d dashboardModel
			if err := json.Unmarshal(f.JSON, &d); err != nil {
				t.Fatal(err)
			}
			if d.UID == "" || d.Title == "" {
				t.Errorf("uid %q, title %q: both required", d.UID, d.Title)
			}
			if other, dup := uids[d.UID]; dup {
				t.Errorf("uid %q also used by %s", d.UID, other)
			}
			uids[d.UID] = f.Name
			defined := map[string]bool{}
			for _, v := range d.Templating.List {
				defined[v.Name] = true
			}
			if !defined["datasource"] {
				t.Error("no datasource variable: the dashboard would be bound to one Grafana's data source uid")
			}
			ids, titles := map[int]bool{}, map[string]bool{}
			queries := 0
			for _, p := range d.Panels {
				if ids[p.ID] {
					t.Errorf("panel id %d used twice", p.ID)
				}
				ids[p.ID] = true
				if titles[p.Title] {
					t.Errorf("panel title %q used twice: Queries() names panels by title", p.Title)
				}
				titles[p.Title] = true
				if p.Type == "row" {
					continue
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					queries++
					if tg.RefID == "" || refs[tg.RefID] {
						t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
					}
					refs[tg.RefID] = true
					if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
						t.Errorf("panel %q query %s: datasource is not ${datasource}", p.Title, tg.RefID)
					}
					for _, m := range varRE.FindAllStringSubmatch(tg.Expr, -1) {
						if name := m[1] + m[2]; !defined[name] && !grafanaBuiltins[name] {
							t.Errorf("panel %q query %s uses $%s, which the dashboard does not define", p.Title, tg.RefID, name)
						}
					}
				}
			}
			if queries == 0 {
				t.Error("no queries")
			}
		})
	}
}

// TestQueriesParse parses every panel's PromQL, once with the default variable values and once
// for a policy name that needs escaping.
func TestQueriesParse(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 20 {
		t.Fatalf("got %d queries; the two dashboards have more than 20", len(qs))
	}
	p := parser.NewParser(parser.Options{})
	for _, q := range qs {
		for _, policy := range []string{"", "shop.web-1"} {
			expr := q.PromQL(policy)
			e, err := p.ParseExpr(expr)
			if err != nil {
				t.Errorf("%s / %q %s: %v\n%s", q.Dashboard, q.Panel, q.RefID, err, expr)
				continue
			}
			if ty := e.Type(); ty != parser.ValueTypeVector && ty != parser.ValueTypeScalar {
				t.Errorf("%s / %q %s: a panel query must return a vector or scalar, got %s", q.Dashboard, q.Panel, q.RefID, ty)
			}
		}
	}
}

// TestDashboardMetricsExist ties the dashboards to the metric names the exporter and the
// webhook register and the recording rules record, so a rename on either side fails here
// instead of leaving an empty panel.
func TestDashboardMetricsExist(t *testing.T) {
	var sources bytes.Buffer
	for _, pat := range []string{"../exporter/*.go", "../webhook/*.go", "../rules/*.yaml", "../rules/*.yml"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sources.Write(b)
		}
	}
	if sources.Len() == 0 {
		t.Skip("no exporter, webhook or rules sources next to grafana/")
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	p := parser.NewParser(parser.Options{})
	for _, q := range qs {
		e, err := p.ParseExpr(q.PromQL(""))
		if err != nil {
			continue // TestQueriesParse reports it
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok || seen[vs.Name] {
				return nil
			}
			if strings.Contains(vs.Name, ":") { // a recording rule's output
				seen[vs.Name] = true
				if !bytes.Contains(sources.Bytes(), []byte("record: "+vs.Name)) {
					t.Errorf("%s / %q uses %s, which no rule in rules/ records", q.Dashboard, q.Panel, vs.Name)
				}
				return nil
			}
			if !strings.HasPrefix(vs.Name, "debi_") {
				return nil
			}
			seen[vs.Name] = true
			name := regexp.MustCompile(`_(bucket|count|sum)$`).ReplaceAllString(vs.Name, "")
			if !bytes.Contains(sources.Bytes(), []byte(`"`+name+`"`)) && !bytes.Contains(sources.Bytes(), []byte("record: "+name)) {
				t.Errorf("%s / %q uses %s, which neither exporter/, webhook/ nor rules/ defines", q.Dashboard, q.Panel, vs.Name)
			}
			return nil
		})
	}
	if len(seen) < 10 {
		t.Errorf("only %d debi_ metrics found in the dashboards", len(seen))
	}
}

func TestExpand(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`x{policy=~"$policy"}[$__rate_interval]`, `x{policy=~"a\\.b"}[1m]`},
		{`${sla} * $__range_s`, `0.9 * 3600`},
		{`${policy:regex}`, `a\\.b`},
		{`$unknown`, `$unknown`}, // left alone, so parsing fails and a test notices
	} {
		if got := (Query{Expr: c.in}).PromQL("a.b"); got != c.want {
			t.Errorf("PromQL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestBudgetRow: the policy dashboard has an overload-budget row, and every query in it reads a
// series only budget policies publish (a debi_budget_ series or a burn rate recorded from
// them), so that it is empty, not misleading, for a policy of another algorithm: the live tests
// run those panels against a budget policy.
func TestBudgetRow(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range qs {
		if q.Row != BudgetRow {
			continue
		}
		n++
		if q.Dashboard != "debi-policy.json" {
			t.Errorf("%s / %q: the budget row belongs to the policy dashboard", q.Dashboard, q.Panel)
		}
		if !strings.Contains(q.Expr, "debi_budget_") {
			t.Errorf("%s / %q %s reads no budget series: %s", q.Dashboard, q.Panel, q.RefID, q.Expr)
		}
	}
	if n < 8 {
		t.Errorf("%d queries in the %q row, want the quantiles, margin, level and burn rates", n, BudgetRow)
	}
}

// TestOneUnitPerAxis: every time-series panel draws one unit per axis side. The panel's unit is
// the left axis; a query in another unit carries an override (byFrameRefID, unit, placed right,
// labelled), and there is at most one such unit, on the right. The quantity of every query is
// read off its PromQL (quantityOf), so a query of another quantity added to a panel without an
// override of its own fails here: cores and a ratio, or a 0/1 flag and seconds, on one axis.
// Axes in cores or replicas, and both axes of a two-axis panel, are labelled.
func TestOneUnitPerAxis(t *testing.T) {
	files, err := Committed()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		problems, panels := axisProblems(t, f)
		n += panels
		for _, p := range problems {
			t.Errorf("%s: %s", f.Name, p)
		}
	}
	if n < 20 {
		t.Errorf("only %d time-series panels checked", n)
	}
}

// axisPanel is the part of a panel's JSON model the axis check reads.
type axisPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			Unit   string `json:"unit"`
			Custom struct {
				AxisLabel     string `json:"axisLabel"`
				AxisPlacement string `json:"axisPlacement"`
			} `json:"custom"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options any    `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []axisPanel `json:"panels"`
}

// unitOf are the Grafana units a quantity may be drawn in; a quantity not listed takes any.
var unitOf = map[string][]string{
	"ratio":     {"percentunit"},
	"s":         {"s"},
	"cores":     {"short"},
	"replicas":  {"short"},
	"0/1":       {"short", "bool", "bool_yes_no", "bool_on_off"},
	"count/min": {"short"},
}

// labelled are the quantities whose axis must say what it counts: a bare number of cores or
// replicas reads as anything.
var labelled = map[string]bool{"cores": true, "replicas": true}

// axisProblems checks one dashboard file and returns what is wrong, and how many time-series
// panels it checked.
func axisProblems(t *testing.T, f File) ([]string, int) {
	t.Helper()
	var d struct {
		Panels []axisPanel `json:"panels"`
	}
	if err := json.Unmarshal(f.JSON, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	n := 0
	var walk func(ps []axisPanel)
	walk = func(ps []axisPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "timeseries" {
				continue
			}
			n++
			bad := func(format string, a ...any) {
				out = append(out, fmt.Sprintf("panel %q: ", p.Title)+fmt.Sprintf(format, a...))
			}
			left := p.FieldConfig.Defaults.Unit
			if left == "" {
				bad("no unit")
			}
			if pl := p.FieldConfig.Defaults.Custom.AxisPlacement; pl == "right" {
				bad("the panel's own unit must be on the left axis, not %q", pl)
			}
			// The refIds drawn on the right, with the unit and label of their override.
			right := map[string]bool{}
			rightUnits := map[string]bool{}
			for _, o := range p.FieldConfig.Overrides {
				props := map[string]string{}
				for _, pr := range o.Properties {
					if s, ok := pr.Value.(string); ok {
						props[pr.ID] = s
					}
				}
				unit, hasUnit := props["unit"]
				if !hasUnit && props["custom.axisPlacement"] == "" {
					continue // colours, say
				}
				ref, _ := o.Matcher.Options.(string)
				if o.Matcher.ID != "byFrameRefID" || ref == "" {
					bad("an override of unit or axis must match one query (byFrameRefID), not %s %v", o.Matcher.ID, o.Matcher.Options)
					continue
				}
				if !hasUnit || unit == "" {
					bad("query %s is placed on its own axis without a unit", ref)
				}
				if props["custom.axisPlacement"] != "right" {
					bad("query %s has unit %q but is not placed on the right axis: one unit per axis side", ref, unit)
				}
				if props["custom.axisLabel"] == "" {
					bad("query %s: the right axis (%s) has no label", ref, unit)
				}
				right[ref] = true
				rightUnits[unit] = true
			}
			if len(rightUnits) > 1 {
				bad("%d units on the right axis %v: split the panel", len(rightUnits), rightUnits)
			}
			if len(right) > 0 && p.FieldConfig.Defaults.Custom.AxisLabel == "" {
				bad("two axes, and the left one (%s) has no label", left)
			}
			// The quantity of each side's queries.
			qty := map[bool]map[string][]string{false: {}, true: {}}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				refs[tg.RefID] = true
				e, err := parser.NewParser(parser.Options{}).ParseExpr(Expand(tg.Expr, nil))
				if err != nil {
					continue // TestQueriesParse reports it
				}
				q := quantityOf(e)
				if strings.HasPrefix(q, "?") {
					bad("query %s: no known quantity for %s (add it to quantityOf)", tg.RefID, q[1:])
					continue
				}
				qty[right[tg.RefID]][q] = append(qty[right[tg.RefID]][q], tg.RefID)
			}
			for ref := range right {
				if !refs[ref] {
					bad("an override names query %s, which the panel does not have", ref)
				}
			}
			for side, qs := range qty {
				name, unit := "left", left
				if side {
					name = "right"
					for u := range rightUnits {
						unit = u
					}
				}
				if len(qs) > 1 {
					bad("the %s axis (%s) mixes quantities %v: give the other a unit of its own (q.unit, right axis) or split the panel", name, unit, qs)
				}
				for q := range qs {
					if us, ok := unitOf[q]; ok && !slices.Contains(us, unit) {
						bad("the %s axis draws %s in unit %q, want one of %v", name, q, unit, us)
					}
					if labelled[q] && !side && p.FieldConfig.Defaults.Custom.AxisLabel == "" {
						bad("the left axis is in %s and has no label", q)
					}
				}
			}
		}
	}
	walk(d.Panels)
	return out, n
}

// quantityOf is what a query's values are: cores, replicas, ratio (a share or a utilization),
// s, 0/1, a count, a count per minute (a rate × 60), … read off the metric names it uses and
// the arithmetic on them. "?name" when a metric is not known.
func quantityOf(n parser.Node) string {
	switch n := n.(type) {
	case *parser.ParenExpr:
		return quantityOf(n.Expr)
	case *parser.StepInvariantExpr:
		return quantityOf(n.Expr)
	case *parser.UnaryExpr:
		return quantityOf(n.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return ""
	case *parser.MatrixSelector:
		return quantityOf(n.VectorSelector)
	case *parser.SubqueryExpr:
		return quantityOf(n.Expr)
	case *parser.AggregateExpr:
		if n.Op == parser.COUNT {
			return "count"
		}
		return quantityOf(n.Expr)
	case *parser.Call:
		switch n.Func.Name {
		case "time":
			return "timestamp"
		case "vector", "scalar":
			return quantityOf(n.Args[0])
		case "rate", "irate", "increase":
			return quantityOf(n.Args[0]) + "/min"
		case "histogram_quantile": // of the buckets' rates: the quantity of the observations
			return strings.TrimSuffix(quantityOf(n.Args[1]), "/min")
		}
		for _, a := range n.Args {
			if q := quantityOf(a); q != "" {
				return q
			}
		}
		return ""
	case *parser.VectorSelector:
		return metricQuantity(n.Name)
	case *parser.BinaryExpr:
		l, r := quantityOf(n.LHS), quantityOf(n.RHS)
		unknown := func(q string) bool { return strings.HasPrefix(q, "?") }
		switch {
		case unknown(l):
			return l
		case unknown(r) && n.Op != parser.LAND && n.Op != parser.LUNLESS:
			return r
		}
		switch n.Op {
		case parser.LAND, parser.LUNLESS:
			return l
		case parser.LOR:
			if l == "" {
				return r
			}
			return l
		case parser.ADD, parser.SUB:
			if l == "timestamp" && r == "timestamp" {
				return "s"
			}
			if l == "" {
				return r
			}
			return l
		case parser.MUL:
			switch {
			case l == "":
				return r
			case r == "":
				return l
			case l == "ratio" || l == "0/1":
				return r
			case r == "ratio" || r == "0/1":
				return l
			case l == "replicas" && r == "cores", l == "cores" && r == "replicas":
				return "cores"
			}
			return l + "×" + r
		case parser.DIV:
			switch {
			case r == "":
				return l
			case l == r:
				return "ratio"
			}
			return l + "/" + r
		}
		if n.Op.IsComparisonOperator() {
			if n.ReturnBool {
				return "0/1"
			}
			return l
		}
		return l
	}
	return ""
}

// metricQuantity is the quantity of one metric, by its name (the exporter's and webhook's
// naming: _cores, _ratio, _replicas, _seconds; counters _total).
func metricQuantity(name string) string {
	switch name {
	case "debi_budget_level", "debi_budget_overload_budget":
		return "ratio"
	case "debi_budget_margin":
		return "factor"
	case "debi_budget_error_samples", "debi_evt_excesses", "debi_budget_price":
		return "count"
	case "debi_evt_shape":
		return "shape"
	case "debi_evt_fallback", "debi_policy_stale", "debi_webhook_policy_paused", "debi_webhook_leader", "ALERTS":
		return "0/1"
	case "policy:debi_replicas_delta:diff":
		return "replicas"
	}
	switch {
	case strings.Contains(name, "burn_rate"):
		return "burn rate"
	case strings.HasSuffix(name, "_info"):
		return "0/1"
	case strings.HasSuffix(name, "_seconds_bucket"), strings.HasSuffix(name, "_seconds_total"):
		return "s"
	case strings.HasSuffix(name, "_total"):
		return "count"
	case strings.HasSuffix(name, "_timestamp_seconds"):
		return "timestamp"
	case strings.HasSuffix(name, "_seconds"):
		return "s"
	case strings.HasSuffix(name, "_cores"):
		return "cores"
	case strings.HasSuffix(name, "_ratio"):
		return "ratio"
	case strings.HasSuffix(name, "_replicas"):
		return "replicas"
	}
	return "?" + name
}
