package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestSyntaxErrorLine: a broken file's error names the line of the problem, in Load (LoadFile,
// what the exporter and the webhook say at start-up) and in Check (debi check config). The
// YAML library names the line where the enclosing construct starts, counted from 0 for parser
// errors; each case notes what it said before syntaxErrorLine.
func TestSyntaxErrorLine(t *testing.T) {
	const head = "global:\n  prometheus_url: http://prometheus:9090\n  interval: 15s\npolicies:\n" // lines 1-4
	for _, tc := range []struct {
		name, file string
		line       int    // the line of the problem
		want       string // in the message of both
	}{
		{
			// The library said line 4 (the list's first item, line 5, counted from 0).
			name: "indent: a key less indented than its mapping",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n   algorithm: hpa\n",
			line: 7, want: "did not find expected '-' indicator",
		},
		{
			// The library said line 4.
			name: "indent: a key more indented than its mapping",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n      algorithm: hpa\n",
			line: 7, want: "did not find expected key",
		},
		{
			// The library said line 8 (the exporter section).
			name: "indent: a top-level section's key",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\nexporter:\n  concurrency: 8\n mae_window: 60\n",
			line: 9, want: "did not find expected key",
		},
		{
			// Where the quote opens, as the library said.
			name: "unclosed double quote",
			file: head + "  - name: \"web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n",
			line: 5, want: "found unexpected end of stream",
		},
		{
			name: "unclosed single quote",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    queries:\n      demand: 'sum(rate(x[1m])\n    algorithm: hpa\n",
			line: 8, want: "found unexpected end of stream",
		},
		{
			// The library said line 5 (the list item).
			name: "unclosed flow mapping",
			file: head + "  - name: web\n    target: {namespace: shop, name: web\n    algorithm: hpa\n",
			line: 6, want: "did not find expected ',' or '}'",
		},
		{
			// The library said line 5.
			name: "tab in the indentation",
			file: head + "  - name: web\n\ttarget: {namespace: shop, name: web}\n",
			line: 6, want: "found a tab character that violates indentation",
		},
		{
			// As the library said.
			name: "mapping value in a plain scalar",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n\n    # the request\n    request: cores: 1\n",
			line: 10, want: "mapping values are not allowed in this context",
		},
		{
			// The case: the library said line 9.
			name: "unclosed flow sequence",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n\n    # the request\n    request: [1, 2\n",
			line: 10, want: "did not find expected ',' or ']'",
		},
		{
			// The library said line 4.
			name: "text after a quoted value",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: \"hpa\" or apa\n",
			line: 7, want: "did not find expected key",
		},
		{
			// The library named no line.
			name: "unknown alias",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n    request: *cores\n",
			line: 8, want: "unknown anchor 'cores' referenced",
		},
		{
			name: "duplicate key",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n    algorithm: apa\n",
			line: 8, want: `mapping key "algorithm" already defined at line 7`,
		},
		{
			name: "a value of the wrong type",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n    request: [1]\n",
			line: 8, want: "policies[0].request",
		},
		{
			name: "a duration that is not one",
			file: head + "  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n    request: 1\n    lead_time: two minutes\n",
			line: 9, want: "policies[0].lead_time",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "debi.yml")
			if err := os.WriteFile(f, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(f)
			if err == nil {
				t.Fatal("LoadFile accepts the file")
			}
			if got := errLines(err.Error()); len(got) != 1 || got[0] != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadFile: %v\nwant one line %d and %q", err, tc.line, tc.want)
			}
			errs := Check([]byte(tc.file))
			if len(errs) == 0 {
				t.Fatal("Check accepts the file")
			}
			if got := errLines(errs[0].Error()); len(got) != 1 || got[0] != tc.line || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("Check: %v\nwant line %d and %q", errs[0], tc.line, tc.want)
			}
		})
	}
}

var errLineRe = regexp.MustCompile(`\bline (\d+)\b`)

// errLines lists the line numbers an error message names, but the one a duplicate key's
// message names for the first definition ("already defined at line N").
func errLines(msg string) []int {
	msg = regexp.MustCompile(`already defined at line \d+`).ReplaceAllString(msg, "")
	var out []int
	for _, m := range errLineRe.FindAllStringSubmatch(msg, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// TestSyntaxErrorLineNotSyntax: syntaxErrorLine leaves what is not a syntax error alone, and a
// message it cannot reproduce on a prefix keeps the library's line.
func TestSyntaxErrorLineNotSyntax(t *testing.T) {
	b := []byte("global:\n  interval: 15s\n")
	_, err := Load([]byte("global: {interval: [1]}\n"))
	if _, _, ok := syntaxErrorLine(b, err); ok {
		t.Errorf("a type error %v taken for a syntax error", err)
	}
	if _, _, ok := syntaxErrorLine(b, errTest("yaml: line 1: something the prefixes never say")); ok {
		t.Error("a message no prefix reproduces got a line")
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// fleetFileWithIndentError is a file of n policies (four lines each) with a key less indented
// than its mapping in the last one: the problem is far inside a list that starts on line 4.
func fleetFileWithIndentError(n int) ([]byte, int) {
	var b strings.Builder
	b.WriteString("global:\n  prometheus_url: http://prometheus:9090\n  interval: 15s\npolicies:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: web-%d\n    target: {namespace: shop, name: web-%d}\n    request: 1\n    algorithm: hpa\n", i, i)
	}
	b.WriteString("  - name: last\n    target: {namespace: shop, name: last}\n   algorithm: hpa\n")
	return []byte(b.String()), 4 + 4*n + 3
}

// TestSyntaxErrorLineFleet: the line of a problem deep inside a long list is found, as near the
// list's start.
func TestSyntaxErrorLineFleet(t *testing.T) {
	b, line := fleetFileWithIndentError(2500)
	_, err := Load(b)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", line)) {
		t.Errorf("error %v, want one at line %d", err, line)
	}
}

// BenchmarkSyntaxErrorLine is the cost of finding the line of a problem in the last of 2,500
// policies (10,000 lines), where the library names the list's start as its context.
func BenchmarkSyntaxErrorLine(b *testing.B) {
	file, _ := fleetFileWithIndentError(2500)
	var node yaml.Node
	err := yaml.Unmarshal(file, &node)
	if err == nil {
		b.Fatal("no error")
	}
	b.Logf("the library says %v", err)
	for b.Loop() {
		if _, _, ok := syntaxErrorLine(file, err); !ok {
			b.Fatal("no line")
		}
	}
}
