package webhook

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/scaling"
)

const (
	qWebLoad     = `debi_load_ratio{policy="web",load="w"}`
	qWebReplicas = `debi_load_replicas{policy="web"}`
)

func mustDecode(t *testing.T, b []byte) *AlertmanagerMessage {
	t.Helper()
	m, err := DecodeAlertmanager(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Expected values for policy web (debi; min 2, max 20, bounds 0.3–0.7, tolerance 0.1):
// B = (0.7−0.3)·2 = 0.8; at N = 4, U(4) = 0.7 − 0.8/4 = 0.5. W = 0.9 measured at 4 replicas:
// |0.9/0.5 − 1| = 0.8 > 0.1, L = 3.6, n* = round((3.6+0.8)/0.7) = round(6.29) = 6,
// U(6) = 0.7 − 0.8/6 = 0.567. The rate limit allows max(4+4, 4·2) = 8, so 6 stands.
func TestAlertDecisionFromPrometheus(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	rec := record.NewFakeRecorder(10)
	c, err := NewController(testConfig(t, testConfigYAML), ControllerOptions{Actuator: act, Recorder: rec,
		Query: staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4})})
	if err != nil {
		t.Fatal(err)
	}
	msg := mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web", "namespace", "shop"),
		"annotations": map[string]string{"load": "5"}})) // stale annotation must not be used
	outs, err := c.Alerts(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	o := outs[0]
	if o.After != 6 || o.Before != 4 || !o.Written || o.Source != "prometheus" || *o.W != 0.9 {
		t.Fatalf("outcome = %+v, want 4 -> 6 written from prometheus W=0.9", o)
	}
	if math.Abs(o.Target-(0.7-0.8/6)) > 1e-9 {
		t.Errorf("target = %v, want U(6) = 0.567", o.Target)
	}
	if got := act.Writes(); len(got) != 1 || got[0] != "web=6" {
		t.Errorf("writes = %v, want [web=6]", got)
	}
	ev := <-rec.Events
	for _, want := range []string{"Normal DebiScaled", "policy web (debi): replicas 4 -> 6 (scale-up)", "W=0.900 (source prometheus)", "target utilization=0.567"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}

	// The same notification again (Alertmanager repeats): now N = 6 and W = 0.9·4/6 = 0.6,
	// |0.6/0.567 − 1| = 0.059 ≤ 0.1, so the count stays 6 and nothing is written.
	outs, err = c.Alerts(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].After != 6 || outs[0].Written || outs[0].Reason != scaling.ReasonTolerance {
		t.Errorf("repeat outcome = %+v, want 6 within tolerance, nothing written", outs[0])
	}
	if got := act.Writes(); len(got) != 1 {
		t.Errorf("repeat wrote again: %v", got)
	}
	select {
	case ev := <-rec.Events:
		t.Errorf("unexpected event for an unchanged target: %s", ev)
	default:
	}
}

// A W computed at 2 replicas is converted to the current 4: 0.9·2/4 = 0.45, |0.45/0.5 − 1| = 0.1
// ≤ tolerance, so no change. Without the conversion the webhook would apply the same load twice.
func TestLoadBasisConversion(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 2}), nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].After != 4 || math.Abs(*outs[0].W-0.45) > 1e-12 || len(act.Writes()) != 0 {
		t.Fatalf("outcome %+v writes %v: want W 0.45, no change", outs[0], act.Writes())
	}
}

