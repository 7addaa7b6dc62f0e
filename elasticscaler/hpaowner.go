// The HPA owner: the HPA algorithm path of ElasticScaler objects (elasticscaler.io/v1alpha1):
// for every object whose spec.trigger.metricsTrigger.scalingAlgorithm is HPA it creates, keeps in
// line and owns a Kubernetes HorizontalPodAutoscaler (autoscaling/v2) of the same name in the
// object's namespace, and the HPA controller of the cluster does the scaling — as the Elastic
// Scaler guide describes ("使用HPA算法"). When the object switches to another algorithm or is
// deleted, the HPA it owns is deleted: the guide asks its users to clean up by hand, debi does it.
//
// The HPA is written by server-side apply with the field manager "debi", only when it differs
// from the object's wish, carries the labels app.kubernetes.io/managed-by: debi and
// elasticscaler.io/name: <object>, and has the object as its controller owner
// (blockOwnerDeletion), so Kubernetes' garbage collector removes it with the object too. An HPA
// of that name that the object does not own is never touched: it is reported (log, Problems).
//
// debi itself does not act on an HPA-algorithm object's target: TranslateElasticScaler
// runs its policy in shadow mode (a live comparison of debi's HPA model with the real HPA).

package elasticscaler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/internal/kube"
)

const (
	// FieldManager is the server-side apply field manager of the HPAs.
	FieldManager = "debi"
	// LabelManagedBy and ManagedBy mark the HPAs debi owns; LabelName names their object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "debi"
	LabelName      = "elasticscaler.io/name"
	// Kind is the owner's kind.
	Kind = "ElasticScaler"
)

// selector selects the HPAs this package writes.
var selector = LabelManagedBy + "=" + ManagedBy + "," + LabelName

// OwnerOptions configure an Owner.
type OwnerOptions struct {
	// Dynamic lists and watches the ElasticScalers.
	Dynamic dynamic.Interface
	// Informers is the process's informer cache, shared with the other readers of
	// ElasticScalers (nil: Run builds one of its own from Dynamic and Namespaces). Its scope
	// must cover Namespaces.
	Informers *kube.Informers
	// Kube writes the HPAs, watches them (those labelled as debi's only) and asks discovery
	// whether ElasticScalers are served.
	Kube kubernetes.Interface
	// Namespaces to watch; empty watches every namespace (a ClusterRole then).
	Namespaces []string
	// Logger receives what is done and every problem.
	Logger *slog.Logger
	// Recheck is how often discovery is asked again while ElasticScalers are not served
	// (default 1m).
	Recheck time.Duration
	// MaxRetry is the longest wait before an object whose reconciliation failed (an API error,
	// a foreign HPA of its name) is tried again (default 2m; the first retry is after 1s).
	MaxRetry time.Duration
}

// Owner reconciles the HPAs of HPA-algorithm ElasticScalers.
type Owner struct {
	o   OwnerOptions
	log *slog.Logger

	mu       sync.Mutex
	problems map[string]string // namespace/name → why the object's HPA is not as it wants

	esStores  []cache.Store
	hpaStores []cache.Store
	queue     workqueue.TypedRateLimitingInterface[string]
}

// NewOwner returns an Owner; Run starts it.
func NewOwner(o OwnerOptions) *Owner {
	if o.Recheck <= 0 {
		o.Recheck = time.Minute
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 2 * time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Owner{o: o, log: log, problems: map[string]string{}}
}

// RunOwner is NewOwner(o).Run(ctx).
func RunOwner(ctx context.Context, o OwnerOptions) error { return NewOwner(o).Run(ctx) }

// Problems returns, by "namespace/name" of ElasticScaler, why its HPA is not what the object
// asks for (an HPA of that name not owned by it, an invalid object, an API error): for a status
// writer. An object is absent once its HPA is as it should be (or, not HPA, gone).
func (w *Owner) Problems() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.problems)
}

// setProblem records (msg "" clears) the problem of key, and reports whether it changed.
func (w *Owner) setProblem(key, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.problems[key] == msg {
		return false
	}
	if msg == "" {
		delete(w.problems, key)
	} else {
		w.problems[key] = msg
	}
	return true
}

