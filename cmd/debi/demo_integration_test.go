package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/internal/demo"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/trace"
)

// demoConfig is the what-if's configuration of docs/getting-started.md ("Try the what-if on a
// laptop"): the demo's deployment, every query on its default. The page shows it whole.
const demoConfig = "../../deploy/examples/demo.yml"

// TestDemoWhatIf runs the recipe of docs/getting-started.md on the real Prometheus: a day of the
// first embedded trace from debi demo openmetrics, promtool tsdb create-blocks-from openmetrics,
// Prometheus on the blocks, then the what-if with the recipe's configuration. The demand it
// reads (its default query falling back to cAdvisor's counters, debi's rules having no history)
// is the trace's at every point of the day, the request is the pods', the recorded replicas and
// ready pods are the simulated HPA's; and debi backtest --config.file scores the day's 289
// samples with an actual row replaying those replicas.
func TestDemoWhatIf(t *testing.T) {
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	const (
		step = 5 * time.Minute
		rng  = 24 * time.Hour
		n    = int(rng/step) + 1 // the what-if's points: both ends of the day
	)
	end := time.Now().Add(-time.Hour).Truncate(step)
	endFlag := end.UTC().Format(time.RFC3339)
	code, om, stderr := runCmd("demo", "openmetrics", "--range", "1d", "--end", endFlag)
	if code != 0 {
		t.Fatalf("debi demo openmetrics: exit %d: %s", code, stderr)
	}
	// The same demo through the package, for the values it wrote.
	ts, err := trace.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	o := demo.DefaultOptions()
	o.End, o.Range = end, rng
	d, err := demo.Build(context.Background(), ts[0], o)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := d.WriteOpenMetrics(&want); err != nil {
		t.Fatal(err)
	}
	if om != want.String() {
		t.Fatal("debi demo openmetrics wrote other series than demo.Build with its defaults")
	}

	tmp := t.TempDir()
	omFile, data := filepath.Join(tmp, "demo.om"), filepath.Join(tmp, "data")
	if err := os.WriteFile(omFile, []byte(om), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(dir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", omFile, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	url := testenv.Prometheus(t, dir, data)
	cfg := demoConfig
	example, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "```yaml\n"+string(example)+"```\n") {
		t.Errorf("docs/getting-started.md does not show %s as it is", cfg)
	}

	// What the what-if reads, point by point.
	got, wo, err := whatIfTraces(context.Background(), whatIf{configFile: cfg, promURL: url, rng: rng, end: end}, backtest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	dem := got[0].Values
	rec := wo.Recorded[got[0].Name]
	if len(dem) != n || len(rec.Replicas) != n || len(rec.Ready) != n || got[0].StepMinutes != 5 {
		t.Fatalf("the what-if read %d demand, %d replicas, %d ready points at %d min; want %d at 5", len(dem), len(rec.Replicas), len(rec.Ready), got[0].StepMinutes, n)
	}
	if wo.Request != o.Sim.Request {
		t.Errorf("request %v, want the pods' %v", wo.Request, o.Sim.Request)
	}
	for k := range n {
		at := end.Add(-time.Duration(n-1-k) * step)
		wd, wr, wready, ok := d.At(at)
		if !ok {
			t.Fatalf("the demo has no point at %v", at)
		}
		if math.Abs(dem[k]-wd) > 1e-9*wd {
			t.Fatalf("demand at %v: the what-if read %v, the trace's is %v", at, dem[k], wd)
		}
		if rec.Replicas[k] != float64(wr) || rec.Ready[k] != float64(wready) {
			t.Fatalf("at %v the what-if read %v replicas, %v ready; the HPA had %d, %d", at, rec.Replicas[k], rec.Ready[k], wr, wready)
		}
	}
	for _, c := range rec.Coverage {
		if c.Missing != 0 || c.Filled != 0 {
			t.Errorf("%s: %v missing, %v filled over a day the demo covers", c.Series, c.Missing, c.Filled)
		}
	}
	// The HPA's start-ups, measured from the demo's kube_pod_created and
	// kube_pod_status_ready_time (debi's rule has no samples): every one the start-up delay. The
	// what-if counts the pods with samples over its day: at least those created and Ready within
	// it, at most every one the demo wrote.
	var inDay int
	starts := d.Startups()
	for _, s := range starts {
		if !s.Created.Before(end.Add(-rng)) && !s.Ready.After(end) {
			inDay++
		}
	}
	var counted int
	if len(rec.Notes) == 0 {
		t.Fatal("the what-if says nothing of the lead time")
	}
	note := rec.Notes[0]
	if _, err := fmt.Sscanf(note[strings.Index(note, "over ")+len("over "):], "%d start-ups", &counted); err != nil || counted < inDay || counted > len(starts) ||
		!strings.Contains(note, "median start-up 2m (0.9: 2m") || !strings.Contains(note, "read from kube_pod_created and kube_pod_status_ready_time") {
		t.Errorf("the what-if's lead time: %q; want the demo's start-ups, 2m each, %d to %d of them (%v)", note, inDay, len(starts), err)
	}

	// The what-if itself, as the recipe runs it.
	code, out, stderr := runCmd("backtest", "--config.file", cfg, "--prometheus.url", url, "--range", "1d", "--range.end", endFlag,
		"--policies", "hpa", "--format", "json")
	if code != 0 {
		t.Fatalf("debi backtest --config.file: exit %d: %s", code, stderr)
	}
	var doc struct {
		Traces []struct {
			Samples    int            `json:"samples"`
			WarmupTime string         `json:"warmup_time"`
			Ticks      int            `json:"ticks"`
			Runs       []backtest.Run `json:"runs"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Traces) != 1 || doc.Traces[0].Samples != n {
		t.Fatalf("the what-if scored %d traces, want 1 of %d samples:\n%s", len(doc.Traces), n, out)
	}
	tr := doc.Traces[0]
	var actual *backtest.Run
	var policies []string
	for i, r := range tr.Runs {
		policies = append(policies, r.Policy)
		if r.Policy == backtest.ActualPolicy {
			actual = &tr.Runs[i]
		}
	}
	if actual == nil {
		t.Fatalf("no actual row among %v", policies)
	}
	// The actual row holds each recorded count for the step after it, at the 15 s tick, and
	// scores from the warm-up on: its mean is that of the HPA's counts over the same ticks.
	tick := backtest.DefaultOptions().Tick
	warm, err := time.ParseDuration(tr.WarmupTime)
	if err != nil {
		t.Fatalf("warmup_time %q: %v", tr.WarmupTime, err)
	}
	var sum float64
	scored := 0
	for i := range tr.Ticks {
		if time.Duration(i)*tick < warm {
			continue
		}
		sum += rec.Replicas[min(int(time.Duration(i)*tick/step), n-1)]
		scored++
	}
	if scored == 0 || actual.Ticks != scored || math.Abs(actual.MeanReplicas-sum/float64(scored)) > 1e-9 {
		t.Errorf("actual: %d ticks, mean %v replicas; want %d, %v (the HPA's)", actual.Ticks, actual.MeanReplicas, scored, sum/float64(scored))
	}
	if !strings.Contains(strings.Join(policies, ","), "budget") {
		t.Errorf("the configured policy (budget, the default algorithm) is not among %v", policies)
	}
	t.Logf("the what-if on the demo's day: %d samples, actual mean %.2f replicas, %d actions; policies %v; %s", tr.Samples, actual.MeanReplicas, actual.ScaleActions, policies, note)
}
