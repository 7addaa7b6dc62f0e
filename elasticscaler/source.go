// The object source: the ElasticScalers watched and translated, delivered to the exporter and
// the webhook, which run their policies beside the file's (global.elastic_scalers; WithPolicies
// merges the two for both). With SourceSourceOptions.StateTriggers (the webhook's) it also watches
// Tidals (tidal.io/v1alpha1) and delivers the policies of StateTrigger objects
// (TranslateStateTrigger), translated again when a Tidal's spec or labels change. It reads the
// objects only: the status writer (status.go) writes their conditions and Events.

package elasticscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/kube"
)

// Resource is the watched resource.
var Resource = esv1.SchemeGroupVersion.WithResource("elasticscalers")

// TidalResource is the resource StateTrigger objects name, watched with SourceOptions.StateTriggers.
var TidalResource = tidalv1.SchemeGroupVersion.WithResource("tidals")

// Update is the current set of ElasticScalers, translated.
type Update struct {
	// Policies are the objects that translate, in no particular order; they are checked
	// against the file by config.(*Config).WithPolicies.
	Policies []config.ObjectPolicy
	// Errors are the objects that do not translate, one error each (config.ObjectError, joined
	// when several fields are at fault), sorted. Without SourceOptions.StateTriggers, StateTrigger
	// objects are not errors: they are counted in Skipped.
	Errors []error
	// Skipped counts the StateTrigger objects not translated: SourceOptions.StateTriggers is off.
	Skipped int
	// Pending counts the StateTrigger objects waiting for the Tidal cache's first sync (neither
	// policies nor errors yet).
	Pending int
}

// SourceOptions configure RunSource.
type SourceOptions struct {
	// Dynamic lists and watches the objects; Discovery tells whether the API server serves them.
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Namespaces to watch; empty watches every namespace.
	Namespaces []string
	// StateTriggers translates StateTrigger objects (watching tidals.tidal.io in Namespaces, once
	// the API server serves them): their policies (config.ObjectPolicy.StateTrigger) are in
	// Update.Policies. Only the webhook, whose Tidal watch drives them, sets it: the exporter must
	// not run them (no metric drives them). Off, they are counted in Update.Skipped.
	StateTriggers bool
	// Debounce is how long changes are gathered before one delivery (default 1s).
	Debounce time.Duration
	// Recheck is how often discovery is asked again while the resource is not served
	// (default 1m).
	Recheck time.Duration
	// Informers is the process's informer cache, shared with the other consumers of the
	// resources (nil: RunSource builds one of its own from Dynamic and Namespaces). Its scope must
	// cover Namespaces.
	Informers *kube.Informers
	// Logger receives the translation warnings (once per object version) and the watch's state.
	Logger *slog.Logger
}

// RunSource watches ElasticScalers until ctx ends and calls deliver with the current set after the
// informers' first sync and after every change (debounced), but not when a change leaves the
// translated set as it was (a status update, say). deliver runs on RunSource's goroutine. While the API
// server does not serve the resource (the CRD is not installed), RunSource waits and asks discovery
// again every Recheck; it delivers nothing then, so only the file's policies run.
func RunSource(ctx context.Context, o SourceOptions, deliver func(Update)) error {
	if o.Debounce <= 0 {
		o.Debounce = time.Second
	}
	if o.Recheck <= 0 {
		o.Recheck = time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for logged := false; !served(o.Discovery); logged = true {
		if !logged {
			log.Info("ElasticScaler watch waiting: the API server does not serve the resource (CRD not installed?); looking again periodically",
				"resource", Resource.String(), "recheck", o.Recheck)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Recheck):
		}
	}
	nss := o.Namespaces
	if len(nss) == 0 {
		nss = []string{metav1.NamespaceAll}
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	inf := o.Informers
	if inf == nil { // a cache of its own
		inf = kube.NewInformers(o.Dynamic, nss...)
		inf.Start(ctx)
		defer inf.Shutdown()
	}
	esWatch, err := inf.Watch(Resource, cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() }, UpdateFunc: func(_, _ any) { poke() }, DeleteFunc: func(any) { poke() },
	}, nss...)
	if err != nil {
		return err
	}
	defer esWatch.Stop()
	if !esWatch.WaitForSync(ctx) {
		return nil
	}
	informers := esWatch.Informers
	log.Info("watching ElasticScalers", "namespaces", o.Namespaces, "state_triggers", o.StateTriggers)
	w := &translator{log: log, seen: map[string]string{}, stateTriggers: o.StateTriggers, namespaces: nss}
	var recheck <-chan time.Time
	if o.StateTriggers {
		tw := &tidalWatch{o: o, inf: inf, nss: nss, poke: poke, log: log}
		defer tw.shutdown()
		if !tw.start(ctx) {
			t := time.NewTicker(o.Recheck)
			defer t.Stop()
			recheck = t.C
		}
		tw.wait(ctx, tidalSyncWait)
		w.tidals = tw
	}
	var last *Update
	for {
		u := w.snapshot(informers)
		if last == nil || !sameUpdate(*last, u) {
			log.Info("ElasticScalers changed", "policies", len(u.Policies), "invalid", len(u.Errors),
				"state_trigger_skipped", u.Skipped, "state_trigger_pending", u.Pending)
			deliver(u)
			last = &u
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-recheck:
			if !w.tidals.start(ctx) {
				continue
			}
			recheck = nil
			w.tidals.wait(ctx, tidalSyncWait)
			continue
		}
		// Gather what follows the first change.
		t := time.NewTimer(o.Debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		select { // a change during the debounce is in the snapshot
		case <-changed:
		default:
		}
	}
}