// Run watches ElasticScalers and debi's HPAs until ctx ends. While the API server does not serve
// ElasticScalers (the CRD is not installed) it waits, asking discovery again every Recheck.
// It returns nil when ctx ends, an error when the watches cannot be set up. Run may be called
// again after it returned (under leader election, each time the Lease is won), not concurrently.
func (w *Owner) Run(ctx context.Context) error {
	for logged := false; !served(w.o.Kube.Discovery()); logged = true {
		if !logged {
			w.log.Info("HPA owner waiting: the API server does not serve ElasticScalers (CRD not installed?); looking again periodically",
				"resource", Resource.String(), "recheck", w.o.Recheck)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.o.Recheck):
		}
	}
	nss := w.o.Namespaces
	if len(nss) == 0 {
		nss = []string{metav1.NamespaceAll}
	}
	w.esStores, w.hpaStores = nil, nil // Run again (leadership regained): new informers
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, w.o.MaxRetry),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "debi-hpaowner"})
	defer w.queue.ShutDown()

	// The handlers hold this Run's queue: a handler removed from the shared informers may
	// still deliver an event after Run returned (the removal is asynchronous), into a queue
	// shut down, never into the next Run's.
	q := w.queue
	enqueueES := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil && kube.InNamespaces(w.o.Namespaces, keyNamespace(key)) {
			q.Add(key)
		}
	}
	enqueueHPA := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok && h.Labels[LabelName] != "" {
			q.Add(h.Namespace + "/" + h.Labels[LabelName])
		}
	}
	inf := w.o.Informers
	if inf == nil { // a cache of its own
		inf = kube.NewInformers(w.o.Dynamic, nss...)
		inf.Start(ctx)
		defer inf.Shutdown()
	}
	esWatch, err := inf.Watch(Resource, cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueES, UpdateFunc: func(_, n any) { enqueueES(n) }, DeleteFunc: enqueueES,
	}, nss...)
	if err != nil {
		return err
	}
	defer esWatch.Stop()
	w.esStores = esWatch.Stores()
	syncs := []cache.InformerSynced{esWatch.HasSynced}
	var starts []func(<-chan struct{})
	var stops []func()
	for _, ns := range nss {
		// debi's HPAs: this package is their only reader, so the informers are its own.
		kf := informers.NewSharedInformerFactoryWithOptions(w.o.Kube, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }))
		hi := kf.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
		if _, err := hi.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueHPA, UpdateFunc: func(_, n any) { enqueueHPA(n) }, DeleteFunc: enqueueHPA,
		}); err != nil {
			return err
		}
		w.hpaStores = append(w.hpaStores, hi.GetStore())
		syncs = append(syncs, hi.HasSynced)
		starts = append(starts, kf.Start)
		stops = append(stops, kf.Shutdown)
	}
	for _, s := range starts {
		s(ctx.Done())
	}
	defer func() {
		w.queue.ShutDown()
		for _, s := range stops {
			s()
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return nil
	}
	w.log.Info("owning the HPAs of HPA-algorithm ElasticScalers", "namespaces", w.o.Namespaces)
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for w.next(ctx) {
	}
	return nil
}

// keyNamespace is the namespace of a namespace/name key.
func keyNamespace(key string) string {
	n, _, _ := cache.SplitMetaNamespaceKey(key)
	return n
}

// next reconciles one queued object; false when the queue is shut down.
func (w *Owner) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if err := w.reconcile(ctx, key); err != nil {
		if ctx.Err() != nil {
			return true
		}
		// Logged when it changes; a retry that fails the same way is only a debug line.
		if w.setProblem(key, err.Error()) {
			w.log.Error("ElasticScaler's HPA not reconciled; retrying", "object", key, "err", err)
		} else {
			w.log.Debug("ElasticScaler's HPA still not reconciled; retrying", "object", key, "err", err)
		}
		w.queue.AddRateLimited(key)
		return true
	}
	w.setProblem(key, "")
	w.queue.Forget(key)
	return true
}

// ErrForeignHPA is returned (wrapped) when an HPA of the object's name exists that the object
// does not own: debi leaves it alone.
var ErrForeignHPA = errors.New("an HPA of this name exists that this ElasticScaler does not own; debi leaves it alone (delete or rename it, or rename the ElasticScaler)")

