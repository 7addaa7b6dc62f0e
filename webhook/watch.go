package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/debi-scaler/debi/config"
	kubepkg "github.com/debi-scaler/debi/internal/kube"
)

// TidalFromUnstructured turns a watched object into a status event: metadata, spec.targetRef,
// status.desiredReplicas (or status.replicas), and what says whether the status may be acted on:
// metadata.generation, status.observedGeneration, the Ready condition and the debi.io/applied
// annotation (see Controller.Tidal).
func TidalFromUnstructured(u *unstructured.Unstructured) *TidalEvent {
	e := &TidalEvent{Namespace: u.GetNamespace(), Name: u.GetName(), Labels: u.GetLabels(), fromCluster: true,
		generation: u.GetGeneration(), applied: u.GetAnnotations()[AnnotationTidalApplied]}
	if g, ok, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); ok && err == nil {
		e.observedGeneration = &g
	}
	e.ready = readyCondition(u)
	e.fired, _, _ = unstructured.NestedString(u.Object, "status", "lastScheduleTime")
	if ref, ok, _ := unstructured.NestedMap(u.Object, "spec", "targetRef"); ok {
		str := func(k string) string { s, _ := ref[k].(string); return s }
		e.TargetRef = &TargetRef{APIVersion: str("apiVersion"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name")}
	}
	num := func(field string) *float64 {
		v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", field)
		if !ok {
			return nil
		}
		var f float64
		switch x := v.(type) {
		case int64:
			f = float64(x)
		case float64:
			f = x
		default:
			return nil
		}
		return &f
	}
	e.Status.DesiredReplicas, e.Status.Replicas = num("desiredReplicas"), num("replicas")
	return e
}

// WatchTidals watches the configured resources in the namespaces of the policies on the
// process's informer cache inf (a namespace inf's scope does not cover gets a namespaced
// informer of its own there: a Role per namespace suffices), keeps the objects labelled
// elasticscaler.io/name, and feeds their status to the controller through a rate-limited work
// queue: a retryable failure is retried with backoff, a permanent one is logged and dropped until
// the object changes. Every tc.ResyncPeriod it replays the cached objects (the shared informers
// have no resync of their own). It returns when ctx ends; the informers go on for the other
// consumers, and a watch started again replays the cache rather than listing again.
//
// Only the resources the API server serves are watched: on a cluster without the Tidal CRD the
// watch waits (debi_webhook_tidal_watch_enabled 0, one log line) and looks again every
// DiscoveryRecheck, instead of logging a failed list forever.
func (c *Controller) WatchTidals(ctx context.Context, inf *kubepkg.Informers, tc config.TidalConfig) {
	served := c.servedResources(ctx, tc.Resources)
	for len(served) == 0 {
		c.m.tidalWatchEnabled.Set(0)
		select {
		case <-ctx.Done():
			return
		case <-time.After(DiscoveryRecheck):
		}
		served = c.servedResources(ctx, tc.Resources)
	}
	c.m.tidalWatchEnabled.Set(1)
	defer c.m.tidalWatchEnabled.Set(0)
	tc.Resources = served
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	nss := map[string]bool{}
	for _, p := range c.policies {
		nss[p.pol.Target.Namespace] = true
	}
	var nsList []string
	for ns := range nss {
		nsList = append(nsList, ns)
	}
	sort.Strings(nsList)
	ws := map[string]*tidalResourceWatch{}
	for _, r := range tc.Resources {
		gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		prefix := gvr.String() + "|"
		rw := &tidalResourceWatch{res: r, namespaces: nsList}
		enqueue := func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok && rw.wants(u) {
				q.Add(prefix + u.GetNamespace() + "/" + u.GetName())
			}
		}
		if len(nsList) == 0 {
			continue
		}
		w, err := inf.Watch(gvr, cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
		}, nsList...)
		if err != nil {
			c.log.Error("cannot watch", "resource", r.String(), "err", err)
			continue
		}
		defer w.Stop()
		rw.w = w
		ws[prefix] = rw
	}
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	if tc.ResyncPeriod > 0 {
		go func() {
			t := time.NewTicker(tc.ResyncPeriod)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				for prefix, rw := range ws {
					for _, st := range rw.w.Stores() {
						for _, obj := range st.List() {
							if u, ok := obj.(*unstructured.Unstructured); ok && rw.wants(u) {
								q.Add(prefix + u.GetNamespace() + "/" + u.GetName())
							}
						}
					}
				}
			}
		}()
	}
	c.log.Info("watching tidal resources", "namespaces", nsList, "resources", fmt.Sprint(tc.Resources))
	for {
		k, quit := q.Get()
		if quit {
			break
		}
		c.syncTidal(ctx, q, ws, k)
		q.Done(k)
	}
}

