package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
)

// ReplicaHistory records every spec.replicas a watch sees on the Deployments of a namespace,
// from a list made when it starts. A RetryWatcher resumes it after a broken connection; after
// an API server restart the new watch cache answers 410 Gone to the old resourceVersion, so a
// test that restarts the server calls Resume (a new list and watch) once the server is back.
type ReplicaHistory struct {
	kube kubernetes.Interface
	ns   string

	mu     sync.Mutex
	seen   map[string][]int32 // each value differing from the one before it
	lastRV map[string]string
	err    error
	stopFn func()
}

type deploymentWatcher struct {
	kube kubernetes.Interface
	ns   string
}

func (w deploymentWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return w.kube.AppsV1().Deployments(w.ns).Watch(ctx, o)
}

// WatchReplicas records the replica history of the Deployments of ns until the test ends.
func WatchReplicas(t testing.TB, kube kubernetes.Interface, ns string) *ReplicaHistory {
	t.Helper()
	h := &ReplicaHistory{kube: kube, ns: ns, seen: map[string][]int32{}, lastRV: map[string]string{}}
	h.start(t)
	t.Cleanup(func() { h.Stop() })
	return h
}

func (h *ReplicaHistory) observe(d *appsv1.Deployment) {
	if s := h.seen[d.Name]; len(s) == 0 || s[len(s)-1] != *d.Spec.Replicas {
		h.seen[d.Name] = append(s, *d.Spec.Replicas)
	}
	h.lastRV[d.Name] = d.ResourceVersion
}

func (h *ReplicaHistory) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := h.kube.AppsV1().Deployments(h.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.mu.Lock()
	for i := range list.Items {
		h.observe(&list.Items[i])
	}
	h.mu.Unlock()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, deploymentWatcher{h.kube, h.ns})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			h.mu.Lock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				h.observe(ev.Object.(*appsv1.Deployment))
			case watch.Error:
				h.err = fmt.Errorf("watch: %v", ev.Object)
			}
			h.mu.Unlock()
		}
		h.mu.Lock()
		if ctx.Err() == nil && h.err == nil {
			h.err = errors.New("the watch stopped")
		}
		h.mu.Unlock()
	}()
	h.stopFn = func() { rw.Stop(); cancel(); <-done }
}

// Resume replaces the watch by a new list and watch. The history stays complete as long as no
// write could land between the last event seen and the new list (the API server was down).
func (h *ReplicaHistory) Resume(t testing.TB) {
	t.Helper()
	h.Stop()
	h.mu.Lock()
	h.err = nil
	h.mu.Unlock()
	h.start(t)
}

// History is what the watch has seen of name so far.
func (h *ReplicaHistory) History(name string) []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[name])
}

// Sync waits until the watch has seen the Deployment's current resourceVersion and returns
// its history.
func (h *ReplicaHistory) Sync(t testing.TB, name string) []int32 {
	t.Helper()
	d, err := h.kube.AppsV1().Deployments(h.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Poll(t, 20*time.Second, "the watch to see "+name+" at resourceVersion "+d.ResourceVersion, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.lastRV[name] == d.ResourceVersion
	})
	h.mu.Lock()
	err = h.err
	h.mu.Unlock()
	if err != nil {
		t.Error(err)
	}
	return h.History(name)
}

// WantHistory fails the test unless the Deployment web's replica history is want.
func WantHistory(t testing.TB, h *ReplicaHistory, want ...int32) {
	t.Helper()
	if got := h.Sync(t, "web"); !slices.Equal(got, want) {
		t.Fatalf("web's replica history %v, want %v", got, want)
	}
}

// Stop ends the watch (Resume starts it again); the test's cleanup stops it too.
func (h *ReplicaHistory) Stop() { h.stopFn() }
