package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"

	"github.com/debi-scaler/debi/internal/testenv"
)

// engineQuerier evaluates PromQL with Prometheus's own engine over an in-memory TSDB, so that
// batched and per-policy queries are compared on real semantics (unit tests only; the
// integration tests use a real Prometheus). It counts the queries it answers.
type engineQuerier struct {
	mu      sync.Mutex
	engine  *promql.Engine
	st      storage.Queryable
	instant int
	ranges  int
}

func newEngineQuerier(t testing.TB, load string) *engineQuerier {
	st := promqltest.LoadedStorage(t, load)
	return &engineQuerier{
		engine: promql.NewEngine(promql.EngineOpts{MaxSamples: 1e8, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}),
		st:     st,
	}
}

func (q *engineQuerier) Query(ctx context.Context, expr string, ts time.Time, o ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.instant++
	return testenv.EngineQuerier{Engine: q.engine, Storage: q.st}.Query(ctx, expr, ts, o...)
}

func (q *engineQuerier) QueryRange(ctx context.Context, expr string, r v1.Range, o ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ranges++
	return testenv.EngineQuerier{Engine: q.engine, Storage: q.st}.QueryRange(ctx, expr, r, o...)
}

func (q *engineQuerier) counts() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.instant, q.ranges
}

func metricOf(m map[string]string) model.Metric {
	out := model.Metric{}
	for k, v := range m {
		out[model.LabelName(k)] = model.LabelValue(v)
	}
	return out
}

func TestParseTemplate(t *testing.T) {
	def := func(ns, name string) string {
		return fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace=%q,workload_type="deployment",workload=%q})`, ns, name)
	}
	a, ok1 := parseTemplate(def("shop", "web"))
	b, ok2 := parseTemplate(def("pay", "api"))
	if !ok1 || !ok2 || a.key != b.key || !a.aggregated || a.values["workload"] != "web" || b.values["namespace"] != "pay" {
		t.Fatalf("default demand queries: %+v %v, %+v %v", a, ok1, b, ok2)
	}
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{`max(kube_deployment_spec_replicas{namespace="a",deployment="b"})`, true},
		{`kube_deployment_spec_replicas{namespace="a",deployment="b"}`, true},
		{`sum(rate(container_cpu_usage_seconds_total{namespace="a",pod=~"web-.*"}[1m])) * 2`, true},
		{`avg(clamp_min(x{namespace="a"}, 0))`, true},
		{`sum by (pod) (x{namespace="a"})`, false},               // grouped already
		{`topk(1, x{namespace="a"})`, false},                     // not a per-group aggregation
		{`sum(x{namespace="a"}) / sum(y{namespace="a"})`, false}, // two selectors
		{`sum(label_replace(x{namespace="a"}, "n", "$1", "namespace", "(.*)"))`, false},
		{`sum(x{namespace=~"a"})`, false},               // no equality matcher
		{`x`, false},                                    // nothing varies
		{`scalar(x{namespace="a"})`, false},             // scalar() drops labels
		{`sum(x{namespace="a", namespace="b"})`, false}, // two matchers on one label
		{`sum(x{namespace="a"} offset 5m)`, true},
		{`vector(1)`, false},
	} {
		if _, ok := parseTemplate(tc.expr); ok != tc.ok {
			t.Errorf("%s: batchable %v, want %v", tc.expr, ok, tc.ok)
		}
	}
}

// fleetLoad is an in-memory TSDB of a fleet: per workload a CPU counter per pod, a recorded
// demand, spec replicas and a request; some workloads lack series, one has its replicas twice.
func fleetLoad(n int, seed uint64) (string, []string) {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString("load 15s\n")
	var names []string
	for i := range n {
		ns := fmt.Sprintf("ns%d", i%3)
		w := fmt.Sprintf("w%d", i)
		names = append(names, ns+"/"+w)
		if i%7 == 3 {
			continue // a workload without series: stale
		}
		for p := range 1 + i%3 {
			fmt.Fprintf(&b, "  container_cpu_usage_seconds_total{namespace=%q,pod=\"%s-%d\",workload=%q} 0+%.3fx120\n", ns, w, p, w, 1+r.Float64()*10)
		}
		fmt.Fprintf(&b, "  namespace_workload:debi_cpu_usage_cores:rate1m{namespace=%q,workload_type=\"deployment\",workload=%q} %.3f+%.3fx120\n", ns, w, r.Float64()*5, r.Float64()/10)
		fmt.Fprintf(&b, "  kube_deployment_spec_replicas{namespace=%q,deployment=%q} %dx120\n", ns, w, 1+i%5)
		if i%11 == 5 {
			fmt.Fprintf(&b, "  kube_deployment_spec_replicas{namespace=%q,deployment=%q,instance=\"ksm-2\"} %dx120\n", ns, w, 1+i%5)
		}
		fmt.Fprintf(&b, "  namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace=%q,workload_type=\"deployment\",workload=%q} 0.5x120\n", ns, w)
	}
	return b.String(), names
}

// fleetQueries are several templates of queries over the fleet's workloads.
func fleetQueries(names []string) []string {
	var out []string
	for _, nw := range names {
		ns, w, _ := strings.Cut(nw, "/")
		out = append(out,
			fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace=%q,workload_type="deployment",workload=%q})`, ns, w),
			fmt.Sprintf(`max(kube_deployment_spec_replicas{namespace=%q,deployment=%q})`, ns, w),
			fmt.Sprintf(`kube_deployment_spec_replicas{namespace=%q,deployment=%q}`, ns, w), // bare: several series for some
			fmt.Sprintf(`max(namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace=%q,workload_type="deployment",workload=%q})`, ns, w),
			fmt.Sprintf(`sum(rate(container_cpu_usage_seconds_total{namespace=%q,workload=%q}[1m])) * 1.5`, ns, w),
			fmt.Sprintf(`count(container_cpu_usage_seconds_total{namespace=%q,workload=%q})`, ns, w),
			fmt.Sprintf(`avg(avg_over_time(namespace_workload:debi_cpu_usage_cores:rate1m{namespace=%q,workload=%q}[2m]))`, ns, w),
		)
	}
	return out
}

