// Package controller is debi's Tidal controller (`debi tidal-controller`): it watches
// tidals.tidal.io, evaluates each Tidal's spec.triggers.times.rules with
// [github.com/debi-scaler/debi/tidal/schedule] and writes, through the status subresource,
// status.desiredReplicas, activeRule, lastScheduleTime, observedGeneration and a Ready
// condition. The webhook's Tidal watch (`debi webhook`) applies desiredReplicas to the target
// through its safe actuator: the StateTrigger path.
//
// Timing: after every evaluation the object's key is put back on a client-go work queue with
// AddAfter(Next(now) - now), so each Tidal is evaluated again at the second its next rule fires
// (the delaying queue keeps one timer heap for all objects, and keeps the earliest of several
// pending wake-ups of a key). A spec change re-evaluates at once. A deleted Tidal is dropped at
// its next wake-up (nothing is written) and its series removed.
//
// Rules are level-setting: at start, after a restart or a failover, the rule that fired most
// recently is in force, so no activation is lost while no replica leads.
//
// Leader election (a coordination.k8s.io Lease, as the webhook's watch) makes one replica the
// writer; the others wait. A replica that loses the Lease stops its informers and timers.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	tidalv1 "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
	"github.com/debi-scaler/debi/internal/kube"
)

// TidalResource is the resource the controller watches by default.
var TidalResource = tidalv1.SchemeGroupVersion.WithResource("tidals")

// FieldManager is the manager of the controller's status writes.
const FieldManager = "debi-tidal-controller"

// Defaults of Options.
const (
	DefaultLeaseNamespace = "debi-system"
	DefaultLeaseName      = "debi-tidal-controller"
	DefaultResyncPeriod   = 10 * time.Minute
	DefaultWorkers        = 4
	// MaxWait bounds how long a Tidal waits between two evaluations: a far activation (a
	// yearly rule) is approached in steps, so a wall-clock change on the node (the work queue's
	// timers run on the monotonic clock) is caught up within MaxWait.
	MaxWait = time.Hour
)

// LeaderElection configures the Lease that makes one replica the writer.
type LeaderElection struct {
	// Enabled runs the controller only while holding the Lease. Off, it runs at once: for a
	// single replica only.
	Enabled bool
	// Namespace and Name of the Lease (DefaultLeaseNamespace, DefaultLeaseName).
	Namespace, Name string
	// Identity of this replica in the Lease (default hostname_uuid).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go (default 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Client holds the Lease (kubernetes.Interface.CoordinationV1()); required when Enabled.
	Client coordinationv1.LeasesGetter
}

// Options configure Run.
type Options struct {
	// Client reads Tidals and writes their status (required).
	Client dynamic.Interface
	// Resource is the watched resource (default TidalResource).
	Resource schema.GroupVersionResource
	// Namespaces to watch; empty means all.
	Namespaces []string
	// Now is the clock rules are evaluated against (default time.Now). The work queue's timers
	// wait Next(Now()) - Now() of real time.
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Metrics (default: unregistered).
	Metrics *Metrics
	// LeaderElection, off when its Enabled is false.
	LeaderElection LeaderElection
	// ResyncPeriod re-evaluates every Tidal this often regardless of timers (default
	// DefaultResyncPeriod).
	ResyncPeriod time.Duration
	// Workers evaluate and write in parallel, one key at a time each (default DefaultWorkers).
	Workers int
	// Ready, when set, is called once: when the campaign for the Lease starts, or, without
	// leader election, when the informers' caches have synced (/-/ready of the subcommand).
	Ready func()
}