// reconcile brings the HPA of the object key (namespace/name) in line with the object.
func (w *Owner) reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || !kube.InNamespaces(w.o.Namespaces, ns) {
		return nil // not ours (a shared cache may hold more namespaces than Namespaces)
	}
	es, err := w.object(key)
	if err != nil {
		return err
	}
	hpa, err := w.hpa(ctx, ns, name)
	if err != nil {
		return err
	}
	if es == nil || es.DeletionTimestamp != nil {
		// Deleted: the garbage collector removes the HPA (its owner reference); delete it here
		// as well, so that it goes at once and where no garbage collector runs. The owner is
		// gone, so any HPA of debi's whose controller is an ElasticScaler of this name is its.
		if hpa == nil || !ownedByName(hpa, name) || (es != nil && !ownedBy(hpa, es)) {
			return nil
		}
		return w.delete(ctx, hpa, "ElasticScaler deleted")
	}
	mt := es.Spec.Trigger.MetricsTrigger
	if es.Spec.Trigger.Type != esv1.MetricsTriggerType || mt == nil || !mt.IsHPA() {
		// Not (or no longer) the HPA algorithm: the HPA this object owns goes.
		if hpa == nil || !ownedBy(hpa, es) {
			return nil
		}
		return w.delete(ctx, hpa, "scalingAlgorithm is no longer HPA")
	}
	want, err := Desired(es)
	if err != nil {
		return err
	}
	if hpa != nil {
		switch {
		case ownedBy(hpa, es):
			if Matches(hpa, want) {
				return nil
			}
		case ownedByName(hpa, name):
			// Debi's HPA of an earlier object of this name (deleted, and its HPA not collected
			// yet): a second controller reference cannot be added, so it is replaced.
			if err := w.delete(ctx, hpa, "owned by an earlier ElasticScaler of this name"); err != nil {
				return err
			}
		default:
			owner := "none"
			if ref := metav1.GetControllerOf(hpa); ref != nil {
				owner = ref.Kind + " " + ref.Name
			}
			return fmt.Errorf("elasticscaler %s: HorizontalPodAutoscaler %s/%s (controller: %s): %w", key, ns, name, owner, ErrForeignHPA)
		}
	}
	return w.apply(ctx, want, hpa == nil)
}

// object is the ElasticScaler key from the informers' cache; nil when there is none.
func (w *Owner) object(key string) (*esv1.ElasticScaler, error) {
	u := cached(w.esStores, key)
	if u == nil {
		return nil, nil
	}
	es, err := decode[esv1.ElasticScaler](u)
	if err != nil {
		return nil, fmt.Errorf("elasticscaler %s: decode: %w", key, err)
	}
	return es, nil
}

// hpa is the HPA ns/name: from the cache of debi's HPAs, else from the API server (an HPA
// without debi's labels is not in the cache, and must not be overwritten); nil when none exists.
func (w *Owner) hpa(ctx context.Context, ns, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	for _, s := range w.hpaStores {
		if obj, ok, err := s.GetByKey(ns + "/" + name); err == nil && ok {
			if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
				return h, nil
			}
		}
	}
	h, err := w.o.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get HorizontalPodAutoscaler %s/%s: %w", ns, name, err)
	}
	return h, nil
}

func (w *Owner) delete(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler, why string) error {
	uid := h.UID
	err := w.o.Kube.AutoscalingV2().HorizontalPodAutoscalers(h.Namespace).Delete(ctx, h.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) { // gone, or another object now
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete HorizontalPodAutoscaler %s/%s: %w", h.Namespace, h.Name, err)
	}
	w.log.Info("HPA deleted", "hpa", h.Namespace+"/"+h.Name, "reason", why)
	return nil
}

// apply writes want by server-side apply (field manager debi, forced: the fields are debi's).
func (w *Owner) apply(ctx context.Context, want *autoscalingv2.HorizontalPodAutoscaler, create bool) error {
	body := map[string]any{
		"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
		"metadata": map[string]any{
			"name": want.Name, "namespace": want.Namespace, "labels": want.Labels, "ownerReferences": want.OwnerReferences,
		},
		"spec": want.Spec,
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = w.o.Kube.AutoscalingV2().HorizontalPodAutoscalers(want.Namespace).Patch(ctx, want.Name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)})
	if err != nil {
		return fmt.Errorf("apply HorizontalPodAutoscaler %s/%s: %w", want.Namespace, want.Name, err)
	}
	verb := "HPA updated"
	if create {
		verb = "HPA created"
	}
	w.log.Info(verb, "hpa", want.Namespace+"/"+want.Name, "target", want.Spec.ScaleTargetRef.Kind+"/"+want.Spec.ScaleTargetRef.Name,
		"min", *want.Spec.MinReplicas, "max", want.Spec.MaxReplicas, "metrics", len(want.Spec.Metrics))
	return nil
}

