package exporter

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/backtest"
	"github.com/debi-scaler/debi/trace"
)

// readyConfig: two Deployments at 4 replicas with the same constant demand, 1.2 cores at 1 core
// per pod; kube-state-metrics records web's ready count and not api's. The default replicas and
// ready_replicas queries are kube-state-metrics'.
const readyConfig = `
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    request: 1
    queries: {demand: 'sum(shop_cpu_cores{deployment="web"})'}
    scaling: {min_replicas: 1, max_replicas: 20}
  - name: api
    target: {namespace: shop, name: api}
    algorithm: hpa
    request: 1
    queries: {demand: 'sum(shop_cpu_cores{deployment="api"})'}
    scaling: {min_replicas: 1, max_replicas: 20}
`

// TestWhatIfActualReady: the what-if's actual row scores the pods that served as Prometheus
// recorded them (kube_deployment_status_replicas_ready), backfilled into a real Prometheus:
// web ran 4 replicas for a day but only 1 was ready for 2 hours of the scored half, so its
// actual row is overloaded for those 2 hours (1.2 cores > u_sla · 1 pod · 1 core at any u_sla
// below 1.2, and not at 4 pods), although the spec never moved. api has no ready series: its
// actual row models the ready pods from the spec (4, never overloaded), and the report says so.
func TestWhatIfActualReady(t *testing.T) {
	const (
		scrape = 30 * time.Second
		step   = 5 * time.Minute
	)
	end := time.Now().Add(-time.Hour).Truncate(step)
	start := end.Add(-24 * time.Hour)
	dipFrom, dipTo := start.Add(16*time.Hour), start.Add(18*time.Hour) // web: 1 pod ready
	var om strings.Builder
	series := func(family string, lines ...func(ts time.Time) string) {
		fmt.Fprintf(&om, "# TYPE %s gauge\n", family)
		for _, line := range lines {
			for ts := start.Add(-10 * time.Minute); !ts.After(end); ts = ts.Add(scrape) {
				fmt.Fprintf(&om, "%s %d\n", line(ts), ts.Unix())
			}
		}
	}
	for _, d := range []string{"web", "api"} {
		series("shop_cpu_cores_"+d, func(time.Time) string { return fmt.Sprintf(`shop_cpu_cores{deployment=%q} 1.2`, d) })
		series("kube_deployment_spec_replicas_"+d, func(time.Time) string {
			return fmt.Sprintf(`kube_deployment_spec_replicas{namespace="shop",deployment=%q} 4`, d)
		})
	}
	series("kube_deployment_status_replicas_ready", func(ts time.Time) string {
		n := 4
		if !ts.Before(dipFrom) && ts.Before(dipTo) {
			n = 1
		}
		return fmt.Sprintf(`kube_deployment_status_replicas_ready{namespace="shop",deployment="web"} %d`, n)
	})
	om.WriteString("# EOF\n")
	// OpenMetrics names one family per # TYPE: the _web/_api suffixes only keep each series'
	// samples together; the metric names are the lines'.
	text := strings.NewReplacer("# TYPE shop_cpu_cores_web gauge", "# TYPE shop_cpu_cores gauge",
		"# TYPE shop_cpu_cores_api gauge\n", "",
		"# TYPE kube_deployment_spec_replicas_web gauge", "# TYPE kube_deployment_spec_replicas gauge",
		"# TYPE kube_deployment_spec_replicas_api gauge\n", "").Replace(om.String())
	q := backfilledPrometheus(t, text)
	cfg := loadConfig(t, readyConfig)

	actualOf := func(name string) (backtest.TraceResult, backtest.Run, string) {
		t.Helper()
		p, _ := cfg.PolicyByName(name)
		h, err := DemandHistory(context.Background(), q, p, start, end, step)
		if err != nil {
			t.Fatal(err)
		}
		base := backtest.DefaultOptions()
		base.Policies = []string{"hpa"}
		base.SweepTargets = []float64{0.5, 0.7}
		o, _ := backtest.PolicyOptions(p, base, step, h.Request, len(h.Demand))
		// As cmd/debi's what-if builds it.
		rec := backtest.Recorded{Start: h.Start, Replicas: h.Replicas, Ready: h.Ready, ReadyQuery: h.ReadyQuery}
		for _, c := range h.Coverage {
			rec.Coverage = append(rec.Coverage, backtest.Coverage{Series: c.Series, Query: c.Query, Fallback: c.Fallback,
				Range: c.Time(c.Points - 1), Covered: c.Time(c.Covered), FromFallback: c.Time(c.FromFallback), Missing: c.Time(c.Missing), Filled: c.Time(c.Filled)})
		}
		o.Recorded = map[string]backtest.Recorded{name: rec}
		rep, err := backtest.RunTraces(context.Background(), []trace.Trace{{Name: name, Class: "recorded", StepMinutes: 5, Values: h.Demand}}, o)
		if err != nil {
			t.Fatal(err)
		}
		var screen strings.Builder
		if err := rep.Write(&screen, "summary"); err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Traces[0].Runs {
			if r.Policy == backtest.ActualPolicy {
				return rep.Traces[0], r, screen.String()
			}
		}
		t.Fatalf("%s: no actual row", name)
		return backtest.TraceResult{}, backtest.Run{}, ""
	}

	tr, web, screen := actualOf("web")
	// Scored: the second half of the day (the warm-up is min(history, samples/2)); the dip's
	// 2 hours lie in it.
	want := dipTo.Sub(dipFrom).Seconds() / web.Seconds
	if web.ScaleActions != 0 || web.MeanReplicas != 4 || math.Abs(web.OverloadFraction-want) > 0.01 {
		t.Errorf("web's actual row: %d actions, mean %v replicas, overload %v; want 0, 4, %.3f (2 h of %v)",
			web.ScaleActions, web.MeanReplicas, web.OverloadFraction, want, time.Duration(web.Seconds)*time.Second)
	}
	wantSrc := `recorded (max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"}))`
	if tr.ActualReady != wantSrc || !strings.Contains(strings.Join(strings.Fields(screen), " "), "its ready pods "+wantSrc) {
		t.Errorf("web: actual_ready %q, want %q; the screen:\n%s", tr.ActualReady, wantSrc, screen)
	}
	if !strings.Contains(screen, "ready: covered 1d5m of 1d (100%)") {
		t.Errorf("web: the screen does not report the ready series' coverage:\n%s", screen)
	}
	t.Logf("web's what-if screen:\n%s", screen)

	tr, api, screen := actualOf("api")
	if api.OverloadFraction != 0 || api.MeanReplicas != 4 {
		t.Errorf("api's actual row: overload %v, mean %v; want 0 and 4 (modelled: the spec's 4 pods ready)", api.OverloadFraction, api.MeanReplicas)
	}
	wantSrc = `modelled from the start-up delay: max(kube_deployment_status_replicas_ready{namespace="shop",deployment="api"}) has no samples`
	if tr.ActualReady != wantSrc || !strings.Contains(strings.Join(strings.Fields(screen), " "), "its ready pods "+wantSrc) {
		t.Errorf("api: actual_ready %q, want %q; the screen:\n%s", tr.ActualReady, wantSrc, screen)
	}
}