func (o *Options) defaults() error {
	if o.Client == nil {
		return errors.New("tidal controller: Options.Client is required")
	}
	if o.Resource.Empty() {
		o.Resource = TidalResource
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Ready == nil {
		o.Ready = func() {}
	}
	le := &o.LeaderElection
	if le.Enabled {
		if le.Client == nil {
			return errors.New("tidal controller: leader election needs LeaderElection.Client")
		}
		if le.Namespace == "" {
			le.Namespace = DefaultLeaseNamespace
		}
		if le.Name == "" {
			le.Name = DefaultLeaseName
		}
		if le.Identity == "" {
			host, _ := os.Hostname()
			le.Identity = host + "_" + uuid.NewString()
		}
		kube.LeaseDefaults(&le.LeaseDuration, &le.RenewDeadline, &le.RetryPeriod)
	}
	return nil
}

// Run evaluates Tidals until ctx ends (then it returns nil): at once without leader election,
// else while holding the Lease, campaigning again after losing it.
func Run(ctx context.Context, opts Options) error {
	if err := opts.defaults(); err != nil {
		return err
	}
	le := opts.LeaderElection
	log := opts.Logger
	if !le.Enabled {
		opts.Metrics.leader.Set(1)
		defer opts.Metrics.leader.Set(0)
		return newController(opts).run(ctx)
	}
	log.Info("campaigning for the lease", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
	opts.Ready()
	opts.Ready = func() {}
	leading := func(on bool) { opts.Metrics.leader.Set(map[bool]float64{true: 1}[on]) }
	return kube.RunLeaderElected(ctx, kube.Lease{Client: le.Client, Namespace: le.Namespace, Name: le.Name,
		Identity: le.Identity, Elector: FieldManager, LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline,
		RetryPeriod: le.RetryPeriod}, log.With("acting_on", "tidals"), leading, func(ctx context.Context) error { return newController(opts).run(ctx) })
}

type controller struct {
	opts Options
	log  *slog.Logger
	m    *Metrics
	q    workqueue.TypedRateLimitingInterface[string]
	// informers by namespace ("" when watching all).
	informers map[string]cache.SharedIndexInformer

	mu sync.Mutex
	// armed is the activation each key's timer waits for, to log and export it once.
	armed map[string]time.Time
}

func newController(opts Options) *controller {
	return &controller{
		opts: opts, log: opts.Logger, m: opts.Metrics,
		q:         workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		informers: map[string]cache.SharedIndexInformer{},
		armed:     map[string]time.Time{},
	}
}

// run starts the informers and the workers, and returns when ctx ends.
func (c *controller) run(ctx context.Context) error {
	defer c.q.ShutDown()
	nss := append([]string(nil), c.opts.Namespaces...)
	sort.Strings(nss)
	if len(nss) == 0 {
		nss = []string{metav1.NamespaceAll}
	}
	var factories []dynamicinformer.DynamicSharedInformerFactory
	for _, ns := range nss {
		if _, dup := c.informers[ns]; dup {
			continue
		}
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.opts.Client, c.opts.ResyncPeriod, ns, nil)
		inf := f.ForResource(c.opts.Resource).Informer()
		enqueue := func(obj any) {
			if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.q.Add(k)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			return fmt.Errorf("watch %s: %w", c.opts.Resource, err)
		}
		c.informers[ns] = inf
		factories = append(factories, f)
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
		c.m.nextActivation.Reset()
	}()
	go func() {
		<-ctx.Done()
		c.q.ShutDown()
	}()
	c.log.Info("watching Tidals", "resource", c.opts.Resource.String(), "namespaces", c.opts.Namespaces)
	for _, inf := range c.informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil // ctx ended
		}
	}
	c.opts.Ready()
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for {
				k, quit := c.q.Get()
				if quit {
					return
				}
				if err := c.sync(ctx, k); err != nil && ctx.Err() == nil {
					c.log.Warn("tidal sync failed; retrying", "tidal", k, "err", err)
					c.q.AddRateLimited(k)
				} else {
					c.q.Forget(k)
				}
				c.q.Done(k)
			}
		})
	}
	wg.Wait()
	return nil
}

func (c *controller) informer(ns string) cache.SharedIndexInformer {
	if inf, ok := c.informers[ns]; ok {
		return inf
	}
	return c.informers[metav1.NamespaceAll]
}

// sync evaluates one Tidal, writes its status when it changed and arms its timer.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	inf := c.informer(ns)
	if inf == nil {
		return nil
	}
	obj, exists, err := inf.GetStore().GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		c.forget(ns, name, key)
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	res, err := c.reconcile(ctx, u)
	if err != nil {
		return err
	}
	c.arm(ns, name, key, res)
	return nil
}

