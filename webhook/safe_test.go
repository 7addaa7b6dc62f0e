package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/scaling"
)

const (
	qWebWindow = `debi_load_ratio{policy="web",load="window"}`
	qWebStale  = `debi_policy_stale{policy="web"}`
	qWebAge    = `time() - debi_policy_last_success_timestamp_seconds{policy="web"}`
	qDBLoad    = `debi_load_ratio{policy="db",load="w"}`
	qDBBasis   = `debi_load_replicas{policy="db"}`
	qDBFloor   = `debi_decision_floor_replicas{policy="db"}`
	qDBCeil    = `debi_decision_ceiling_replicas{policy="db"}`
)

// TestHoldOnBadInputs: any configured input stale, missing, doubled or unusable holds the size —
// the cases a production user met: a failing demand query (stale, loads still published), an
// empty window (the scale-down guard), an empty load_replicas (the load applied twice), two
// exporters publishing one policy, an exporter whose loop stopped.
func TestHoldOnBadInputs(t *testing.T) {
	// At 9 replicas W = 0.1 is L = 0.9 > Lower·min = 0.6, n* = round((0.9+0.8)/0.7) = 2, raised to
	// min+1 = 3 (Algorithm 2's lowest above the minimum): every case would scale 9 → 3.
	good := map[string]float64{qWebLoad: 0.1, qWebReplicas: 9, qWebWindow: 0.1, qWebStale: 0, qWebAge: 5}
	for _, tc := range []struct {
		name   string
		change map[string]float64
		want   string
	}{
		{"exporter stale (demand query failing)", map[string]float64{qWebStale: 1}, "stale"},
		{"exporter step too old", map[string]float64{qWebAge: 3600}, "above webhook.max_input_age"},
		{"no load", map[string]float64{qWebLoad: nan}, "load: query"},
		{"load doubled", map[string]float64{qWebLoad: -1}, "several series"},
		{"no window load", map[string]float64{qWebWindow: nan}, "window_load: query"},
		{"window doubled", map[string]float64{qWebWindow: -1}, "window_load: query"},
		{"no load_replicas", map[string]float64{qWebReplicas: nan}, "load_replicas: query"},
		{"load_replicas negative", map[string]float64{qWebReplicas: -3}, "not a replica count"},
		{"load_replicas fractional", map[string]float64{qWebReplicas: 2.5}, "not a replica count"},
		{"no staleness series", map[string]float64{qWebStale: nan}, "stale: query"},
		{"no age series", map[string]float64{qWebAge: nan}, "age: query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]float64{}
			for k, v := range good {
				vals[k] = v
			}
			for k, v := range tc.change {
				vals[k] = v
			}
			act := newFakeActuator(map[string]int32{"web": 9})
			reg := prometheusRegistry()
			c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(vals), reg)
			outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web"),
				"annotations": map[string]string{"load": "0.1", "current_replicas": "9"}})))
			if err != nil {
				t.Fatal(err)
			}
			o := outs[0]
			if o.After != 9 || o.Written || o.Reason != "held" || !strings.Contains(o.Held, tc.want) || len(act.Writes()) != 0 {
				t.Fatalf("outcome %+v writes %v: want 9 held (%q)", o, act.Writes(), tc.want)
			}
			if n := testutil.ToFloat64(c.m.decisions.WithLabelValues("web", "prometheus", "held")); n != 1 {
				t.Errorf("decisions_total{result=held} = %v, want 1", n)
			}
		})
	}
	// The same inputs, all good, do scale down: the holds above are the inputs' doing.
	act := newFakeActuator(map[string]int32{"web": 9})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(good), nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil || outs[0].After != 3 || !outs[0].Written {
		t.Fatalf("good inputs: %+v %v, want 9 -> 3", outs, err)
	}
}