func TestAnnotationFallback(t *testing.T) {
	fire := func(ann map[string]string) []byte {
		return testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web"), "annotations": ann})
	}
	t.Run("prometheus down, annotations used and labelled", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4})
		c := newTestController(t, testConfig(t, testConfigYAML), act, prometheusDown, nil)
		outs, err := c.Alerts(context.Background(), mustDecode(t, fire(map[string]string{"load": "0.9", "current_replicas": "4"})))
		if err != nil {
			t.Fatal(err)
		}
		if outs[0].Source != "annotation" || outs[0].After != 6 {
			t.Fatalf("outcome = %+v, want 6 from source annotation", outs[0])
		}
	})
	t.Run("prometheus down, no annotation: retry", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4})
		c := newTestController(t, testConfig(t, testConfigYAML), act, prometheusDown, nil)
		_, err := c.Alerts(context.Background(), mustDecode(t, fire(nil)))
		if code := errorCode(err); code != http.StatusServiceUnavailable {
			t.Fatalf("code = %d (%v), want 503", code, err)
		}
		if len(act.Writes()) != 0 {
			t.Error("wrote without data")
		}
	})
	t.Run("no prometheus configured, negative annotation: permanent", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4})
		c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
		_, err := c.Alerts(context.Background(), mustDecode(t, fire(map[string]string{"load": "-1"})))
		if code := errorCode(err); code != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), `annotation load="-1" is not a load in [0, 1e+06]`) {
			t.Fatalf("code = %d (%v), want 422", code, err)
		}
	})
	// The fallback may scale up or hold, never down, and only on validated values.
	for _, tc := range []struct {
		name string
		ann  map[string]string
		code int
		want string
	}{
		{"a low load does not scale down", map[string]string{"load": "0.1", "current_replicas": "9"}, 0, ""},
		{"an absurd load is refused", map[string]string{"load": "1e308", "current_replicas": "4"}, 503, "is not a load"},
		{"Inf is refused", map[string]string{"load": "+Inf", "current_replicas": "4"}, 503, "is not a load"},
		{"no replica count: refused (W cannot be converted)", map[string]string{"load": "0.9"}, 503, `annotation "current_replicas" missing`},
		{"a fractional replica count is refused", map[string]string{"load": "0.9", "current_replicas": "2.5"}, 503, "not a whole replica count"},
		{"a zero replica count is refused", map[string]string{"load": "0.9", "current_replicas": "0"}, 503, "not a whole replica count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"web": 9})
			c := newTestController(t, testConfig(t, testConfigYAML), act, prometheusDown, nil)
			outs, err := c.Alerts(context.Background(), mustDecode(t, fire(tc.ann)))
			if tc.code != 0 {
				if errorCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) || len(act.Writes()) != 0 {
					t.Fatalf("err = %v (code %d), writes %v; want %d with %q", err, errorCode(err), act.Writes(), tc.code, tc.want)
				}
				return
			}
			// W 0.1 at 9 replicas: Algorithm 2 would go to the minimum, 2.
			if err != nil || outs[0].After != 9 || outs[0].Source != "annotation" || len(act.Writes()) != 0 {
				t.Fatalf("outcome %+v err %v writes %v: want 9 held from the annotations", outs, err, act.Writes())
			}
		})
	}
	t.Run("NaN annotation", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4})
		c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
		_, err := c.Alerts(context.Background(), mustDecode(t, fire(map[string]string{"load": "NaN"})))
		if errorCode(err) != http.StatusUnprocessableEntity || len(act.Writes()) != 0 {
			t.Fatalf("err = %v, writes %v", err, act.Writes())
		}
	})
}

func TestResolvedWritesNothing(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 9})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.1}), nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("resolved", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Trigger != "resolved" || outs[0].Written || len(act.Writes()) != 0 {
		t.Fatalf("outcome %+v writes %v: resolved is not an order to scale back", outs[0], act.Writes())
	}
}