// tidalResourceWatch is the Tidal watch's handler on one resource's shared informers.
type tidalResourceWatch struct {
	res        config.WatchResource
	namespaces []string
	w          *kubepkg.Watch
}

// wants reports whether the watch acts on u: in the policies' namespaces, labelled
// elasticscaler.io/name (the label selector of a watch of its own, applied in the handler).
func (rw *tidalResourceWatch) wants(u *unstructured.Unstructured) bool {
	_, labelled := u.GetLabels()[LabelScalerName]
	return labelled && kubepkg.InNamespaces(rw.namespaces, u.GetNamespace()) && u.GetNamespace() != ""
}

func (c *Controller) syncTidal(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], ws map[string]*tidalResourceWatch, k string) {
	var rw *tidalResourceWatch
	var objKey string
	for prefix, w := range ws {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			rw, objKey = w, k[len(prefix):]
		}
	}
	if rw == nil {
		q.Forget(k)
		return
	}
	obj, exists := rw.w.GetByKey(objKey)
	if !exists {
		q.Forget(k) // deleted: a Tidal going away leaves the size where it is
		return
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !rw.wants(u) {
		q.Forget(k) // its label removed: as gone
		return
	}
	res := rw.res
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Webhook.DecisionTimeout)
	defer cancel()
	// A resync and the initial list replay unchanged objects: Tidal acts on a change only.
	e := TidalFromUnstructured(u)
	e.resource = res
	out, err := c.Tidal(ctx, e)
	code := http.StatusOK
	if err != nil {
		code = errorCode(err)
	}
	c.m.notifications.WithLabelValues("watch", fmt.Sprint(code)).Inc()
	c.m.notificationDuration.WithLabelValues("watch").Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		q.Forget(k)
		c.log.Debug("tidal synced", "key", k, "before", out.Before, "after", out.After)
	case code >= 500:
		c.log.Warn("tidal sync failed; retrying", "key", k, "err", err)
		q.AddRateLimited(k)
	default:
		c.log.Warn("tidal refused", "key", k, "code", code, "err", err)
		q.Forget(k)
	}
}

func errorCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// DiscoveryRecheck is how often the watches look again for resources the API server did not serve.
var DiscoveryRecheck = time.Minute

// servedResources are the resources of rs the API server's discovery lists; every resource when
// the actuator cannot tell (fakes). A resource not served is logged once per policy set.
func (c *Controller) servedResources(ctx context.Context, rs []config.WatchResource) []config.WatchResource {
	k, ok := c.act.(*KubeActuator)
	if !ok {
		return rs
	}
	var out []config.WatchResource
	for _, r := range rs {
		found, err := kubepkg.Served(k.kube.Discovery(), schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
		if found {
			out = append(out, r)
			continue
		}
		if !c.tidalMissingLogged.Swap(true) {
			c.log.Info("Tidal watch waiting: the API server does not serve the resource (CRD not installed?); looking again every minute",
				"resource", r.String(), "err", err)
		}
	}
	if len(out) > 0 {
		c.tidalMissingLogged.Store(false)
	}
	return out
}