// TestStatefulPolicyNeedsBounds: an hpa policy without the exporter's bounds holds; with them
// the rule's answer is clamped into them.
func TestStatefulPolicyNeedsBounds(t *testing.T) {
	// db: hpa, target 0.5, min 1, max 10. W = 0.2 at 8 replicas: ceil(8·0.4) = 4 (utilization 20 %).
	base := map[string]float64{qDBLoad: 0.2, qDBBasis: 8}
	for _, tc := range []struct {
		name   string
		bounds map[string]float64
		after  int32
		held   bool
	}{
		{"no floor: hold", map[string]float64{qDBFloor: nan, qDBCeil: 10}, 8, true},
		{"no ceiling: hold", map[string]float64{qDBFloor: 1, qDBCeil: nan}, 8, true},
		{"inverted bounds: hold", map[string]float64{qDBFloor: 6, qDBCeil: 3}, 8, true},
		{"stabilised: the floor of the window", map[string]float64{qDBFloor: 8, qDBCeil: 10}, 8, false},
		{"part of the way", map[string]float64{qDBFloor: 6, qDBCeil: 10}, 6, false},
		{"free", map[string]float64{qDBFloor: 1, qDBCeil: 10}, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]float64{}
			for k, v := range base {
				vals[k] = v
			}
			for k, v := range tc.bounds {
				vals[k] = v
			}
			act := newFakeActuator(map[string]int32{"db": 8})
			c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(vals), nil)
			outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "db")})))
			if err != nil {
				t.Fatal(err)
			}
			if o := outs[0]; o.After != tc.after || (o.Held != "") != tc.held {
				t.Fatalf("outcome %+v, want %d (held %v)", o, tc.after, tc.held)
			}
		})
	}
}

// TestOneDecisionAcrossReplicas: the webhook keeps no decision state. A long-lived controller,
// a second one (the chart's other replica) and one built anew before every notification (a
// restart each time) decide identically, notification after notification, for an hpa policy
// whose stabilisation made the old webhook's answers depend on its memory (8 → 4 at once
// after a restart), while the bounds the exporter publishes move as its own state would.
func TestOneDecisionAcrossReplicas(t *testing.T) {
	cfg := testConfig(t, testConfigYAML)
	// The exporter's side: the stateful HPA, stepped on the same loads, publishes the bounds.
	p := cfg.Policies[1].Scaling
	exp := scaling.NewHPA(p)
	loads := []float64{0.9, 0.9, 0.2, 0.2, 0.1, 0.1, 0.1, 0.6, 0.3, 0.1, 0.05, 0.05, 0.05}
	start := time.Unix(1_700_000_000, 0)
	actA, actB, actC := newFakeActuator(map[string]int32{"db": 8}), newFakeActuator(map[string]int32{"db": 8}), newFakeActuator(map[string]int32{"db": 8})
	vals := map[string]float64{}
	var mu sync.Mutex
	q := func(ctx context.Context, expr string) (float64, error) {
		mu.Lock()
		m := map[string]float64{}
		for k, v := range vals {
			m[k] = v
		}
		mu.Unlock()
		return staticQuery(m)(ctx, expr)
	}
	a := newTestController(t, cfg, actA, q, nil)
	b := newTestController(t, cfg, actB, q, nil)
	moved := 0
	for i, w := range loads {
		now := start.Add(time.Duration(i) * time.Minute)
		cur := actA.replicas["db"]
		lo, hi := exp.Bounds(now, cur)
		want := exp.Recommend(scaling.Input{Time: now, Current: cur, Ready: cur, W: w})
		mu.Lock()
		vals[qDBLoad], vals[qDBBasis], vals[qDBFloor], vals[qDBCeil] = w, float64(cur), float64(lo), float64(hi)
		mu.Unlock()
		msg := mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "db")}))
		fresh := newTestController(t, testConfig(t, testConfigYAML), actC, q, nil)
		var outs [3]Outcome
		for j, c := range []*Controller{a, b, fresh} {
			o, err := c.Alerts(context.Background(), msg)
			if err != nil {
				t.Fatalf("step %d replica %d: %v", i, j, err)
			}
			outs[j] = o[0]
		}
		if outs[0].After != outs[1].After || outs[0].After != outs[2].After {
			t.Fatalf("step %d (W %v, bounds [%d, %d]): replicas decided %d, %d, %d", i, w, lo, hi, outs[0].After, outs[1].After, outs[2].After)
		}
		// And they decide as the exporter's stateful HPA did.
		if outs[0].After != want.Replicas {
			t.Fatalf("step %d: webhook %d, exporter's HPA %d (%s)", i, outs[0].After, want.Replicas, want.Reason)
		}
		if outs[0].After != cur {
			moved++
		}
	}
	if moved < 3 {
		t.Fatalf("only %d changes of size: the sequence does not exercise the stabilisation", moved)
	}
	if fmt.Sprint(actA.Writes()) != fmt.Sprint(actB.Writes()) || fmt.Sprint(actA.Writes()) != fmt.Sprint(actC.Writes()) {
		t.Fatalf("writes differ: %v / %v / %v", actA.Writes(), actB.Writes(), actC.Writes())
	}
}