func TestModes(t *testing.T) {
	t.Run("shadow decides and exports, writes nothing", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"batch": 4})
		reg := prometheus.NewRegistry()
		c := newTestController(t, testConfig(t, testConfigYAML), act,
			staticQuery(map[string]float64{`debi_load_ratio{policy="batch",load="w"}`: 0.9, `debi_load_replicas{policy="batch"}`: 4}), reg)
		// apa, target 0.5: 0.9/0.5 = 1.8 > 1.1, ceil(4·1.8) = 8 = the ×2 rate limit.
		outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "batch")})))
		if err != nil {
			t.Fatal(err)
		}
		if outs[0].After != 8 || outs[0].Mode != config.ModeShadow || outs[0].Written || len(act.Writes()) != 0 {
			t.Fatalf("outcome %+v writes %v", outs[0], act.Writes())
		}
		if v := testutil.ToFloat64(c.m.lastReplicas.WithLabelValues("batch", "shadow")); v != 8 {
			t.Errorf("last decision gauge = %v, want 8", v)
		}
	})
	t.Run("hpa-floor raises the floor instead of scaling", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4})
		cfg := testConfig(t, strings.Replace(testConfigYAML, "mode: act", "mode: hpa-floor", 1))
		c := newTestController(t, cfg, act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
		if _, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))); err != nil {
			t.Fatal(err)
		}
		if got := act.Writes(); len(got) != 1 || got[0] != "hpa/web=6" || act.replicas["web"] != 4 {
			t.Fatalf("writes = %v, replicas %d: want only the HPA floor raised to 6", got, act.replicas["web"])
		}
	})
}

