package exporter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/metricsapi"
)

// fakeReader answers Read from values by metric name; a metric in fail fails with its error.
// It records every Read's queries.
type fakeReader struct {
	mu     sync.Mutex
	values map[string]float64
	fail   map[string]error
	reads  [][]metricsapi.Query
}

func (f *fakeReader) set(metric string, v float64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.values == nil {
		f.values, f.fail = map[string]float64{}, map[string]error{}
	}
	f.values[metric], f.fail[metric] = v, err
}

func (f *fakeReader) Read(_ context.Context, qs []metricsapi.Query) []metricsapi.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, append([]metricsapi.Query(nil), qs...))
	out := make([]metricsapi.Result, len(qs))
	for i, q := range qs {
		out[i] = metricsapi.Result{Query: q, Value: f.values[q.Metric], Count: 1}
		if err := f.fail[q.Metric]; err != nil {
			out[i] = metricsapi.Result{Query: q, Err: fmt.Errorf("%s: %w", q, err)}
		}
	}
	return out
}

func (f *fakeReader) calls() [][]metricsapi.Query {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]metricsapi.Query(nil), f.reads...)
}

// apiCfg: policy w on a PromQL cpu metric and an External metric, policy p on a Pods metric.
const apiCfg = `
global: {interval: 15s}
exporter: {batch_queries: false}
policies:
  - name: w
    target: {namespace: shop, name: worker}
    algorithm: hpa
    history_step: 15s
    history: 10
    scaling: {target: 0.5, scale_up_percent: 1000, scale_down_stabilization: 0s}
    queries: {replicas: 'replicas', ready_replicas: 'ready'}
    metrics:
      - name: cpu
        query: 'cpu_demand'
        request: 1
        target: {type: Utilization}
        stabilization: {window: 15s}
      - name: queue_depth
        unit: items
        external: {metric: queue_depth, selector: {match_labels: {queue: orders}}}
        target: {type: AverageValue, averageValue: "30"}
        stabilization: {window: 15s}
  - name: p
    target: {namespace: shop, name: api}
    algorithm: hpa
    history_step: 15s
    history: 10
    scaling: {target: 0.5, scale_up_percent: 1000, scale_down_stabilization: 0s}
    queries: {replicas: 'replicas', ready_replicas: 'ready'}
    metrics:
      - name: rps
        unit: requests_per_second
        pods: {metric: http_requests_per_second}
        target: {type: AverageValue, averageValue: "100"}
        stabilization: {window: 15s}
`

func apiQuerier() *fakeQuerier {
	nothing := func(time.Time) (float64, bool, error) { return 0, false, nil }
	return &fakeQuerier{byExpr: map[string]series{
		"replicas": constant(4), "ready": constant(4), "cpu_demand": constant(1),
		config.SourceHistoryQuery("w", "queue_depth"): nothing,
		config.SourceHistoryQuery("p", "rps"):         nothing,
	}}
}

