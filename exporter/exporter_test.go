package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/policy"
)

// t0 is a step time on the 15 s grid (1,700,000,100 = 15 × 113,333,340).
var t0 = time.Unix(1_700_000_100, 0)

const step = 15 * time.Second

// demandTrace is a smooth daily-like wave plus a burst, in cores, indexed by grid step.
func demandTrace(t time.Time) float64 {
	k := float64(t.Sub(t0) / step)
	d := 2 + 1.5*math.Sin(2*math.Pi*k/20)
	if k >= 10 && k < 14 {
		d += 6 // burst: the EVT level and the window must react
	}
	return d
}

// histStep is the history step of oneCfg: the model history advances every other step.
const histStep = 30 * time.Second

const oneCfg = `
global: {interval: 15s}
exporter: {mae_window: 4}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: exporter-test-drift-debi
    request: 0.5
    history_step: 30s
    lead_time: 30s
    history: 40
    scaling: {min_replicas: 2, max_replicas: 40, window: 30s}
    metrics: {window: 30s, aggregation: Max}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`

func newTestExporter(t *testing.T, yml string, q Querier) (*Exporter, *prometheus.Registry) {
	t.Helper()
	c := loadConfig(t, yml)
	reg := prometheus.NewRegistry()
	e, err := New(c, c.Policies, q, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return e, reg
}

// value returns the value of the series name of policy pol (and the extra label pairs).
func value(t *testing.T, g prometheus.Gatherer, name, pol string, extra ...string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.Metric {
			want := map[string]string{"policy": pol}
			for i := 0; i+1 < len(extra); i += 2 {
				want[extra[i]] = extra[i+1]
			}
			n := 0
			if q, ok := want["quantile"]; ok && m.Summary != nil { // a summary's quantile is no label
				for _, sq := range m.Summary.Quantile {
					if strconv.FormatFloat(sq.GetQuantile(), 'g', -1, 64) == q {
						n++
						m = &dto.Metric{Label: m.Label, Gauge: &dto.Gauge{Value: sq.Value}}
						break
					}
				}
			}
			for _, lp := range m.Label {
				if v, ok := want[lp.GetName()]; ok {
					if v != lp.GetValue() {
						continue metric
					}
					n++
				}
			}
			if n != len(want) {
				continue
			}
			return metricValue(m), true
		}
	}
	return math.NaN(), false
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return math.NaN()
}

// replay is the reference: a policy.Runner with training in line (the backtest's path) fed
// one observation at each of the given times from the same inputs, by the rule the exporter
// documents: a step needs the replica count and a request, missing ready replicas mean "all
// ready", a missing demand is a NaN sample. It returns the results of the steps with every
// input present.
func replay(t testing.TB, cfg *config.Config, p *config.Policy, times []time.Time, get func(time.Time) [numQueries]float64) map[int64]policy.Result {
	t.Helper()
	rc, err := p.RunnerConfig()
	if err != nil {
		t.Fatal(err)
	}
	rc.AsyncTraining = false
	rc.Unapplied = observedSizes // as the exporter's runner
	r, err := policy.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	req := p.Request
	out := map[int64]policy.Result{}
	for _, ts := range times {
		v := get(ts)
		if v[qRequest] > 0 {
			req = v[qRequest]
		}
		if math.IsNaN(v[qReplicas]) || req <= 0 {
			continue
		}
		ready := v[qReplicas]
		if !math.IsNaN(v[qReady]) {
			ready = v[qReady]
		}
		if err := r.SetRequest(req); err != nil {
			t.Fatal(err)
		}
		res, err := r.Step(context.Background(), policy.Observation{Time: ts, Demand: v[qDemand],
			Current: int32(math.Round(v[qReplicas])), Ready: int32(math.Round(ready))})
		if res.Budget != nil {
			b := *res.Budget // the runner's own, overwritten by its next step
			res.Budget = &b
		}
		if err == nil && !math.IsNaN(v[qDemand]) {
			out[ts.UnixMilli()] = res
		}
	}
	return out
}

// times returns n times from first, every step.
func times(first time.Time, n int, step time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = first.Add(time.Duration(i) * step)
	}
	return out
}

func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b))
}

