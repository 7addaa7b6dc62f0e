package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

var (
	esGVR    = schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}
	tidalGVR = schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}
)

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name}}}
}

// counting is a fake dynamic client that counts list and watch calls by resource and namespace.
func counting(objs ...runtime.Object) (*dynamicfake.FakeDynamicClient, func() map[string]int) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		esGVR: "ElasticScalerList", tidalGVR: "TidalList"}, objs...)
	var mu sync.Mutex
	n := map[string]int{}
	count := func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		n[fmt.Sprintf("%s %s %q", a.GetResource().Resource, a.GetVerb(), a.GetNamespace())]++
		mu.Unlock()
		return false, nil, nil
	}
	dyn.PrependReactor("list", "*", count)
	dyn.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		_, _, _ = count(a)
		return false, nil, nil
	})
	return dyn, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range n {
			out[k] = v
		}
		return out
	}
}

type adds struct {
	mu sync.Mutex
	n  int
}

func (a *adds) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: func(any) { a.mu.Lock(); a.n++; a.mu.Unlock() }}
}

func (a *adds) get() int { a.mu.Lock(); defer a.mu.Unlock(); return a.n }

// TestInformersOneWatch: three consumers of one resource, one of which stops and starts again,
// and a consumer of another, make one list and one watch per resource; each consumer receives
// the cached objects as Adds; a namespace outside the scope gets a namespaced informer.
func TestInformersOneWatch(t *testing.T) {
	dyn, calls := counting(obj("elasticscaler.io/v1alpha1", "ElasticScaler", "shop", "a"),
		obj("elasticscaler.io/v1alpha1", "ElasticScaler", "shop", "b"), obj("tidal.io/v1alpha1", "Tidal", "shop", "t"),
		obj("tidal.io/v1alpha1", "Tidal", "other", "u"))
	inf := NewInformers(dyn, "shop")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx)
	defer inf.Shutdown()

	var a1, a2, a3, tw adds
	w1, err := inf.Watch(esGVR, a1.handler())
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := inf.Watch(esGVR, a2.handler(), "shop")
	if !w1.WaitForSync(ctx) || !w2.WaitForSync(ctx) {
		t.Fatal("not synced")
	}
	w2.Stop()
	w3, _ := inf.Watch(esGVR, a3.handler(), "shop") // a consumer started again: the cache, no list
	tws, _ := inf.Watch(tidalGVR, tw.handler(), "shop", "other")
	if !w3.WaitForSync(ctx) || !tws.WaitForSync(ctx) {
		t.Fatal("not synced")
	}
	if a1.get() != 2 || a2.get() != 2 || a3.get() != 2 || tw.get() != 2 {
		t.Errorf("adds %d %d %d %d, want 2 each", a1.get(), a2.get(), a3.get(), tw.get())
	}
	if _, ok := w3.GetByKey("shop/a"); !ok {
		t.Error("shop/a not in the cache")
	}
	if _, ok := tws.GetByKey("other/u"); !ok || len(tws.Informers) != 2 {
		t.Errorf("other/u: %v, %d informers; want found, 2 (shop and other)", ok, len(tws.Informers))
	}
	time.Sleep(100 * time.Millisecond)
	want := map[string]int{
		`elasticscalers list "shop"`: 1, `elasticscalers watch "shop"`: 1,
		`tidals list "shop"`: 1, `tidals watch "shop"`: 1, `tidals list "other"`: 1, `tidals watch "other"`: 1,
	}
	got := calls()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// TestInformersAllNamespaces: a scope of every namespace serves any namespace asked for with
// its one informer.
func TestInformersAllNamespaces(t *testing.T) {
	dyn, calls := counting(obj("tidal.io/v1alpha1", "Tidal", "a", "t"), obj("tidal.io/v1alpha1", "Tidal", "b", "u"))
	inf := NewInformers(dyn, metav1.NamespaceAll, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx)
	defer inf.Shutdown()
	w, _ := inf.Watch(tidalGVR, cache.ResourceEventHandlerFuncs{}, "a")
	w2, _ := inf.Watch(tidalGVR, cache.ResourceEventHandlerFuncs{}, "b", "a")
	if !w.WaitForSync(ctx) || !w2.WaitForSync(ctx) || len(w.Informers) != 1 || len(w2.Informers) != 1 {
		t.Fatal("not synced, or not one informer")
	}
	if got := calls(); got[`tidals list ""`] != 1 || got[`tidals watch ""`] != 1 || len(got) != 2 {
		t.Errorf("calls %v, want one list and one watch of every namespace", got)
	}
	if !InNamespaces([]string{"a"}, "a") || InNamespaces([]string{"a"}, "b") || !InNamespaces(nil, "b") || !InNamespaces([]string{""}, "b") {
		t.Error("InNamespaces")
	}
	inf.Shutdown()
	if _, err := inf.Watch(tidalGVR, cache.ResourceEventHandlerFuncs{}); err != ErrShutdown {
		t.Errorf("Watch after Shutdown: %v", err)
	}
}
