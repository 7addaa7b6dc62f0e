package webhook

// Unit tests of "a Tidal is a trigger, never a level-setter" (issue 20): a status that does not
// describe the spec, or is not Ready, is not acted on; an unchanged Tidal (a resync, a restart,
// another replica) applies nothing new. Each asserts the target's whole write history.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/debi-scaler/debi/config"
)

// setTidalStatus edits a fake Tidal's generation, status.observedGeneration and Ready condition
// (status "" removes the condition).
func setTidalStatus(u *unstructured.Unstructured, generation, observed int64, ready string) {
	u.SetGeneration(generation)
	st := u.Object["status"].(map[string]any)
	st["observedGeneration"] = observed
	if ready == "" {
		delete(st, "conditions")
		return
	}
	st["conditions"] = []any{map[string]any{"type": "Ready", "status": ready, "reason": "RuleActive", "observedGeneration": observed}}
}

// watchEvent is what the watch hands Controller.Tidal for the fake's current object.
func watchEvent(t *testing.T, act *fakeActuator, key string) *TidalEvent {
	t.Helper()
	act.mu.Lock()
	u := act.tidals[key].DeepCopy()
	act.mu.Unlock()
	e := TidalFromUnstructured(u)
	return e
}

func wantWrites(t *testing.T, act *fakeActuator, want ...string) {
	t.Helper()
	if got := act.Writes(); !slices.Equal(got, want) {
		t.Fatalf("write history %q, want %q", got, want)
	}
}

// TestTidalStatusNotCurrentWritesNothing: a Tidal whose status predates its spec, one its
// controller marks Ready=False, one without a status or a Ready condition, and one whose Ready
// condition is of an older generation are not applied, pushed or watched. On main each wrote
// web=2 (desiredReplicas 2, web at 9).
func TestTidalStatusNotCurrentWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		held string
	}{
		{"observedGeneration predates generation", func(u *unstructured.Unstructured) { setTidalStatus(u, 2, 1, "True") }, "status.observedGeneration 1 is not metadata.generation 2"},
		{"Ready=False", func(u *unstructured.Unstructured) { setTidalStatus(u, 2, 2, "False") }, "Ready=False"},
		{"Ready=Unknown", func(u *unstructured.Unstructured) { setTidalStatus(u, 1, 1, "Unknown") }, "Ready=Unknown"},
		{"no Ready condition", func(u *unstructured.Unstructured) { setTidalStatus(u, 1, 1, "") }, "has no Ready condition"},
		{"no observedGeneration", func(u *unstructured.Unstructured) {
			delete(u.Object["status"].(map[string]any), "observedGeneration")
		}, "has no status.observedGeneration"},
		{"Ready of an older generation", func(u *unstructured.Unstructured) {
			setTidalStatus(u, 3, 3, "True")
			u.Object["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["observedGeneration"] = int64(2)
		}, "describes generation 2"},
	} {
		for _, path := range []string{"push", "watch"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				act := newFakeActuator(map[string]int32{"web": 9})
				u := tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(2))
				tc.edit(u)
				act.tidals["shop/t"] = u
				c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
				e := &TidalEvent{Namespace: "shop", Name: "t"}
				if path == "watch" {
					e = watchEvent(t, act, "shop/t")
				}
				out, err := c.Tidal(context.Background(), e)
				if err != nil || !strings.Contains(out.Held, tc.held) || out.Policy != "web" || out.Written {
					t.Errorf("out %+v err %v, want held with %q", out, err, tc.held)
				}
				wantWrites(t, act)
				if len(act.marks) != 0 {
					t.Errorf("marks %v, want none", act.marks)
				}
				// Its controller catches up: the same desiredReplicas now applies, once.
				act.mu.Lock()
				setTidalStatus(act.tidals["shop/t"], 4, 4, "True")
				act.mu.Unlock()
				if path == "watch" {
					e = watchEvent(t, act, "shop/t")
				}
				if _, err := c.Tidal(context.Background(), e); err != nil {
					t.Fatal(err)
				}
				wantWrites(t, act, "web=2")
			})
		}
	}
}