// TestMetricsAPIStep: every step reads every metrics-API metric of every policy in one Read;
// the External metric decides when it asks for more than cpu; when its API is not served it is
// named missing (log, debi_metric_source_failed and _errors_total with the reason) and the
// policy does not scale down although cpu asks for less; the Pods metric reads the pods of the
// target's scale selector.
func TestMetricsAPIStep(t *testing.T) {
	f := apiQuerier()
	e, reg, logs := newLoggedExporter(t, apiCfg, f)
	r := &fakeReader{}
	var selTargets []string
	e.sources.reader, e.sources.built = r, true
	e.sources.selector = func(_ context.Context, tg config.Target) (labels.Selector, error) {
		selTargets = append(selTargets, tg.String())
		return labels.Parse("app=api")
	}
	r.set("http_requests_per_second", 800, nil)
	notServed := fmt.Errorf("%w: external.metrics.k8s.io/v1beta1", metricsapi.ErrNotServed)
	r.set("queue_depth", 0, notServed)
	t0 := time.Unix(1_700_000_000, 0).Truncate(15 * time.Second)

	// Step 1: the External API is not served. cpu alone would go to ceil(1/0.5) = 2 pods from 4;
	// with queue_depth missing the policy holds at 4 (metric-missing).
	e.Step(context.Background(), t0)
	if got := gauge(t, reg, "debi_recommended_replicas", "w"); got != 4 {
		t.Errorf("recommended %v with queue_depth missing; want 4 (no scale-down)", got)
	}
	if got := gauge(t, reg, "debi_metric_source_failed", "w", "metric", "queue_depth", "reason", "not_served"); got != 1 {
		t.Errorf("debi_metric_source_failed{reason=not_served} = %v, want 1", got)
	}
	if got := gauge(t, reg, "debi_metric_source_errors_total", "w", "metric", "queue_depth", "reason", "not_served"); got != 1 {
		t.Errorf("debi_metric_source_errors_total{reason=not_served} = %v, want 1", got)
	}
	if _, ok := value(t, reg, "debi_metric_source_value", "w", "metric", "queue_depth"); ok {
		t.Error("debi_metric_source_value published for a failed read")
	}
	if got := gauge(t, reg, "debi_policy_stale", "w"); got != 1 {
		t.Errorf("stale %v, want 1 while a metric is missing", got)
	}
	for _, want := range []string{`metric=queue_depth`, `reason=not_served`, `field=policies[0].metrics[1].external`,
		`external metric \"queue_depth\" in namespace \"shop\": metrics API not served`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not say %s:\n%s", want, logs.String())
		}
	}
	// The Pods metric: 800 rps over the pods of app=api at averageValue 100 per pod → 8 pods
	// (the capacity is 100/0.5 = 200 at load 1, the load 800/(4·200) = 1, and hpa at target 0.5
	// wants ceil(4·1/0.5) = 8, as the HPA's ceil(800/100)).
	if got := gauge(t, reg, "debi_metric_source_value", "p", "metric", "rps"); got != 800 {
		t.Errorf("rps read %v, want 800", got)
	}
	if got := gauge(t, reg, "debi_recommended_replicas", "p"); got != 8 {
		t.Errorf("p recommended %v, want ceil(800/100) = 8", got)
	}

	// Step 2: the API is back with 360 messages at averageValue 30 per pod: ceil(360/30) = 12
	// pods (the load 360/(4·60) = 1.5, ceil(4·1.5/0.5) = 12), above cpu's 2: queue_depth decides.
	r.set("queue_depth", 360, nil)
	e.Step(context.Background(), t0.Add(15*time.Second))
	if got := gauge(t, reg, "debi_recommended_replicas", "w"); got != 12 {
		t.Errorf("recommended %v, want 12 by queue_depth", got)
	}
	if got := gauge(t, reg, "debi_decision_info", "w", "metric", "queue_depth"); got != 1 {
		t.Errorf("deciding metric not queue_depth")
	}
	if got := gauge(t, reg, "debi_metric_source_value", "w", "metric", "queue_depth"); got != 360 {
		t.Errorf("source value %v, want 360", got)
	}
	if got := gauge(t, reg, "debi_metric_source_failed", "w", "metric", "queue_depth", "reason", "not_served"); got != 0 {
		t.Errorf("still failed: %v", got)
	}
	if got := gauge(t, reg, "debi_metric_source_errors_total", "w", "metric", "queue_depth", "reason", "not_served"); got != 1 {
		t.Errorf("errors_total %v, want 1 (counted once)", got)
	}
	if !strings.Contains(logs.String(), "metric read from its metrics API again") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}

	// One Read per step with both policies' metrics, the External one with its selector and
	// namespace, the Pods one with the target's pods.
	calls := r.calls()
	if len(calls) != 2 {
		t.Fatalf("%d Reads for 2 steps, want 2", len(calls))
	}
	for _, qs := range calls {
		if len(qs) != 2 {
			t.Fatalf("a Read of %d queries, want 2: %v", len(qs), qs)
		}
		q, pq := qs[0], qs[1]
		if q.Type != metricsapi.External || q.Namespace != "shop" || q.Metric != "queue_depth" || q.Selector.String() != "queue=orders" {
			t.Errorf("external query %+v", q)
		}
		if pq.Type != metricsapi.Pods || pq.PodSelector.String() != "app=api" {
			t.Errorf("pods query %+v", pq)
		}
	}
	if len(selTargets) != 1 {
		t.Errorf("the pod selector was read %d times in 2 steps, want once (kept for %v)", len(selTargets), podSelectorTTL)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestMetricsAPIWithoutClient: with no client of the metrics APIs (no kube credentials), the
// metric fails with that error, named, and the others still decide without scaling down.
func TestMetricsAPIWithoutClient(t *testing.T) {
	f := apiQuerier()
	e, reg, logs := newLoggedExporter(t, apiCfg, f)
	e.sources.build = func() (kubeReaders, error) { return kubeReaders{}, errors.New("no kubeconfig") }
	e.Step(context.Background(), time.Unix(1_700_000_000, 0).Truncate(15*time.Second))
	if got := gauge(t, reg, "debi_metric_source_failed", "w", "metric", "queue_depth", "reason", "error"); got != 1 {
		t.Errorf("debi_metric_source_failed{reason=error} = %v, want 1", got)
	}
	if got := gauge(t, reg, "debi_recommended_replicas", "w"); got != 4 {
		t.Errorf("recommended %v, want 4 (no scale-down)", got)
	}
	if !strings.Contains(logs.String(), "no client of the metrics APIs: no kubeconfig") {
		t.Errorf("log does not name the cause:\n%s", logs.String())
	}
}

// TestMetricsAPIPodSelectorFails: a Pods metric whose target publishes no selector fails with
// reason no_pod_selector; the selector is asked again at the next step (an error is not kept).
func TestMetricsAPIPodSelectorFails(t *testing.T) {
	f := apiQuerier()
	e, reg, _ := newLoggedExporter(t, apiCfg, f)
	r := &fakeReader{}
	r.set("queue_depth", 30, nil)
	n := 0
	e.sources.reader, e.sources.built = r, true
	e.sources.selector = func(context.Context, config.Target) (labels.Selector, error) {
		n++
		return nil, errors.New("its scale subresource has no status.selector")
	}
	t0 := time.Unix(1_700_000_000, 0).Truncate(15 * time.Second)
	e.Step(context.Background(), t0)
	e.Step(context.Background(), t0.Add(15*time.Second))
	if got := gauge(t, reg, "debi_metric_source_errors_total", "p", "metric", "rps", "reason", "no_pod_selector"); got != 2 {
		t.Errorf("no_pod_selector errors %v, want 2", got)
	}
	if n != 2 {
		t.Errorf("selector asked %d times, want 2", n)
	}
	if calls := r.calls(); len(calls) != 2 || len(calls[0]) != 1 {
		t.Errorf("reads %v: want one query (queue_depth) per step", calls)
	}
}

// TestMetricsAPIHistory: a metric read from a metrics API loads its history from the series the
// exporter published (debi_metric_source_value, read back with PromQL), so that a restarted
// exporter's model starts warm; a Prometheus without that series is an empty history.
func TestMetricsAPIHistory(t *testing.T) {
	yml := strings.Replace(apiCfg, "algorithm: hpa\n    history_step: 15s\n    history: 10\n    scaling: {target: 0.5, scale_up_percent: 1000, scale_down_stabilization: 0s}\n    queries: {replicas: 'replicas', ready_replicas: 'ready'}\n    metrics:\n      - name: cpu",
		"algorithm: "+testModel+"-hpa\n    history_step: 15s\n    history: 10\n    scaling: {target: 0.5, scale_up_percent: 1000, scale_down_stabilization: 0s}\n    queries: {replicas: 'replicas', ready_replicas: 'ready'}\n    metrics:\n      - name: cpu", 1)
	if yml == apiCfg {
		t.Fatal("configuration not changed")
	}
	f := apiQuerier()
	f.byExpr[config.SourceHistoryQuery("w", "queue_depth")] = constant(120)
	e, reg, _ := newLoggedExporter(t, yml, f)
	r := &fakeReader{}
	r.set("queue_depth", 0, fmt.Errorf("%w after 5s", metricsapi.ErrTimeout))
	r.set("http_requests_per_second", 100, nil)
	e.sources.reader, e.sources.built = r, true
	e.sources.selector = func(context.Context, config.Target) (labels.Selector, error) { return labels.Everything(), nil }
	t0 := time.Unix(1_700_000_000, 0).Truncate(15 * time.Second)
	e.Step(context.Background(), t0)
	// history: 10 at 15s: the grid times in (t0 − 150s, t0) are 9 points, fed from the series;
	// the live step's read timed out, so queue_depth has those 9 and cpu 10.
	if got := gauge(t, reg, "debi_model_history_steps", "w", "metric", "queue_depth"); got != 9 {
		t.Errorf("queue_depth history %v steps, want 9 from debi_metric_source_value", got)
	}
	if got := gauge(t, reg, "debi_metric_source_failed", "w", "metric", "queue_depth", "reason", "timeout"); got != 1 {
		t.Errorf("timeout not named: %v", got)
	}
	found := false
	for _, rg := range f.ranges() {
		found = found || rg.Step == 15*time.Second
	}
	if !found {
		t.Error("no history range query")
	}
}

// TestSourceReason: each error of the Reader maps to its low-cardinality reason.
func TestSourceReason(t *testing.T) {
	gr := schema.GroupResource{Group: "external.metrics.k8s.io", Resource: "queue_depth"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w: external.metrics.k8s.io/v1beta1", metricsapi.ErrNotServed), "not_served"},
		{fmt.Errorf("x: %w after 5s", metricsapi.ErrTimeout), "timeout"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("x: %w", metricsapi.ErrNoValues), "no_values"},
		{fmt.Errorf("x: %w", apierrors.NewNotFound(gr, "queue_depth")), "not_found"},
		{fmt.Errorf("x: %w", apierrors.NewForbidden(gr, "queue_depth", errors.New("rbac"))), "forbidden"},
		{fmt.Errorf("x: %w: y", errNoPodSelector), "no_pod_selector"},
		{errors.New("connection refused"), "error"},
	} {
		got := sourceReason(tc.err)
		if got != tc.want {
			t.Errorf("%v: reason %q, want %q", tc.err, got, tc.want)
		}
		known := false
		for _, r := range config.SourceReasons {
			known = known || r == got
		}
		if !known {
			t.Errorf("reason %q is not in config.SourceReasons", got)
		}
	}
}

// TestSourceQueryNames: the exporter's query of a source names the metric exactly as the
// configuration's source does (the webhook's status message is built from the latter).
func TestSourceQueryNames(t *testing.T) {
	c := loadConfig(t, apiCfg+`
  - name: o
    target: {namespace: shop, name: web}
    algorithm: hpa
    metrics:
      - name: hits
        unit: requests_per_second
        object: {metric: hits, described_object: {api_version: networking.k8s.io/v1, kind: Ingress, name: main}}
        target: {type: Value, value: "100"}
`)
	n := 0
	for i := range c.Policies {
		for _, m := range c.Policies[i].ScaleMetrics() {
			if m.Source == nil {
				continue
			}
			q, err := sourceQuery(m.Source, labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if q.String() != m.Source.String() {
				t.Errorf("query %q, source %q", q.String(), m.Source.String())
			}
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d sources, want 3", n)
	}
}