// sameAnswer compares two results of resultValue: equal values, or errors of the same kind.
func sameAnswer(v1, v2 float64, e1, e2 error) bool {
	switch {
	case e1 == nil && e2 == nil:
		return v1 == v2 || math.Abs(v1-v2) <= 1e-9*math.Max(1, math.Abs(v1))
	case e1 != nil && e2 != nil:
		return errors.Is(e1, ErrEmpty) == errors.Is(e2, ErrEmpty) && errors.Is(e1, ErrSeveralSeries) == errors.Is(e2, ErrSeveralSeries)
	}
	return false
}

// TestBatchedEqualsPerPolicy: every policy query answered from a batch gets the answer its own
// query gets from the PromQL engine — the value, no series, or several — instant and range,
// with far fewer queries.
func TestBatchedEqualsPerPolicy(t *testing.T) {
	load, names := fleetLoad(40, 7)
	q := newEngineQuerier(t, load)
	exprs := fleetQueries(names)
	templates := map[string]exprTemplate{}
	for _, x := range exprs {
		if tm, ok := parseTemplate(x); ok {
			templates[x] = tm
		}
	}
	groups, singles := planBatches(exprs, templates)
	if len(groups) != 7 || len(singles) != 0 {
		t.Fatalf("%d groups, %d singles; want 7 templates batched", len(groups), len(singles))
	}
	e := &Exporter{base: q, timeout: time.Minute, lookback: 5 * time.Minute, log: discard(), workers: 2}
	e.metrics = testSelfMetrics()
	ctx := context.Background()
	at := time.Unix(0, 0).Add(20 * time.Minute)
	r := v1.Range{Start: time.Unix(0, 0).Add(2 * time.Minute), End: at, Step: time.Minute}
	before, _ := q.counts()
	kinds := map[string]int{}
	for _, g := range groups {
		inst := e.batchInstant(ctx, g, at)
		rng := e.batchRange(ctx, g, r)
		if inst == nil || rng == nil {
			t.Fatalf("batch %s not prefetched", g.expr)
		}
		for _, xs := range g.members {
			for _, x := range xs {
				a, ok := inst[x]
				if !ok {
					t.Fatalf("%s: no batched answer", x)
				}
				bv, berr := resultValue(a.v)
				if a.err != nil {
					berr = a.err
				}
				want, werr := instantValue(ctx, q, x, at)
				if !sameAnswer(bv, want, berr, werr) {
					t.Errorf("%s at %v: batched %v (%v), own query %v (%v)", x, at, bv, berr, want, werr)
				}
				switch {
				case werr == nil:
					kinds["value"]++
				case errors.Is(werr, ErrSeveralSeries):
					kinds["several"]++
				default:
					kinds["empty"]++
				}
				ra := rng[x]
				bm, berr := matrixValues(ra.v)
				wm, werr := rangeValues(ctx, q, x, r)
				if (berr == nil) != (werr == nil) || len(bm) != len(wm) {
					t.Errorf("%s range: batched %d points (%v), own %d (%v)", x, len(bm), berr, len(wm), werr)
				}
				for ts, v := range wm {
					if math.Abs(bm[ts]-v) > 1e-9*math.Max(1, math.Abs(v)) {
						t.Errorf("%s range at %d: batched %v, own %v", x, ts, bm[ts], v)
						break
					}
				}
			}
		}
	}
	if kinds["value"] == 0 || kinds["several"] == 0 || kinds["empty"] == 0 {
		t.Errorf("answers by kind %v: the fleet must exercise values, several series and none", kinds)
	}
	after, _ := q.counts()
	if sent := after - before - len(exprs); sent != len(groups) {
		t.Errorf("%d batched instant queries for %d groups", sent, len(groups))
	}
}

