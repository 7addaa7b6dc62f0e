package exporter

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
)

// rangeFailing is a Prometheus whose range queries fail while failing is set (a query_range
// timing out on a long history, a proxy refusing it) and whose instant queries work.
type rangeFailing struct {
	*fakeQuerier
	failing atomic.Bool
}

func (q *rangeFailing) QueryRange(ctx context.Context, expr string, r v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	if q.failing.Load() {
		return nil, nil, nil, errors.New("query_range: context deadline exceeded")
	}
	return q.fakeQuerier.QueryRange(ctx, expr, r, opts...)
}

// TestHistoryRetriedAfterLiveSteps: when the history load fails but the live steps work, the
// load is retried at every step; once it succeeds the policy is rebuilt from the history, so
// that it publishes exactly what an exporter started at that step publishes (no live point
// duplicated or fed out of order), and the counters carry over.
func TestHistoryRetriedAfterLiveSteps(t *testing.T) {
	inputs := func() *fakeQuerier {
		return &fakeQuerier{byExpr: map[string]series{
			"demand":   func(t time.Time) (float64, bool, error) { return demandTrace(t), true, nil },
			"replicas": constant(2), "ready": constant(2),
		}}
	}
	q := &rangeFailing{fakeQuerier: inputs()}
	q.failing.Store(true)
	e, reg := newTestExporter(t, oneCfg, q)
	defer e.Close()
	e.Step(context.Background(), t0)
	e.Step(context.Background(), t0.Add(step))
	if v, _ := value(t, reg, "debi_policy_history_points", "web"); v != 0 {
		t.Fatalf("history points while query_range fails = %v, want 0", v)
	}
	if v, _ := value(t, reg, "debi_policy_steps_total", "web"); v != 2 {
		t.Fatalf("steps = %v, want the 2 live steps", v)
	}
	if v, _ := value(t, reg, "debi_model_history_steps", "web"); v != 1 {
		t.Fatalf("model history = %v, want 1 (t0; t0+15s is in the same 30 s history step)", v)
	}
	errsBefore, _ := value(t, reg, "debi_query_errors_total", "web", "query", "replicas")

	q.failing.Store(false)
	at := t0.Add(2 * step) // on the 30 s history grid
	e.Step(context.Background(), at)
	e.Wait()

	// The reference: an exporter whose first step is at, Prometheus answering everything.
	ref, refReg := newTestExporter(t, oneCfg, inputs())
	defer ref.Close()
	ref.Step(context.Background(), at)
	ref.Wait()

	// (at − 40 × 30 s, at): the 39 history steps at − 39·30 s … at − 30 s, plus at itself, live.
	if v, _ := value(t, reg, "debi_policy_history_points", "web"); v != 39 {
		t.Fatalf("history points after the retry = %v, want 39", v)
	}
	if v, _ := value(t, reg, "debi_model_history_steps", "web"); v != 40 {
		t.Fatalf("model history = %v, want 40 (history: 40; nothing duplicated)", v)
	}
	if v, _ := value(t, reg, "debi_policy_steps_total", "web"); v != 2+39+1 {
		t.Fatalf("steps = %v, want 42 (2 live, 39 history, 1 live): the counter carries over", v)
	}
	if v, _ := value(t, reg, "debi_query_errors_total", "web", "query", "replicas"); v < errsBefore {
		t.Fatalf("query errors went down from %v to %v", errsBefore, v)
	}
	// Training runs in the background: step both to the next history step, where each forecasts
	// with its trained model.
	for _, x := range []*Exporter{e, ref} {
		x.Step(context.Background(), at.Add(step))
		x.Wait()
		x.Step(context.Background(), at.Add(2*step))
	}
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"debi_load_ratio", []string{"load", "w1"}},
		{"debi_load_ratio", []string{"load", "w2"}},
		{"debi_load_ratio", []string{"load", "w3"}},
		{"debi_load_ratio", []string{"load", "w"}},
		{"debi_load_ratio", []string{"load", "window"}},
		{"debi_demand_cores", []string{"load", "w2"}},
		{"debi_recommended_replicas", nil},
		{"debi_target_utilization_ratio", nil},
		{"debi_policy_stale", nil},
	} {
		got, ok := value(t, reg, c.name, "web", c.extra...)
		want, wok := value(t, refReg, c.name, "web", c.extra...)
		if ok != wok || got != want {
			t.Errorf("%s%v = %v (%v), want %v (%v) as after a start at that step", c.name, c.extra, got, ok, want, wok)
		}
	}

	if n := len(q.ranges()); n != 3 {
		t.Fatalf("%d range queries, want 3: the history is loaded once, then never again", n)
	}
}