func TestAlertSafety(t *testing.T) {
	for _, tc := range []struct {
		name   string
		alerts []map[string]any
		want   string
	}{
		{"no policy label", []map[string]any{{"labels": testenv.AlertLabels("namespace", "shop")}}, `alerts[0] has no "policy" label`},
		{"unknown policy", []map[string]any{{"labels": testenv.AlertLabels("policy", "payments")}}, `alerts[0]: unknown policy "payments"`},
		{"other namespace", []map[string]any{{"labels": testenv.AlertLabels("policy", "web", "namespace", "kube-system")}}, `label namespace="kube-system" does not match`},
		{"other deployment", []map[string]any{{"labels": testenv.AlertLabels("policy", "web", "deployment", "coredns")}}, `label deployment="coredns" does not match`},
		{"other kind", []map[string]any{{"labels": testenv.AlertLabels("policy", "web", "workload_type", "statefulset", "workload", "web")}}, `label workload_type="statefulset" does not match`},
		{"one bad alert spoils the group", []map[string]any{{"labels": testenv.AlertLabels("policy", "web")}, {"labels": testenv.AlertLabels("policy", "db", "statefulset", "other")}}, `alerts[1] (policy db)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"web": 4, "db": 1})
			c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9}), nil)
			_, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", tc.alerts...)))
			if errorCode(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (code %d), want 422 with %q", err, errorCode(err), tc.want)
			}
			if len(act.Writes()) != 0 {
				t.Fatalf("wrote %v", act.Writes())
			}
		})
	}
}

func TestTidal(t *testing.T) {
	ref := &TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	bind := map[string]string{LabelScalerName: "web", LabelScalerNamespace: "shop"}
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name  string
		ev    TidalEvent
		after int32
		code  int
		want  string
	}{
		{"desired as given", TidalEvent{Namespace: "shop", Name: "t", Labels: bind, TargetRef: ref, Status: TidalStatus{DesiredReplicas: f(9)}}, 9, 0, ""},
		{"status.replicas when no desiredReplicas", TidalEvent{Namespace: "shop", Name: "t", Labels: bind, Status: TidalStatus{Replicas: f(7)}}, 7, 0, ""},
		{"bound by targetRef", TidalEvent{Namespace: "shop", Name: "t", TargetRef: ref, Status: TidalStatus{DesiredReplicas: f(5)}}, 5, 0, ""},
		{"clamped to max", TidalEvent{Namespace: "shop", Name: "t", Labels: bind, Status: TidalStatus{DesiredReplicas: f(500)}}, 20, 0, ""},
		{"clamped to min", TidalEvent{Namespace: "shop", Name: "t", Labels: bind, Status: TidalStatus{DesiredReplicas: f(0)}}, 2, 0, ""},
		{"tidal in another namespace", TidalEvent{Namespace: "evil", Name: "t", Labels: bind, Status: TidalStatus{DesiredReplicas: f(9)}}, 0, 422, "only drive a policy of its own namespace"},
		{"label names another namespace", TidalEvent{Namespace: "shop", Name: "t", Labels: map[string]string{LabelScalerName: "web", LabelScalerNamespace: "kube-system"}, Status: TidalStatus{DesiredReplicas: f(9)}}, 0, 422, `does not match policy web`},
		{"targetRef names another object", TidalEvent{Namespace: "shop", Name: "t", Labels: bind, TargetRef: &TargetRef{Kind: "Deployment", Name: "coredns", Namespace: "kube-system"}, Status: TidalStatus{DesiredReplicas: f(9)}}, 0, 422, "is not the target of policy web"},
		{"unknown policy", TidalEvent{Namespace: "shop", Name: "t", Labels: map[string]string{LabelScalerName: "nope"}, Status: TidalStatus{DesiredReplicas: f(9)}}, 0, 422, `unknown policy "nope"`},
		{"unbound", TidalEvent{Namespace: "shop", Name: "t", Status: TidalStatus{DesiredReplicas: f(9)}}, 0, 422, "names no policy"},
		{"negative", TidalEvent{Namespace: "shop", Name: "t", Labels: bind, Status: TidalStatus{DesiredReplicas: f(-1)}}, 0, 422, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"web": 4})
			act.tidals[tc.ev.Namespace+"/"+tc.ev.Name] = tidalObjectFrom(tc.ev)
			c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
			// The event is a trigger: only its namespace and name count.
			out, err := c.Tidal(context.Background(), &TidalEvent{Namespace: tc.ev.Namespace, Name: tc.ev.Name})
			if tc.code != 0 {
				if errorCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) || len(act.Writes()) != 0 {
					t.Fatalf("err = %v, writes %v; want %d with %q and no write", err, act.Writes(), tc.code, tc.want)
				}
				return
			}
			if err != nil || out.After != tc.after || act.replicas["web"] != tc.after || out.Source != "tidal" {
				t.Fatalf("out %+v err %v replicas %d, want %d", out, err, act.replicas["web"], tc.after)
			}
		})
	}
}

// tidalObjectFrom is the object the API server would hold for an event.
func tidalObjectFrom(e TidalEvent) *unstructured.Unstructured {
	var ref map[string]any
	if r := e.TargetRef; r != nil {
		ref = map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name}
		if r.Namespace != "" {
			ref["namespace"] = r.Namespace
		}
	}
	var desired any
	if e.Status.DesiredReplicas != nil {
		desired = *e.Status.DesiredReplicas
	}
	u := tidalObject(e.Namespace, e.Name, e.Labels, ref, desired)
	if e.Status.Replicas != nil {
		u.Object["status"].(map[string]any)["replicas"] = *e.Status.Replicas
	}
	return u
}

// TestTidalPushIsATrigger: what a pushed event claims (labels, status) is not believed; the
// object read from the API server decides, and a Tidal the API server does not have is a 404.
func TestTidalPushIsATrigger(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 5})
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(7))
	c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
	zero := 0.0
	lie := &TidalEvent{Namespace: "shop", Name: "t", Labels: map[string]string{LabelScalerName: "db"}, Status: TidalStatus{DesiredReplicas: &zero}}
	out, err := c.Tidal(context.Background(), lie)
	if err != nil || out.Policy != "web" || out.After != 7 || act.replicas["web"] != 7 {
		t.Fatalf("out %+v err %v replicas %d: want policy web scaled to the object's 7", out, err, act.replicas["web"])
	}
	_, err = c.Tidal(context.Background(), &TidalEvent{Namespace: "shop", Name: "ghost"})
	if errorCode(err) != http.StatusNotFound || !strings.Contains(err.Error(), "tidal shop/ghost: not found") {
		t.Fatalf("unknown tidal: err %v (code %d), want 404", err, errorCode(err))
	}
	if len(act.Writes()) != 1 {
		t.Fatalf("writes %v, want one", act.Writes())
	}
}

func TestUnknownTargetIsPermanentAndAPIErrorsRetry(t *testing.T) {
	act := newFakeActuator(map[string]int32{}) // web does not exist
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9}), nil)
	_, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if errorCode(err) != http.StatusNotFound {
		t.Fatalf("missing target: code %d (%v), want 404", errorCode(err), err)
	}
	act.err = errors.New("connection refused")
	_, err = c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if errorCode(err) != http.StatusInternalServerError {
		t.Fatalf("API down: code %d (%v), want 500 (retry)", errorCode(err), err)
	}
}

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), reg)
	if _, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))); err != nil {
		t.Fatal(err)
	}
	c.m.notifications.WithLabelValues("alertmanager", "200").Inc()
	c.m.notificationDuration.WithLabelValues("alertmanager").Observe(0.001)
	c.m.patchDuration.WithLabelValues("act").Observe(0.001)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP debi_webhook_decisions_total Decisions by policy, load source (prometheus, annotation, tidal, none) and result (change, no_change, held: an input stale, missing or ambiguous or the target paused, resolved, error).
# TYPE debi_webhook_decisions_total counter
debi_webhook_decisions_total{policy="web",result="change",source="prometheus"} 1
# HELP debi_webhook_last_decision_replicas Replica count of the last decision per policy, also in shadow mode.
# TYPE debi_webhook_last_decision_replicas gauge
debi_webhook_last_decision_replicas{mode="act",policy="web"} 6
# HELP debi_webhook_patches_total Writes by policy, mode (act, hpa-floor) and result (success, unchanged, error).
# TYPE debi_webhook_patches_total counter
debi_webhook_patches_total{mode="act",policy="web",result="success"} 1
`), "debi_webhook_decisions_total", "debi_webhook_last_decision_replicas", "debi_webhook_patches_total")
	if err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "debi_webhook_build_info"); n != 1 {
		t.Errorf("build info series = %d, want 1", n)
	}
}