// served reports whether discovery lists the resource.
func served(d discovery.DiscoveryInterface) bool { return servedResource(d, Resource) }

func servedResource(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	ok, _ := kube.Served(d, gvr)
	return ok
}

// tidalWatch is the Tidal cache of the StateTrigger objects: informers in the watched
// namespaces, started once the API server serves the resource. A change of a Tidal's spec
// (metadata.generation) or labels, its creation or deletion, pokes the translation; a status
// write (every rule activation) does not.
type tidalWatch struct {
	o         SourceOptions
	inf       *kube.Informers
	nss       []string
	poke      func()
	log       *slog.Logger
	watch     *kube.Watch
	informers []cache.SharedIndexInformer
	synced    atomic.Bool
	syncedCh  chan struct{} // closed on the first sync
	logged    bool
}

// tidalSyncWait bounds how long a delivery waits for the Tidal cache's first sync (then the
// StateTrigger objects are pending, and delivered once it ends).
var tidalSyncWait = 10 * time.Second

// wait waits for the Tidal cache's first sync, at most d; at once when it is not started.
func (t *tidalWatch) wait(ctx context.Context, d time.Duration) {
	if t.syncedCh == nil {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-t.syncedCh:
	case <-tm.C:
	case <-ctx.Done():
	}
}

// start starts the informers when the API server serves tidals; false when it does not.
func (t *tidalWatch) start(ctx context.Context) bool {
	if t == nil {
		return false
	}
	if !servedResource(t.o.Discovery, TidalResource) {
		if !t.logged {
			t.logged = true
			t.log.Info("Tidal watch waiting: the API server does not serve the resource (CRD not installed?); StateTrigger objects do not translate; looking again periodically",
				"resource", TidalResource.String(), "recheck", t.o.Recheck)
		}
		return false
	}
	w, err := t.inf.Watch(TidalResource, cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.poke() },
		UpdateFunc: func(a, b any) {
			ao, aok := a.(*unstructured.Unstructured)
			bo, bok := b.(*unstructured.Unstructured)
			if !aok || !bok || ao.GetGeneration() != bo.GetGeneration() || !reflect.DeepEqual(ao.GetLabels(), bo.GetLabels()) {
				t.poke()
			}
		},
		DeleteFunc: func(any) { t.poke() },
	}, t.nss...)
	if err != nil {
		t.log.Error("cannot watch Tidals", "err", err)
		return true // as before: the translation goes on without them (every Tidal missing)
	}
	t.watch, t.informers = w, w.Informers
	t.syncedCh = make(chan struct{})
	// The first sync holds a delivery for tidalSyncWait at most (a Tidal watch the RBAC refuses
	// would hold it for ever): the StateTrigger objects are pending until it ends.
	go func() {
		warn := time.AfterFunc(30*time.Second, func() {
			t.log.Warn("Tidal cache not synced after 30s (can the webhook list and watch tidals.tidal.io?); StateTrigger objects wait",
				"namespaces", t.o.Namespaces)
		})
		defer warn.Stop()
		if w.WaitForSync(ctx) {
			t.synced.Store(true)
			close(t.syncedCh)
			t.log.Info("watching Tidals for StateTrigger objects", "namespaces", t.o.Namespaces)
			t.poke()
		}
	}()
	return true
}

func (t *tidalWatch) shutdown() { t.watch.Stop() }

// ready reports whether the Tidal cache answers: synced, or the resource is not served (then
// every Tidal is missing).
func (t *tidalWatch) ready() bool { return len(t.informers) == 0 || t.synced.Load() }

