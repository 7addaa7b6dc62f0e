package webhook

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	plabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/exporter"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/scaling"
)

// The one-decision tests drive the real exporter and the real webhook Controller from one event
// sequence, through Prometheus's own PromQL engine over an in-memory TSDB: the workload's series
// and everything the exporter publishes are appended at each tick, the webhook's queries are
// evaluated there at the tick's time, and the target is a simulated scale subresource with a
// ready count. At every tick where nothing moved the target between the exporter's step and the
// alert, the webhook's answer (size and reason) must be the exporter's; after an outside resize
// it must follow the explicit rule of scaling.Decide; and the full write history is asserted.

// simTarget is the target's scale subresource and ready count; it records every write.
type simTarget struct {
	mu       sync.Mutex
	replicas int32
	ready    int32
	writes   []string
}

func (s *simTarget) GetScale(context.Context, config.Target) (ScaleInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ScaleInfo{Replicas: s.replicas, Ready: s.ready, ReadyKnown: true, UID: "uid-web"}, nil
}

func (s *simTarget) SetReplicas(_ context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur.Replicas != s.replicas {
		return WriteResult{}, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, t.Name, fmt.Errorf("stale read"))
	}
	res := WriteResult{Object: "Deployment/" + t.Name, Before: s.replicas, After: n}
	s.writes = append(s.writes, fmt.Sprintf("%d→%d", s.replicas, n))
	s.replicas = n
	return res, nil
}

func (s *simTarget) SetHPAFloor(context.Context, config.Target, int32) (WriteResult, error) {
	return WriteResult{}, fmt.Errorf("not in this test")
}

func (s *simTarget) ScalingHPA(context.Context, config.Target) (string, error) { return "", nil }

func (s *simTarget) GetTidal(_ context.Context, _ config.WatchResource, _, name string) (*unstructured.Unstructured, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "tidal.io", Resource: "tidals"}, name)
}

func (s *simTarget) MarkTidal(context.Context, config.WatchResource, string, string, string) error {
	return fmt.Errorf("not in this test")
}

func (s *simTarget) set(replicas, ready int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas, s.ready = replicas, ready
}

func (s *simTarget) state() (int32, int32, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas, s.ready, append([]string(nil), s.writes...)
}

// liveLoop is one exporter and one webhook over one in-memory Prometheus.
type liveLoop struct {
	t      *testing.T
	cfg    *config.Config
	st     *teststorage.TestStorage
	engine *promql.Engine
	now    time.Time
	target *simTarget
	exp    *exporter.Exporter
	reg    *prometheus.Registry
	ctl    *Controller
	demand float64
	// scraped are the exporter's series of the last scrape: one that is gone gets a staleness
	// marker, as Prometheus writes.
	scraped map[string]map[string]string
}

func newLiveLoop(t *testing.T, yml string, replicas int32) *liveLoop {
	l := &liveLoop{t: t, cfg: testConfig(t, yml), st: teststorage.New(t),
		engine: promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}),
		now:    time.Unix(1_700_000_000, 0).Truncate(time.Minute), target: &simTarget{replicas: replicas, ready: replicas}}
	l.restartExporter()
	l.restartWebhook()
	return l
}

func (l *liveLoop) restartExporter() {
	if l.exp != nil {
		l.exp.Close()
	}
	l.reg = prometheus.NewRegistry()
	e, err := exporter.New(l.cfg, l.cfg.Policies, l.querier(), testenv.Logger(l.t), l.reg)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(e.Close)
	l.exp = e
}

func (l *liveLoop) restartWebhook() {
	c, err := NewController(l.cfg, ControllerOptions{Actuator: l.target, Query: l.query, Logger: testenv.Logger(l.t),
		Registerer: prometheus.NewRegistry(), Now: func() time.Time { return l.now }})
	if err != nil {
		l.t.Fatal(err)
	}
	l.ctl = c
}

func (l *liveLoop) append(name string, lbls map[string]string, v float64) {
	m := map[string]string{"__name__": name}
	for k, x := range lbls {
		m[k] = x
	}
	app := l.st.Appender(context.Background())
	if _, err := app.Append(0, plabels.FromMap(m), l.now.UnixMilli(), v); err != nil {
		l.t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		l.t.Fatal(err)
	}
}

// scrape appends the workload's series as they are now.
func (l *liveLoop) scrape() {
	n, ready, _ := l.target.state()
	l.append("demand", nil, l.demand)
	l.append("replicas", nil, float64(n))
	l.append("ready", nil, float64(ready))
}