// Desired is the HPA an HPA-algorithm ElasticScaler asks for: its name and namespace, debi's
// labels, the object as controller owner, scaleTargetRef = spec.targetRef, the bounds and the
// metrics in HPA's shapes. The object must pass its admission checks.
func Desired(es *esv1.ElasticScaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	src := "elasticscaler " + es.Namespace + "/" + es.Name
	if errs := es.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: invalid, its HPA is left as it is: %w", src, errs.ToAggregate())
	}
	mt := es.Spec.Trigger.MetricsTrigger
	if mt == nil || !mt.IsHPA() {
		return nil, fmt.Errorf("%s: scalingAlgorithm is not HPA", src)
	}
	minR := esv1.DefaultMinReplicas
	if es.Spec.MinReplicas != nil {
		minR = *es.Spec.MinReplicas
	}
	if es.Spec.MaxReplicas == nil {
		return nil, fmt.Errorf("%s: spec.maxReplicas: required", src)
	}
	ref := es.Spec.TargetRef
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{
			Name: es.Name, Namespace: es.Namespace,
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelName: es.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: esv1.SchemeGroupVersion.String(), Kind: Kind, Name: es.Name, UID: es.UID,
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
			MinReplicas:    new(minR),
			MaxReplicas:    *es.Spec.MaxReplicas,
		},
	}
	for i, m := range mt.Metrics {
		hm, err := Metric(m)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.trigger.metricsTrigger.metrics[%d]: %w", src, i, err)
		}
		h.Spec.Metrics = append(h.Spec.Metrics, hm)
	}
	return h, nil
}

// Metric converts a metric of the object to HPA's: Resource → Resource, External → External,
// Custom → Pods (no describedObject) or Object; the target as it is. ExternalServer has no HPA
// equivalent (admission rejects it with HPA).
func Metric(m esv1.MetricSpec) (autoscalingv2.MetricSpec, error) {
	switch m.Type {
	case esv1.ResourceMetricSourceType:
		if m.Resource == nil {
			break
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceName(m.Resource.MetricsName), Target: target(m.Resource.Target)}}, nil
	case esv1.ExternalMetricSourceType:
		if m.External == nil {
			break
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: identifier(m.External.Metric), Target: target(m.External.Target)}}, nil
	case esv1.CustomMetricSourceType:
		c := m.Custom
		if c == nil {
			break
		}
		if c.DescribedObject == nil {
			return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: identifier(c.Metric), Target: target(c.Target)}}, nil
		}
		d := c.DescribedObject
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: d.Kind, Name: d.Name, APIVersion: d.APIVersion},
			Metric:          identifier(c.Metric), Target: target(c.Target)}}, nil
	case esv1.ExternalServerMetricSourceType:
		return autoscalingv2.MetricSpec{}, errors.New("type ExternalServer has no Kubernetes HPA equivalent (not supported with scalingAlgorithm HPA)")
	}
	return autoscalingv2.MetricSpec{}, fmt.Errorf("type %q without its sub-structure", m.Type)
}

func target(t esv1.MetricTarget) autoscalingv2.MetricTarget {
	out := autoscalingv2.MetricTarget{Type: autoscalingv2.MetricTargetType(t.Type)}
	if t.Value != nil {
		out.Value = new(t.Value.DeepCopy())
	}
	if t.AverageValue != nil {
		out.AverageValue = new(t.AverageValue.DeepCopy())
	}
	if t.AverageUtilization != nil {
		out.AverageUtilization = new(*t.AverageUtilization)
	}
	return out
}

func identifier(m esv1.MetricIdentifier) autoscalingv2.MetricIdentifier {
	out := autoscalingv2.MetricIdentifier{Name: m.Name}
	if m.Selector != nil {
		out.Selector = m.Selector.DeepCopy()
	}
	return out
}

// Matches reports whether have already is want in every field debi writes (labels, controller
// reference, scaleTargetRef, bounds, metrics); fields other managers own (behavior) are not
// compared. Quantities compare by value.
func Matches(have, want *autoscalingv2.HorizontalPodAutoscaler) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	ref, wref := metav1.GetControllerOf(have), want.OwnerReferences[0]
	if ref == nil || !equality.Semantic.DeepEqual(*ref, wref) {
		return false
	}
	hs, ws := have.Spec, want.Spec
	return equality.Semantic.DeepEqual(hs.ScaleTargetRef, ws.ScaleTargetRef) &&
		equality.Semantic.DeepEqual(hs.MinReplicas, ws.MinReplicas) && hs.MaxReplicas == ws.MaxReplicas &&
		equality.Semantic.DeepEqual(hs.Metrics, ws.Metrics)
}

// ownedByName: h's controller is an ElasticScaler named name (of any UID), and h has debi's label.
func ownedByName(h *autoscalingv2.HorizontalPodAutoscaler, name string) bool {
	ref := metav1.GetControllerOf(h)
	if ref == nil || ref.Kind != Kind || ref.Name != name || h.Labels[LabelManagedBy] != ManagedBy {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == esv1.GroupName
}

// ownedBy: h's controller is es itself (its UID).
func ownedBy(h *autoscalingv2.HorizontalPodAutoscaler, es *esv1.ElasticScaler) bool {
	ref := metav1.GetControllerOf(h)
	return ownedByName(h, es.Name) && ref.UID == es.UID
}