// TestPaused: spec replicas 0 (the HPA's convention), the debi.io/paused annotation and a
// paused policy all keep the size; nothing is written.
func TestPaused(t *testing.T) {
	vals := map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}
	for _, tc := range []struct {
		name     string
		replicas int32
		ann      map[string]string
		yaml     string
		want     string
	}{
		{"at zero", 0, nil, testConfigYAML, "0 replicas"},
		{"annotation", 4, map[string]string{AnnotationPaused: "true"}, testConfigYAML, "annotation debi.io/paused"},
		{"policy paused", 4, nil, strings.Replace(testConfigYAML, "    - {name: batch, mode: shadow}", "    - {name: batch, mode: shadow}\n    - {name: web, paused: true}", 1), "webhook.policies[].paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"web": tc.replicas})
			if tc.ann != nil {
				act.annotations["web"] = tc.ann
			}
			reg := prometheusRegistry()
			c := newTestController(t, testConfig(t, tc.yaml), act, staticQuery(vals), reg)
			outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
			if err != nil {
				t.Fatal(err)
			}
			if o := outs[0]; o.After != tc.replicas || !strings.Contains(o.Held, tc.want) || len(act.Writes()) != 0 {
				t.Fatalf("outcome %+v writes %v, want held (%q)", o, act.Writes(), tc.want)
			}
			if v := testutil.ToFloat64(c.m.paused.WithLabelValues("web")); v != 1 {
				t.Errorf("debi_webhook_policy_paused = %v, want 1", v)
			}
		})
	}
	// A Tidal does not unpause either.
	act := newFakeActuator(map[string]int32{"web": 4})
	act.annotations["web"] = map[string]string{AnnotationPaused: "true"}
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(9))
	c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
	if out, err := c.Tidal(context.Background(), &TidalEvent{Namespace: "shop", Name: "t"}); err != nil || out.Held == "" || len(act.Writes()) != 0 {
		t.Fatalf("tidal on a paused target: %+v %v writes %v", out, err, act.Writes())
	}
}

// TestActRefusedUnderAnHPA: act mode does not fight an HPA on the same target.
func TestActRefusedUnderAnHPA(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	act.hpas["web"] = "web-hpa"
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	_, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if errorCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "use") || !strings.Contains(err.Error(), "hpa-floor") || len(act.Writes()) != 0 {
		t.Fatalf("err %v (code %d) writes %v: want 409 naming hpa-floor, nothing written", err, errorCode(err), act.Writes())
	}
}

// TestConflictDecidesAgain: a conflict means the size changed under the decision; the webhook
// reads the new size and decides from it instead of writing the count computed from the old.
func TestConflictDecidesAgain(t *testing.T) {
	// web at 4 with W = 0.9 (measured at 4) asks for 6. Someone scales to 10 meanwhile: W at 10
	// is 0.36, and the exporter has not seen 10 replicas, so no scale-down: 10 stays.
	act := newFakeActuator(map[string]int32{"web": 4})
	act.conflicts, act.conflictSize = 1, 10
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[0]; o.Before != 10 || o.After != 10 || o.Written || o.Conflicts != 1 || len(act.Writes()) != 0 {
		t.Fatalf("outcome %+v writes %v: want the new size 10 kept, one conflict, nothing written", o, act.Writes())
	}
	// Conflicts forever: 503 after the rounds, nothing written.
	act = newFakeActuator(map[string]int32{"web": 4})
	act.conflicts, act.conflictSize = 1000, 4
	c = newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	_, err = c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if errorCode(err) != http.StatusServiceUnavailable || len(act.Writes()) != 0 || act.conflicts != 1000-maxDecideAttempts {
		t.Fatalf("err %v (code %d), writes %v, conflicts left %d", err, errorCode(err), act.Writes(), act.conflicts)
	}
}

