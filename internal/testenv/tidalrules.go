package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
)

// Tidals with cron rules, as the Tidal controller's tests and the end-to-end tests of cmd/debi
// write them, and a watch for the moment an object changes.

// CronAt is a daily six-field UTC cron for t's second.
func CronAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d %d * * *", t.Second(), t.Minute(), t.Hour())
}

// RuleTidal creates the Tidal ns/name (labels, targetRef the Deployment web) with two daily rules: "earlier", which fired ten minutes ago with
// 2 replicas, and "soon" at fire with 7.
func RuleTidal(t testing.TB, dyn dynamic.Interface, ns, name string, fire time.Time, labels map[string]string) {
	t.Helper()
	td := &tidalv1.Tidal{
		TypeMeta:   metav1.TypeMeta{APIVersion: "tidal.io/v1alpha1", Kind: "Tidal"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: tidalv1.TidalSpec{
			TargetRef: tidalv1.TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Namespace: ns},
			Triggers: tidalv1.Triggers{Times: &tidalv1.TimeTriggers{Rules: []tidalv1.TimeRule{
				{Name: "earlier", Cron: CronAt(fire.Add(-10 * time.Minute)), Replicas: 2},
				{Name: "soon", Cron: CronAt(fire), Replicas: 7, Description: "a few seconds ahead"},
			}}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(td)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(TidalResource).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("Tidal %s/%s: earlier %q → 2, soon %q → 7 (fires at %s)", ns, name, CronAt(fire.Add(-10*time.Minute)), CronAt(fire), fire.UTC().Format("15:04:05"))
}

// WatchUntil watches ri's object name and returns the time the first event satisfying cond
// arrived; it fails after timeout.
func WatchUntil(t testing.TB, ri dynamic.ResourceInterface, name string, timeout time.Duration, what string, cond func(*unstructured.Unstructured) bool) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond(u) {
		return time.Now()
	}
	w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: u.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		at := time.Now()
		if ev.Type != watch.Modified && ev.Type != watch.Added {
			continue
		}
		if obj, ok := ev.Object.(*unstructured.Unstructured); ok && cond(obj) {
			return at
		}
	}
	t.Fatalf("timed out waiting for %s", what)
	return time.Time{}
}

// FireIn is the start of the UTC second at least d ahead.
func FireIn(d time.Duration) time.Time { return time.Now().Add(d + time.Second).Truncate(time.Second) }
