package exporter

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/debi-scaler/debi/internal/testenv"
)

// twoCfg: two HPA policies on their own demand queries; ok is policies[0], bad policies[1].
const twoCfg = `
global: {interval: 15s}
policies:
  - name: ok
    target: {namespace: shop, name: ok}
    algorithm: hpa
    request: 1
    history_step: 30s
    history: 10
    queries: {demand: 'demand_ok', replicas: 'replicas', ready_replicas: 'ready'}
  - name: bad
    target: {namespace: shop, name: bad}
    algorithm: hpa
    request: 1
    history_step: 30s
    history: 10
    queries: {demand: 'demand_bad', replicas: 'replicas', ready_replicas: 'ready'}
`

func newLoggedExporter(t *testing.T, yml string, q Querier) (*Exporter, *prometheus.Registry, *testenv.Buffer) {
	t.Helper()
	c := loadConfig(t, yml)
	reg := prometheus.NewRegistry()
	var logs testenv.Buffer
	e, err := New(c, c.Policies, q, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, reg, &logs
}

func setMulti(f *fakeQuerier, expr string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.multi == nil {
		f.multi = map[string]bool{}
	}
	f.multi[expr] = on
}

// gauge is the value of a policy's series, failing the test when it is absent.
func gauge(t *testing.T, g prometheus.Gatherer, name, pol string, extra ...string) float64 {
	t.Helper()
	v, ok := value(t, g, name, pol, extra...)
	if !ok {
		t.Fatalf("%s{policy=%q} absent", name, pol)
	}
	return v
}

// TestFailedPolicyAtStart: a policy whose query returns two series at the start-up check is
// marked failed and holds while the other runs; fixing the query (a recording rule corrected)
// brings it back at the next step, without a restart.
func TestFailedPolicyAtStart(t *testing.T) {
	f := &fakeQuerier{byExpr: map[string]series{
		"demand_ok": constant(3), "demand_bad": constant(3), "replicas": constant(2), "ready": constant(2),
	}}
	setMulti(f, "demand_bad", true)
	e, reg, logs := newLoggedExporter(t, twoCfg, f)
	err := e.CheckQueries(context.Background(), t0)
	if !errors.Is(err, ErrSeveralSeries) || !strings.Contains(err.Error(), "policies[1].queries.demand") || strings.Contains(err.Error(), "policies[0]") {
		t.Fatalf("CheckQueries = %v, want ErrSeveralSeries at policies[1].queries.demand only", err)
	}
	if gauge(t, reg, "debi_policy_failed", "bad") != 1 || gauge(t, reg, "debi_policy_failed", "ok") != 0 {
		t.Fatal("debi_policy_failed: want bad 1, ok 0 after the start-up check")
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "policies[1].queries.demand") {
		t.Fatalf("no error log naming policies[1].queries.demand:\n%s", logs)
	}

	for i := range 3 {
		e.Step(context.Background(), t0.Add(time.Duration(i)*step))
	}
	// HPA: ceil(2 × (3 cores / 2 pods / 1 core) / 0.5) = 6.
	if got := gauge(t, reg, "debi_recommended_replicas", "ok"); got != 6 {
		t.Errorf("ok: recommended %v, want 6", got)
	}
	if gauge(t, reg, "debi_policy_stale", "bad") != 1 || gauge(t, reg, "debi_policy_failed", "bad") != 1 {
		t.Error("bad: want stale and failed while its query returns two series")
	}
	if got := gauge(t, reg, "debi_policy_steps_total", "bad"); got != 0 {
		t.Errorf("bad: runner stepped %v times while failed, want 0", got)
	}
	if n := strings.Count(logs.String(), "policy failed"); n != 1 {
		t.Errorf("failure logged %d times, want once (then checked quietly)", n)
	}

	setMulti(f, "demand_bad", false) // the rule is fixed
	e.Step(context.Background(), t0.Add(3*step))
	if gauge(t, reg, "debi_policy_failed", "bad") != 0 || gauge(t, reg, "debi_policy_stale", "bad") != 0 {
		t.Fatal("bad: still failed or stale after its query was fixed")
	}
	// The history is loaded at the recovery: 10 history points, then the live step.
	if got := gauge(t, reg, "debi_policy_history_points", "bad"); got != 10 {
		t.Errorf("bad: history points %v after recovery, want 10", got)
	}
	if got := gauge(t, reg, "debi_recommended_replicas", "bad"); got != 6 {
		t.Errorf("bad: recommended %v after recovery, want 6", got)
	}
	if !strings.Contains(logs.String(), "policy queries fixed") {
		t.Errorf("recovery not logged:\n%s", logs)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestFailedPolicyLater: a query that turns ambiguous at a later step fails the policy the same
// way: it holds at its current size and its runner is not stepped until the query is fixed.
// Meanwhile an unreachable Prometheus does not count as fixed.
func TestFailedPolicyLater(t *testing.T) {
	demand := 3.0
	f := &fakeQuerier{byExpr: map[string]series{
		"demand_ok": constant(3), "replicas": constant(2), "ready": constant(2),
		"demand_bad": func(time.Time) (float64, bool, error) { return demand, true, nil },
	}}
	e, reg, logs := newLoggedExporter(t, twoCfg, f)
	e.Step(context.Background(), t0)
	if got := gauge(t, reg, "debi_recommended_replicas", "bad"); got != 6 {
		t.Fatalf("bad: recommended %v, want 6", got)
	}
	steps := gauge(t, reg, "debi_policy_steps_total", "bad")

	demand = 0.5 // a scale-down, if the policy were stepped: ceil(2 × 0.25 / 0.5) = 1
	setMulti(f, "demand_bad", true)
	e.Step(context.Background(), t0.Add(step))
	if gauge(t, reg, "debi_policy_failed", "bad") != 1 || gauge(t, reg, "debi_policy_failed", "ok") != 0 {
		t.Fatal("debi_policy_failed: want bad 1, ok 0 after two series at a live step")
	}
	if gauge(t, reg, "debi_policy_stale", "bad") != 1 || gauge(t, reg, "debi_recommended_replicas", "bad") != 2 {
		t.Fatal("bad: want stale, recommending its current size 2")
	}
	if !strings.Contains(logs.String(), "policies[1].queries.demand") {
		t.Fatalf("no log naming policies[1].queries.demand:\n%s", logs)
	}
	stepped := gauge(t, reg, "debi_policy_steps_total", "bad") // the step that found it fed a missing demand
	for i := 2; i < 4; i++ {
		e.Step(context.Background(), t0.Add(time.Duration(i)*step))
	}
	if got := gauge(t, reg, "debi_policy_steps_total", "bad"); got != stepped || stepped > steps+1 {
		t.Fatalf("bad: steps %v → %v → %v, want no step while failed", steps, stepped, got)
	}

	f.setDown(true)
	setMulti(f, "demand_bad", false)
	e.Step(context.Background(), t0.Add(4*step))
	if gauge(t, reg, "debi_policy_failed", "bad") != 1 {
		t.Fatal("bad: an unreachable Prometheus cleared the failure")
	}
	f.setDown(false)
	e.Step(context.Background(), t0.Add(5*step))
	if gauge(t, reg, "debi_policy_failed", "bad") != 0 || gauge(t, reg, "debi_policy_stale", "bad") != 0 {
		t.Fatal("bad: still failed after the fix")
	}
	if got := gauge(t, reg, "debi_recommended_replicas", "ok"); got != 6 {
		t.Errorf("ok: recommended %v, want 6 all along", got)
	}
}

// TestFailedPolicyBadData: Prometheus rejecting a query as bad data fails the policy, at its
// history load too (range queries), and the path names the query.
func TestFailedPolicyBadData(t *testing.T) {
	rejected := &v1.Error{Type: v1.ErrBadData, Msg: `1:1: parse error: unknown function with name "rate2"`}
	f := &fakeQuerier{byExpr: map[string]series{
		"demand_ok": constant(3), "replicas": constant(2), "ready": constant(2),
		"demand_bad": func(time.Time) (float64, bool, error) { return 0, false, rejected },
	}}
	e, reg, logs := newLoggedExporter(t, twoCfg, f)
	e.Step(context.Background(), t0) // no start-up check: the history load finds it
	if gauge(t, reg, "debi_policy_failed", "bad") != 1 || gauge(t, reg, "debi_policy_failed", "ok") != 0 {
		t.Fatal("debi_policy_failed: want bad 1, ok 0")
	}
	if !strings.Contains(logs.String(), "policies[1].queries.demand") || !strings.Contains(logs.String(), "rate2") {
		t.Fatalf("no log naming policies[1].queries.demand and the error:\n%s", logs)
	}
	if got := gauge(t, reg, "debi_policy_steps_total", "bad"); got != 0 {
		t.Fatalf("bad: %v steps, want 0", got)
	}
	if got := gauge(t, reg, "debi_recommended_replicas", "ok"); got != 6 {
		t.Errorf("ok: recommended %v, want 6", got)
	}
}

func TestCheckQueries(t *testing.T) {
	f := &fakeQuerier{byExpr: map[string]series{
		"demand": constant(1), "replicas": constant(2), "ready": constant(2),
	}, multi: map[string]bool{"demand": true}}
	e, _ := newTestExporter(t, oneCfg, f)
	err := e.CheckQueries(context.Background(), t0)
	if !errors.Is(err, ErrSeveralSeries) || !strings.Contains(err.Error(), `policies[0].queries.demand (policy "web")`) {
		t.Fatalf("several series: err = %v, want ErrSeveralSeries naming policies[0].queries.demand", err)
	}
	f.multi = nil
	f.setDown(true)
	if err := e.CheckQueries(context.Background(), t0); err != nil {
		t.Fatalf("unreachable Prometheus at start-up must only warn, got %v", err)
	}
}
