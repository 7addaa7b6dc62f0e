package webhook

import (
	"context"
	"testing"
)

const oneDecisionTwoMetrics = `
global: {interval: 15s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    scaling: {min_replicas: 1, max_replicas: 40, target: 0.5, scale_up_percent: 1000}
    queries: {replicas: 'replicas', ready_replicas: 'ready'}
    metrics:
      - name: cpu
        query: demand
        target: {type: Utilization}
        request: 1
        stabilization: {window: 15s}
      - name: rps
        unit: requests_per_second
        query: rps
        target: {type: AverageValue, averageValue: "100"}
        stabilization: {window: 15s}
webhook:
  mode: act
  allow_unauthenticated: true
`

// TestOneDecisionTwoMetrics: a policy on cpu and requests per second decides, in the exporter
// and in the webhook alike, the larger of the two counts; the deciding metric is named by the
// exporter's debi_decision_info and the webhook's outcome and switches with the load mix; a
// metric whose series goes missing never lets the other scale down.
func TestOneDecisionTwoMetrics(t *testing.T) {
	l := newLiveLoop(t, oneDecisionTwoMetrics, 4)
	deciding := func() string {
		q, err := l.engine.NewInstantQuery(context.Background(), l.st, nil, `debi_decision_info{policy="web"}`, l.now)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		v, err := q.Exec(context.Background()).Vector()
		if err != nil || len(v) != 1 {
			t.Fatalf("debi_decision_info: %v, %d series", err, len(v))
		}
		return v[0].Metric.Get("metric")
	}
	step := func(cpu, rps float64, withRPS bool) (Outcome, int32, string) {
		l.now = l.now.Add(l.cfg.Global.Interval)
		l.demand = cpu
		l.scrape()
		if withRPS {
			l.append("rps", nil, rps)
		}
		l.exporterStep()
		rec := int32(l.published(`debi_recommended_replicas{policy="web"}`))
		return l.alert(), rec, deciding()
	}
	// Counts at the current size N with the hpa rule ceil(N·W/0.5): cpu's W = D/(N·1), rps's
	// W = R/(N·200) (100 per pod at the target 0.5 is a capacity of 200).
	type phase struct {
		cpu, rps float64
		want     string
	}
	for i, ph := range []phase{
		{cpu: 1, rps: 1500, want: "rps"}, // cpu ceil(1/0.5) = 2, rps ceil(1500/100) = 15
		{cpu: 1, rps: 1500, want: "rps"},
		{cpu: 12, rps: 300, want: "cpu"}, // cpu ceil(12/0.5) = 24, rps 3
		{cpu: 12, rps: 300, want: "cpu"},
	} {
		out, rec, exp := step(ph.cpu, ph.rps, true)
		n := out.Before
		cpuN := int32(ceilDiv(ph.cpu, 0.5))
		rpsN := int32(ceilDiv(ph.rps, 100))
		t.Logf("phase %d: at %d exporter recommends %d by %s; webhook %d→%d (%s, metric %s; %s)", i, n, rec, exp, out.Before, out.After, out.Reason, out.Metric, out.Held)
		if exp != ph.want || out.Metric != ph.want {
			t.Errorf("phase %d: deciding metric exporter %q, webhook %q; want %q", i, exp, out.Metric, ph.want)
		}
		if out.Held != "" || out.After != rec || out.After != min(40, max(cpuN, rpsN)) {
			t.Errorf("phase %d: webhook %d→%d (held %q), exporter %d; want max(%d, %d)", i, out.Before, out.After, out.Held, rec, cpuN, rpsN)
		}
	}
	// rps goes missing while cpu asks for far fewer pods: no scale-down, by either.
	before, _, _ := l.target.state()
	l.now = l.now.Add(l.cfg.Global.Interval * 20) // the rps series is now older than the lookback
	out, rec, _ := step(0.5, 0, false)
	if out.After < before || rec < before {
		t.Errorf("rps missing: the webhook went %d→%d, the exporter recommends %d; want no scale-down from %d", out.Before, out.After, rec, before)
	}
	// …and while rps stays missing, cpu asks for more: both scale up on cpu (a metric that
	// cannot be read blocks a scale-down only, as in the HPA), the missing one named.
	out, rec, exp := step(30, 0, false) // cpu ceil(30/0.5) = 60, at max_replicas 40
	t.Logf("rps missing, cpu 30: exporter recommends %d by %s; webhook %d→%d (%s, metric %s; held %q)", rec, exp, out.Before, out.After, out.Reason, out.Metric, out.Held)
	if out.Held != "" || out.After != 40 || rec != 40 || out.Metric != "cpu" || exp != "cpu" {
		t.Errorf("rps missing, cpu asks for 60: webhook %d→%d (held %q, metric %q), exporter %d by %q; want 40 by cpu from both",
			out.Before, out.After, out.Held, out.Metric, rec, exp)
	}
}

func ceilDiv(a, b float64) float64 {
	n := a / b
	if f := float64(int64(n)); f < n {
		return f + 1
	}
	return n
}