// matrixValues is rangeValues over a prefetched matrix.
func matrixValues(v model.Value) (map[int64]float64, error) {
	return rangeValues(context.Background(), staticQuerier{v}, "", v1.Range{})
}

type staticQuerier struct{ v model.Value }

func (s staticQuerier) Query(context.Context, string, time.Time, ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return s.v, nil, nil, nil
}
func (s staticQuerier) QueryRange(context.Context, string, v1.Range, ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return s.v, nil, nil, nil
}

// TestBatchRangePaged: a history larger than a page is loaded in pages and joined.
func TestBatchRangePaged(t *testing.T) {
	load, names := fleetLoad(12, 3)
	q := newEngineQuerier(t, load)
	exprs := fleetQueries(names)[:1]
	for _, nw := range names[1:] {
		ns, w, _ := strings.Cut(nw, "/")
		exprs = append(exprs, fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace=%q,workload_type="deployment",workload=%q})`, ns, w))
	}
	templates := map[string]exprTemplate{}
	for _, x := range exprs {
		templates[x], _ = parseTemplate(x)
	}
	groups, _ := planBatches(exprs, templates)
	if len(groups) != 1 {
		t.Fatalf("%d groups", len(groups))
	}
	e := &Exporter{base: q, timeout: time.Minute, lookback: 5 * time.Minute, log: discard(), workers: 1}
	e.metrics = testSelfMetrics()
	r := v1.Range{Start: time.Unix(0, 0), End: time.Unix(0, 0).Add(29 * time.Minute), Step: 15 * time.Second} // 117 points
	_, r0 := q.counts()
	got := e.batchRangePaged(context.Background(), groups[0], r, 10*len(exprs)) // 10 steps a page
	_, r1 := q.counts()
	if r1-r0 != 12 {
		t.Errorf("%d range queries, want 12 pages of 10 steps for 117 steps", r1-r0)
	}
	for _, x := range exprs {
		bm, _ := matrixValues(got[x].v)
		wm, err := rangeValues(context.Background(), q, x, r)
		if err != nil || len(bm) != len(wm) {
			t.Fatalf("%s: %d paged points, %d own (%v)", x, len(bm), len(wm), err)
		}
		for ts, v := range wm {
			if bm[ts] != v {
				t.Fatalf("%s at %d: paged %v, own %v", x, ts, bm[ts], v)
			}
		}
	}
}

func testSelfMetrics() selfMetrics { return newSelfMetrics(prometheus.NewRegistry()) }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestExporterBatched: an exporter whose policies' default queries are batched publishes, step
// by step and from its start-up history on, exactly what the same exporter querying each policy
// alone publishes, with one query per template and step instead of one per policy.
func TestExporterBatched(t *testing.T) {
	load, names := fleetLoad(30, 11)
	var b strings.Builder
	b.WriteString("global: {interval: 15s}\npolicies:\n")
	for i, nw := range names {
		ns, w, _ := strings.Cut(nw, "/")
		fmt.Fprintf(&b, "  - {name: p%d, target: {namespace: %s, name: %s}, algorithm: %s-debi, history_step: 30s, lead_time: 30s, history: 20, scaling: {max_replicas: 50}}\n", i, ns, w, testModel)
	}
	run := func(batching bool) ([]string, []int) {
		q := newEngineQuerier(t, load)
		c := loadConfig(t, fmt.Sprintf("exporter: {batch_queries: %v}\n", batching)+b.String())
		e, err := New(c, c.Policies, q, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if e.batching != batching {
			t.Fatalf("exporter.batch_queries: %v, batching %v", batching, e.batching)
		}
		e.mu.Lock()
		e.syncTraining = true
		for i, ps := range e.policies {
			ps.runner.Close()
			if e.policies[i], err = e.newPolicyState(c, ps.cfg); err != nil {
				t.Fatal(err)
			}
		}
		e.replan()
		e.mu.Unlock()
		var snaps []string
		var perStep []int
		for k := range 12 {
			before, rb := q.counts()
			e.Step(context.Background(), time.Unix(0, 0).Add(15*time.Minute+time.Duration(k)*15*time.Second))
			after, ra := q.counts()
			perStep = append(perStep, after-before+ra-rb)
			for _, p := range e.snap.Load().policies {
				p.lastTrain, p.trainDuration = 0, 0
				snaps = append(snaps, fmt.Sprintf("%d %+v", k, p))
			}
		}
		return snaps, perStep
	}
	want, perPolicy := run(false)
	got, batched := run(true)
	if len(got) != len(want) {
		t.Fatalf("%d snapshots batched, %d alone", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batched and per-policy exporters differ:\n batched %s\n alone   %s", got[i], want[i])
		}
	}
	stale := 0
	for _, s := range want {
		if strings.Contains(s, "stale:1") {
			stale++
		}
	}
	if stale == 0 || stale == len(want) {
		t.Errorf("%d of %d snapshots stale: the fleet must have fresh and stale policies", stale, len(want))
	}
	// Step 0 loads the history (4 range queries per policy alone, 4 batches batched); every
	// later step asks 4 instant queries per policy alone, one per template batched.
	if perPolicy[1] != 4*len(names) || batched[1] != 4 {
		t.Errorf("queries per step: %d alone, %d batched; want %d and 4", perPolicy[1], batched[1], 4*len(names))
	}
	// Besides, each default demand or request rule without a sample at the history's start
	// reads the raw series once (config.Policy.HistoryFallback), batched or not.
	fallback := 0
	c := loadConfig(t, b.String())
	q := newEngineQuerier(t, load)
	for _, p := range c.Policies {
		t0 := time.Unix(0, 0).Add(15 * time.Minute)
		start, end, _ := historyRange(t0, p.HistoryStep, p.History, c.Exporter.HistoryLookback)
		for _, expr := range []string{p.Queries.Demand, p.Queries.Request} {
			m, err := rangeValues(context.Background(), q, expr, v1.Range{Start: start, End: end, Step: p.HistoryStep})
			if _, ok := m[start.UnixMilli()]; err == nil && !ok {
				fallback++
			}
		}
	}
	if fallback == 0 || fallback == 2*len(names) {
		t.Errorf("%d of %d rules without history at the start: the fleet must have both", fallback, 2*len(names))
	}
	// And the first step measures every workload's start-up in one query for the whole fleet
	// (leadtime.go), batched or not.
	lead := 1
	if batched[0] != 8+fallback+lead || perPolicy[0] != 8*len(names)+fallback+lead {
		t.Errorf("first step: %d queries alone, %d batched; want %d and %d (history and step, %d history fallbacks, %d start-up measurements)",
			perPolicy[0], batched[0], 8*len(names)+fallback+lead, 8+fallback+lead, fallback, lead)
	}
}