// lookup finds a Tidal in the cache.
func (t *tidalWatch) lookup(ns, name string) (*tidalv1.Tidal, bool) {
	if !kube.InNamespaces(t.nss, ns) {
		return nil, false
	}
	stores := make([]cache.Store, len(t.informers))
	for i, inf := range t.informers {
		stores[i] = inf.GetStore()
	}
	if u := cached(stores, ns+"/"+name); u != nil {
		td, err := decode[tidalv1.Tidal](u)
		if err != nil {
			t.log.Warn("Tidal does not decode", "tidal", ns+"/"+name, "err", err)
			return nil, false
		}
		return td, true
	}
	return nil, false
}

// translator turns the informers' objects into an Update, logging each object's warnings once
// per resourceVersion.
type translator struct {
	log  *slog.Logger
	seen map[string]string // namespace/name → resourceVersion whose warnings were logged
	// namespaces are the watched ones (the shared stores may hold more).
	namespaces []string
	// stateTriggers translates StateTrigger objects with the Tidals of tidals.
	stateTriggers bool
	tidals        *tidalWatch
}

func (w *translator) snapshot(informers []cache.SharedIndexInformer) Update {
	var u Update
	live := map[string]bool{}
	for _, inf := range informers {
		for _, obj := range inf.GetStore().List() {
			o, ok := obj.(*unstructured.Unstructured)
			if !ok || !kube.InNamespaces(w.namespaces, o.GetNamespace()) {
				continue
			}
			key := o.GetNamespace() + "/" + o.GetName()
			live[key] = true
			var lookup TidalLookup
			if w.stateTriggers && isStateTrigger(o) {
				if !w.tidals.ready() {
					u.Pending++
					continue
				}
				lookup = w.tidals.lookup
			}
			op, warns, err := TranslateWith(o, lookup)
			if w.seen[key] != o.GetResourceVersion() {
				w.seen[key] = o.GetResourceVersion()
				for _, wn := range warns {
					w.log.Warn("ElasticScaler", "object", key, "warning", wn)
				}
			}
			switch {
			case errors.Is(err, ErrStateTrigger):
				u.Skipped++
			case err != nil:
				u.Errors = append(u.Errors, err)
			default:
				u.Policies = append(u.Policies, op)
			}
		}
	}
	for k := range w.seen {
		if !live[k] {
			delete(w.seen, k)
		}
	}
	sort.Slice(u.Policies, func(i, j int) bool { return u.Policies[i].Source < u.Policies[j].Source })
	sort.Slice(u.Errors, func(i, j int) bool { return u.Errors[i].Error() < u.Errors[j].Error() })
	return u
}

// Translate decodes an ElasticScaler from the watch and translates it; a StateTrigger object
// returns an error wrapping ErrStateTrigger.
func Translate(o *unstructured.Unstructured) (config.ObjectPolicy, []string, error) {
	return TranslateWith(o, nil)
}

// TranslateWith is Translate with a Tidal lookup: a StateTrigger object is translated with its
// Tidal (TranslateStateTrigger) when lookup is set.
func TranslateWith(o *unstructured.Unstructured, lookup TidalLookup) (config.ObjectPolicy, []string, error) {
	es, err := decode[esv1.ElasticScaler](o)
	if err != nil {
		src := "elasticscaler " + o.GetNamespace() + "/" + o.GetName()
		return config.ObjectPolicy{Source: src}, nil, &config.ObjectError{Source: src, Err: fmt.Errorf("decode: %w", err)}
	}
	if lookup != nil {
		return TranslateObject(es, lookup)
	}
	return TranslateElasticScaler(es)
}

func isStateTrigger(o *unstructured.Unstructured) bool {
	t, _, _ := unstructured.NestedString(o.Object, "spec", "trigger", "type")
	return t == string(esv1.StateTriggerType)
}

func sameUpdate(a, b Update) bool {
	if a.Skipped != b.Skipped || a.Pending != b.Pending || len(a.Errors) != len(b.Errors) || !reflect.DeepEqual(a.Policies, b.Policies) {
		return false
	}
	for i := range a.Errors {
		if a.Errors[i].Error() != b.Errors[i].Error() {
			return false
		}
	}
	return true
}

// WithPolicies is the configuration in force of a process that runs the objects' policies beside
// the file's (the exporter and the webhook): file with the objects' valid policies
// (config.(*Config).WithPolicies) while file enables global.elastic_scalers, else file alone.
// Each object it rejects is logged (LogRejected).
func WithPolicies(file *config.Config, objects []config.ObjectPolicy, logger *slog.Logger) *config.Config {
	if !file.Global.ElasticScalers.Enabled {
		return file
	}
	cfg, errs := file.WithPolicies(objects)
	LogRejected(logger, errs)
	return cfg
}

// LogRejected logs each error as an object whose policy does not run: an Update's Errors, or
// the objects the file rejects.
func LogRejected(logger *slog.Logger, errs []error) {
	for _, err := range errs {
		logger.Error("ElasticScaler rejected; its policy does not run", "err", err)
	}
}