// TestTidalUnchangedAppliesNothingNew: a Tidal at 8 is applied once (5 → 8) and recorded on the
// Tidal; the load then takes web to 12; the same Tidal seen again — a resync (the watch's
// cached object), a push, a new Controller (a restart, a reload, another replica taking the
// Lease) — writes nothing; a spec edit that leaves desiredReplicas at 8 writes nothing; a change
// to 3 writes once. On main: web=8, web=12, web=8 (the resync undid the load), then web=3.
func TestTidalUnchangedAppliesNothingNew(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 5})
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(8))
	cfg := testConfig(t, testConfigYAML)
	c := newTestController(t, cfg, act, nil, nil)
	cached := watchEvent(t, act, "shop/t") // the informer's copy, before the annotation
	out, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t"))
	wantWrites(t, act, "web=8")
	if err != nil || out.Before != 5 || out.After != 8 || !out.Written {
		t.Fatalf("first apply: %+v %v", out, err)
	}
	// The load policy scales up.
	if _, err := act.SetReplicas(context.Background(), config.Target{Kind: "Deployment", Name: "web"}, 12, ScaleInfo{Replicas: 8}); err != nil {
		t.Fatal(err)
	}
	// A resync that still carries the object as it was before the annotation: read again, so
	// nothing is written.
	out, err = c.Tidal(context.Background(), cached)
	wantWrites(t, act, "web=8", "web=12")
	if err != nil || out.Written || out.Reason != "applied" {
		t.Fatalf("stale cached copy: %+v %v, want nothing applied", out, err)
	}
	for i, trigger := range []func(*Controller) (Outcome, error){
		func(c *Controller) (Outcome, error) {
			return c.Tidal(context.Background(), watchEvent(t, act, "shop/t"))
		}, // resync
		func(c *Controller) (Outcome, error) {
			return c.Tidal(context.Background(), &TidalEvent{Namespace: "shop", Name: "t"})
		}, // push
	} {
		for _, ctl := range []*Controller{c, newTestController(t, cfg, act, nil, nil)} { // the same process; a restart
			out, err := trigger(ctl)
			wantWrites(t, act, "web=8", "web=12")
			if err != nil || out.Written || !strings.Contains(out.Held, "already applied") {
				t.Fatalf("trigger %d: %+v %v, want nothing applied", i, out, err)
			}
		}
	}
	wantWrites(t, act, "web=8", "web=12")
	// A spec edit the controller has evaluated, desiredReplicas still 8: not a change.
	act.mu.Lock()
	setTidalStatus(act.tidals["shop/t"], 2, 2, "True")
	act.mu.Unlock()
	if out, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil || out.Written {
		t.Fatalf("spec edit: %+v %v", out, err)
	}
	wantWrites(t, act, "web=8", "web=12")
	// A change of desiredReplicas: one write, recorded; seen again, nothing.
	act.mu.Lock()
	_ = unstructured.SetNestedField(act.tidals["shop/t"].Object, int64(3), "status", "desiredReplicas")
	act.mu.Unlock()
	for range 3 {
		if _, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil {
			t.Fatal(err)
		}
	}
	wantWrites(t, act, "web=8", "web=12", "web=3")
	if want := []string{"shop/t=1/8/web/shop/Deployment/web", "shop/t=2/3/web/shop/Deployment/web"}; !slices.Equal(act.marks, want) {
		t.Fatalf("marks %q, want %q", act.marks, want)
	}
}

// TestTidalBindingChangeApplies: the same desiredReplicas bound to another policy (its labels
// changed) is a change: applied once to the new target.
func TestTidalBindingChangeApplies(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 5, "db": 1})
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(4))
	c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
	for range 2 {
		if _, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil {
			t.Fatal(err)
		}
	}
	act.mu.Lock()
	act.tidals["shop/t"].SetLabels(map[string]string{LabelScalerName: "db"})
	act.mu.Unlock()
	for range 2 {
		if _, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil {
			t.Fatal(err)
		}
	}
	wantWrites(t, act, "web=4", "db=4")
}

