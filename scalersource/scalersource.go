// Package scalersource watches ElasticScaler objects (elasticscaler.io/v1alpha1) and delivers
// the policies they translate to (config.TranslateElasticScaler) to the exporter and the webhook,
// which run them beside the file's policies (global.elastic_scalers). It reads the objects only:
// status conditions and events are written elsewhere.
package scalersource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
)

// Resource is the watched resource.
var Resource = esv1.SchemeGroupVersion.WithResource("elasticscalers")

// Update is the current set of ElasticScalers, translated.
type Update struct {
	// Policies are the objects that translate, in no particular order; they are checked
	// against the file by config.(*Config).WithPolicies.
	Policies []config.ObjectPolicy
	// Errors are the objects that do not translate, one error each (config.ObjectError, joined
	// when several fields are at fault), sorted. StateTrigger objects are not errors: they are
	// counted in Skipped.
	Errors []error
	// Skipped counts the StateTrigger objects (not translated yet).
	Skipped int
}

// Options configure Run.
type Options struct {
	// Dynamic lists and watches the objects; Discovery tells whether the API server serves them.
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Namespaces to watch; empty watches every namespace.
	Namespaces []string
	// Debounce is how long changes are gathered before one delivery (default 1s).
	Debounce time.Duration
	// Recheck is how often discovery is asked again while the resource is not served
	// (default 1m).
	Recheck time.Duration
	// Logger receives the translation warnings (once per object version) and the watch's state.
	Logger *slog.Logger
}

// Run watches ElasticScalers until ctx ends and calls deliver with the current set after the
// informers' first sync and after every change (debounced), but not when a change leaves the
// translated set as it was (a status update, say). deliver runs on Run's goroutine. While the API
// server does not serve the resource (the CRD is not installed), Run waits and asks discovery
// again every Recheck; it delivers nothing then, so only the file's policies run.
func Run(ctx context.Context, o Options, deliver func(Update)) error {
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
	var factories []dynamicinformer.DynamicSharedInformerFactory
	var informers []cache.SharedIndexInformer
	for _, ns := range nss {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.Dynamic, 0, ns, nil)
		inf := f.ForResource(Resource).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { poke() }, UpdateFunc: func(_, _ any) { poke() }, DeleteFunc: func(any) { poke() },
		}); err != nil {
			return err
		}
		factories = append(factories, f)
		informers = append(informers, inf)
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	syncs := make([]cache.InformerSynced, len(informers))
	for i, inf := range informers {
		syncs[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return nil
	}
	log.Info("watching ElasticScalers", "namespaces", o.Namespaces)
	w := &translator{log: log, seen: map[string]string{}}
	var last *Update
	for {
		u := w.snapshot(informers)
		if last == nil || !sameUpdate(*last, u) {
			log.Info("ElasticScalers changed", "policies", len(u.Policies), "invalid", len(u.Errors), "state_trigger_skipped", u.Skipped)
			deliver(u)
			last = &u
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
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
func served(d discovery.DiscoveryInterface) bool {
	list, err := d.ServerResourcesForGroupVersion(esv1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == Resource.Resource {
			return true
		}
	}
	return false
}

// translator turns the informers' objects into an Update, logging each object's warnings once
// per resourceVersion.
type translator struct {
	log  *slog.Logger
	seen map[string]string // namespace/name → resourceVersion whose warnings were logged
}

func (w *translator) snapshot(informers []cache.SharedIndexInformer) Update {
	var u Update
	live := map[string]bool{}
	for _, inf := range informers {
		for _, obj := range inf.GetStore().List() {
			o, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			key := o.GetNamespace() + "/" + o.GetName()
			live[key] = true
			op, warns, err := Translate(o)
			if w.seen[key] != o.GetResourceVersion() {
				w.seen[key] = o.GetResourceVersion()
				for _, wn := range warns {
					w.log.Warn("ElasticScaler", "object", key, "warning", wn)
				}
			}
			switch {
			case errors.Is(err, config.ErrStateTrigger):
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

// Translate decodes an ElasticScaler from the watch and translates it.
func Translate(o *unstructured.Unstructured) (config.ObjectPolicy, []string, error) {
	var es esv1.ElasticScaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &es); err != nil {
		src := "elasticscaler " + o.GetNamespace() + "/" + o.GetName()
		return config.ObjectPolicy{Source: src}, nil, &config.ObjectError{Source: src, Err: fmt.Errorf("decode: %w", err)}
	}
	return config.TranslateElasticScaler(&es)
}

func sameUpdate(a, b Update) bool {
	if a.Skipped != b.Skipped || len(a.Errors) != len(b.Errors) || !reflect.DeepEqual(a.Policies, b.Policies) {
		return false
	}
	for i := range a.Errors {
		if a.Errors[i].Error() != b.Errors[i].Error() {
			return false
		}
	}
	return true
}

// RestConfig is rc, or the kubeconfig found as kubectl does (kubeconfig, else $KUBECONFIG,
// else ~/.kube/config, else in-cluster), with userAgent.
func RestConfig(rc *rest.Config, kubeconfig, userAgent string) (*rest.Config, error) {
	if rc == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		var err error
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes client configuration (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = userAgent
	return rc, nil
}

// Clients builds the dynamic and discovery clients of rc.
func Clients(rc *rest.Config) (dynamic.Interface, discovery.DiscoveryInterface, error) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return dyn, disc, nil
}
