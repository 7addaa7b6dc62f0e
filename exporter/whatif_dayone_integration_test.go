package exporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/trace"
)

// backfilledPrometheus starts a real Prometheus over the OpenMetrics text om, backfilled with
// promtool at its exact timestamps.
func backfilledPrometheus(t *testing.T, om string) v1.API {
	t.Helper()
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)")
	tmp := t.TempDir()
	omFile := filepath.Join(tmp, "history.om")
	if err := os.WriteFile(omFile, []byte(om), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(tmp, "data")
	if out, err := exec.Command(filepath.Join(dir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", "-q", omFile, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	client, err := api.NewClient(api.Config{Address: testenv.Prometheus(t, dir, data)})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(client)
}

// dayOneConfig is a policy on the defaults: its demand and request queries read debi's
// recording rules, its replicas kube-state-metrics.
const dayOneConfig = `
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: budget
    scaling: {min_replicas: 1, max_replicas: 20}
`

// TestWhatIfDayOne: two days of what kube-prometheus-stack keeps before debi is installed —
// cAdvisor's CPU counters of two pods and kube-state-metrics' owners, requests and replica
// counts at a 30 s scrape — with a 4-hour hole in all of them (a Prometheus outage), and debi's
// recording rule only for the last 6 hours (installed then), backfilled into a real
// Prometheus. The what-if over the two days reads the rule where it has samples and the raw
// series elsewhere, reports what it covered, filled and missed, replays the recorded replicas
// as the actual row, and refuses a 5-day range that is mostly without data, saying how much
// there is.
func TestWhatIfDayOne(t *testing.T) {
	const (
		scrape  = 30 * time.Second
		step    = 5 * time.Minute
		days    = 2
		request = 0.5 // cores per pod, one container
	)
	end := time.Now().Add(-time.Hour).Truncate(step)
	start := end.Add(-days * 24 * time.Hour)
	gapFrom, gapTo := start.Add(30*time.Hour), start.Add(34*time.Hour) // no samples in [from, to)
	ruleFrom := end.Add(-6 * time.Hour)                                // debi's rules record from here
	change := start.Add(36 * time.Hour)                                // replicas 2 → 3
	// perPod is each pod's CPU use in cores: a daily cycle between 0.2 and 0.6.
	perPod := func(ts time.Time) float64 {
		return 0.4 + 0.2*math.Sin(2*math.Pi*ts.Sub(start).Hours()/24)
	}
	pods := []string{"web-7c9f-a", "web-7c9f-b"}
	var om strings.Builder
	family := func(name string, sample func(ts time.Time) []string) {
		fmt.Fprintf(&om, "# TYPE %s gauge\n", name)
		var lines [][]string
		for ts := start.Add(-10 * time.Minute); !ts.After(end); ts = ts.Add(scrape) {
			if !ts.Before(gapFrom) && ts.Before(gapTo) {
				continue
			}
			lines = append(lines, sample(ts))
		}
		// OpenMetrics wants each series' samples together.
		for k := range lines[0] {
			for _, l := range lines {
				om.WriteString(l[k])
			}
		}
	}
	at := func(ts time.Time) string { return fmt.Sprintf(" %d\n", ts.Unix()) }
	// The counters integrate perPod exactly: ∫ 0.4 + 0.2 sin(2πh/24) dh in seconds.
	counter := func(ts time.Time) float64 {
		h := ts.Sub(start).Hours()
		return 3600 * (0.4*h + 0.2*24/(2*math.Pi)*(1-math.Cos(2*math.Pi*h/24)))
	}
	family("container_cpu_usage_seconds_total", func(ts time.Time) []string {
		var out []string
		for _, p := range pods {
			out = append(out, fmt.Sprintf(`container_cpu_usage_seconds_total{namespace="shop",pod=%q,container="app",image="shop/web:1"} %g`, p, counter(ts)+1000)+at(ts))
		}
		return out
	})
	family("kube_pod_owner", func(ts time.Time) []string {
		var out []string
		for _, p := range pods {
			out = append(out, fmt.Sprintf(`kube_pod_owner{namespace="shop",pod=%q,owner_kind="ReplicaSet",owner_name="web-7c9f"} 1`, p)+at(ts))
		}
		return out
	})
	family("kube_replicaset_owner", func(ts time.Time) []string {
		return []string{`kube_replicaset_owner{namespace="shop",replicaset="web-7c9f",owner_kind="Deployment",owner_name="web"} 1` + at(ts)}
	})
	family("kube_pod_container_resource_requests", func(ts time.Time) []string {
		var out []string
		for _, p := range pods {
			out = append(out, fmt.Sprintf(`kube_pod_container_resource_requests{namespace="shop",pod=%q,container="app",resource="cpu",unit="core"} %g`, p, request)+at(ts))
		}
		return out
	})
	family("kube_deployment_spec_replicas", func(ts time.Time) []string {
		n := 2
		if !ts.Before(change) {
			n = 3
		}
		return []string{fmt.Sprintf(`kube_deployment_spec_replicas{namespace="shop",deployment="web"} %d`, n) + at(ts)}
	})
	// debi's recording rule, from its install on, at the 5-minute grid: 2 × perPod, + 1 core so
	// that the test sees which series a point came from.
	om.WriteString("# TYPE namespace_workload:debi_cpu_usage_cores:rate1m gauge\n")
	for ts := ruleFrom; !ts.After(end); ts = ts.Add(step) {
		fmt.Fprintf(&om, `namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload_type="deployment",workload="web"} %g`+at(ts), 2*perPod(ts)+1)
	}
	om.WriteString("# EOF\n")
	q := backfilledPrometheus(t, om.String())

	cfg := loadConfig(t, dayOneConfig)
	p := &cfg.Policies[0]
	if fb := p.HistoryFallback(); fb.Demand == "" || fb.Request == "" {
		t.Fatalf("the default queries have no fallback: %+v", fb)
	}
	h, err := DemandHistory(context.Background(), q, p, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	// The grid has 2 days / 5 min + 1 points; the hole hides 4 h of them (48) and the rate's
	// first minute after it (its [1m] window needs two samples: the point at gapTo has one).
	n := days*24*12 + 1
	gapPoints := int(gapTo.Sub(gapFrom) / step)
	rulePoints := int(end.Sub(ruleFrom)/step) + 1
	dem := h.Coverage[0]
	if dem.Series != "demand" || dem.Points != n || dem.Missing != 0 {
		t.Errorf("demand coverage %+v: want %d points, none missing (samples at both ends)", dem, n)
	}
	if dem.Filled < gapPoints || dem.Filled > gapPoints+1 || dem.Covered != n-dem.Filled {
		t.Errorf("demand coverage %+v: want %d (+1) points filled in the outage, the rest covered", dem, gapPoints)
	}
	if dem.FromFallback != dem.Covered-rulePoints || dem.Fallback == "" {
		t.Errorf("demand coverage %+v: want the %d rule points from the rule, the other %d from the raw series", dem, rulePoints, dem.Covered-rulePoints)
	}
	if h.Gaps != dem.Filled || len(h.Demand) != n || !h.Start.Equal(start) {
		t.Errorf("history: %d points from %v, %d gaps; want %d from %v, %d", len(h.Demand), h.Start, h.Gaps, n, start, dem.Filled)
	}
	for i, v := range h.Demand {
		ts := start.Add(time.Duration(i) * step)
		want := 2 * perPod(ts) // the raw series: two pods
		switch {
		case !ts.Before(ruleFrom):
			want++ // the rule's marker
		case !ts.Before(gapFrom) && ts.Before(gapTo.Add(time.Minute)):
			continue // filled
		}
		if math.Abs(v-want) > 0.01*want {
			t.Fatalf("demand at %v: %v, want %v", ts, v, want)
		}
	}
	if h.Request != request {
		t.Errorf("request %v from kube-state-metrics, want %v", h.Request, request)
	}
	if len(h.Replicas) != n || h.Replicas[0] != 2 || h.Replicas[n-1] != 3 {
		t.Fatalf("recorded replicas: %d points, %v … %v; want %d, 2 … 3", len(h.Replicas), h.Replicas[:1], h.Replicas[len(h.Replicas)-1:], n)
	}

	// The actual row: the recorded 2 → 3 replicas, one scale action, scored like the policies.
	base := backtest.DefaultOptions()
	base.Policies = []string{"hpa", "budget"}
	base.SweepTargets = []float64{0.5, 0.7}
	o, name := backtest.PolicyOptions(p, base, step, h.Request, len(h.Demand))
	if name != "budget" || strings.Join(o.Policies, ",") != "budget,hpa" || o.Configured != "budget" {
		t.Fatalf("options: %s, policies %v, configured %q; want budget once, first, marked", name, o.Policies, o.Configured)
	}
	rec := backtest.Recorded{Start: h.Start, Replicas: h.Replicas}
	for _, c := range h.Coverage {
		rec.Coverage = append(rec.Coverage, backtest.Coverage{Series: c.Series, Query: c.Query, Fallback: c.Fallback,
			Range: c.Time(c.Points - 1), Covered: c.Time(c.Covered), FromFallback: c.Time(c.FromFallback), Missing: c.Time(c.Missing), Filled: c.Time(c.Filled)})
	}
	o.Recorded = map[string]backtest.Recorded{"web": rec}
	rep, err := backtest.RunTraces(context.Background(), []trace.Trace{{Name: "web", Class: "recorded", StepMinutes: 5, Values: h.Demand}}, o)
	if err != nil {
		t.Fatal(err)
	}
	var screen strings.Builder
	if err := rep.Write(&screen, "summary"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(screen.String(), "demand: covered") || !strings.Contains(screen.String(), "from the raw series") || !strings.Contains(screen.String(), "(yours)") {
		t.Errorf("the screen lacks the coverage, the fallback or the marked policy:\n%s", screen.String())
	}
	t.Logf("the what-if's screen on the recorded history:\n%s", screen.String())
	var actual *backtest.Run
	for i, r := range rep.Traces[0].Runs {
		if r.Policy == backtest.ActualPolicy {
			actual = &rep.Traces[0].Runs[i]
		}
	}
	if actual == nil {
		t.Fatalf("no actual row in %+v", rep.Traces[0].Runs)
	}
	// Scored from the warm-up on (o.Warmup 5-minute samples): 2 replicas until the change,
	// 3 after it.
	scoredFrom := start.Add(time.Duration(o.Warmup) * step)
	before, after := change.Sub(scoredFrom).Seconds(), end.Sub(change).Seconds()
	wantMean := (2*before + 3*after) / (before + after)
	if actual.ScaleActions != 1 || math.Abs(actual.MeanReplicas-wantMean) > 0.01 {
		t.Errorf("actual: %d actions, mean %v replicas; want 1, %v", actual.ScaleActions, actual.MeanReplicas, wantMean)
	}
	if wantCost := request * actual.MeanReplicas * actual.Seconds / 3600; math.Abs(actual.Cost-wantCost) > 1e-6*wantCost {
		t.Errorf("actual cost %v, want R·mean·time = %v", actual.Cost, wantCost)
	}
	for _, r := range rep.Traces[0].Runs {
		if r.ActualRatio != r.Cost/actual.Cost {
			t.Errorf("%s: actual_ratio %v, want %v", r.Policy, r.ActualRatio, r.Cost/actual.Cost)
		}
	}

	// Five days over two days of history: refused, with how much there is.
	_, err = DemandHistory(context.Background(), q, p, end.Add(-5*24*time.Hour), end, step)
	if !errors.Is(err, ErrSparse) {
		t.Fatalf("5 days over 2 of history: %v, want ErrSparse", err)
	}
	for _, want := range []string{"1d20h", "of the 5d", "(37%)", "--range 1d20h"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
