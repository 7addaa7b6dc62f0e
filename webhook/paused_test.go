package webhook

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPausedReplicas: a policy paused at 3 (webhook.policies[].paused_replicas) is scaled to 3
// by Pin, without a trigger; a notification whose load asks for 6 (TestAlertDecisionFromPrometheus)
// writes nothing while the target is at 3, and puts it back to 3 after a resize by hand; the
// annotation debi.io/paused on the target holds even the pin; paused_replicas 0 stops the
// workload (below min_replicas, as KEDA allows). The write history is asserted whole.
func TestPausedReplicas(t *testing.T) {
	cfg := func(n string) string {
		return strings.Replace(testConfigYAML, "  policies:\n", "  policies:\n    - {name: web, paused_replicas: "+n+"}\n", 1)
	}
	q := staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4})
	alert := func(t *testing.T, c *Controller) Outcome {
		t.Helper()
		outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
		if err != nil || len(outs) != 1 {
			t.Fatalf("outcomes %+v, err %v", outs, err)
		}
		return outs[0]
	}

	t.Run("pinned at 3", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4, "db": 1})
		reg := prometheus.NewRegistry()
		c := newTestController(t, testConfig(t, cfg("3")), act, q, reg)
		if v := testutil.ToFloat64(c.m.pausedReplicas.WithLabelValues("web")); v != 3 {
			t.Errorf("debi_webhook_policy_paused_replicas = %v, want 3", v)
		}
		outs, err := c.Pin(context.Background())
		if err != nil || len(outs) != 1 || outs[0].Before != 4 || outs[0].After != 3 || !outs[0].Written || outs[0].Trigger != TriggerPause {
			t.Fatalf("Pin: %+v, %v; want web 4 -> 3 written", outs, err)
		}
		if o := alert(t, c); o.After != 3 || o.Written || o.Reason != ReasonPausedReplicas || o.W != nil {
			t.Errorf("alert while pinned: %+v; want 3, nothing written, no load read", o)
		}
		act.replicas["web"] = 7 // by hand
		if o := alert(t, c); o.Before != 7 || o.After != 3 || !o.Written {
			t.Errorf("alert after a resize to 7: %+v; want 7 -> 3", o)
		}
		act.annotations["web"] = map[string]string{AnnotationPaused: "true"}
		act.replicas["web"] = 9
		if o := alert(t, c); o.Reason == ReasonPausedReplicas || o.After != 9 || o.Written {
			t.Errorf("alert with debi.io/paused: %+v; want 9 kept, not the pin", o)
		}
		if outs, err := c.Pin(context.Background()); err != nil || outs[0].Held == "" || outs[0].Written {
			t.Errorf("Pin with debi.io/paused: %+v, %v; want held", outs, err)
		}
		if got, want := act.Writes(), []string{"web=3", "web=3"}; !slices.Equal(got, want) {
			t.Errorf("writes %v, want %v", got, want)
		}
		if v := testutil.ToFloat64(c.m.paused.WithLabelValues("web")); v != 1 {
			t.Errorf("debi_webhook_policy_paused = %v, want 1", v)
		}
	})
	t.Run("pinned at 0", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4, "db": 1})
		c := newTestController(t, testConfig(t, cfg("0")), act, q, nil)
		if _, err := c.Pin(context.Background()); err != nil {
			t.Fatal(err)
		}
		if o := alert(t, c); o.Before != 0 || o.After != 0 || o.Written {
			t.Errorf("alert at 0: %+v; want held at 0", o)
		}
		if got, want := act.Writes(), []string{"web=0"}; !slices.Equal(got, want) {
			t.Errorf("writes %v, want %v", got, want)
		}
	})
	t.Run("paused without a count writes nothing", func(t *testing.T) {
		act := newFakeActuator(map[string]int32{"web": 4, "db": 1})
		c := newTestController(t, testConfig(t, strings.Replace(testConfigYAML, "  policies:\n", "  policies:\n    - {name: web, paused: true}\n", 1)), act, q, nil)
		if outs, err := c.Pin(context.Background()); err != nil || len(outs) != 0 {
			t.Fatalf("Pin: %+v, %v; want nothing to pin", outs, err)
		}
		if o := alert(t, c); o.Held == "" || o.Written {
			t.Errorf("alert while paused: %+v; want held", o)
		}
		if len(act.Writes()) != 0 {
			t.Errorf("writes %v", act.Writes())
		}
	})
}
