package kube

import (
	"context"
	"errors"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Informers is the one informer cache of a process: one dynamic informer factory per watched
// namespace (or one for every namespace), so that each resource is listed and watched once
// however many consumers read it. A consumer registers its handler with Watch and removes it
// with (*Watch).Stop; the informers themselves run until Shutdown (or the context given to
// Start ends), so a consumer that stops and starts again (a reload, a Lease regained) replays
// the cache instead of listing again.
//
// The namespaces given to NewInformers are the holder's scope: a resource asked for in a
// namespace the scope covers (metav1.NamespaceAll covers every one) is served by the scope's
// informers; one asked for in another namespace gets a factory of its own for that namespace,
// created on first use and kept. An informer of the scope may hold objects of namespaces the
// consumer did not ask for: consumers filter. Informers have no resync of their own (a
// consumer that wants one replays the store itself) and no label selector (consumers filter
// in their handlers).
type Informers struct {
	dyn   dynamic.Interface
	scope []string // sorted; [""] is every namespace

	mu        sync.Mutex
	factories map[string]dynamicinformer.DynamicSharedInformerFactory // by namespace
	stop      <-chan struct{}                                         // nil until Start
	cancel    context.CancelFunc
	shutdown  bool
}

// NewInformers returns the holder of dyn's informers for namespaces (metav1.NamespaceAll for
// every namespace; none: only the namespaces consumers ask for). Start starts it.
func NewInformers(dyn dynamic.Interface, namespaces ...string) *Informers {
	i := &Informers{dyn: dyn, factories: map[string]dynamicinformer.DynamicSharedInformerFactory{}}
	if slices.Contains(namespaces, metav1.NamespaceAll) {
		i.scope = []string{metav1.NamespaceAll}
	} else {
		i.scope = slices.Compact(slices.Sorted(slices.Values(namespaces)))
	}
	return i
}

// Scope are the namespaces of NewInformers: [""] for every namespace.
func (i *Informers) Scope() []string { return slices.Clone(i.scope) }

// Start runs the informers created so far, and every one created later, until ctx ends or
// Shutdown. It may be called once.
func (i *Informers) Start(ctx context.Context) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stop != nil || i.shutdown {
		return
	}
	ctx, i.cancel = context.WithCancel(ctx)
	i.stop = ctx.Done()
	for _, f := range i.factories {
		f.Start(i.stop)
	}
}

// Shutdown stops the informers and waits for them; Watch fails after it.
func (i *Informers) Shutdown() {
	i.mu.Lock()
	i.shutdown = true
	cancel := i.cancel
	fs := make([]dynamicinformer.DynamicSharedInformerFactory, 0, len(i.factories))
	for _, f := range i.factories {
		fs = append(fs, f)
	}
	i.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, f := range fs {
		f.Shutdown()
	}
}

// covering is the namespace of the factory that serves ns.
func (i *Informers) covering(ns string) string {
	if len(i.scope) == 1 && i.scope[0] == metav1.NamespaceAll {
		return metav1.NamespaceAll
	}
	return ns
}

// For returns the shared informers of gvr that together hold namespaces (none: the scope),
// one per factory, created (and started, when the holder is) on first use.
func (i *Informers) For(gvr schema.GroupVersionResource, namespaces ...string) []cache.SharedIndexInformer {
	if len(namespaces) == 0 {
		namespaces = i.scope
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var seen []string
	var out []cache.SharedIndexInformer
	for _, ns := range namespaces {
		fns := i.covering(ns)
		if slices.Contains(seen, fns) {
			continue
		}
		seen = append(seen, fns)
		f, ok := i.factories[fns]
		if !ok {
			f = dynamicinformer.NewFilteredDynamicSharedInformerFactory(i.dyn, 0, fns, nil)
			i.factories[fns] = f
		}
		out = append(out, f.ForResource(gvr).Informer())
		if i.stop != nil {
			f.Start(i.stop) // starts only what is not running yet
		}
	}
	return out
}

// Watch is one consumer's handler on the shared informers of a resource.
type Watch struct {
	// Informers are the informers the handler is on; their stores are the consumer's cache
	// (shared: read-only, and possibly holding namespaces it did not ask for).
	Informers []cache.SharedIndexInformer
	regs      []cache.ResourceEventHandlerRegistration
}

// ErrShutdown is returned by Watch after Shutdown.
var ErrShutdown = errors.New("kube: informers shut down")

// Watch adds h to the informers For(gvr, namespaces...) returns. h first receives an Add for
// every object already cached (as from a new informer's initial list), then the changes.
func (i *Informers) Watch(gvr schema.GroupVersionResource, h cache.ResourceEventHandler, namespaces ...string) (*Watch, error) {
	i.mu.Lock()
	down := i.shutdown
	i.mu.Unlock()
	if down {
		return nil, ErrShutdown
	}
	w := &Watch{Informers: i.For(gvr, namespaces...)}
	for _, inf := range w.Informers {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			w.Stop()
			return nil, err
		}
		w.regs = append(w.regs, reg)
	}
	return w, nil
}

// HasSynced reports whether every informer has listed and h has received what it listed.
func (w *Watch) HasSynced() bool {
	for _, r := range w.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync waits for HasSynced; false when ctx ends first.
func (w *Watch) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.HasSynced)
}

// Stores are the informers' stores.
func (w *Watch) Stores() []cache.Store {
	out := make([]cache.Store, len(w.Informers))
	for k, inf := range w.Informers {
		out[k] = inf.GetStore()
	}
	return out
}

// GetByKey finds namespace/name in the stores.
func (w *Watch) GetByKey(key string) (any, bool) {
	for _, inf := range w.Informers {
		if obj, ok, err := inf.GetStore().GetByKey(key); err == nil && ok {
			return obj, true
		}
	}
	return nil, false
}

// Stop removes the handler; the informers keep running for the other consumers.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	for k, r := range w.regs {
		_ = w.Informers[k].RemoveEventHandler(r)
	}
	w.regs = nil
}

// InNamespaces reports whether ns is one of namespaces (metav1.NamespaceAll, or none, is all):
// the filter of a consumer reading a shared store that may hold more.
func InNamespaces(namespaces []string, ns string) bool {
	return len(namespaces) == 0 || slices.Contains(namespaces, metav1.NamespaceAll) || slices.Contains(namespaces, ns)
}