// The window term (METHOD §5.5) read from Prometheus: W = 0.9 gives 6 (above); the window mean
// 1.1 at 4 replicas gives L = 4.4, round((4.4+0.8)/0.7) = round(7.43) = 7, the larger, reason window.
func TestWindowLoad(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	cfg := testConfig(t, strings.Replace(testConfigYAML, "window: 0s", "window: 5m", 1))
	c := newTestController(t, cfg, act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4,
		`debi_load_ratio{policy="web",load="window"}`: 1.1}), nil)
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].After != 7 || outs[0].Reason != scaling.ReasonWindow {
		t.Fatalf("outcome %+v, want 7 by the window", outs[0])
	}
}

// Concurrent repeats of one notification are serialised per policy: one write, one count.
func TestConcurrentNotificationsOneWrite(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	msg := mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := c.Alerts(context.Background(), msg)
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if w := act.Writes(); len(w) != 1 || w[0] != "web=6" {
		t.Fatalf("writes = %v, want exactly [web=6]", w)
	}
}

func TestJoinErrors(t *testing.T) {
	e := func(code int) error { return &Error{code, errors.New(http.StatusText(code))} }
	for _, tc := range []struct {
		errs []error
		want int
	}{
		{[]error{e(422), e(503)}, 503},         // one retryable: retry the notification
		{[]error{e(404), e(422)}, 404},         // all permanent: the first
		{[]error{errors.New("plain")}, 500},    // unknown errors retry
		{[]error{e(422), e(504), e(503)}, 504}, // the first retryable code
	} {
		if got := errorCode(joinErrors(tc.errs)); got != tc.want {
			t.Errorf("joinErrors(%v) code = %d, want %d", tc.errs, got, tc.want)
		}
	}
	if joinErrors(nil) != nil {
		t.Error("no errors must give nil")
	}
}