// reconcile evaluates u at Now and writes the status when it changed, retrying on conflict with
// a fresh read (and a fresh evaluation).
func (c *controller) reconcile(ctx context.Context, u *unstructured.Unstructured) (Result, error) {
	ri := c.opts.Client.Resource(c.opts.Resource).Namespace(u.GetNamespace())
	var res Result
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			u = fresh
		}
		first = false
		t, err := toTidal(u)
		if err != nil {
			return permanent{err}
		}
		now := c.opts.Now()
		res = Evaluate(t, now)
		c.m.evaluations.WithLabelValues(res.Outcome).Inc()
		if !Changed(t.Status, res.Status) {
			return nil
		}
		st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&res.Status)
		if err != nil {
			return err
		}
		out := u.DeepCopy()
		out.Object["status"] = st
		_, err = ri.UpdateStatus(ctx, out, metav1.UpdateOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			c.m.writes.WithLabelValues("success").Inc()
			c.logWrite(u, t, res, now)
		case apierrors.IsConflict(err):
			c.m.writes.WithLabelValues("conflict").Inc()
		case apierrors.IsNotFound(err):
			c.m.writes.WithLabelValues("not_found").Inc()
		default:
			c.m.writes.WithLabelValues("error").Inc()
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return Result{}, nil // deleted meanwhile; the informer's delete event drops it
	}
	if p, ok := err.(permanent); ok {
		c.log.Warn("cannot read the Tidal; waiting for it to change", "tidal", u.GetNamespace()+"/"+u.GetName(), "err", p.error)
		return Result{}, nil
	}
	return res, err
}

func (c *controller) logWrite(u *unstructured.Unstructured, old *tidalv1.Tidal, res Result, now time.Time) {
	log := c.log.With("tidal", u.GetNamespace()+"/"+u.GetName(), "generation", u.GetGeneration())
	switch res.Outcome {
	case "invalid":
		log.Warn("invalid rules; status.desiredReplicas left as it was", "err", res.Err)
	case "no_rule":
		log.Info("no rule has fired yet", "next_rule", res.NextRule, "next", res.Next)
	default:
		prev := old.Status.LastScheduleTime
		if prev != nil && prev.Equal(&metav1.Time{Time: res.Activated}) && old.Status.ActiveRule == res.Rule.Name {
			log.Debug("status updated", "rule", res.Rule.Name, "replicas", res.Rule.Replicas)
			return
		}
		late := now.Sub(res.Activated)
		attrs := []any{"rule", res.Rule.Name, "replicas", res.Rule.Replicas, "activated", res.Activated.UTC(),
			"next_rule", res.NextRule, "next", res.Next.UTC()}
		if late >= 0 && late <= time.Minute { // written for this activation, not found in force at start
			c.m.lateness.Observe(late.Seconds())
			attrs = append(attrs, "lateness", late)
		}
		log.Info("rule in force; status.desiredReplicas written", attrs...)
	}
}

// arm puts key back on the queue for its next activation and exports it.
func (c *controller) arm(ns, name, key string, res Result) {
	if res.Next.IsZero() {
		c.m.nextActivation.DeleteLabelValues(ns, name)
		c.mu.Lock()
		delete(c.armed, key)
		c.mu.Unlock()
		return
	}
	c.m.nextActivation.WithLabelValues(ns, name).Set(float64(res.Next.Unix()))
	wait := min(res.Next.Sub(c.opts.Now()), MaxWait)
	c.q.AddAfter(key, wait)
	c.mu.Lock()
	changed := !c.armed[key].Equal(res.Next)
	c.armed[key] = res.Next
	c.mu.Unlock()
	if changed {
		c.log.Debug("timer armed", "tidal", key, "rule", res.NextRule, "at", res.Next.UTC(), "in", wait)
	}
}

// forget drops a deleted Tidal: its pending wake-up finds nothing and re-arms nothing.
func (c *controller) forget(ns, name, key string) {
	c.m.nextActivation.DeleteLabelValues(ns, name)
	c.mu.Lock()
	_, had := c.armed[key]
	delete(c.armed, key)
	c.mu.Unlock()
	if had {
		c.log.Info("tidal deleted; its timer is stopped", "tidal", key)
	}
}

func toTidal(u *unstructured.Unstructured) (*tidalv1.Tidal, error) {
	t := &tidalv1.Tidal{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return t, nil
}

// permanent is an error a retry cannot fix (an object that does not convert).
type permanent struct{ error }
