// Package grafana builds debi's Grafana dashboards in Go and reads back the committed JSON.
//
// The JSON files in this directory are the source of truth of the dashboards (STYLE, "mixin"):
// `go run ./hack/gen-dashboards` (or `make dashboards`) writes them from Dashboards, a test fails
// when they are stale, and the deploy generator copies them into the dashboard ConfigMaps of the
// kustomize base and the Helm chart. Queries lists every panel's PromQL so that tests can parse
// it and run it against a real Prometheus.
package grafana

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

//go:embed *.json
var committed embed.FS

// File is one generated dashboard.
type File struct {
	// Name is the file name in grafana/, e.g. debi-policy.json.
	Name string
	// JSON is the dashboard model, indented, with a trailing newline.
	JSON []byte
}

// Dashboards builds every dashboard and returns them sorted by file name.
func Dashboards() ([]File, error) {
	var out []File
	for _, b := range builders {
		d, err := b.build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.file, err)
		}
		// No HTML escaping: PromQL's > and & stay readable in the committed JSON.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return nil, fmt.Errorf("%s: %w", b.file, err)
		}
		out = append(out, File{Name: b.file, JSON: buf.Bytes()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Committed returns the dashboard files as committed in grafana/ (embedded at build time).
func Committed() ([]File, error) {
	names, err := fs.Glob(committed, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]File, 0, len(names))
	for _, n := range names {
		b, err := committed.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: n, JSON: b})
	}
	return out, nil
}

// Query is one PromQL expression of a committed dashboard panel.
type Query struct {
	// Dashboard is the file name, e.g. debi-policy.json.
	Dashboard string
	// Panel is the panel title.
	Panel string
	// Row is the title of the row the panel is in ("" above the first row); the panels of
	// BudgetRow read series only budget policies publish, those of ZeroRow series only
	// policies that scale to zero publish.
	Row string
	// RefID is the query's refId within the panel (A, B, …).
	RefID string
	// Expr is the expression as stored, with Grafana variables such as $policy and
	// $__rate_interval.
	Expr string
	// Instant is true for instant queries (tables and stats), false for range queries.
	Instant bool
}

// Queries returns every query of the committed dashboards: annotation queries (Panel
// "annotation: <name>"), then panel queries in panel order. Template variable queries
// (label_values(...)) are Grafana syntax, not PromQL, and are left out.
func Queries() ([]Query, error) {
	files, err := Committed()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, f := range files {
		var d struct {
			Panels      []jsonPanel `json:"panels"`
			Annotations struct {
				List []struct {
					Name string `json:"name"`
					Expr string `json:"expr"`
				} `json:"list"`
			} `json:"annotations"`
		}
		if err := json.Unmarshal(f.JSON, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		for _, a := range d.Annotations.List {
			if strings.TrimSpace(a.Expr) != "" {
				out = append(out, Query{Dashboard: f.Name, Panel: "annotation: " + a.Name, RefID: "Anno", Expr: a.Expr})
			}
		}
		// Rows are flat (a row panel, then its panels) or collapsed (a row panel holding them).
		var walk func(ps []jsonPanel, row string)
		walk = func(ps []jsonPanel, row string) {
			for _, p := range ps {
				if p.Type == "row" {
					row = p.Title
				}
				for _, t := range p.Targets {
					if strings.TrimSpace(t.Expr) == "" {
						continue
					}
					out = append(out, Query{Dashboard: f.Name, Panel: p.Title, Row: row, RefID: t.RefID, Expr: t.Expr, Instant: t.Instant})
				}
				walk(p.Panels, row)
			}
		}
		walk(d.Panels, "")
	}
	return out, nil
}

type jsonPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID   string `json:"refId"`
		Expr    string `json:"expr"`
		Instant bool   `json:"instant"`
	} `json:"targets"`
	Panels []jsonPanel `json:"panels"` // collapsed rows
}

// Defaults are the values Expand substitutes for the Grafana variables the dashboards use when
// no other value is given: a 1 h dashboard range at a 15 s step.
var Defaults = map[string]string{
	"policy":          ".+",
	"namespace":       ".+",
	"sla":             "0.9",
	"horizon":         "60",
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "1h",
	"__range_s":       "3600",
	"__range_ms":      "3600000",
	"__interval_ms":   "15000",
	"datasource":      "prometheus",
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)`)

// Expand replaces the Grafana variables of expr ($name, ${name} and ${name:fmt}) with vars,
// falling back to Defaults, so that the result is plain PromQL Prometheus can run. A variable
// it does not know is left as is, which makes the expression fail to parse: a test catches a
// dashboard that uses a variable nobody defined.
func Expand(expr string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(expr, func(m string) string {
		sub := varRE.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		if v, ok := vars[name]; ok {
			return v
		}
		if v, ok := Defaults[name]; ok {
			return v
		}
		return m
	})
}

// PromQL is the query with its variables expanded for one policy (a regular expression: the
// dashboards match policy with =~). An empty policy matches every policy.
func (q Query) PromQL(policy string) string {
	if policy == "" {
		return Expand(q.Expr, nil)
	}
	// QuoteMeta's backslashes must themselves be escaped inside a PromQL string literal.
	re := strings.ReplaceAll(regexp.QuoteMeta(policy), `\`, `\\`)
	return Expand(q.Expr, map[string]string{"policy": re})
}

// Equal reports whether two dashboard files hold the same bytes, for staleness checks.
func Equal(a, b File) bool { return a.Name == b.Name && bytes.Equal(a.JSON, b.JSON) }
