package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/metricsapi"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/scaling"
)

// stubReader is the exporter's metrics-API reader: one External metric's value, or its error.
type stubReader struct {
	mu  sync.Mutex
	v   float64
	err error
}

func (r *stubReader) set(v float64, err error) { r.mu.Lock(); r.v, r.err = v, err; r.mu.Unlock() }

func (r *stubReader) Read(_ context.Context, qs []metricsapi.Query) []metricsapi.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]metricsapi.Result, len(qs))
	for i, q := range qs {
		out[i] = metricsapi.Result{Query: q, Value: r.v, Count: 1}
		if r.err != nil {
			out[i] = metricsapi.Result{Query: q, Err: fmt.Errorf("%s: %w", q, r.err)}
		}
	}
	return out
}

const apiMetricPolicy = `
global: {interval: 15s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    scaling: {min_replicas: 1, max_replicas: 40, target: 0.5, scale_up_percent: 1000, scale_down_stabilization: 0s}
    queries: {replicas: 'replicas', ready_replicas: 'ready'}
    metrics:
      - name: cpu
        query: demand
        target: {type: Utilization}
        request: 1
        stabilization: {window: 15s}
      - name: queue_depth
        unit: items
        external: {metric: queue_depth}
        target: {type: AverageValue, averageValue: "30"}
        stabilization: {window: 15s}
webhook:
  mode: act
  allow_unauthenticated: true
`

// TestMetricsAPIStatus: the exporter reads a policy's External metric and the webhook decides
// on it, through one Prometheus; when the metric's API is not served, the MetricsPipeline
// condition names the metric, its source and the cause the exporter published
// (debi_metric_source_failed), and the decision, taken on cpu, does not scale down although cpu
// asks for less.
func TestMetricsAPIStatus(t *testing.T) {
	l := newLiveLoop(t, apiMetricPolicy, 4)
	r := &stubReader{}
	l.exp.SetMetricsAPI(r, nil, nil)
	var obs []elasticscaler.Decision
	c, err := NewController(l.cfg, ControllerOptions{Actuator: l.target, Query: l.query, Logger: testenv.Logger(t),
		Registerer: prometheus.NewRegistry(), Now: func() time.Time { return l.now }, Observe: func(o elasticscaler.Decision) { obs = append(obs, o) }})
	if err != nil {
		t.Fatal(err)
	}
	l.ctl = c
	step := func(queue float64, err error) (Outcome, metav1.Condition) {
		t.Helper()
		r.set(queue, err)
		l.now = l.now.Add(l.cfg.Global.Interval)
		l.demand = 1 // cpu: ceil(1/0.5) = 2 pods
		l.scrape()
		l.exporterStep()
		out := l.alert()
		if len(obs) == 0 || obs[len(obs)-1].Metrics == nil {
			t.Fatalf("no observation with metrics: %+v", obs)
		}
		return out, elasticscaler.MetricsCondition(obs[len(obs)-1].Metrics, 1)
	}
	// 360 messages at 30 per pod: ceil(360/30) = 12 pods, above cpu's 2.
	out, cond := step(360, nil)
	if out.After != 12 || out.Metric != "queue_depth" {
		t.Errorf("outcome %d→%d by %q (held %q); want 12 by queue_depth", out.Before, out.After, out.Metric, out.Held)
	}
	if cond.Status != metav1.ConditionTrue || strings.Contains(cond.Message, "queue_depth") {
		t.Errorf("MetricsPipeline %+v; want True without a failed metric", cond)
	}
	// The API goes away: queue_depth is missing, cpu asks for 2, the size stays at 12 at least.
	l.target.set(12, 12)
	out, cond = step(0, fmt.Errorf("%w: external.metrics.k8s.io/v1beta1", metricsapi.ErrNotServed))
	if out.After < out.Before {
		t.Errorf("scaled down %d→%d with queue_depth missing", out.Before, out.After)
	}
	want := `queue_depth: external metric "queue_depth" in namespace "shop": metrics API not served`
	if cond.Status != metav1.ConditionFalse || cond.Reason != esv1.ReasonMetricsPartialSuccess || !strings.Contains(cond.Message, want) {
		t.Errorf("MetricsPipeline %s %s %q; want PartialSuccess naming %q", cond.Status, cond.Reason, cond.Message, want)
	}
	// Decided on cpu, which asks for 2, without scaling down (not held: a scale-up cpu asked
	// for would be made; webhook.TestOneDecisionTwoMetrics).
	if out.Held != "" || out.After != 12 || out.Metric != "cpu" || out.Reason != scaling.ReasonMetricMissing {
		t.Errorf("queue_depth missing: %d→%d by %q (%s, held %q); want 12 by cpu, reason %s", out.Before, out.After, out.Metric, out.Reason, out.Held, scaling.ReasonMetricMissing)
	}
	t.Logf("%d→%d by %s (%s); MetricsPipeline: %s", out.Before, out.After, out.Metric, out.Reason, cond.Message)
	// Back: the cause is gone from the condition.
	_, cond = step(360, nil)
	if strings.Contains(cond.Message, "not served") {
		t.Errorf("MetricsPipeline still names the cause: %q", cond.Message)
	}
}

// TestSourceReasonQuery: the reason code query is the index + 1 of the one reason at 1, 0 when
// every reason is 0, and names nothing for another policy or metric.
func TestSourceReasonQuery(t *testing.T) {
	l := newLiveLoop(t, apiMetricPolicy, 4)
	put := func(metric, reason string, v float64) {
		l.append("debi_metric_source_failed", map[string]string{"policy": "web", "metric": metric, "reason": reason}, v)
	}
	for k, reason := range config.SourceReasons {
		for _, r := range config.SourceReasons {
			v := 0.0
			if r == reason {
				v = 1
			}
			put("queue_depth", r, v)
			put("other", r, 1-v)
		}
		if got := l.published(sourceReasonQuery("web", "queue_depth")); got != float64(k+1) {
			t.Errorf("%s: code %v, want %d", reason, got, k+1)
		}
		l.now = l.now.Add(15 * time.Second)
	}
	for _, r := range config.SourceReasons {
		put("queue_depth", r, 0)
	}
	if got := l.published(sourceReasonQuery("web", "queue_depth")); got != 0 {
		t.Errorf("no failure: code %v, want 0", got)
	}
}
