package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBacktestEmbeddedJSON(t *testing.T) {
	code, out, stderr := runCmd("backtest", "--max-steps", "1100", "--policies", "hpa,debi", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Traces []struct {
			Trace string           `json:"trace"`
			Runs  []map[string]any `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// hpa and debi, and the oracle that every backtest runs beside them.
	if len(doc.Traces) != 3 || len(doc.Traces[0].Runs) != 3 || doc.Traces[0].Runs[2]["policy"] != "oracle" {
		t.Fatalf("want 3 traces × (2 policies + the oracle), got %+v", doc)
	}
}

func TestBacktestPlots(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCmd("backtest", "--max-steps", "1000", "--policies", "hpa,apa", "--plots", dir, "--sweep", "0.4,0.6")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	if len(files) != 9 {
		t.Fatalf("want 3 plots (replicas, burst, frontier) × 3 traces, got %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG (%v)", f, err)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("minute,value\n0,1\n1,oops\n"), 0o644)
	short := filepath.Join(dir, "short.csv")
	os.WriteFile(short, []byte("minute,value\n0,1\n1,2\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"malformed csv", []string{"backtest", "--trace", bad}, 1, "bad.csv:3: value \"oops\" is not a number"},
		{"missing file", []string{"backtest", "--trace", filepath.Join(dir, "nope.csv")}, 1, "nope.csv"},
		{"too short", []string{"backtest", "--trace", short}, 1, "short: 2 samples"},
		{"bad request", []string{"backtest", "--request", "-1"}, 1, "--request"},
		{"bad q", []string{"backtest", "--evt.q", "0.5"}, 1, "must be below tau"},
		{"bad policy", []string{"backtest", "--policies", "hpa,crystalball"}, 1, "unknown policy \"crystalball\""},
		{"bad duration", []string{"backtest", "--startup-delay", "2"}, 2, "startup-delay"},
		{"negative delay", []string{"backtest", "--startup-delay", "-1s"}, 1, "--startup-delay"},
		{"bad startup sweep", []string{"backtest", "--startup-sweep", "30s,soon"}, 2, "startup-sweep"},
		{"bad budget", []string{"backtest", "--budget.overload-budget", "0.7"}, 1, "overload_budget"},
		{"bad format", []string{"backtest", "--format", "yaml"}, 2, "--format"},
		{"bad number", []string{"backtest", "--hpa.target", "half"}, 2, "hpa.target"},
		{"bad rounding", []string{"backtest", "--debi.rounding", "up"}, 1, "rounding"},
		{"stray arg", []string{"backtest", "trace.csv"}, 2, "--trace"},
		{"unknown command", []string{"scale"}, 2, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q does not contain %q", code, tc.code, stderr, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd("version")
	if code != 0 || !strings.Contains(out, "debi") {
		t.Fatalf("exit %d: %q", code, out)
	}
}
