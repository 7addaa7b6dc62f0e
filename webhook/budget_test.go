package webhook

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/record"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/scaling"
)

// budgetConfigYAML has an overload-budget policy (api) next to a debi one (web). The rule, u_sla
// and the hold are explicit, so that the expected counts below do not move with the defaults.
const budgetConfigYAML = `
policies:
  - name: api
    target: {namespace: shop, name: api}
    algorithm: naive-budget
    request: 1
    scaling: {min_replicas: 1, max_replicas: 20, budget: {u_sla: 0.9, hold: 0s, rule: quantile}}
  - name: web
    target: {namespace: shop, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, window: 0s}
webhook:
  mode: act
  allow_unauthenticated: true
`

const (
	qAPILoad     = `debi_load_ratio{policy="api",load="w"}`
	qAPIReplicas = `debi_current_replicas{policy="api"}`
	qAPIWindow   = `debi_load_ratio{policy="api",load="window"}`
	qAPINow      = `debi_load_ratio{policy="api",load="w1"}`
	qAPIDown     = `debi_load_ratio{policy="api",load="down"}`
	qAPIFloor    = `debi_decision_floor_replicas{policy="api"}`
	qAPICeiling  = `debi_decision_ceiling_replicas{policy="api"}`
	qAPIStale    = `debi_policy_stale{policy="api"}`
	qAPIAge      = `time() - debi_policy_last_success_timestamp_seconds{policy="api"}`
)

var nan = math.NaN()

// recordingQuery answers from a map like staticQuery, fails with a several-series error for
// the expressions in ambiguous, and records every expression asked.
type recordingQuery struct {
	mu        sync.Mutex
	values    map[string]float64
	ambiguous map[string]bool
	asked     []string
}

func (q *recordingQuery) query(ctx context.Context, expr string) (float64, error) {
	q.mu.Lock()
	q.asked = append(q.asked, expr)
	amb := q.ambiguous[expr]
	q.mu.Unlock()
	if amb {
		return 0, fmt.Errorf("query %s: %w: 2", expr, ErrSeveralSeries)
	}
	return staticQuery(q.values)(ctx, expr)
}

// TestBudgetDecisions: for a budget policy the webhook reads W (the calibrated quantile over
// the lead time), WNow (the observed load, load="w1") and WDown (the quantile over the lead time
// plus the hold, load="down") and decides with scaling.Budget, ceil(load·N/u_sla); a missing or
// ambiguous now or down series holds the size, whatever W says.
func TestBudgetDecisions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		values    map[string]float64
		ambiguous []string
		after     int32
		reason    string
	}{
		// 4 pods: 4·1.8/0.9 = 8, at once.
		{"quantile asks for more", map[string]float64{qAPILoad: 1.8, qAPINow: 0.5, qAPIDown: 1.8}, nil, 8, scaling.ReasonScaleUp},
		// The observed load alone needs 4·1.35/0.9 = 6.
		{"never below the observed load", map[string]float64{qAPILoad: 0.5, qAPINow: 1.35, qAPIDown: 0.5}, nil, 6, scaling.ReasonScaleUp},
		// The quantile over lead time + hold fits 4·0.45/0.9 = 2 pods; no hold configured.
		{"down when the hold quantile fits", map[string]float64{qAPILoad: 0.3, qAPINow: 0.2, qAPIDown: 0.45}, nil, 2, scaling.ReasonScaleDown},
		// W and WNow alone would allow 1 pod: the gate's quantile decides.
		{"the hold quantile bounds the scale-down", map[string]float64{qAPILoad: 0.2, qAPINow: 0.1, qAPIDown: 0.7}, nil, 4, scaling.ReasonTolerance},
		// Measured at 2 replicas, converted to the current 4: W 2.7 → 1.35, WNow 0.6 → 0.3,
		// WDown 2.7 → 1.35: 4·1.35/0.9 = 6 pods.
		{"loads converted to the current size", map[string]float64{qAPILoad: 2.7, qAPINow: 0.6, qAPIDown: 2.7, qAPIReplicas: 2}, nil, 6, scaling.ReasonScaleUp},
		// The same conversion would allow 2 pods (W 0.9 → 0.45, 4·0.45/0.9 = 2), but the
		// exporter has not seen 4 replicas yet: its state is for another size, no scale-down.
		{"no scale-down at a size the exporter has not seen", map[string]float64{qAPILoad: 0.9, qAPINow: 0.6, qAPIDown: 0.9, qAPIReplicas: 2}, nil, 4, scaling.ReasonSizeChanged},
		// The published state (the hold) allows nothing below the current size.
		{"the published floor holds", map[string]float64{qAPILoad: 0.3, qAPINow: 0.2, qAPIDown: 0.45, qAPIFloor: 4, qAPICeiling: 20}, nil, 4, scaling.ReasonStabilized},
		// The published ceiling (a rate limit) caps a scale-up.
		{"the published ceiling caps", map[string]float64{qAPILoad: 1.8, qAPINow: 0.5, qAPIDown: 1.8, qAPIFloor: 1, qAPICeiling: 6}, nil, 6, scaling.ReasonRateLimited},
		{"no observed load: hold", map[string]float64{qAPILoad: 1.8, qAPIDown: 1.8}, nil, 4, "held"},
		{"no hold quantile: hold", map[string]float64{qAPILoad: 0.3, qAPINow: 0.2}, nil, 4, "held"},
		{"ambiguous observed load: hold", map[string]float64{qAPILoad: 1.8, qAPINow: 0.5, qAPIDown: 1.8}, []string{qAPINow}, 4, "held"},
		{"ambiguous hold quantile: hold", map[string]float64{qAPILoad: 0.3, qAPINow: 0.2, qAPIDown: 0.45}, []string{qAPIDown}, 4, "held"},
		{"no bounds: hold", map[string]float64{qAPILoad: 1.8, qAPINow: 0.5, qAPIDown: 1.8, qAPIFloor: nan}, nil, 4, "held"},
		{"stale exporter: hold", map[string]float64{qAPILoad: 1.8, qAPINow: 0.5, qAPIDown: 1.8, qAPIStale: 1}, nil, 4, "held"},
		{"old exporter step: hold", map[string]float64{qAPILoad: 1.8, qAPINow: 0.5, qAPIDown: 1.8, qAPIAge: 600}, nil, 4, "held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"api": 4})
			q := &recordingQuery{values: tc.values, ambiguous: map[string]bool{}}
			for _, e := range tc.ambiguous {
				q.ambiguous[e] = true
			}
			if _, ok := q.values[qAPIReplicas]; !ok {
				q.values[qAPIReplicas] = 4
			}
			c := newTestController(t, testConfig(t, budgetConfigYAML), act, q.query, nil)
			outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "api")})))
			if err != nil {
				t.Fatal(err)
			}
			o := outs[0]
			if o.After != tc.after || o.Reason != tc.reason || o.Source != "prometheus" {
				t.Fatalf("outcome %+v, want %d (%s) from prometheus", o, tc.after, tc.reason)
			}
			if wrote := len(act.Writes()) > 0; wrote != (tc.after != 4) {
				t.Fatalf("writes %v for %d → %d", act.Writes(), 4, tc.after)
			}
			for _, want := range []string{qAPILoad, qAPIReplicas, qAPINow, qAPIDown, qAPIFloor, qAPICeiling, qAPIStale, qAPIAge} {
				if !slices.Contains(q.asked, want) {
					t.Errorf("%s not queried (asked %v)", want, q.asked)
				}
			}
		})
	}
}