// TestTidalPendingWhileNotApplied: a change held (the target paused) or decided in shadow mode
// is not recorded, so it applies once the pause ends; a change whose record cannot be written
// is an error (retried) and, once recorded, applies nothing more.
func TestTidalPendingWhileNotApplied(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 5})
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(8))
	act.annotations["web"] = map[string]string{AnnotationPaused: "true"}
	c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
	if out, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil || out.Held == "" {
		t.Fatalf("paused: %+v %v, want held", out, err)
	}
	wantWrites(t, act)
	if len(act.marks) != 0 {
		t.Fatalf("marks %v while paused", act.marks)
	}
	act.mu.Lock()
	act.annotations["web"] = nil
	act.markErr = errors.New("tidals.tidal.io \"t\" is forbidden")
	act.mu.Unlock()
	_, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t"))
	if err == nil || errorCode(err) < http.StatusInternalServerError || !strings.Contains(err.Error(), "record debi.io/applied on tidal shop/t") {
		t.Fatalf("record failed: %v (code %d), want a retryable error", err, errorCode(err))
	}
	act.mu.Lock()
	act.markErr = nil
	act.mu.Unlock()
	for range 2 { // the retry records it (web already at 8: no write); then nothing
		if _, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil {
			t.Fatal(err)
		}
	}
	wantWrites(t, act, "web=8")
	if len(act.marks) != 1 {
		t.Fatalf("marks %v, want one", act.marks)
	}

	// Shadow: decided, nothing written, nothing recorded.
	act2 := newFakeActuator(map[string]int32{"batch": 3})
	act2.tidals["jobs/t"] = tidalObject("jobs", "t", map[string]string{LabelScalerName: "batch"}, nil, int64(6))
	c2 := newTestController(t, testConfig(t, testConfigYAML), act2, nil, nil)
	if out, err := c2.Tidal(context.Background(), watchEvent(t, act2, "jobs/t")); err != nil || out.After != 6 || out.Mode != config.ModeShadow {
		t.Fatalf("shadow: %+v %v", out, err)
	}
	wantWrites(t, act2)
	if len(act2.marks) != 0 {
		t.Fatalf("shadow recorded %v", act2.marks)
	}
}

// TestTidalPendingWhilePinned: a policy paused at a count (paused_replicas) decides that count
// whatever the Tidal asks. Paused at 6, a Tidal asking for 12 writes 6 and records nothing, so
// the Controller of the configuration without the pause (a reload) applies 12, once. Paused at
// the Tidal's own count, the pin applies it: recorded. Before the fix the pin's 6 recorded 12 as
// applied, and 12 was never written.
func TestTidalPendingWhilePinned(t *testing.T) {
	pinned := func(n string) *config.Config {
		return testConfig(t, strings.Replace(testConfigYAML, "  policies:\n", "  policies:\n    - {name: web, paused_replicas: "+n+"}\n", 1))
	}
	act := newFakeActuator(map[string]int32{"web": 4})
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(12))
	c := newTestController(t, pinned("6"), act, nil, nil)
	for range 2 { // the first writes the pin, the second (a resync) writes nothing
		if out, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil || out.After != 6 || out.Reason != ReasonPausedReplicas {
			t.Fatalf("paused at 6: %+v %v, want 6 (%s)", out, err, ReasonPausedReplicas)
		}
	}
	wantWrites(t, act, "web=6")
	if len(act.marks) != 0 {
		t.Fatalf("marks %v while paused at 6: the Tidal's 12 recorded as applied", act.marks)
	}

	c = newTestController(t, testConfig(t, testConfigYAML), act, nil, nil) // unpaused
	for range 2 {
		if _, err := c.Tidal(context.Background(), watchEvent(t, act, "shop/t")); err != nil {
			t.Fatal(err)
		}
	}
	wantWrites(t, act, "web=6", "web=12")
	if len(act.marks) != 1 {
		t.Fatalf("marks %v after the pause, want one", act.marks)
	}

	// Paused at the Tidal's count: the pin applies it, recorded.
	act2 := newFakeActuator(map[string]int32{"web": 4})
	act2.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(12))
	c2 := newTestController(t, pinned("12"), act2, nil, nil)
	if out, err := c2.Tidal(context.Background(), watchEvent(t, act2, "shop/t")); err != nil || out.After != 12 {
		t.Fatalf("paused at 12: %+v %v", out, err)
	}
	if len(act2.marks) != 1 {
		t.Fatalf("marks %v paused at the Tidal's count, want one", act2.marks)
	}
}
