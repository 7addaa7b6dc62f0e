package grafana

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
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