// TestCoalescing: a burst of identical notifications makes few decisions (each waiter gets the
// outcome of a decision that started after it arrived) and at most one write.
func TestCoalescing(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	msg := testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for range 500 {
		wg.Go(func() {
			outs, err := c.Alerts(context.Background(), mustDecode(t, msg))
			if err == nil && outs[0].After != 6 {
				err = fmt.Errorf("outcome %+v", outs[0])
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if w := act.Writes(); len(w) != 1 || w[0] != "web=6" {
		t.Fatalf("writes %v, want [web=6]", w)
	}
	if act.reads >= 500 {
		t.Errorf("%d reads for 500 notifications: not coalesced", act.reads)
	}
}

// TestTargetIdentity: kind spellings are one target; names are validated; template values are
// escaped.
func TestTargetIdentity(t *testing.T) {
	dup := `
webhook: {mode: act, allow_unauthenticated: true}
policies:
  - {name: a, target: {namespace: shop, kind: Deployment, name: web}, algorithm: hpa, request: 1}
  - {name: b, target: {namespace: shop, kind: deployment, name: web}, algorithm: hpa, request: 1}
`
	if _, err := config.Load([]byte(dup)); err == nil || !strings.Contains(err.Error(), "policies[1].target: shop/Deployment/web is already scaled by policies[0]") {
		t.Fatalf("duplicate by kind case: %v", err)
	}
	for _, tc := range []struct{ target, want string }{
		{`{namespace: shop, name: "web\"} or vector(1) #"}`, "policies[0].target.name"},
		{`{namespace: "Shop", name: web}`, "policies[0].target.namespace"},
		{`{namespace: shop, kind: "deploy ment", name: web}`, "policies[0].target.kind"},
		{`{namespace: shop, api_version: "a/b/c", name: web}`, "policies[0].target.api_version"},
	} {
		_, err := config.Load([]byte("policies:\n  - {name: a, target: " + tc.target + ", algorithm: hpa, request: 1}\n"))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("target %s: err %v, want %s", tc.target, err, tc.want)
		}
	}
	p := &config.Policy{Name: `x"y`, Target: config.Target{Namespace: "n", Kind: "Deployment", Name: `a\b`}}
	q, err := config.RenderQuery(`m{policy="{{.Policy}}",name="{{.Name}}"}`, p)
	if err != nil || q != `m{policy="x\"y",name="a\\b"}` {
		t.Fatalf("rendered %q (%v)", q, err)
	}
}

// TestKubeErrorCodes: permanent API errors are 4xx, the rest 5xx.
func TestKubeErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{apiStatus(http.StatusUnprocessableEntity, "Invalid"), 422},
		{apiStatus(http.StatusBadRequest, "BadRequest"), 400},
		{apiStatus(http.StatusNotFound, "NotFound"), 404},
		{apiStatus(http.StatusConflict, "Conflict"), 503},
		{apiStatus(http.StatusTooManyRequests, "TooManyRequests"), 503},
		{apiStatus(http.StatusForbidden, "Forbidden"), 500},
		{apiStatus(http.StatusInternalServerError, "InternalError"), 500},
		{apiStatus(http.StatusGatewayTimeout, "Timeout"), 504},
		{fmt.Errorf("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline"), 504},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, 503},
	} {
		if got := errorCode(kubeError("x", tc.err)); got != tc.code {
			t.Errorf("%v: code %d, want %d", tc.err, got, tc.code)
		}
	}
}
