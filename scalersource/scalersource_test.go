package scalersource

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

func scaler(ns, name string, maxReplicas int64, algConfig map[string]any) *unstructured.Unstructured {
	mt := map[string]any{
		"scalingAlgorithm": "APA",
		"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
			"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query", "query": "sum(qps)"}}},
	}
	if algConfig != nil {
		mt["algorithmConfig"] = algConfig
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
			"maxReplicas": maxReplicas,
			"trigger":     map[string]any{"type": "MetricsTrigger", "metricsTrigger": mt},
		},
	}}
}

type recorder struct {
	mu      sync.Mutex
	updates []Update
	ch      chan struct{}
}

func (r *recorder) deliver(u Update) {
	r.mu.Lock()
	r.updates = append(r.updates, u)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *recorder) next(t *testing.T, within time.Duration) Update {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(within):
		t.Fatal("no delivery")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updates[len(r.updates)-1]
}

func (r *recorder) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-r.ch:
		t.Fatalf("unexpected delivery %+v", r.updates[len(r.updates)-1])
	case <-time.After(within):
	}
}

// gatedDiscovery serves the ElasticScaler resource once served is set.
type gatedDiscovery struct {
	*discoveryfake.FakeDiscovery
	served atomic.Bool
}

func (d *gatedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if !d.served.Load() || gv != "elasticscaler.io/v1alpha1" {
		return nil, errors.New("not found")
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "elasticscalers", Namespaced: true, Kind: "ElasticScaler"}}}, nil
}

// TestRun: nothing while the resource is not served; the set after the first sync (empty); a
// created object, debounced; an invalid one as an error; a change that leaves the translation as
// it was is not delivered; a deletion is.
func TestRun(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{Resource: "ElasticScalerList"})
	disc := &gatedDiscovery{FakeDiscovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{ch: make(chan struct{}, 10)}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Dynamic: dyn, Discovery: disc, Debounce: 200 * time.Millisecond, Recheck: 100 * time.Millisecond}, r.deliver)
	}()
	r.none(t, 300*time.Millisecond)
	disc.served.Store(true)
	if u := r.next(t, 5*time.Second); len(u.Policies) != 0 || len(u.Errors) != 0 {
		t.Fatalf("first delivery %+v, want empty", u)
	}

	es := dyn.Resource(Resource).Namespace("ai")
	if _, err := es.Create(ctx, scaler("ai", "web", 10, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.Create(ctx, scaler("ai", "bad", 10, map[string]any{"upTolerance": "x"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	u := r.next(t, 5*time.Second)
	if time.Since(start) < 150*time.Millisecond {
		t.Errorf("delivered after %v, before the debounce", time.Since(start))
	}
	if len(u.Policies) != 1 || u.Policies[0].Policy.Name != "ai.web" || u.Policies[0].Policy.Scaling.MaxReplicas != 10 {
		t.Fatalf("policies %+v", u.Policies)
	}
	if len(u.Errors) != 1 || !strings.Contains(u.Errors[0].Error(), "elasticscaler ai/bad: spec.trigger.metricsTrigger.algorithmConfig.upTolerance") {
		t.Fatalf("errors %v", u.Errors)
	}
	r.none(t, 400*time.Millisecond) // both in one delivery

	// A status change: the same translation, no delivery.
	obj, _ := es.Get(ctx, "web", metav1.GetOptions{})
	_ = unstructured.SetNestedField(obj.Object, int64(3), "status", "currentReplicas")
	obj.SetResourceVersion("2")
	if _, err := es.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.none(t, 500*time.Millisecond)

	if err := es.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := r.next(t, 5*time.Second); len(u.Policies) != 0 || len(u.Errors) != 1 {
		t.Fatalf("after delete %+v", u)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestTranslateStateTrigger: a StateTrigger object is counted, not an error.
func TestTranslateStateTrigger(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": "s", "namespace": "ai"},
		"spec": map[string]any{
			"targetRef": map[string]any{"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal", "name": "t"},
			"trigger":   map[string]any{"type": "StateTrigger", "stateTrigger": map[string]any{}},
		},
	}}
	_, _, err := Translate(o)
	if err == nil || !strings.Contains(err.Error(), "StateTrigger") {
		t.Fatalf("err %v", err)
	}
}
