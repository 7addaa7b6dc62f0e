package webhook

// Integration tests of "a Tidal is a trigger, never a level-setter" (issue 20) on the real
// kube-apiserver: the Tidal watch (informers, resyncs, the initial list of a restarted or newly
// leading webhook) and pushed events, each test auditing the Deployment's whole replica history
// as a watch saw it from the start (testenv.ReplicaHistory).

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/process"
	"github.com/debi-scaler/debi/internal/testenv"
)

// tidalWatch is one webhook's Tidal watch: a Controller on a real actuator and its watchTidals
// (under a Lease when le is set), stopped by stop.
type tidalWatch struct {
	c    *Controller
	stop func()
}

func startTidalWatch(t *testing.T, e *kubeEnv, q QueryFunc, resync time.Duration, le *config.LeaderElectionConfig, id string, leading func(bool)) *tidalWatch {
	t.Helper()
	act, err := NewKubeActuator(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewController(itConfig(t, e.NS, "act"), ControllerOptions{Actuator: act, Query: q, Logger: testenv.Logger(t).With("webhook", id)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tc := config.TidalConfig{Resources: []config.WatchResource{{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}}, ResyncPeriod: resync}
	go func() {
		defer close(done)
		if le == nil {
			watchTidals(ctx, c, act.Dynamic(), tc)
			return
		}
		if err := process.RunLeaderElected(ctx, e.Kube, *le, id, testenv.Logger(t), leading, func(ctx context.Context) { watchTidals(ctx, c, act.Dynamic(), tc) }); err != nil {
			t.Error(err)
		}
	}()
	w := &tidalWatch{c: c}
	w.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the Tidal watch did not stop")
		}
	}
	t.Cleanup(w.stop)
	return w
}

// syncs is how many Tidal syncs the watch has done (initial list, updates, resyncs).
func (w *tidalWatch) syncs() float64 {
	return testutilCounter(w.c.m.notifications.WithLabelValues("watch", "200"))
}

// waitSyncs waits until the watch has synced n more times than it had at from.
func (w *tidalWatch) waitSyncs(t *testing.T, from float64, n int, what string) {
	t.Helper()
	testenv.Poll(t, 20*time.Second, fmt.Sprintf("%d Tidal syncs (%s)", n, what), func() bool { return w.syncs() >= from+float64(n) })
}

func (w *tidalWatch) held() float64 {
	return testutilCounter(w.c.m.decisions.WithLabelValues("web", "tidal", "held"))
}

// editTidalSpec changes the Tidal's spec: metadata.generation goes up, the status stays.
func (e *kubeEnv) editTidalSpec(t *testing.T, name, note string) int64 {
	t.Helper()
	u, err := e.Dyn.Resource(testenv.TidalResource).Namespace(e.NS).Patch(context.Background(), name, types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"note":%q}}`, note), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetGeneration()
}

// loadQuery is Prometheus saying the load at 5 replicas asks for more: W = 0.9 at 5 (debi,
// bounds 0.3–0.7, U(5) = 0.54, n* = round((4.5 + 0.8)/0.7) = 8).
func loadQuery() QueryFunc {
	return staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 5})
}

// loadScaleUp is the load policy's decision: an alert for web, decided and written by c.
func loadScaleUp(t *testing.T, c *Controller) int32 {
	t.Helper()
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[0]; !o.Written || o.After <= o.Before {
		t.Fatalf("the load policy did not scale up: %+v", o)
	}
	return outs[0].After
}

// TestTidalIntegrationStatusNotCurrent: the watch and a push see a Tidal whose status predates
// its spec (observedGeneration 1, generation 2) and then one its controller marks Ready=False:
// web stays at 9. Once the status describes the spec and is Ready, desiredReplicas 2 is applied,
// once. On main: [9 2] at the first status write.
func TestTidalIntegrationStatusNotCurrent(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 9)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	w := startTidalWatch(t, e, itQuery(), time.Second, nil, "a", nil)
	testenv.Poll(t, 20*time.Second, "the Tidal watch", func() bool { return testutilCounter(w.c.m.tidalWatchEnabled) == 1 })
	bind := map[string]any{LabelScalerName: "web", LabelScalerNamespace: e.NS}
	ref := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}

	// Created with a status of no generation (0), its spec edited, then a status of the
	// generation before (1): never current.
	e.TidalObjectStatus(t, e.NS, "t", bind, ref, 2, 1, "True")
	_ = e.editTidalSpec(t, "t", "edited")
	e.TidalObjectStatus(t, e.NS, "t", bind, ref, 2, 1, "True")
	if _, gen, obs := e.TidalApplied(t, "t"); gen != 2 || obs != 1 {
		t.Fatalf("generation %d observedGeneration %d, want 2 and 1", gen, obs)
	}
	// Resyncs replay the latest object: three of them, and every event before is processed.
	w.waitSyncs(t, w.syncs(), 3, "the stale status")
	testenv.WantHistory(t, h, 9)
	if w.held() == 0 {
		t.Fatal("the stale status was not held")
	}
	out, err := w.c.Tidal(context.Background(), &TidalEvent{Namespace: e.NS, Name: "t"})
	if err != nil || !strings.Contains(out.Held, "status.observedGeneration 1 is not metadata.generation 2") {
		t.Fatalf("push of a stale Tidal: %+v %v", out, err)
	}
	// Ready=False for the current generation.
	e.TidalObjectStatus(t, e.NS, "t", bind, ref, 2, 0, "False")
	held := w.held()
	w.waitSyncs(t, w.syncs(), 3, "Ready=False")
	testenv.WantHistory(t, h, 9)
	if w.held() < held+2 { // (a sync in flight at the first read may be counted once only)
		t.Fatalf("held %v → %v: Ready=False not held at its syncs", held, w.held())
	}
	out, err = w.c.Tidal(context.Background(), &TidalEvent{Namespace: e.NS, Name: "t"})
	if err != nil || !strings.Contains(out.Held, "Ready=False") {
		t.Fatalf("push of a Ready=False Tidal: %+v %v", out, err)
	}
	testenv.WantHistory(t, h, 9)

	// Current and Ready: applied once.
	e.TidalObjectStatus(t, e.NS, "t", bind, ref, 2, 0, "True")
	testenv.Poll(t, 20*time.Second, "web at 2", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 2 })
	testenv.WantHistory(t, h, 9, 2)
}

// TestTidalIntegrationResyncAndRestart: web at 4; the Tidal's desiredReplicas 5 is applied
// (4 → 5) and recorded on the Tidal (debi.io/applied, generation unchanged); the load policy
// then scales web to 8. Resyncs every second, a spec edit that leaves desiredReplicas alone, and
// a restarted webhook (a new Controller and watch, whose initial list replays the Tidal) write
// nothing; a change of desiredReplicas to 3 writes once. On main: [4 5 8 5] at the first resync
// (the operator's 5 → 8 → 5), and 5 again after every load scale-up.
func TestTidalIntegrationResyncAndRestart(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	const resync = time.Second // client-go's shortest resync period
	w := startTidalWatch(t, e, loadQuery(), resync, nil, "a", nil)
	e.Tidal(t, e.NS, "t", "web", 5)
	testenv.Poll(t, 20*time.Second, "web at 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	testenv.WantHistory(t, h, 4, 5)

	up := loadScaleUp(t, w.c)
	testenv.WantHistory(t, h, 4, 5, up)
	w.waitSyncs(t, w.syncs(), 3, "resyncs after the load scale-up")
	testenv.WantHistory(t, h, 4, 5, up)
	a, gen, obs := e.TidalApplied(t, "t")
	if want := "1/5/web/" + e.NS + "/Deployment/web"; a != want || gen != 1 || obs != 1 {
		t.Fatalf("debi.io/applied %q generation %d observedGeneration %d, want %q, 1, 1 (an annotation does not bump the generation)", a, gen, obs, want)
	}

	// A spec edit, evaluated by the controller, desiredReplicas still 5: not a change.
	_ = e.editTidalSpec(t, "t", "rules edited")
	e.Tidal(t, e.NS, "t", "web", 5)
	w.waitSyncs(t, w.syncs(), 3, "resyncs after the spec edit")
	testenv.WantHistory(t, h, 4, 5, up)

	// Restart: the watch stops, a new webhook lists the Tidal and resyncs it.
	w.stop()
	w2 := startTidalWatch(t, e, loadQuery(), resync, nil, "a-restarted", nil)
	w2.waitSyncs(t, 0, 4, "the restarted webhook's initial list and resyncs")
	testenv.WantHistory(t, h, 4, 5, up)

	// A change: one write, recorded; resyncs after it write nothing.
	e.Tidal(t, e.NS, "t", "web", 3)
	testenv.Poll(t, 20*time.Second, "web at 3", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 3 })
	w2.waitSyncs(t, w2.syncs(), 3, "resyncs after the change")
	testenv.WantHistory(t, h, 4, 5, up, 3)
	if a, _, _ := e.TidalApplied(t, "t"); a != "2/3/web/"+e.NS+"/Deployment/web" {
		t.Errorf("debi.io/applied %q after the change", a)
	}
}

// TestTidalIntegrationRuleFiresAgain: a rule that fires again at the count it set before (the
// morning rule: 5 every day at 08:00) is a change, though desiredReplicas does not move; the
// resyncs and a restart that replay one firing are not. Applied (4 → 5), the load scales web up
// (→ 8), resyncs write nothing, the rule fires again at 5 (a new status.lastScheduleTime): 8 → 5,
// once, and a restarted webhook writes nothing. Before the firing time was recorded: [4 5 8], the
// second morning lost.
func TestTidalIntegrationRuleFiresAgain(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	const resync = time.Second
	const mon, tue = "2026-11-30T08:00:00Z", "2026-12-01T08:00:00Z"
	w := startTidalWatch(t, e, loadQuery(), resync, nil, "a", nil)
	e.TidalFired(t, e.NS, "t", "web", 5, mon)
	testenv.Poll(t, 20*time.Second, "web at 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	up := loadScaleUp(t, w.c)
	w.waitSyncs(t, w.syncs(), 3, "resyncs after the load scale-up")
	testenv.WantHistory(t, h, 4, 5, up)
	if a, _, _ := e.TidalApplied(t, "t"); a != "1/5/web/"+e.NS+"/Deployment/web@"+mon {
		t.Fatalf("debi.io/applied %q, want the firing recorded", a)
	}

	e.TidalFired(t, e.NS, "t", "web", 5, tue)
	testenv.Poll(t, 20*time.Second, "web back at 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	w.waitSyncs(t, w.syncs(), 3, "resyncs after the second firing")
	testenv.WantHistory(t, h, 4, 5, up, 5)

	w.stop()
	w2 := startTidalWatch(t, e, loadQuery(), resync, nil, "a-restarted", nil)
	w2.waitSyncs(t, 0, 4, "the restarted webhook's initial list and resyncs")
	testenv.WantHistory(t, h, 4, 5, up, 5)
	if a, _, _ := e.TidalApplied(t, "t"); a != "1/5/web/"+e.NS+"/Deployment/web@"+tue {
		t.Errorf("debi.io/applied %q after the second firing", a)
	}
}

// TestTidalIntegrationRestart: as TestTidalIntegrationResyncAndRestart without resyncs, so that
// only the restart replays the Tidal: applied (4 → 5), the load scales web up (→ 8), the webhook
// stops and a new one starts; its initial list writes nothing; a change to 3 writes once. On
// main: [4 5 8 5] at the new webhook's initial list.
func TestTidalIntegrationRestart(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	w := startTidalWatch(t, e, loadQuery(), time.Hour, nil, "a", nil)
	e.Tidal(t, e.NS, "t", "web", 5)
	testenv.Poll(t, 20*time.Second, "web at 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	if !eventually(5*time.Second, func() bool { a, _, _ := e.TidalApplied(t, "t"); return a != "" }) {
		t.Error("no debi.io/applied on the Tidal")
	}
	up := loadScaleUp(t, w.c)
	testenv.WantHistory(t, h, 4, 5, up)

	w.stop()
	w2 := startTidalWatch(t, e, loadQuery(), time.Hour, nil, "a-restarted", nil)
	w2.waitSyncs(t, 0, 1, "the restarted webhook's initial list")
	testenv.WantHistory(t, h, 4, 5, up)

	before := w2.syncs()
	e.Tidal(t, e.NS, "t", "web", 3)
	testenv.Poll(t, 20*time.Second, "web at 3", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 3 })
	w2.waitSyncs(t, before, 2, "the change and the update of its record")
	testenv.WantHistory(t, h, 4, 5, up, 3)
}

// eventually reports whether cond holds within timeout.
func eventually(timeout time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestTidalIntegrationLeaseHandover: two webhooks campaign for one Lease (no resyncs: only the
// handover replays the Tidal); the leader applies the Tidal's 5 (4 → 5), the load policy (an
// alert decided by the follower: every replica serves HTTP) scales web to 8; the leader goes,
// the follower takes the Lease and lists the Tidal: nothing is written; the next change of
// desiredReplicas (3) is applied once by the new leader. On main: [4 5 8 5] at the handover.
func TestTidalIntegrationLeaseHandover(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	le := &config.LeaderElectionConfig{Namespace: e.NS, Name: "debi-webhook", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	var leadA, leadB atomic.Bool
	a := startTidalWatch(t, e, loadQuery(), time.Hour, le, "a", leadA.Store)
	testenv.Poll(t, 20*time.Second, "a to lead", leadA.Load)
	b := startTidalWatch(t, e, loadQuery(), time.Hour, le, "b", leadB.Store)
	e.Tidal(t, e.NS, "t", "web", 5)
	testenv.Poll(t, 20*time.Second, "web at 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	if !eventually(5*time.Second, func() bool { v, _, _ := e.TidalApplied(t, "t"); return v != "" }) {
		t.Error("no debi.io/applied on the Tidal")
	}
	up := loadScaleUp(t, b.c)
	testenv.WantHistory(t, h, 4, 5, up)
	if leadB.Load() || b.syncs() != 0 {
		t.Fatalf("b leads (%v) or watched (%v syncs) while a leads", leadB.Load(), b.syncs())
	}

	a.stop() // releases the Lease
	testenv.Poll(t, 20*time.Second, "b to take the Lease", leadB.Load)
	b.waitSyncs(t, 0, 1, "the new leader's initial list")
	testenv.WantHistory(t, h, 4, 5, up)

	before := b.syncs()
	e.Tidal(t, e.NS, "t", "web", 3)
	testenv.Poll(t, 20*time.Second, "web at 3", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 3 })
	b.waitSyncs(t, before, 2, "the change and the update of its record")
	testenv.WantHistory(t, h, 4, 5, up, 3)
	if v, _, _ := e.TidalApplied(t, "t"); v != "1/3/web/"+e.NS+"/Deployment/web" {
		t.Errorf("debi.io/applied %q after the change, written by the new leader", v)
	}
}
