package exporter

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
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
