package elasticscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	"sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/config"
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
func TestRunSource(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{Resource: "ElasticScalerList"})
	disc := &gatedDiscovery{FakeDiscovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{ch: make(chan struct{}, 10)}
	done := make(chan error, 1)
	go func() {
		done <- RunSource(ctx, SourceOptions{Dynamic: dyn, Discovery: disc, Debounce: 200 * time.Millisecond, Recheck: 100 * time.Millisecond}, r.deliver)
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

// servingDiscovery serves the ElasticScaler resource, and the Tidal resource once tidals is set.
type servingDiscovery struct {
	*discoveryfake.FakeDiscovery
	tidals atomic.Bool
}

func (d *servingDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	switch {
	case gv == "elasticscaler.io/v1alpha1":
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "elasticscalers", Namespaced: true, Kind: "ElasticScaler"}}}, nil
	case gv == "tidal.io/v1alpha1" && d.tidals.Load():
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "tidals", Namespaced: true, Kind: "Tidal"}}}, nil
	}
	return nil, errors.New("not found")
}

func fixture(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "apis", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestRunStateTriggers: the guide's StateTrigger object and Tidal (apis/testdata). Without the
// Tidal resource served, the object is an error ("tidal … not found"); once it is, the policy of
// the object on the Tidal's Deployment; a change of the Tidal's spec.targetRef translates it
// again, a status write does not; the Tidal's deletion makes it an error again. Without
// Options.StateTriggers (the exporter) the object is only counted.
func TestRunStateTriggers(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		Resource: "ElasticScalerList", TidalResource: "TidalList"})
	disc := &servingDiscovery{FakeDiscovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := dyn.Resource(Resource).Namespace("ai-inference").Create(ctx, fixture(t, "guide-state-trigger.yaml"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := &recorder{ch: make(chan struct{}, 10)}
	exp := &recorder{ch: make(chan struct{}, 10)}
	done := make(chan error, 2)
	go func() {
		done <- RunSource(ctx, SourceOptions{Dynamic: dyn, Discovery: disc, StateTriggers: true, Debounce: 100 * time.Millisecond, Recheck: 100 * time.Millisecond}, r.deliver)
	}()
	go func() { // as the exporter runs it
		done <- RunSource(ctx, SourceOptions{Dynamic: dyn, Discovery: disc, Debounce: 100 * time.Millisecond, Recheck: 100 * time.Millisecond}, exp.deliver)
	}()
	const notFound = "elasticscaler ai-inference/state-scaling-example: spec.targetRef.name: tidal ai-inference/tidal-frequent-test not found"
	if u := r.next(t, 5*time.Second); len(u.Policies) != 0 || len(u.Errors) != 1 || u.Errors[0].Error() != notFound {
		t.Fatalf("without the Tidal resource %+v", u)
	}
	if u := exp.next(t, 5*time.Second); len(u.Policies) != 0 || len(u.Errors) != 0 || u.Skipped != 1 {
		t.Fatalf("exporter %+v", u)
	}

	disc.tidals.Store(true)
	r.none(t, 400*time.Millisecond) // served, no Tidal yet: the same error
	tidals := dyn.Resource(TidalResource).Namespace("ai-inference")
	td := fixture(t, "guide-tidal.yaml")
	td.SetGeneration(1)
	if _, err := tidals.Create(ctx, td, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := r.next(t, 5*time.Second)
	if len(u.Errors) != 0 || len(u.Policies) != 1 {
		t.Fatalf("with the Tidal %+v", u)
	}
	op := u.Policies[0]
	if p := op.Policy; p.Name != "ai-inference.state-scaling-example" || !op.StateTrigger || op.Mode != config.ModeAct ||
		p.Target != (config.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ai-inference", Name: "elastic-scaler-state-test"}) {
		t.Fatalf("policy %+v", op)
	}

	// A status write (every activation): no delivery.
	got, _ := tidals.Get(ctx, "tidal-frequent-test", metav1.GetOptions{})
	_ = unstructured.SetNestedField(got.Object, int64(3), "status", "desiredReplicas")
	if got, err := tidals.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	} else {
		td = got
	}
	r.none(t, 400*time.Millisecond)

	// Its target changes: translated again.
	_ = unstructured.SetNestedField(td.Object, "other", "spec", "targetRef", "name")
	td.SetGeneration(2)
	if _, err := tidals.Update(ctx, td, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := r.next(t, 5*time.Second); len(u.Policies) != 1 || u.Policies[0].Policy.Target.Name != "other" {
		t.Fatalf("after the targetRef change %+v", u)
	}

	if err := tidals.Delete(ctx, "tidal-frequent-test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := r.next(t, 5*time.Second); len(u.Policies) != 0 || len(u.Errors) != 1 || u.Errors[0].Error() != notFound {
		t.Fatalf("after the Tidal's deletion %+v", u)
	}
	exp.none(t, 100*time.Millisecond) // the exporter saw none of it
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWithPolicies: the objects' policies join the file's only while the file enables
// global.elastic_scalers; one the file rejects (its name taken by a file policy) is logged, the
// file's policy wins.
func TestWithPolicies(t *testing.T) {
	web, _, err := Translate(scaler("ai", "web", 10, nil))
	if err != nil {
		t.Fatal(err)
	}
	clash, _, err := Translate(scaler("ai", "clash", 10, nil))
	if err != nil {
		t.Fatal(err)
	}
	clash.Policy.Name = "file"
	filePolicy := "policies:\n  - {name: file, target: {namespace: ai, name: file}, algorithm: hpa, request: 1}\n"
	load := func(s string) *config.Config {
		t.Helper()
		cfg, err := config.Load([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	off := load(filePolicy)
	if got := WithPolicies(off, []config.ObjectPolicy{web}, logger); got != off {
		t.Errorf("global.elastic_scalers off: %d policies, want the file alone", len(got.Policies))
	}
	on := load("global: {elastic_scalers: {enabled: true}}\n" + filePolicy)
	got := WithPolicies(on, []config.ObjectPolicy{web, clash}, logger)
	var names []string
	for _, p := range got.Policies {
		names = append(names, p.Name)
	}
	if fmt.Sprint(names) != "[file ai.web]" || len(on.Policies) != 1 {
		t.Errorf("policies %v (file's now %d), want [file ai.web] and the file untouched", names, len(on.Policies))
	}
	if !strings.Contains(logs.String(), "ElasticScaler rejected; its policy does not run") || !strings.Contains(logs.String(), "ai/clash") {
		t.Errorf("the rejected object is not logged:\n%s", logs.String())
	}
}