// TestHistoryRetried: when Prometheus is unreachable at the first step, the history is loaded at
// the first step that can reach it, before any live observation.
func TestHistoryRetried(t *testing.T) {
	f := &fakeQuerier{byExpr: map[string]series{"demand": constant(1), "replicas": constant(2), "ready": constant(2)}}
	e, reg := newTestExporter(t, oneCfg, f)
	f.setDown(true)
	e.Step(context.Background(), t0)
	if v, _ := value(t, reg, "debi_policy_history_points", "web"); v != 0 {
		t.Fatalf("history points while down = %v, want 0", v)
	}
	f.setDown(false)
	e.Step(context.Background(), t0.Add(step))
	e.Wait()
	// t0+15s is inside the 30 s history step that began at t0: the history holds the 40 history
	// steps t0 − 39·30 s … t0, and the live step takes no new point.
	if v, _ := value(t, reg, "debi_policy_history_points", "web"); v != 40 {
		t.Fatalf("history points after recovery = %v, want 40", v)
	}
	if q := f.ranges(); len(q) == 0 || !q[0].Start.Equal(t0.Add(-39*histStep)) || !q[0].End.Equal(t0) || q[0].Step != histStep {
		t.Fatalf("history range = %+v, want %v … %v step %v", q, t0.Add(-39*histStep), t0, histStep)
	}
	if v, _ := value(t, reg, "debi_policy_steps_total", "web"); v != 41 {
		t.Fatalf("steps = %v, want 41 (40 history + 1 live)", v)
	}
	if v, _ := value(t, reg, "debi_model_history_steps", "web"); v != 40 {
		t.Fatalf("model history = %v steps, want 40", v)
	}
	e.Step(context.Background(), t0.Add(2*step)) // a new history step
	if v, _ := value(t, reg, "debi_model_history_steps", "web"); v != 40 {
		t.Fatalf("model history = %v steps after a new history step, want 40 (history: 40)", v)
	}
}

// TestHistoryStep: the model history advances once per history step (30 s) while the exporter
// steps every interval (15 s); between history steps the forecast stands; the start-up history
// is capped by exporter.history_lookback.
func TestHistoryStep(t *testing.T) {
	f := &fakeQuerier{byExpr: map[string]series{
		"demand":   func(ts time.Time) (float64, bool, error) { return demandTrace(ts), true, nil },
		"replicas": constant(6), "ready": constant(6),
	}}
	e, reg := newTestExporter(t, `
global: {interval: 15s}
exporter: {history_lookback: 5m}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: exporter-test-drift-debi
    request: 0.5
    history_step: 30s
    lead_time: 45s
    history: 100
    metrics: {window: 15s}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`, f)
	get := func(name string, extra ...string) float64 {
		t.Helper()
		v, ok := value(t, reg, name, "web", extra...)
		if !ok {
			t.Fatalf("%s not published", name)
		}
		return v
	}
	var w1, w2 float64
	for i := range 8 {
		ts := t0.Add(time.Duration(i) * step)
		e.Step(context.Background(), ts)
		e.Wait()
		if i == 0 {
			// 5 minutes of 30 s history steps before t0: 9 points, then t0's own.
			if n := get("debi_policy_history_points"); n != 9 {
				t.Fatalf("history points = %v, want 9 (history_lookback 5m of 30 s steps, the last one live)", n)
			}
		}
		// 10 history points at t0, one more every 30 s.
		if have, want := get("debi_model_history_steps"), float64(10+i/2); have != want {
			t.Fatalf("step %d: debi_model_history_steps = %v, want %v", i, have, want)
		}
		// The first training run, started during the history load, runs in the background: its
		// model forecasts from the next history step on.
		nw1 := get("debi_demand_cores", "load", "w1")
		nw2, ok := value(t, reg, "debi_demand_cores", "web", "load", "w2")
		if !ok && i >= 2 {
			t.Fatalf("step %d: no forecast", i)
		}
		if i%2 == 1 {
			if nw2 != w2 && !(isNaN(nw2) && isNaN(w2)) {
				t.Fatalf("step %d: between history steps the forecast moved: %v → %v", i, w2, nw2)
			}
			if nw1 == w1 {
				t.Fatalf("step %d: the observed demand did not move (%v): the test proves nothing", i, w1)
			}
		}
		w1, w2 = nw1, nw2
	}
	// h = ceil(45 s / 30 s) + 1 = 3 history steps of 30 s; the drift model needs 6 points.
	for name, want := range map[string]float64{
		"debi_forecast_horizon_seconds":     90,
		"debi_model_history_step_seconds":   30,
		"debi_model_history_required_steps": driftSpan + 1,
	} {
		if got := get(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