// exporterStep steps the exporter at now and appends what it publishes (Prometheus scraping it).
func (l *liveLoop) exporterStep() {
	l.exp.Step(context.Background(), l.now)
	mfs, err := l.reg.Gather()
	if err != nil {
		l.t.Fatal(err)
	}
	seen := map[string]map[string]string{}
	defer func() {
		for k, lbls := range l.scraped {
			if _, ok := seen[k]; !ok {
				name := lbls["__name__"]
				delete(lbls, "__name__")
				l.append(name, lbls, math.Float64frombits(value.StaleNaN))
			}
		}
		l.scraped = seen
	}()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			lbls := map[string]string{}
			for _, p := range m.GetLabel() {
				lbls[p.GetName()] = p.GetValue()
			}
			var v float64
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_UNTYPED:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			l.append(mf.GetName(), lbls, v)
			key := map[string]string{"__name__": mf.GetName()}
			for k, x := range lbls {
				key[k] = x
			}
			seen[plabels.FromMap(key).String()] = key
		}
	}
}

// published reads one of the exporter's series for policy web at now.
func (l *liveLoop) published(expr string) float64 {
	v, err := l.query(context.Background(), expr)
	if err != nil {
		l.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// exporterReason is the reason label of the exporter's debi_decision_info.
func (l *liveLoop) exporterReason() string {
	q, err := l.engine.NewInstantQuery(context.Background(), l.st, nil, `debi_decision_info{policy="web"}`, l.now)
	if err != nil {
		l.t.Fatal(err)
	}
	defer q.Close()
	v, err := q.Exec(context.Background()).Vector()
	if err != nil || len(v) != 1 {
		l.t.Fatalf("debi_decision_info: %v, %d series", err, len(v))
	}
	return v[0].Metric.Get("reason")
}

// alert notifies the webhook as Alertmanager would and returns its outcome.
func (l *liveLoop) alert() Outcome {
	outs, err := l.ctl.Alerts(context.Background(), &AlertmanagerMessage{Version: "4", Status: StatusFiring,
		Alerts: []Alert{{Status: StatusFiring, Labels: labels1("policy", "web"), StartsAt: l.now}}})
	if err != nil {
		l.t.Fatalf("t=%v: %v", l.now.Sub(time.Unix(1_700_000_000, 0).Truncate(time.Minute)), err)
	}
	return outs[0]
}

func labels1(kv ...string) map[string]string { return testenv.AlertLabels(kv...) }

// query is the webhook's QueryFunc: Prometheus's engine at now.
func (l *liveLoop) query(ctx context.Context, expr string) (float64, error) {
	v, _, _, err := l.querier().Query(ctx, expr, l.now)
	var apiErr *v1.Error
	if errors.As(err, &apiErr) {
		return 0, fmt.Errorf("query %s: %w: %v", expr, ErrUnusable, err)
	}
	if err != nil {
		return 0, err
	}
	return sampleValue(expr, v)
}

// querier is the exporter's Querier over the same engine and storage.
func (l *liveLoop) querier() testenv.EngineQuerier {
	return testenv.EngineQuerier{Engine: l.engine, Storage: l.st}
}

// event is one tick of a sequence: the demand, what happens to the target between the
// exporter's step and the alert (an outside resize, pods turning unready), and restarts.
type event struct {
	demand float64
	// resize, when positive, is a size someone else sets after the exporter's step; ready, when
	// non-negative, the ready count from then on (with resize or alone).
	resize, ready int32
	// restart restarts the webhook (and, with exporter, the exporter too) before the tick.
	restart, exporter bool
}

// tick is what one event did.
type tick struct {
	exporterSaw, recommended int32
	reason                   string
	out                      Outcome
	outside                  bool // the target moved between the exporter's step and the alert
}

func (l *liveLoop) run(seq []event) []tick {
	var ticks []tick
	for i, ev := range seq {
		if i > 0 {
			l.now = l.now.Add(l.cfg.Global.Interval)
		}
		if ev.restart {
			l.restartWebhook()
			if ev.exporter {
				l.restartExporter()
			}
		}
		l.demand = ev.demand
		l.scrape()
		l.exporterStep()
		tk := tick{exporterSaw: int32(l.published(`debi_current_replicas{policy="web"}`)),
			recommended: int32(l.published(`debi_recommended_replicas{policy="web"}`)), reason: l.exporterReason()}
		if ev.resize > 0 || ev.ready >= 0 {
			n, ready, _ := l.target.state()
			if ev.resize > 0 {
				n, tk.outside = ev.resize, ev.resize != n
				if ev.ready < 0 {
					ready = n
				}
			}
			if ev.ready >= 0 {
				tk.outside = tk.outside || ev.ready != ready
				ready = ev.ready
			}
			l.target.set(n, ready)
		}
		tk.out = l.alert()
		ticks = append(ticks, tk)
	}
	return ticks
}

// steady is n ticks of one demand with nothing else happening.
func steady(n int, demand float64) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = event{demand: demand, ready: -1}
	}
	return out
}

