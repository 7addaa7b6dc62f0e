package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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
	// Every run carries floor_closed: a number, or null where the floor saves nothing.
	for _, tr := range doc.Traces {
		for _, r := range tr.Runs {
			if v, ok := r["floor_closed"]; !ok {
				t.Errorf("%s/%s: no floor_closed", tr.Trace, r["policy"])
			} else if _, isNum := v.(float64); v != nil && !isNum {
				t.Errorf("%s/%s: floor_closed %v is neither a number nor null", tr.Trace, r["policy"], v)
			}
		}
	}
	// The summary screen leads with it, the other formats carry its column.
	for _, format := range []string{"summary", "full", "csv", "markdown", "report"} {
		code, out, stderr := runCmd("backtest", "--max-steps", "1100", "--policies", "hpa", "--sweep", "0.5,0.7", "--format", format)
		if code != 0 || !strings.Contains(out, "floor_closed") {
			t.Errorf("--format %s: exit %d, %s; no floor_closed in:\n%.1500s", format, code, stderr, out)
		}
	}
}

// twoMetricTrace is the shipped two-metric trace (trace/testdata/README.md).
var twoMetricTrace = filepath.Join("..", "..", "trace", "testdata", "azure2019_google2019_cpu_5min.csv")

// TestBacktestSeveralMetrics: `debi backtest --trace` takes a trace with several metrics and
// replays every policy on all of them; the report names each metric's scale and capacity (the
// one given by --trace.capacity, in the trace's unit) and each run's overloaded ticks per metric,
// which add up to at least the run's own (any metric).
func TestBacktestSeveralMetrics(t *testing.T) {
	code, out, stderr := runCmd("backtest", "--trace", twoMetricTrace, "--max-steps", "1500", "--policies", "hpa,budget",
		"--trace.capacity", "google_cpu=0.02", "--budget.metric-calibration", "per-metric", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Parameters struct {
			Capacity    map[string]float64 `json:"trace_capacity"`
			Calibration string             `json:"metric_calibration"`
		} `json:"parameters"`
		Traces []struct {
			Metrics []struct {
				Metric          string
				Scale, Capacity float64
			} `json:"metrics"`
			Runs []struct {
				Policy         string  `json:"policy"`
				Overload       float64 `json:"overload_fraction"`
				Ticks          int     `json:"ticks"`
				MetricOverload []struct {
					Metric string
					Ticks  int
				} `json:"metric_overload"`
			} `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if doc.Parameters.Capacity["google_cpu"] != 0.02 || doc.Parameters.Calibration != "per-metric" {
		t.Errorf("parameters %+v", doc.Parameters)
	}
	tr := doc.Traces[0]
	// R = 5 cores: a capacity of 0.02 per pod is a scale of 5/0.02 = 250.
	if len(tr.Metrics) != 2 || tr.Metrics[0].Metric != "azure_cpu" || tr.Metrics[1].Metric != "google_cpu" ||
		math.Abs(tr.Metrics[1].Scale-250) > 1e-9 || tr.Metrics[1].Capacity != 0.02 {
		t.Fatalf("metrics %+v", tr.Metrics)
	}
	if len(tr.Runs) != 3 {
		t.Fatalf("want hpa, budget and the oracle, got %d runs", len(tr.Runs))
	}
	for _, r := range tr.Runs {
		if len(r.MetricOverload) != 2 {
			t.Fatalf("%s: per-metric overload %+v", r.Policy, r.MetricOverload)
		}
		over := int(math.Round(r.Overload * float64(r.Ticks)))
		if sum := r.MetricOverload[0].Ticks + r.MetricOverload[1].Ticks; sum < over || over < max(r.MetricOverload[0].Ticks, r.MetricOverload[1].Ticks) {
			t.Errorf("%s: %d overloaded ticks, per metric %+v", r.Policy, over, r.MetricOverload)
		}
	}
	// The screen says it per metric too.
	code, out, stderr = runCmd("backtest", "--trace", twoMetricTrace, "--max-steps", "1200", "--policies", "hpa", "--sweep", "0.5")
	if code != 0 || !strings.Contains(out, "azure2019_google2019_cpu_5min/hpa: overloaded") || !strings.Contains(out, "google_cpu") {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
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
	badMulti := filepath.Join(dir, "multi.csv")
	os.WriteFile(badMulti, []byte("minute,cpu,rps\n0,1,2\n5,1,x\n"), 0o644)
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
		{"malformed multi-metric csv", []string{"backtest", "--trace", badMulti}, 1, "multi.csv:3: column 3 (rps): value \"x\" is not a number"},
		{"capacity of no metric", []string{"backtest", "--trace", twoMetricTrace, "--trace.capacity", "rps=100"}, 1, "no metric \"rps\""},
		{"capacity not a pair", []string{"backtest", "--trace.capacity", "rps"}, 2, "--trace.capacity"},
		{"bad metric calibration", []string{"backtest", "--budget.metric-calibration", "both"}, 1, "--budget.metric-calibration"},
		{"neighbours under pot", []string{"backtest", "--budget.quantile", "pot", "--budget.quantile-neighbours", "0.25"}, 1, "quantile_neighbours must be 0 with quantile_method \"pot\""},
		{"neighbours above 1", []string{"backtest", "--budget.quantile-neighbours", "2"}, 1, "quantile_neighbours must be in [0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q does not contain %q", code, tc.code, stderr, tc.want)
			}
		})
	}
}

// TestBudgetQuantilePOT: --budget.quantile pot alone takes one pool of errors (its
// quantile_neighbours default is 0), so it runs.
func TestBudgetQuantilePOT(t *testing.T) {
	code, out, stderr := runCmd("backtest", "--policies", "budget", "--budget.quantile", "pot", "--max-steps", "1200", "--format", "json")
	if code != 0 || !strings.Contains(out, `"policy": "budget"`) {
		t.Fatalf("exit %d, stderr %q, stdout %.200q", code, stderr, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd("version")
	if code != 0 || !strings.Contains(out, "debi") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestFlagsAndHelp(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout + stderr
	}{
		{"--version", []string{"--version"}, 0, "debi, version"},
		{"--help", []string{"--help"}, 0, "check config <config-files>..."},
		{"-h", []string{"exporter", "-h"}, 0, "--web.listen-address=\":9107\""},
		{"--help-long", []string{"--help-long"}, 0, "--budget.overload-budget"},
		{"help command", []string{"help", "webhook"}, 0, "--kubeconfig"},
		{"no command", nil, 2, "usage: debi"},
		{"single dash", []string{"backtest", "-max-steps", "10"}, 2, "unknown short flag"},
		{"negative value after a space", []string{"backtest", "--request", "-1"}, 1, "--request"},
		{"bad log level", []string{"--log.level=loud", "version"}, 2, "loud"},
		{"bad log format", []string{"version", "--log.format=xml"}, 2, "xml"},
		{"forecast without eval", []string{"forecast"}, 2, "subcommand of 'forecast'"},
		{"check without files", []string{"check", "config"}, 2, "config-files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(tc.args...)
			if code != tc.code || !strings.Contains(out+stderr, tc.want) {
				t.Fatalf("exit %d (want %d), output does not contain %q:\n%s%s", code, tc.code, tc.want, out, stderr)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	os.WriteFile(good, []byte("policies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1}\n"), 0o644)
	code, out, stderr := runCmd("check", "config", good)
	if code != 0 || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("good file: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCmd("check", "config", good, "../../config/testdata/check-errors.yml", filepath.Join(dir, "missing.yml"))
	if code != 1 {
		t.Fatalf("bad files: exit %d, want 1\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"SUCCESS: " + good,
		"FAILED: ../../config/testdata/check-errors.yml: 6 error(s)",
		`policies[0].history_step (line 10): "abc" is not a duration`,
		"policies[1].target.namespace (line 12): required",
		`policies[2].algorithm (line 16): unknown policy "crystalball"`,
		"missing.yml",
	} {
		if !strings.Contains(out+stderr, want) {
			t.Errorf("output lacks %q:\n%s%s", want, out, stderr)
		}
	}
}

// TestBacktestWhatIf: `debi backtest --config.file` replays the configured policy on the history
// a Prometheus returns for its demand query (a fake here; exporter.TestWhatIfOnRecordedHistory
// does it on a real one), named after the policy and the range, beside the HPA and the oracle.
func TestBacktestWhatIf(t *testing.T) {
	end := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		// The workload's HPA, as kube-state-metrics exports it: CPU at 60 %, 2–20 replicas.
		hpa := map[string][2]string{ // query: the labels beyond namespace and name, the value
			`kube_horizontalpodautoscaler_info{namespace="shop",scaletargetref_name="web"}`:                   {`,"scaletargetref_kind":"Deployment","scaletargetref_name":"web"`, "1"},
			`kube_horizontalpodautoscaler_spec_target_metric{namespace="shop",horizontalpodautoscaler="web"}`: {`,"metric_name":"cpu","metric_target_type":"utilization"`, "60"},
			`kube_horizontalpodautoscaler_spec_min_replicas{namespace="shop",horizontalpodautoscaler="web"}`:  {"", "2"},
			`kube_horizontalpodautoscaler_spec_max_replicas{namespace="shop",horizontalpodautoscaler="web"}`:  {"", "20"},
		}
		if h, ok := hpa[q]; ok {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"namespace":"shop","horizontalpodautoscaler":"web"%s},"values":[[%d,"%s"]]}]}}`,
				h[0], end.Add(-time.Minute).Unix(), h[1])
			return
		}
		if r.URL.Path != "/api/v1/query_range" || q != `sum(demand{app="web"})` && q != "replicas" && q != "ready" {
			http.Error(w, "unexpected "+r.URL.Path+" "+q, http.StatusBadRequest)
			return
		}
		var pts []string
		for i := range 2016 { // a week at 5 minutes
			if i >= 1000 && i < 1010 { // 50 minutes without samples
				continue
			}
			ts := end.Add(-time.Duration(2015-i) * 5 * time.Minute).Unix()
			v := 4 + 3*math.Sin(float64(i)/288*2*math.Pi)
			if q == "replicas" || q == "ready" {
				v = float64(3 + i/1008) // 3 pods, 4 for the second half
			}
			if q == "ready" && i >= 1500 && i < 1512 {
				v = 1 // an hour with two of the four pods not ready
			}
			pts = append(pts, fmt.Sprintf(`[%d,"%g"]`, ts, v))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[%s]}]}}`, strings.Join(pts, ","))
	}))
	defer srv.Close()
	cfg := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfg, []byte(`
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: budget
    model: auto
    request: 1
    queries: {demand: 'sum(demand{app="web"})', replicas: 'replicas', ready_replicas: 'ready'}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd("backtest", "--config.file", cfg, "--prometheus.url", srv.URL, "--range", "167h55m",
		"--range.end", end.Format(time.RFC3339), "--policies", "hpa,budget", "--sweep", "0.5,0.7", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// budget is auto-budget: shown once, under the configuration's name, marked. The
	// actual row replays the recorded replicas (one change, 3 → 4) with the recorded ready
	// counts; the coverage counts the 10 points without samples as filled.
	for _, want := range []string{`"trace": "web (6d23h55m to 2026-11-24 00:00)"`, `"policy": "auto-budget"`, `"configured": "auto-budget"`,
		`"policy": "hpa"`, `"policy": "oracle"`, `"policy": "actual"`, `"samples": 2016`, `"class": "recorded"`, `"filled": "50m0s"`, `"start": "2026-11-17T00:05:00Z"`,
		`"series": "ready"`, `"actual_ready": "recorded (ready)"`, `"floor_closed": `, `"frontier_floor": `,
		`"recommendation": {`, `"against": "actual"`, `"sentence": `,
		// The hpa row replays the workload's HPA read from kube-state-metrics, and says so.
		`"hpa": "hpa = your HPA shop/web: target 0.60 (60 %), 2–20 replicas, read from kube-state-metrics;`, `"current_target": 0.6`,
		`"target": 0.6,`, `"min_replicas": 2,`, `"max_replicas": 20,`, `"yours": true`,
		// The fake has nothing before the range: the warm-up of 760 samples (63h20m) comes out
		// of it, and 2015 − 760 steps of 5 minutes are scored.
		`"scored": "scored 4d8h35m of the 6d23h55m asked: 2d15h20m of warm-up came from inside the range (Prometheus had no history before it)"`,
		`"warmup_inside": "63h20m0s"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%.3000s", want, out)
		}
	}
	if strings.Contains(out, `"policy": "budget"`) {
		t.Errorf("budget and auto-budget both in the report:\n%.3000s", out)
	}
	plots := t.TempDir()
	code, out, stderr = runCmd("backtest", "--config.file", cfg, "--prometheus.url", srv.URL, "--range", "167h55m",
		"--range.end", end.Format(time.RFC3339), "--policies", "hpa,budget", "--sweep", "0.5,0.7", "--plots", plots)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(plots, "*"))
	if len(files) != 3 {
		t.Errorf("plots: %v, want 3 files", files)
	}
	for _, f := range files {
		if b := filepath.Base(f); !regexp.MustCompile(`^web-6d23h55m-to-2026-11-24-00-00-[a-z]+\.png$`).MatchString(b) {
			t.Errorf("plot file %q is not shell-safe (or not named after the policy and range)", b)
		}
	}
	for _, want := range []string{"History read from Prometheus", "demand: covered 6d23h10m of 6d23h55m", "filled 50m", "> auto-budget (yours)", "cost/actual", "  actual  ", "its ready pods recorded (ready)", "floor_closed",
		"Recommendation for web (6d23h55m to 2026-11-24 00:00)", "what ran (actual)", "cheapest target keeping 1%", "→ ",
		"hpa = your HPA shop/web: target 0.60 (60 %), 2–20 replicas, read from kube-state-metrics;"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config.file", cfg}, "--prometheus.url: required"},
		{[]string{"--config.file", cfg, "--prometheus.url", srv.URL, "--policy", "nope"}, `--policy: no policy named "nope"`},
		{[]string{"--config.file", cfg, "--prometheus.url", srv.URL, "--range.end", "yesterday"}, "--range.end"},
		{[]string{"--config.file", cfg, "--trace", "x.csv"}, "exclusive"},
	} {
		if code, _, stderr := runCmd(append([]string{"backtest"}, tc.args...)...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestBacktestWhatIfTwoMetrics: the what-if of a policy with several metrics replays each
// metric's recorded query in its unit with its capacity per pod (a fake Prometheus here): over
// two days at 4 recorded replicas the CPU (1 core of 4 × 0.5) never overloads and the request
// rate (200 per second of 4 × 200 at load 1) does for the 2 hours it runs at 1000, so the actual
// row is overloaded that long, all of it by rps; the policies are scored on both metrics.
func TestBacktestWhatIfTwoMetrics(t *testing.T) {
	end := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	const points = 576 // two days at 5 minutes
	burst := func(i int) bool { return i >= 400 && i < 424 }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		if strings.HasPrefix(q, "kube_horizontalpodautoscaler_") { // no HPA
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
			return
		}
		if r.URL.Path != "/api/v1/query_range" || q != "cpu" && q != "rps" && q != "replicas" && q != "ready" {
			http.Error(w, "unexpected "+r.URL.Path+" "+q, http.StatusBadRequest)
			return
		}
		var pts []string
		for i := range points {
			ts := end.Add(-time.Duration(points-1-i) * 5 * time.Minute).Unix()
			v := 4.0 // replicas, ready
			switch {
			case q == "cpu":
				v = 1
			case q == "rps" && burst(i):
				v = 1000
			case q == "rps":
				v = 200
			}
			pts = append(pts, fmt.Sprintf(`[%d,"%g"]`, ts, v))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[%s]}]}}`, strings.Join(pts, ","))
	}))
	defer srv.Close()
	cfg := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfg, []byte(`
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    scaling: {target: 0.5, max_replicas: 40}
    queries: {replicas: 'replicas', ready_replicas: 'ready'}
    metrics:
      - {name: cpu, query: cpu, target: {type: Utilization}, request: 0.5}
      - {name: rps, unit: requests_per_second, query: rps, target: {type: AverageValue, averageValue: "100"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd("backtest", "--config.file", cfg, "--prometheus.url", srv.URL, "--range", "47h55m",
		"--range.end", end.Format(time.RFC3339), "--policies", "hpa,budget", "--sweep", "0.5,0.7", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Traces []struct {
			Metrics []struct {
				Metric   string  `json:"metric"`
				Capacity float64 `json:"capacity"`
			} `json:"metrics"`
			Runs []struct {
				Policy           string  `json:"policy"`
				OverloadFraction float64 `json:"overload_fraction"`
				Seconds          float64 `json:"seconds"`
				MetricOverload   []struct {
					Metric string `json:"metric"`
					Ticks  int    `json:"ticks"`
				} `json:"metric_overload"`
			} `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Traces) != 1 {
		t.Fatalf("report: %v (%d traces)\n%.2000s", err, len(rep.Traces), out)
	}
	// kube-state-metrics has no HPA of web: the hpa row is an HPA at scaling.target, and says so.
	if want := `"hpa": "hpa = an HPA at 0.50 (no HPA of yours found for shop/web in kube-state-metrics)"`; !strings.Contains(out, want) {
		t.Errorf("output lacks %s", want)
	}
	tr := rep.Traces[0]
	// Each metric's capacity per pod at load 1: cpu its request, rps 100 per pod at the target 0.5.
	if fmt.Sprint(tr.Metrics) != "[{cpu 0.5} {rps 200}]" {
		t.Errorf("the replayed trace's metrics are %v, want cpu at 0.5 and rps at 200 per pod", tr.Metrics)
	}
	seen := map[string]bool{}
	for _, r := range tr.Runs {
		seen[r.Policy] = true
		ticks := map[string]int{}
		for _, m := range r.MetricOverload {
			ticks[m.Metric] = m.Ticks
		}
		if len(r.MetricOverload) != 2 {
			t.Errorf("%s: metric_overload %v, want one entry per metric", r.Policy, r.MetricOverload)
		}
		if r.Policy != "actual" {
			continue
		}
		// The scored half (the second day) holds the whole burst: 2 h of its ~24 h.
		want := 2 * time.Hour.Seconds() / r.Seconds
		if math.Abs(r.OverloadFraction-want) > 0.01 || ticks["cpu"] != 0 || ticks["rps"] == 0 {
			t.Errorf("actual: overload %.4f (want %.4f), ticks by metric %v (want all rps)", r.OverloadFraction, want, ticks)
		}
	}
	for _, p := range []string{"actual", "hpa", "oracle"} {
		if !seen[p] {
			t.Errorf("no %s row:\n%.2000s", p, out)
		}
	}
}
