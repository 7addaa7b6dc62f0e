package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/trace"
)

// whatIfConfig is a policy whose demand is the backfilled series.
const whatIfConfig = `
global: {interval: 15s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: debi
    model: naive
    request: 2
    history: 288
    history_step: 5m
    scaling: {min_replicas: 1, max_replicas: 40}
    queries:
      demand: 'debi_whatif_demand_cores{namespace="shop",workload="web"}'
      replicas: 'debi_whatif_replicas{namespace="shop",workload="web"}'
`

// TestWhatIfOnRecordedHistory: eight days of an embedded trace (5-minute samples) is backfilled
// into a real Prometheus with promtool's OpenMetrics importer at exact timestamps; the what-if
// reads it back with the exporter's range loader (DemandHistory), gets every sample exactly,
// and the backtest of the replayed policy on it equals the backtest on the trace itself (what
// `debi backtest --trace` computes).
func TestWhatIfOnRecordedHistory(t *testing.T) {
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	traces, err := trace.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	tr := traces[0]
	const step = 5 * time.Minute
	n := min(len(tr.Values), 8*24*12+1) // eight days: a range of seven after a day of warm-up
	// Cores: the trace's values scaled so that its peak needs about 10 of the 40 pods.
	peak := 0.0
	for _, v := range tr.Values[:n] {
		peak = max(peak, v)
	}
	want := make([]float64, n)
	for i, v := range tr.Values[:n] {
		want[i] = v / peak * 20
	}
	end := time.Now().Add(-time.Hour).Truncate(step)
	start := end.Add(-time.Duration(n-1) * step)

	tmp := t.TempDir()
	var om strings.Builder
	om.WriteString("# TYPE debi_whatif_demand_cores gauge\n")
	for i, v := range want {
		ts := start.Add(time.Duration(i) * step)
		fmt.Fprintf(&om, "debi_whatif_demand_cores{namespace=\"shop\",workload=\"web\"} %s %d\n", strconv.FormatFloat(v, 'g', -1, 64), ts.Unix())
	}
	// shop/web's HPA as kube-state-metrics exports it: CPU at 50 % the first day, 60 % after,
	// 2–20 replicas; and one on a StatefulSet of the same name, which is not web's.
	hpa := func(family string, value func(i int) int, labels ...string) {
		fmt.Fprintf(&om, "# TYPE %s gauge\n", family)
		for _, l := range labels {
			for i := range n {
				fmt.Fprintf(&om, "%s{namespace=\"shop\",%s} %d %d\n", family, l, value(i), start.Add(time.Duration(i)*step).Unix())
			}
		}
	}
	hpa("kube_horizontalpodautoscaler_info", func(int) int { return 1 },
		`horizontalpodautoscaler="web",scaletargetref_api_version="apps/v1",scaletargetref_kind="Deployment",scaletargetref_name="web"`,
		`horizontalpodautoscaler="web-sts",scaletargetref_api_version="apps/v1",scaletargetref_kind="StatefulSet",scaletargetref_name="web"`)
	hpa("kube_horizontalpodautoscaler_spec_target_metric", func(i int) int { return map[bool]int{true: 50, false: 60}[i < 288] },
		`horizontalpodautoscaler="web",metric_name="cpu",metric_target_type="utilization"`)
	hpa("kube_horizontalpodautoscaler_spec_min_replicas", func(int) int { return 2 }, `horizontalpodautoscaler="web"`)
	hpa("kube_horizontalpodautoscaler_spec_max_replicas", func(int) int { return 20 }, `horizontalpodautoscaler="web"`)
	om.WriteString("# EOF\n")
	omFile := filepath.Join(tmp, "history.om")
	if err := os.WriteFile(omFile, []byte(om.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(tmp, "data")
	if out, err := exec.Command(filepath.Join(dir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", "-q", omFile, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	cfgFile := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte("global: {scrape_interval: 15s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	addr := l.Addr().String()
	l.Close()
	testenv.Start(t, tmp, "prometheus", filepath.Join(dir, "prometheus"), "--config.file="+cfgFile,
		"--storage.tsdb.path="+data, "--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn")
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	client, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, whatIfConfig)
	p := &cfg.Policies[0]
	h, err := DemandHistory(context.Background(), v1.NewAPI(client), p, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Demand) != n || h.Gaps != 0 || h.Request != 2 {
		t.Fatalf("history: %d samples, %d gaps, request %v; want %d, 0, 2", len(h.Demand), h.Gaps, h.Request, n)
	}
	for i := range want {
		if h.Demand[i] != want[i] {
			t.Fatalf("sample %d at %v: %v from Prometheus, %v backfilled", i, start.Add(time.Duration(i)*step), h.Demand[i], want[i])
		}
	}
	// A range with nothing recorded is an error, not an idle workload.
	if _, err := DemandHistory(context.Background(), v1.NewAPI(client), p, start.Add(-30*24*time.Hour), start.Add(-29*24*time.Hour), step); err == nil {
		t.Error("a range without samples gave no error")
	}

	base := backtest.DefaultOptions()
	base.Policies = []string{"hpa"}
	base.SweepTargets = []float64{0.2, 0.3, 0.5, 0.7}
	o, name := backtest.PolicyOptions(p, base, step, h.Request, len(h.Demand))
	if name != "debi" || o.Policies[0] != "debi" || o.DebiModel != "naive" || o.Request != 2 || o.Scale != 1 || o.History != 288 {
		t.Fatalf("options from the policy: %s %+v", name, o)
	}
	// The workload's HPA, read back from kube-state-metrics's series (the StatefulSet's left
	// out): the hpa row replays it, as debi backtest --config.file does.
	yours, found, err := FindHPA(context.Background(), v1.NewAPI(client), p.Target, start, end, step)
	if err != nil || !found || yours.Name != "web" || !yours.CPUUtilization() || yours.Target != 0.6 || yours.MinReplicas != 2 || yours.MaxReplicas != 20 ||
		!slices.Equal(yours.Changes, []string{"target 50 % → 60 %"}) || len(yours.Others) != 0 {
		t.Fatalf("the workload's HPA: %+v, found %v, %v; want web at 0.6, 2–20, its change from 50 %% said", yours, found, err)
	}
	o.HPA = &backtest.HPARow{Workload: "shop/web", Yours: true, Name: "shop/" + yours.Name, Target: yours.Target,
		MinReplicas: yours.MinReplicas, MaxReplicas: yours.MaxReplicas, Source: "kube-state-metrics", Changes: yours.Changes}
	run := func(vals []float64, o backtest.Options) string {
		rep, err := backtest.RunTraces(context.Background(), []trace.Trace{{Name: "web", StepMinutes: 5, Values: vals}}, o)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := rep.Write(&b, "json"); err != nil {
			t.Fatal(err)
		}
		// Everything but the run's own timing (decide and train seconds, ticks per second).
		var keep []string
		for _, line := range strings.Split(b.String(), "\n") {
			if !strings.Contains(line, `"decide_seconds"`) && !strings.Contains(line, `"train_seconds"`) && !strings.Contains(line, `"ticks_per_second"`) {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	replayed, direct := run(h.Demand, o), run(want, o)
	if replayed != direct {
		t.Fatalf("the replay of Prometheus's history differs from the backtest of the trace:\n%s\n%s", replayed, direct)
	}
	// The comparison has teeth: another week gives another report.
	other := append([]float64(nil), want...)
	for i := range other {
		if i%10 == 0 {
			other[i] *= 2
		}
	}
	if run(other, o) == direct {
		t.Fatal("a different demand gave the same report: the comparison proves nothing")
	}
	if !strings.Contains(replayed, `"policy": "debi"`) && !strings.Contains(replayed, `"policy":"debi"`) {
		t.Errorf("the configured policy is not in the report: %.300s", replayed)
	}
	// The what-if opens with a recommendation that names a target of the sweep (no replicas
	// were backfilled: its savings are against the hpa row).
	var view struct {
		Recommendation *struct {
			Target   float64 `json:"target"`
			Against  string  `json:"against"`
			Sentence string  `json:"sentence"`
		} `json:"recommendation"`
	}
	if err := json.Unmarshal([]byte(replayed), &view); err != nil {
		t.Fatal(err)
	}
	if r := view.Recommendation; r == nil || !slices.Contains(o.SweepTargets, r.Target) || r.Against != "hpa" ||
		!strings.Contains(r.Sentence, fmt.Sprintf("%.2f", r.Target)) || !strings.Contains(r.Sentence, "against the hpa row") {
		t.Errorf("recommendation %+v: want one naming a target of the sweep, against the hpa row", r)
	} else {
		t.Logf("recommendation: %s", r.Sentence)
	}
	// The hpa row is the workload's HPA, labelled so, at its target and bounds: its cost is
	// that of an hpa run with them as the policy's parameters (the sweep keeps the policy's).
	const label = "hpa = your HPA shop/web: target 0.60 (60 %), 2–20 replicas, read from kube-state-metrics; within the range target 50 % → 60 %"
	rows := hpaRows(t, replayed)
	if !strings.HasPrefix(rows.Recommendation.HPA, label) || rows.Recommendation.CurrentTarget != 0.6 {
		t.Errorf("recommendation: hpa %q, current target %v; want %q…, 0.6", rows.Recommendation.HPA, rows.Recommendation.CurrentTarget, label)
	}
	row := rows.run("hpa")
	if h := row.HPA; h == nil || !h.Yours || h.Target != 0.6 || h.MinReplicas != 2 || h.MaxReplicas != 20 || !strings.HasPrefix(h.Label, label) {
		t.Errorf("the hpa row: %+v; want yours at 0.6 with 2–20 replicas, labelled so", h)
	}
	at06 := o
	at06.HPA, at06.Policies = nil, []string{"hpa"}
	at06.Params.Target, at06.Params.MinReplicas, at06.Params.MaxReplicas = 0.6, 2, 20
	if want := hpaRows(t, run(h.Demand, at06)).run("hpa").Cost; row.Cost != want {
		t.Errorf("the hpa row costs %v; an hpa run at 0.6 with 2–20 replicas %v", row.Cost, want)
	} else {
		t.Logf("%s: cost %.1f", rows.Recommendation.HPA, row.Cost)
	}

	// The warm-up read from before the range (what `debi backtest --config.file` does): a range
	// starting 288 steps after the first backfilled sample has the policy's whole history (288
	// samples) before it and is scored whole; one starting 100 steps in has 100 samples before
	// it, and the other 188 of the warm-up come out of the range, unscored.
	for _, tc := range []struct{ from, before int }{{288, 288}, {100, 100}} {
		rangeStart := start.Add(time.Duration(tc.from) * step)
		hw, err := DemandHistoryWithWarmup(context.Background(), v1.NewAPI(client), p, rangeStart, end, step, p.History)
		if err != nil {
			t.Fatal(err)
		}
		if hw.Before != tc.before || len(hw.Demand) != n || !hw.Start.Equal(start) || hw.Coverage[0].Points != n-tc.from || hw.Coverage[0].Missing != 0 {
			t.Fatalf("range from step %d: %d samples before it, %d in all from %v, coverage %+v; want %d, %d from %v, the range's %d points",
				tc.from, hw.Before, len(hw.Demand), hw.Start, hw.Coverage[0], tc.before, n, start, n-tc.from)
		}
		ow, _ := backtest.PolicyOptions(p, base, step, hw.Request, len(hw.Demand))
		ow.Warmup = max(ow.Warmup, hw.Before)
		asked := end.Sub(rangeStart)
		ow.Recorded = map[string]backtest.Recorded{"web": {Start: hw.Start, RangeStart: rangeStart, Asked: asked}}
		rep, err := backtest.RunTraces(context.Background(), []trace.Trace{{Name: "web", StepMinutes: 5, Values: hw.Demand}}, ow)
		if err != nil {
			t.Fatal(err)
		}
		want := asked - time.Duration(p.History-tc.before)*step
		if tc.from == p.History && (asked != 7*24*time.Hour || want != asked) {
			t.Fatalf("range from step %d: %v asked, %v to score; want seven days, scored whole", tc.from, asked, want)
		}
		rec := rep.Recommendation
		if rec == nil || rec.Range == nil || rec.Range.Scored != want || rec.Range.Asked != asked || !slices.Contains(ow.SweepTargets, rec.Target) {
			t.Fatalf("range from step %d: recommendation %+v; want %v of %v scored and a target of the sweep", tc.from, rec, want, asked)
		}
		for _, r := range rep.Traces[0].Runs {
			if d := time.Duration(r.Seconds*float64(time.Second)) - want; d > step || d < -step {
				t.Errorf("range from step %d: %s scored %v s, want %v within a sample", tc.from, r.Policy, r.Seconds, want)
			}
		}
		t.Logf("range from step %d: %s", tc.from, rec.Range)
	}
}

// hpaReport is what a what-if's JSON says of its hpa row.
type hpaReport struct {
	Recommendation struct {
		HPA           string  `json:"hpa"`
		CurrentTarget float64 `json:"current_target"`
	} `json:"recommendation"`
	Traces []struct {
		Runs []hpaRun `json:"runs"`
	} `json:"traces"`
}

type hpaRun struct {
	Policy string  `json:"policy"`
	Cost   float64 `json:"cost"`
	HPA    *struct {
		Label       string  `json:"label"`
		Yours       bool    `json:"yours"`
		Target      float64 `json:"target"`
		MinReplicas int32   `json:"min_replicas"`
		MaxReplicas int32   `json:"max_replicas"`
	} `json:"hpa"`
}

func hpaRows(t *testing.T, report string) hpaReport {
	t.Helper()
	var r hpaReport
	if err := json.Unmarshal([]byte(report), &r); err != nil || len(r.Traces) != 1 {
		t.Fatalf("report: %v, %d traces", err, len(r.Traces))
	}
	return r
}

// run is the trace's run of a policy (the zero run when there is none).
func (r hpaReport) run(policy string) hpaRun {
	for _, x := range r.Traces[0].Runs {
		if x.Policy == policy {
			return x
		}
	}
	return hpaRun{}
}