// checkOneDecision asserts, tick by tick, that the webhook decided as the exporter did wherever
// both saw the same target, and by Decide's size-changed rule where the target moved between.
func checkOneDecision(t *testing.T, ticks []tick) {
	t.Helper()
	for i, tk := range ticks {
		o := tk.out
		t.Logf("tick %2d: exporter at %d recommends %d (%s); webhook %d→%d (%s)%s", i, tk.exporterSaw, tk.recommended, tk.reason,
			o.Before, o.After, o.Reason, map[bool]string{true: " after an outside change"}[tk.outside])
		if o.Held != "" {
			t.Errorf("tick %d: the webhook held (%s)", i, o.Held)
			continue
		}
		if !tk.outside {
			if o.After != tk.recommended || o.Reason != tk.reason {
				t.Errorf("tick %d (exporter at %d): webhook %d→%d (%s), exporter recommends %d (%s)",
					i, tk.exporterSaw, o.Before, o.After, o.Reason, tk.recommended, tk.reason)
			}
			continue
		}
		// The target moved: a resize is never followed by a scale-down below the new size.
		if o.Before != tk.exporterSaw && o.After < o.Before {
			t.Errorf("tick %d: after an outside resize to %d the webhook scaled down to %d (%s)", i, o.Before, o.After, o.Reason)
		}
	}
}

const oneDecisionHPA = `
global: {interval: 15s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    request: 1
    scaling: {min_replicas: 1, max_replicas: 20, target: 0.5}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
webhook:
  mode: act
  allow_unauthenticated: true
`

// TestOneDecisionOutsideResize is the operator's case: an hpa policy (max 20) at 4 pods in a
// spike, the exporter's state allowing [4, 8]; someone scales to 12 by hand before the alert.
// The load asks for 20: the webhook must not write 12 → 8 (on the old composition it did, as
// rate-limited), and once the exporter has stepped at 12 it follows the exporter again.
func TestOneDecisionOutsideResize(t *testing.T) {
	l := newLiveLoop(t, oneDecisionHPA, 4)
	seq := steady(3, 1.6) // 0.4 per pod at 4: within the tolerance of 0.5? ceil(4·0.4/0.5) = 4
	spike := event{demand: 10, resize: 12, ready: -1}
	seq = append(seq, spike)
	seq = append(seq, steady(4, 10)...)
	ticks := l.run(seq)
	checkOneDecision(t, ticks)
	sp := ticks[3]
	if sp.out.Before != 12 || sp.out.After != 12 || sp.out.Reason != scaling.ReasonSizeChanged {
		t.Errorf("after the outside resize: webhook %d→%d (%s), want 12→12 (%s)", sp.out.Before, sp.out.After, sp.out.Reason, scaling.ReasonSizeChanged)
	}
	_, _, writes := l.target.state()
	// At 12 the exporter's state has its 4→8 scale event a whole period (15 s) old: the HPA's
	// rate limit allows 2·12, so the next alert writes the load's 20.
	want := []string{"12→20"}
	if strings.Join(writes, " ") != strings.Join(want, " ") {
		t.Errorf("writes %q, want %q", writes, want)
	}
}

// TestOneDecisionUnready: 10 pods at 4 cores, then 5 of them unready. Over the 5 ready pods that
// is 80 % against a 50 % target, but with 5 pods starting the HPA recomputes over all 10 (40 %)
// and, the direction having changed, holds at 10. The exporter reads the ready count and holds;
// the webhook must read it too (on the old composition it took ready = current, 40 %, and wrote
// 10 → 8; with scale_down_stabilization: 0s, which the old defaults also replaced by 5m).
func TestOneDecisionUnready(t *testing.T) {
	l := newLiveLoop(t, strings.Replace(oneDecisionHPA, "target: 0.5}", "target: 0.5, scale_down_stabilization: 0s}", 1), 10)
	seq := steady(3, 5)
	for range 5 {
		seq = append(seq, event{demand: 4, ready: 5})
	}
	ticks := l.run(seq)
	checkOneDecision(t, ticks)
	if _, _, writes := l.target.state(); len(writes) != 0 {
		t.Errorf("writes %q, want none: with 5 of 10 pods ready at 4 cores the HPA holds", writes)
	}
	if got := l.cfg.Policies[0].Scaling.ScaleDownStabilization; got != 0 {
		t.Fatalf("scale_down_stabilization: 0s loaded as %v", got)
	}
}

// TestOneDecisionRestarts: restarts of the webhook, then of both, in the middle of a ramp; every
// tick still agrees with the exporter.
func TestOneDecisionRestarts(t *testing.T) {
	l := newLiveLoop(t, oneDecisionHPA, 2)
	var seq []event
	for i, d := range []float64{1, 1, 2, 3, 4, 5, 6, 6, 6, 3, 3, 3} {
		ev := event{demand: d, ready: -1}
		if i == 4 {
			ev.restart = true
		}
		if i == 8 {
			ev.restart, ev.exporter = true, true
		}
		seq = append(seq, ev)
	}
	ticks := l.run(seq)
	checkOneDecision(t, ticks)
	_, _, writes := l.target.state()
	if len(writes) == 0 {
		t.Fatal("no write at all: the ramp must scale up")
	}
	t.Logf("writes %q", writes)
}