// TestBudgetHoldsOnFallback: the annotations carry W but no observed load: a budget policy
// holds its size rather than decide from the quantile alone.
func TestBudgetHoldsOnFallback(t *testing.T) {
	act := newFakeActuator(map[string]int32{"api": 4})
	c := newTestController(t, testConfig(t, budgetConfigYAML), act, prometheusDown, nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "api"),
		"annotations": map[string]string{"load": "0.1", "current_replicas": "4"}})))
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[0]; o.Source != "annotation" || o.After != 4 || len(act.Writes()) != 0 {
		t.Fatalf("outcome %+v writes %v: want the size held (4, %s) from the annotation fallback", o, act.Writes(), scaling.ReasonNoLoad)
	}
}

// TestBudgetQueriesOnlyForBudgetPolicies: a debi policy reads W, the replicas and its window,
// never the budget inputs; the Event of a budget decision carries them.
func TestBudgetQueriesOnlyForBudgetPolicies(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4, "api": 4})
	q := &recordingQuery{values: map[string]float64{
		`debi_load_ratio{policy="web",load="w"}`: 0.9, `debi_current_replicas{policy="web"}`: 4,
		`debi_load_ratio{policy="web",load="window"}`: 0.5,
		qAPILoad: 1.8, qAPIReplicas: 4, qAPINow: 0.5, qAPIDown: 1.8,
	}}
	rec := record.NewFakeRecorder(10)
	c, err := NewController(testConfig(t, budgetConfigYAML), ControllerOptions{Actuator: act, Query: q.query, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))); err != nil {
		t.Fatal(err)
	}
	for _, e := range q.asked {
		if strings.Contains(e, `load="w1"`) || strings.Contains(e, `load="down"`) {
			t.Errorf("the debi policy queried %s", e)
		}
	}
	if _, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "api")}))); err != nil {
		t.Fatal(err)
	}
	<-rec.Events // web's scale-up
	ev := <-rec.Events
	for _, want := range []string{"policy api (budget): replicas 4 -> 8 (scale-up)", "W=1.800 (source prometheus)", "observed W1=0.500", "quantile over lead time + hold=1.800"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
}
