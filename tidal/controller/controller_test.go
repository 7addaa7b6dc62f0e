package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
)

var shanghai = func() *time.Location {
	l, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return l
}()

// clock is a controllable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// guideTidal is the guide's Tidal: 16:50 → 3 replicas, 08:00 → 5, Asia/Shanghai.
func guideTidal(ns, name string) *tidalv1.Tidal {
	return &tidalv1.Tidal{
		TypeMeta:   metav1.TypeMeta{APIVersion: "tidal.io/v1alpha1", Kind: "Tidal"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: tidalv1.TidalSpec{
			TargetRef: tidalv1.TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Triggers: tidalv1.Triggers{Times: &tidalv1.TimeTriggers{Rules: []tidalv1.TimeRule{
				{Name: "time1", Cron: "CRON_TZ=Asia/Shanghai 0 50 16 * * *", Replicas: 3},
				{Name: "time2", Cron: "CRON_TZ=Asia/Shanghai 0 0 8 * * *", Replicas: 5},
			}}},
		},
	}
}

func toUnstructured(t *testing.T, obj *tidalv1.Tidal) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func fakeClient(t *testing.T, objs ...*tidalv1.Tidal) *dynamicfake.FakeDynamicClient {
	t.Helper()
	var ro []runtime.Object
	for _, o := range objs {
		ro = append(ro, toUnstructured(t, o))
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{TidalResource: "TidalList"}, ro...)
}

func get(t *testing.T, c *dynamicfake.FakeDynamicClient, ns, name string) *tidalv1.Tidal {
	t.Helper()
	u, err := c.Resource(TidalResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	td, err := toTidal(u)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

func statusWrites(c *dynamicfake.FakeDynamicClient) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestEvaluateGuideExample(t *testing.T) {
	td := guideTidal("ai-inference", "tidal-frequent-test")
	for _, c := range []struct {
		now       time.Time
		rule      string
		replicas  int32
		activated time.Time
		next      time.Time
	}{
		// Started after 16:50: the 16:50 rule is in force without waiting for the next 16:50.
		{time.Date(2026, 12, 1, 17, 0, 0, 0, shanghai), "time1", 3, time.Date(2026, 12, 1, 16, 50, 0, 0, shanghai), time.Date(2026, 12, 2, 8, 0, 0, 0, shanghai)},
		// Started after 08:00 the next morning: time2.
		{time.Date(2026, 12, 2, 9, 0, 0, 0, shanghai), "time2", 5, time.Date(2026, 12, 2, 8, 0, 0, 0, shanghai), time.Date(2026, 12, 2, 16, 50, 0, 0, shanghai)},
		// Before 08:00: still the previous evening's 16:50.
		{time.Date(2026, 12, 2, 7, 59, 59, 999e6, shanghai), "time1", 3, time.Date(2026, 12, 1, 16, 50, 0, 0, shanghai), time.Date(2026, 12, 2, 8, 0, 0, 0, shanghai)},
		// At the second itself: the new rule.
		{time.Date(2026, 12, 2, 8, 0, 0, 0, shanghai), "time2", 5, time.Date(2026, 12, 2, 8, 0, 0, 0, shanghai), time.Date(2026, 12, 2, 16, 50, 0, 0, shanghai)},
	} {
		res := Evaluate(td, c.now)
		st := res.Status
		if res.Outcome != "ok" || st.DesiredReplicas == nil || *st.DesiredReplicas != c.replicas || st.ActiveRule != c.rule {
			t.Errorf("%s: outcome %s, desired %v, rule %q; want %s/%d", c.now, res.Outcome, st.DesiredReplicas, st.ActiveRule, c.rule, c.replicas)
			continue
		}
		if !st.LastScheduleTime.Time.Equal(c.activated) || !res.Next.Equal(c.next) {
			t.Errorf("%s: lastScheduleTime %s next %s; want %s, %s", c.now, st.LastScheduleTime, res.Next, c.activated, c.next)
		}
		cond := meta.FindStatusCondition(st.Conditions, ConditionReady)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonRuleActive || cond.ObservedGeneration != 1 {
			t.Errorf("%s: condition %+v", c.now, cond)
		}
		if st.ObservedGeneration != 1 {
			t.Errorf("observedGeneration %d", st.ObservedGeneration)
		}
	}
}

func TestEvaluateInvalidRulesKeepsDesired(t *testing.T) {
	td := guideTidal("ns", "bad")
	td.Generation = 4
	four := int32(4)
	td.Status = tidalv1.TidalStatus{DesiredReplicas: &four, ActiveRule: "time2", Replicas: &four}
	td.Spec.Triggers.Times.Rules[1].Cron = "0 0 25 * * *" // hour 25
	td.Spec.Triggers.Times.Rules = append(td.Spec.Triggers.Times.Rules, tidalv1.TimeRule{Name: "tz", Cron: "CRON_TZ=Mars/Olympus 0 0 8 * * *", Replicas: 1})
	res := Evaluate(td, time.Date(2026, 12, 1, 17, 0, 0, 0, shanghai))
	st := res.Status
	if res.Outcome != "invalid" || !res.Next.IsZero() {
		t.Fatalf("outcome %s next %s", res.Outcome, res.Next)
	}
	if *st.DesiredReplicas != 4 || st.ActiveRule != "time2" || *st.Replicas != 4 || st.ObservedGeneration != 4 {
		t.Errorf("status changed beyond the condition: %+v", st)
	}
	cond := meta.FindStatusCondition(st.Conditions, ConditionReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonInvalidRules ||
		!strings.Contains(cond.Message, "rules[1].cron") || !strings.Contains(cond.Message, "rules[2].cron") {
		t.Errorf("condition %+v", cond)
	}
	// No rules at all.
	td.Spec.Triggers.Times = nil
	if res := Evaluate(td, time.Now()); res.Outcome != "invalid" || !strings.Contains(meta.FindStatusCondition(res.Status.Conditions, ConditionReady).Message, "at least one rule") {
		t.Errorf("no rules: %+v", res)
	}
}

func TestEvaluateNoRuleFired(t *testing.T) {
	td := guideTidal("ns", "leap")
	td.Spec.Triggers.Times.Rules = []tidalv1.TimeRule{{Name: "leap", Cron: "0 0 0 29 2 *", Replicas: 9}}
	res := Evaluate(td, time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC)) // 29 Feb 2028 is 458 days back
	if res.Outcome != "no_rule" || res.Status.DesiredReplicas != nil || !res.Next.Equal(time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v", res)
	}
	if c := meta.FindStatusCondition(res.Status.Conditions, ConditionReady); c.Reason != ReasonNoRuleFired || c.Status != metav1.ConditionFalse {
		t.Errorf("%+v", c)
	}
}

func newTestController(t *testing.T, c *dynamicfake.FakeDynamicClient, clk *clock) (*controller, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := Options{Client: c, Now: clk.Now, Logger: quiet(), Metrics: NewMetrics(reg)}
	if err := opts.defaults(); err != nil {
		t.Fatal(err)
	}
	return newController(opts), reg
}

// The status logic through the fake API: first write, then nothing until something changes (a
// second later, or a day later within the same rule), a write at the next activation, the
// condition's transition time kept while its status stays.
func TestReconcileWritesOnlyOnChange(t *testing.T) {
	td := guideTidal("ai-inference", "tidal-frequent-test")
	c := fakeClient(t, td)
	clk := &clock{t: time.Date(2026, 12, 1, 16, 50, 0, 0, shanghai).Add(10 * time.Minute)}
	ctl, reg := newTestController(t, c, clk)
	reconcile := func() Result {
		t.Helper()
		u, err := c.Resource(TidalResource).Namespace("ai-inference").Get(context.Background(), "tidal-frequent-test", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ctl.reconcile(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	reconcile()
	if n := statusWrites(c); n != 1 {
		t.Fatalf("%d status writes after the first evaluation, want 1", n)
	}
	got := get(t, c, "ai-inference", "tidal-frequent-test")
	if *got.Status.DesiredReplicas != 3 || got.Status.ActiveRule != "time1" || got.Status.ObservedGeneration != 1 {
		t.Fatalf("status %+v", got.Status)
	}
	firstTransition := meta.FindStatusCondition(got.Status.Conditions, ConditionReady).LastTransitionTime
	clk.Add(time.Second)
	reconcile()
	clk.Add(time.Hour)
	reconcile()
	if n := statusWrites(c); n != 1 {
		t.Fatalf("%d status writes without a change, want 1", n)
	}
	// 08:00 the next morning: time2.
	clk.Set(time.Date(2026, 12, 2, 8, 0, 0, 300e6, shanghai))
	res := reconcile()
	if n := statusWrites(c); n != 2 {
		t.Fatalf("%d status writes after 08:00, want 2", n)
	}
	got = get(t, c, "ai-inference", "tidal-frequent-test")
	if *got.Status.DesiredReplicas != 5 || got.Status.ActiveRule != "time2" ||
		!got.Status.LastScheduleTime.Time.Equal(time.Date(2026, 12, 2, 8, 0, 0, 0, shanghai)) {
		t.Fatalf("status %+v", got.Status)
	}
	if !res.Next.Equal(time.Date(2026, 12, 2, 16, 50, 0, 0, shanghai)) {
		t.Errorf("next %s", res.Next)
	}
	if tt := meta.FindStatusCondition(got.Status.Conditions, ConditionReady).LastTransitionTime; !tt.Equal(&firstTransition) {
		t.Errorf("Ready stayed True but its transition time moved: %s → %s", firstTransition, tt)
	}
	if v := testutil.ToFloat64(ctl.m.writes.WithLabelValues("success")); v != 2 {
		t.Errorf("writes{success} = %v", v)
	}
	if v := testutil.ToFloat64(ctl.m.evaluations.WithLabelValues("ok")); v != 4 {
		t.Errorf("evaluations{ok} = %v", v)
	}
	_ = reg

	// Bad rules: a write for the condition, desiredReplicas unchanged; then nothing more.
	bad := get(t, c, "ai-inference", "tidal-frequent-test")
	bad.Spec.Triggers.Times.Rules[0].Cron = "every day"
	bad.Generation = 2
	if _, err := c.Resource(TidalResource).Namespace("ai-inference").Update(context.Background(), toUnstructured(t, bad), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := reconcile(); res.Outcome != "invalid" {
		t.Fatalf("outcome %s", res.Outcome)
	}
	reconcile()
	got = get(t, c, "ai-inference", "tidal-frequent-test")
	cond := meta.FindStatusCondition(got.Status.Conditions, ConditionReady)
	if n := statusWrites(c); n != 3 || *got.Status.DesiredReplicas != 5 || cond.Reason != ReasonInvalidRules || got.Status.ObservedGeneration != 2 {
		t.Fatalf("writes %d, status %+v", n, got.Status)
	}
	t.Logf("InvalidRules message: %s", cond.Message)
}

// A conflict on the status write is retried with a fresh read.
func TestReconcileRetriesConflict(t *testing.T) {
	td := guideTidal("ns", "t")
	c := fakeClient(t, td)
	conflicts := 0
	c.PrependReactor("update", "tidals", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts < 2 {
			conflicts++
			return true, nil, newConflict()
		}
		return false, nil, nil
	})
	clk := &clock{t: time.Date(2026, 12, 1, 17, 0, 0, 0, shanghai)}
	ctl, _ := newTestController(t, c, clk)
	u, _ := c.Resource(TidalResource).Namespace("ns").Get(context.Background(), "t", metav1.GetOptions{})
	if _, err := ctl.reconcile(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "ns", "t"); got.Status.DesiredReplicas == nil || *got.Status.DesiredReplicas != 3 {
		t.Fatalf("status %+v", got.Status)
	}
	if v := testutil.ToFloat64(ctl.m.writes.WithLabelValues("conflict")); v != 2 {
		t.Errorf("writes{conflict} = %v", v)
	}
}

// Run against the fake: the status right away, the next rule's write at its second (the work
// queue's timer), a spec change at once, a deletion removing the series.
func TestRunTimersAndSpecChanges(t *testing.T) {
	// Rules evaluated on a clock that runs like the real one from a chosen instant: 08:00:01.5
	// CST is 1.5 s ahead.
	base := time.Date(2026, 12, 2, 7, 59, 59, 500e6, shanghai)
	start := time.Now()
	now := func() time.Time { return base.Add(time.Since(start)) }
	td := guideTidal("ai-inference", "tidal-frequent-test")
	td.Spec.Triggers.Times.Rules = append(td.Spec.Triggers.Times.Rules,
		tidalv1.TimeRule{Name: "soon", Cron: "CRON_TZ=Asia/Shanghai 1 0 8 * * *", Replicas: 7})
	c := fakeClient(t, td)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Client: c, Now: now, Logger: quiet(), Metrics: m}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	desired := func() int32 {
		got := get(t, c, "ai-inference", "tidal-frequent-test")
		if got.Status.DesiredReplicas == nil {
			return -1
		}
		return *got.Status.DesiredReplicas
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) time.Time {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) {
			if cond() {
				return now()
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
		return time.Time{}
	}
	waitFor("time1 at start", 3*time.Second, func() bool { return desired() == 3 })
	if v := testutil.ToFloat64(m.leader); v != 1 {
		t.Errorf("leader = %v", v)
	}
	at := waitFor("time2 at 08:00:00", 3*time.Second, func() bool { return desired() == 5 })
	t.Logf("08:00:00 written at %s", at.Format("15:04:05.000"))
	at = waitFor("soon at 08:00:01", 3*time.Second, func() bool { return desired() == 7 })
	fire := time.Date(2026, 12, 2, 8, 0, 1, 0, shanghai)
	if late := at.Sub(fire); late < 0 || late > time.Second {
		t.Errorf("08:00:01 rule written %s after its second", late)
	} else {
		t.Logf("08:00:01 rule seen %s after its second", late)
	}
	if v := testutil.ToFloat64(m.nextActivation.WithLabelValues("ai-inference", "tidal-frequent-test")); v != float64(time.Date(2026, 12, 2, 16, 50, 0, 0, shanghai).Unix()) {
		t.Errorf("next activation %v", v)
	}

	// A spec change is evaluated at once (the replicas of the active rule change).
	cur := get(t, c, "ai-inference", "tidal-frequent-test")
	cur.Spec.Triggers.Times.Rules[2].Replicas = 8
	cur.Generation = 2
	if _, err := c.Resource(TidalResource).Namespace("ai-inference").Update(context.Background(), toUnstructured(t, cur), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the spec change", time.Second, func() bool { return desired() == 8 })

	// Deletion: the series goes.
	if err := c.Resource(TidalResource).Namespace("ai-inference").Delete(context.Background(), "tidal-frequent-test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the series removed", 2*time.Second, func() bool { return testutil.CollectAndCount(m.nextActivation) == 0 })
}

// With leader election on (a fake clientset's Lease), Run evaluates once it holds the Lease, and
// a second Run with another identity does not write while the first leads.
func TestRunLeaderElected(t *testing.T) {
	td := guideTidal("ns", "t")
	c := fakeClient(t, td)
	kube := kubefake.NewClientset()
	clk := &clock{t: time.Date(2026, 12, 1, 17, 0, 0, 0, shanghai)}
	run := func(id string, m *Metrics) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{Client: c, Now: clk.Now, Logger: quiet(), Metrics: m, LeaderElection: LeaderElection{
				Enabled: true, Namespace: "debi-system", Identity: id, Client: kube.CoordinationV1(),
				LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
			}})
		}()
		return cancel, done
	}
	m1, m2 := NewMetrics(nil), NewMetrics(nil)
	cancel1, done1 := run("one", m1)
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m1.leader) != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel2, done2 := run("two", m2)
	defer func() { cancel2(); <-done2 }()
	for time.Now().Before(deadline) {
		if got := get(t, c, "ns", "t"); got.Status.DesiredReplicas != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := get(t, c, "ns", "t"); got.Status.DesiredReplicas == nil || *got.Status.DesiredReplicas != 3 {
		t.Fatalf("status %+v", got.Status)
	}
	lease, err := kube.CoordinationV1().Leases("debi-system").Get(context.Background(), DefaultLeaseName, metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != "one" {
		t.Fatalf("lease %+v %v", lease, err)
	}
	time.Sleep(500 * time.Millisecond)
	if testutil.ToFloat64(m2.leader) != 0 {
		t.Error("two leaders")
	}
	// The leader stops and releases the Lease; the other takes over.
	cancel1()
	if err := <-done1; err != nil {
		t.Error(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m2.leader) != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if testutil.ToFloat64(m2.leader) != 1 {
		t.Fatal("the follower did not take the Lease")
	}
}

func newConflict() error {
	return apierrors.NewConflict(TidalResource.GroupResource(), "t", errors.New("the object has been modified"))
}