// TestStepMatchesRunner drives the exporter through its history load and 30 live steps and
// checks every published figure against a reference runner fed the same inputs: the start-up
// history as one observation per history step (30 s), then one per interval (15 s), the
// schedule docs/exporter.md documents.
func TestStepMatchesRunner(t *testing.T) {
	replicas := func(ts time.Time) float64 { // the workload is resized now and then
		return float64(max(1, 6+int(ts.Sub(t0)/step/7))) // 1 … 10
	}
	f := &fakeQuerier{byExpr: map[string]series{
		"demand":   func(ts time.Time) (float64, bool, error) { return demandTrace(ts), true, nil },
		"replicas": func(ts time.Time) (float64, bool, error) { return replicas(ts), true, nil },
		"ready":    func(ts time.Time) (float64, bool, error) { return replicas(ts) - 1, true, nil },
	}}
	e, reg := newTestExporter(t, oneCfg, f)
	p := &e.policies[0].cfg
	// 40 history steps end with the live one at t0 (on the 30 s grid): 39 history points at
	// t0 − 39·30 s … t0 − 30 s, then live steps every 15 s.
	schedule := append(times(t0.Add(-39*histStep), 39, histStep), times(t0, 30, step)...)
	ref := replay(t, e.cfg, *p, schedule, func(ts time.Time) [numQueries]float64 {
		return [numQueries]float64{replicas(ts), replicas(ts) - 1, math.NaN(), demandTrace(ts)}
	})
	compared := 0
	var prevW2 float64
	for i := range 30 {
		ts := t0.Add(time.Duration(i) * step)
		e.Step(context.Background(), ts)
		e.Wait() // the exporter trains in the background; the reference in line
		if i == 1 {
			// Step 1 is inside step 0's history step: its forecast is step 0's, which may have
			// been made before the first training run was swapped in.
			prevW2, _ = value(t, reg, "debi_demand_cores", "web", "load", "w2")
			continue
		}
		if i == 0 {
			if n, _ := value(t, reg, "debi_policy_history_points", "web"); n != 39 {
				t.Fatalf("history points = %v, want 39 (40 history steps, the last one live)", n)
			}
			if q := f.ranges(); len(q) != 3 || q[0].Step != histStep || !q[0].Start.Equal(t0.Add(-39*histStep)) || !q[0].End.Equal(t0.Add(-histStep)) {
				t.Fatalf("history range queries = %+v, want 3 (no request query) of %v … %v step %v", q, t0.Add(-39*histStep), t0.Add(-histStep), histStep)
			}
			prevW2, _ = value(t, reg, "debi_demand_cores", "web", "load", "w2")
			continue // the first training run may still have been in flight during step 0
		}
		want := ref[ts.UnixMilli()]
		if want.NewSample != (i%2 == 0) {
			t.Fatalf("step %d: reference NewSample = %v; the history step is two intervals", i, want.NewSample)
		}
		for _, c := range []struct {
			name  string
			want  float64
			extra []string
		}{
			{"debi_load_ratio", want.W1, []string{"load", "w1"}},
			{"debi_load_ratio", want.W2, []string{"load", "w2"}},
			{"debi_load_ratio", want.W3, []string{"load", "w3"}},
			{"debi_load_ratio", want.W, []string{"load", "w"}},
			{"debi_load_ratio", want.WindowW, []string{"load", "window"}},
			{"debi_demand_cores", want.Demand, []string{"load", "w1"}},
			{"debi_demand_cores", want.DemandForecast, []string{"load", "w2"}},
			{"debi_demand_cores", want.HighWater, []string{"load", "w3"}},
			// h = ceil(30 s / 30 s) + 1 = 2 history steps of 30 s.
			{"debi_forecast_horizon_seconds", 60, nil},
			{"debi_model_history_step_seconds", 30, nil},
			{"debi_model_history_required_steps", driftSpan + 1, nil},
			{"debi_model_history_steps", 40, nil}, // history: 40, full from the first live step on
			{"debi_target_utilization_ratio", want.Decision.Target, nil},
			{"debi_recommended_replicas", float64(want.Decision.Replicas), nil},
			{"debi_current_replicas", replicas(ts), nil},
			{"debi_ready_replicas", replicas(ts) - 1, nil},
			{"debi_evt_threshold_cores", want.POT.Threshold, nil},
			{"debi_evt_shape", want.POT.Xi, nil},
			{"debi_policy_stale", 0, nil},
			{"debi_policy_last_success_timestamp_seconds", float64(ts.Unix()), nil},
			{"debi_policy_steps_total", float64(39 + i + 1), nil},
		} {
			got, ok := value(t, reg, c.name, "web", c.extra...)
			if !ok || !near(got, c.want) {
				t.Fatalf("step %d: %s = %v (present %v), want %v", i, c.name, got, ok, c.want)
			}
		}
		// Between history steps the forecast stands while the observed load moves on.
		w2, _ := value(t, reg, "debi_demand_cores", "web", "load", "w2")
		if i%2 == 1 && w2 != prevW2 {
			t.Fatalf("step %d: the forecast moved between history steps (%v → %v)", i, prevW2, w2)
		}
		prevW2 = w2
		compared++
	}
	if compared != 28 {
		t.Fatalf("compared %d steps, want 28", compared)
	}
	// Rolling MAE, once per history step k: |D(k) − point forecast of D(k) made h = 2 history
	// steps earlier|, over the last mae_window = 4 history steps (all live by the end).
	ends := map[int64]float64{}
	var absErrs []float64
	for _, ts := range schedule {
		r, ok := ref[ts.UnixMilli()]
		if !ok || !r.NewSample {
			continue
		}
		k := ts.UnixNano() / int64(histStep)
		if f, ok := ends[k-2]; ok && !math.IsNaN(f) {
			absErrs = append(absErrs, math.Abs(r.Demand-f))
		}
		ends[k] = r.DemandForecastEnd
	}
	if len(absErrs) < 4 {
		t.Fatalf("%d forecast errors in the reference, want at least 4", len(absErrs))
	}
	wantMAE := (absErrs[len(absErrs)-1] + absErrs[len(absErrs)-2] + absErrs[len(absErrs)-3] + absErrs[len(absErrs)-4]) / 4
	mae, ok := value(t, reg, "debi_forecast_mean_absolute_error_cores", "web")
	if !ok || !near(mae, wantMAE) || !(mae > 0) {
		t.Fatalf("forecast MAE = %v (present %v), want %v", mae, ok, wantMAE)
	}
	if rec, _ := value(t, reg, "debi_recommended_replicas", "web"); rec < 2 {
		t.Fatalf("recommended %v below min_replicas", rec)
	}
	// Every series family of a forecasting, EVT-fitting policy is present and lint-clean.
	for _, name := range []string{"debi_evt_scale_cores", "debi_evt_fallback", "debi_evt_excesses",
		"debi_model_train_duration_seconds", "debi_model_last_train_timestamp_seconds", "debi_model_train_failures_total",
		"debi_policy_info", "debi_request_cores"} {
		if _, ok := value(t, reg, name, "web"); !ok {
			t.Errorf("%s not published", name)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestMAE checks the rolling mean absolute error with hand-made numbers.
func TestMAE(t *testing.T) {
	m := newMAEWindow(3)
	if !math.IsNaN(m.value()) {
		t.Fatal("empty window must be NaN")
	}
	for _, x := range []float64{1, 2, 3, 10} {
		m.add(x)
	}
	// The window holds the last three: (2 + 3 + 10) / 3 = 5.
	if got := m.value(); got != 5 {
		t.Fatalf("MAE = %v, want 5", got)
	}
}

// TestDegradation: missing demand never scales down, an unreachable Prometheus keeps the last
// values marked stale, and recovery clears the mark.
func TestDegradation(t *testing.T) {
	demandOK := true
	f := &fakeQuerier{byExpr: map[string]series{
		// 10 replicas of 1 core carrying 1 core: W1 = 0.1, far below any target.
		"demand":   func(time.Time) (float64, bool, error) { return 1, demandOK, nil },
		"replicas": constant(10),
		"ready":    constant(10),
	}}
	e, reg := newTestExporter(t, `
global: {interval: 15s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    request: 1
    scaling: {scale_down_stabilization: 1s}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`, f)
	get := func(name string) float64 {
		v, ok := value(t, reg, name, "web")
		if !ok {
			t.Fatalf("%s missing", name)
		}
		return v
	}
	ctx := context.Background()
	e.Step(ctx, t0)
	// HPA: ceil(10 × 0.1 / 0.5) = 2.
	if got := get("debi_recommended_replicas"); got != 2 {
		t.Fatalf("healthy step: recommended = %v, want 2", got)
	}
	w1, _ := value(t, reg, "debi_load_ratio", "web", "load", "w1")

	demandOK = false // the demand query comes back empty; the 60 s window still holds t0's sample
	e.Step(ctx, t0.Add(step))
	if got := get("debi_recommended_replicas"); got != 10 {
		t.Fatalf("empty demand: recommended = %v, want the current 10 (no scale-down on missing data)", got)
	}
	if get("debi_policy_stale") != 1 {
		t.Fatal("empty demand: not marked stale")
	}
	if got := get("debi_policy_last_success_timestamp_seconds"); got != float64(t0.Unix()) {
		t.Fatalf("last success = %v, want %v", got, t0.Unix())
	}
	if got, _ := value(t, reg, "debi_query_errors_total", "web", "query", "demand"); got != 1 {
		t.Fatalf("demand query errors = %v, want 1", got)
	}

	f.setDown(true)
	for i := 2; i < 8; i++ { // long enough for the window to empty
		e.Step(ctx, t0.Add(time.Duration(i)*step))
	}
	if get("debi_recommended_replicas") != 10 || get("debi_policy_stale") != 1 {
		t.Fatal("Prometheus down: want recommended = current 10, stale")
	}
	if got, _ := value(t, reg, "debi_load_ratio", "web", "load", "w1"); got != w1 {
		t.Fatalf("Prometheus down: W1 = %v, want the last good %v", got, w1)
	}
	if got, _ := value(t, reg, "debi_query_errors_total", "web", "query", "replicas"); got != 6 {
		t.Fatalf("replicas query errors = %v, want 6", got)
	}

	f.setDown(false)
	demandOK = true
	e.Step(ctx, t0.Add(8*step))
	if get("debi_policy_stale") != 0 || get("debi_recommended_replicas") != 2 {
		t.Fatalf("recovered: stale %v, recommended %v; want 0 and 2", get("debi_policy_stale"), get("debi_recommended_replicas"))
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestIndependentPolicies: a policy whose queries hang or fail does not keep the others from
// publishing fresh values in the same step.
func TestIndependentPolicies(t *testing.T) {
	hang := func(time.Time) (float64, bool, error) {
		time.Sleep(300 * time.Millisecond)
		return 0, false, context.DeadlineExceeded
	}
	f := &fakeQuerier{byExpr: map[string]series{
		"demand": constant(1), "replicas": constant(2), "ready": constant(2),
		"slow_replicas": hang,
	}}
	e, reg := newTestExporter(t, `
global: {interval: 15s, query_timeout: 200ms}
exporter: {concurrency: 2}
policies:
  - name: slow
    target: {namespace: shop, name: slow}
    algorithm: hpa
    request: 1
    queries: {demand: 'demand', replicas: 'slow_replicas', ready_replicas: 'ready'}
  - name: fast
    target: {namespace: shop, name: fast}
    algorithm: hpa
    request: 1
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`, f)
	e.Step(context.Background(), t0)
	if v, _ := value(t, reg, "debi_policy_stale", "fast"); v != 0 {
		t.Fatalf("fast policy stale = %v, want 0", v)
	}
	if v, _ := value(t, reg, "debi_policy_stale", "slow"); v != 1 {
		t.Fatalf("slow policy stale = %v, want 1", v)
	}
	if _, ok := value(t, reg, "debi_recommended_replicas", "slow"); ok {
		t.Fatal("slow policy publishes a recommendation without ever seeing its replicas")
	}
}

func TestGridTime(t *testing.T) {
	e := &Exporter{interval: step}
	for _, c := range []struct{ in, want time.Time }{
		{t0, t0},
		{t0.Add(14999 * time.Millisecond), t0},
		{t0.Add(-1 * time.Millisecond), t0.Add(-step)},
	} {
		if got := e.gridTime(c.in); !got.Equal(c.want) {
			t.Errorf("gridTime(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestLoopSkipsWhenBehind: a loop that finds itself more than one interval behind skips to the
// present grid time, counts the skipped steps, and steps there.
func TestLoopSkipsWhenBehind(t *testing.T) {
	f := &fakeQuerier{byExpr: map[string]series{"demand": constant(1), "replicas": constant(2), "ready": constant(2)}}
	e, reg := newTestExporter(t, oneCfg, f)
	var calls atomic.Int32
	e.now = func() time.Time {
		if calls.Add(1) == 1 {
			return t0.Add(time.Second) // the first step is t0
		}
		return t0.Add(5*step + time.Second) // the step took 5 intervals: t0+15s…t0+60s are late
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Loop(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		last, _ := value(t, reg, "debi_policy_last_success_timestamp_seconds", "web")
		if last == float64(t0.Add(5*step).Unix()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop did not step at t0+75s; last success %v", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.Wait()
	// Steps at t0 and t0+75s; t0+15s … t0+60s were skipped.
	if got := testutil.ToFloat64(e.metrics.skipped); got != 4 {
		t.Fatalf("skipped = %v, want 4", got)
	}
}

// TestModelHistoryWarning: a model that needs more history than the policy is given (its own
// minimum, or the horizon's) says so at start, in the log and in
// debi_model_history_required_steps; a policy that fits says nothing.
func TestModelHistoryWarning(t *testing.T) {
	f := &fakeQuerier{byExpr: map[string]series{"demand": constant(1), "replicas": constant(2), "ready": constant(2)}}
	c := loadConfig(t, `
global: {interval: 15s}
policies:
  - name: seasonal
    target: {namespace: shop, name: a}
    algorithm: seasonal-naive-debi
    request: 1
    history_step: 30s
    season: 1h     # 120 history steps > history 40
    history: 40
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
  - name: far
    target: {namespace: shop, name: b}
    algorithm: exporter-test-drift-debi
    request: 1
    history_step: 30s
    lead_time: 10m # h = 21 history steps: 22 needed > history 20
    history: 20
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
  - name: fits
    target: {namespace: shop, name: c}
    algorithm: exporter-test-drift-debi
    request: 1
    history_step: 30s
    history: 20
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`)
	var logs testenv.Buffer
	reg := prometheus.NewRegistry()
	e, err := New(c, c.Policies, f, slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	warned := func(pol string) bool {
		for line := range strings.Lines(out) {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "needs more history") && strings.Contains(line, "policy="+pol+" ") {
				return true
			}
		}
		return false
	}
	if !warned("seasonal") || !warned("far") || warned("fits") {
		t.Fatalf("warnings (want for seasonal and far, not fits):\n%s", out)
	}
	e.Step(context.Background(), t0)
	e.Wait()
	for pol, want := range map[string]float64{"seasonal": 120, "far": 22, "fits": driftSpan + 1} {
		if got, _ := value(t, reg, "debi_model_history_required_steps", pol); got != want {
			t.Errorf("%s: debi_model_history_required_steps = %v, want %v", pol, got, want)
		}
	}
	// The seasonal model has its 40 points and still no forecast.
	if have, _ := value(t, reg, "debi_model_history_steps", "seasonal"); have != 40 {
		t.Errorf("seasonal: debi_model_history_steps = %v, want 40", have)
	}
	if _, ok := value(t, reg, "debi_load_ratio", "seasonal", "load", "w2"); ok {
		t.Error("seasonal: W2 published without enough history")
	}
}

// TestShadowHPAKeepsRecommending: an hpa policy whose size has not changed yet recommends at
// every step what the HPA would (rate-limited to max(4+4, 2·4) = 8 from 4 under a doubled
// load), in shadow mode, whose size nothing changes, and in act mode alike: the webhook applies
// a recommendation seconds to a minute after the exporter's step, so the exporter's state counts
// the scale event when it sees the size change, not when it recommends (an acting policy that
// counted its own recommendation fell back to 4, rate-limited, one step later, and published
// that as its ceiling before the webhook read it: e2e.TestClosedLoopTwoMetrics). Once the size
// is seen at 8, that rescale is the event: the next scale-up waits for the 15 s period.
func TestShadowHPAKeepsRecommending(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		demand    float64
		appliedAt time.Duration // when the size is seen at 8 (never for shadow)
		want      []float64
	}{
		{"shadow", 4, time.Hour, []float64{8, 8, 8, 8}},
		{"act", 4, time.Hour, []float64{8, 8, 8, 8}},
		// Demand 8 asks for 16: 8 from 4, seen applied at 10 s (the event), 8 until the event
		// leaves the 15 s period, then 16.
		{"act", 8, 10 * time.Second, []float64{8, 8, 8, 8, 8, -1, 16}},
	} {
		applied := t0.Add(tc.appliedAt)
		size := func(ts time.Time) (float64, bool, error) {
			if ts.Before(applied) {
				return 4, true, nil
			}
			return 8, true, nil
		}
		f := &fakeQuerier{byExpr: map[string]series{
			"demand": constant(tc.demand), "replicas": size, "ready": size,
		}}
		e, reg := newTestExporter(t, fmt.Sprintf(`
global: {interval: 5s}
webhook: {mode: %s, allow_unauthenticated: true}
policies:
  - name: web-hpa
    target: {namespace: shop, name: web}
    algorithm: hpa
    request: 1
    history_step: 5s
    history: 10
    scaling: {target: 0.5, max_replicas: 40}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`, tc.mode), f)
		var got []float64
		for i := range tc.want {
			// 5 s apart: three steps inside the 15 s scale-up period of the first one.
			e.Step(context.Background(), t0.Add(time.Duration(i)*5*time.Second))
			v, _ := value(t, reg, "debi_recommended_replicas", "web-hpa")
			got = append(got, v)
		}
		for i, w := range tc.want {
			if w >= 0 && got[i] != w { // -1: the event's period ends at that step (either)
				t.Errorf("mode %s, demand %v: recommended %v, want %v", tc.mode, tc.demand, got, tc.want)
				break
			}
		}
	}
}

// TestModelActive: debi_model_active names, with the value 1, the one model the latest forecast
// came from — for model auto the one the runner reports it chose, among its models; for a
// single model that model — and nothing while the model has not forecast.
func TestModelActive(t *testing.T) {
	ramp := func(at time.Time) (float64, bool, error) { return 100 + at.Sub(t0).Minutes(), true, nil }
	f := &fakeQuerier{byExpr: map[string]series{"demand": ramp, "replicas": constant(2), "ready": constant(2)}}
	c := loadConfig(t, `
global: {interval: 15s}
policies:
  - {name: auto, target: {namespace: shop, name: a}, algorithm: budget, request: 1, history_step: 30s, history: 200,
     queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}}
  - {name: naive, target: {namespace: shop, name: b}, algorithm: naive-budget, request: 1, history_step: 30s, history: 200,
     queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}}
  - {name: seasonal, target: {namespace: shop, name: c}, algorithm: seasonal-naive-debi, request: 1, history_step: 30s,
     season: 1h, history: 40, queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}}
`)
	reg := prometheus.NewRegistry()
	e, err := New(c, c.Policies, f, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		e.Step(context.Background(), t0.Add(time.Duration(i)*30*time.Second))
		e.Wait()
	}
	actives := func(pol string) map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "debi_model_active" {
				continue
			}
			for _, m := range mf.Metric {
				var p, model string
				for _, lp := range m.Label {
					switch lp.GetName() {
					case "policy":
						p = lp.GetValue()
					case "model":
						model = lp.GetValue()
					}
				}
				if p == pol {
					got[model] = m.Gauge.GetValue()
				}
			}
		}
		return got
	}
	chosen := e.policies[0].runner.Runner(0).ActiveModel()
	if got := actives("auto"); len(got) != 1 || got[chosen] != 1 || !slices.Contains([]string{"holtwinters", "arima", "naive"}, chosen) {
		t.Errorf("auto: debi_model_active %v, the runner chose %q", got, chosen)
	}
	if got := actives("naive"); len(got) != 1 || got["naive"] != 1 {
		t.Errorf("naive-budget: debi_model_active %v, want naive 1", got)
	}
	if got := actives("seasonal"); len(got) != 0 {
		t.Errorf("seasonal without its history: debi_model_active %v, want none", got)
	}
}
