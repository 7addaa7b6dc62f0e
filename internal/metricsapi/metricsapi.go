// Package metricsapi reads the External and Custom metrics of the Elastic Scaler guide's
// MetricsTrigger from the Kubernetes metrics APIs, as the guide's MetricsCollector does on the
// non-HPA path: External metrics from external.metrics.k8s.io/v1beta1, Custom metrics (object
// and pods metrics) from custom.metrics.k8s.io/v1beta2, each only where the API server serves
// that API (an aggregated API server such as prometheus-adapter or KEDA's registered through an
// APIService). A Read collects many metrics with bounded concurrency and a per-metric timeout,
// so that one slow or failing metric neither delays nor fails the others: each Result carries
// its value or an error that names its metric.
//
// Resource metrics (cpu, memory) are not read from metrics.k8s.io: debi reads them from
// Prometheus (see ResourceQueries), where the history its forecasts need already is.
// ExternalServer metrics are PromQL and never reach this package.
package metricsapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"

	"github.com/debi-scaler/debi/internal/kube"
)

// The group versions Read uses; an API server serving only other versions counts as not
// serving the API.
var (
	ExternalGroupVersion = emv1beta1.SchemeGroupVersion // external.metrics.k8s.io/v1beta1
	CustomGroupVersion   = cmv1beta2.SchemeGroupVersion // custom.metrics.k8s.io/v1beta2
)

// Defaults of Options, the guide's MetricsCollector's.
const (
	DefaultConcurrency  = 10
	DefaultTimeout      = 5 * time.Second
	DefaultDiscoveryTTL = time.Minute
)

// Errors a Result can wrap (test with errors.Is).
var (
	// ErrNotServed: the API server does not serve the metric's API (no APIService, or one that
	// is not available). It is not retried before the discovery TTL ends.
	ErrNotServed = errors.New("metrics API not served")
	// ErrTimeout: the metric did not answer within Options.Timeout.
	ErrTimeout = errors.New("metric timed out")
	// ErrNoValues: the API answered with no value (no series, no pod matched the selector).
	ErrNoValues = errors.New("no values returned")
)

// Type is the kind of a Query: the guide's External metric, or one of its two Custom ones
// (autoscaling/v2's Object and Pods metric sources).
type Type int

const (
	// External: a metric not tied to any Kubernetes object (a queue's length, a cloud
	// service's request rate), from external.metrics.k8s.io.
	External Type = iota + 1
	// Object: a custom metric describing one object (an Ingress's requests per second), from
	// custom.metrics.k8s.io.
	Object
	// Pods: a custom metric of each pod a selector matches, from custom.metrics.k8s.io.
	Pods
)

func (t Type) String() string {
	switch t {
	case External:
		return "external"
	case Object:
		return "object"
	case Pods:
		return "pods"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// ObjectRef names the object an Object metric describes, as autoscaling/v2's
// CrossVersionObjectReference does (the API version's group is what matters).
type ObjectRef struct {
	APIVersion string // "apps/v1"; "" or "v1" for the core group
	Kind       string
	Name       string
}

// Query is one metric to read.
type Query struct {
	Type      Type
	Namespace string
	// Metric is the metric's name.
	Metric string
	// Selector selects among the metric's series (autoscaling/v2's metric.selector); nil
	// selects all.
	Selector labels.Selector
	// Object is the described object of an Object query.
	Object ObjectRef
	// PodSelector selects the pods of a Pods query (the workload's selector); nil selects every
	// pod of the namespace.
	PodSelector labels.Selector
}

// String names the metric in errors and logs: `external metric "queue_depth" in namespace "shop"`.
func (q Query) String() string {
	switch q.Type {
	case Object:
		return fmt.Sprintf("object metric %q of %s %q in namespace %q", q.Metric, q.Object.Kind, q.Object.Name, q.Namespace)
	case Pods:
		return fmt.Sprintf("pods metric %q in namespace %q", q.Metric, q.Namespace)
	}
	return fmt.Sprintf("%s metric %q in namespace %q", q.Type, q.Metric, q.Namespace)
}

func (q Query) selector() labels.Selector {
	if q.Selector == nil {
		return labels.Everything()
	}
	return q.Selector
}

// Result is what Read got for one Query. Err is nil or names the metric; the other fields are
// meaningful only when Err is nil.
//
// As autoscaling/v2 uses them: an External or Object metric with a `value` target compares
// Value with it; one with an `averageValue` target compares Value / current replicas (the
// caller knows the replicas); a Pods metric's `averageValue` target compares Average, the mean
// over the pods that reported a value.
type Result struct {
	Query Query
	// Value is the sum over the returned values: the series of an External metric, the pods of
	// a Pods metric; an Object metric's one value.
	Value float64
	// Count is the number of values summed (series, pods; 1 for an Object metric).
	Count int
	// Average is Value / Count.
	Average float64
	// Timestamp is when the oldest of the values was produced.
	Timestamp time.Time
	// Window is the longest window the values were computed over (rates); 0 when the API gave
	// none.
	Window time.Duration
	Err    error
}

// Options bound a Read. Zero values take the defaults.
type Options struct {
	// Concurrency is the number of metrics read at once (DefaultConcurrency).
	Concurrency int
	// Timeout bounds each metric's read (DefaultTimeout).
	Timeout time.Duration
	// DiscoveryTTL is how long a discovery answer (served or not) is kept (DefaultDiscoveryTTL).
	DiscoveryTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DiscoveryTTL <= 0 {
		o.DiscoveryTTL = DefaultDiscoveryTTL
	}
	return o
}

// ServedFunc reports whether the API server serves gv.
type ServedFunc func(gv schema.GroupVersion) (bool, error)

// DiscoveryServed is the ServedFunc of a discovery client: gv is served when its resource list
// can be read (an aggregated API whose APIService is unavailable answers 503: not served).
func DiscoveryServed(d discovery.DiscoveryInterface) ServedFunc {
	return func(gv schema.GroupVersion) (bool, error) {
		_, err := d.ServerResourcesForGroupVersion(gv.String())
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err), apierrors.IsServiceUnavailable(err):
			return false, nil
		}
		return false, err
	}
}

// Reader reads metrics from the metrics APIs. It is safe for concurrent use.
type Reader struct {
	opts     Options
	served   ServedFunc
	external externalclient.ExternalMetricsClient
	custom   customclient.CustomMetricsClient

	mu    sync.Mutex
	cache map[schema.GroupVersion]servedEntry
	now   func() time.Time
}

type servedEntry struct {
	served bool
	err    error
	at     time.Time
}

// New returns a Reader of the API server of rc. Its HTTP timeout is Options.Timeout, so that a
// read abandoned at its timeout also ends on the wire. rc's rate limit (QPS, Burst) applies to
// the metric reads: give it room for Concurrency reads per Read.
func New(rc *rest.Config, opts Options) (*Reader, error) {
	opts = opts.withDefaults()
	c := rest.CopyConfig(rc)
	c.Timeout = opts.Timeout
	c.ContentType = "application/json" // metrics adapters serve JSON, not always protobuf
	dc := rest.CopyConfig(rc)
	dc.Timeout = opts.Timeout
	d, err := discovery.NewDiscoveryClientForConfig(dc)
	if err != nil {
		return nil, fmt.Errorf("metricsapi: discovery client: %w", err)
	}
	ext, err := externalclient.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("metricsapi: external metrics client: %w", err)
	}
	// The mapper rediscovers for a kind it does not know, so that a CRD installed after the
	// Reader started (a described object's kind) is found on the next read.
	cust, err := customclient.NewForVersionForConfig(c, kube.NewMapper(d), CustomGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("metricsapi: custom metrics client: %w", err)
	}
	return NewForClients(DiscoveryServed(d), ext, cust, opts), nil
}

// NewForClients returns a Reader over the given clients; served tells which APIs are served.
// The clients' requests have no context: only an HTTP timeout in their configuration ends a
// request that a Read gave up on.
func NewForClients(served ServedFunc, ext externalclient.ExternalMetricsClient, cust customclient.CustomMetricsClient, opts Options) *Reader {
	return &Reader{opts: opts.withDefaults(), served: served, external: ext, custom: cust,
		cache: map[schema.GroupVersion]servedEntry{}, now: time.Now}
}

// Read reads qs, at most Options.Concurrency at once, each within Options.Timeout, and returns
// one Result per query in the order of qs. It returns when every query has answered, failed or
// timed out, or ctx ended (the queries not done then fail with ctx's error).
func (r *Reader) Read(ctx context.Context, qs []Query) []Result {
	out := make([]Result, len(qs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(r.opts.Concurrency, len(qs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				out[i] = r.readOne(ctx, qs[i])
			}
		}()
	}
	for i := range qs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

func (r *Reader) readOne(ctx context.Context, q Query) Result {
	if err := ctx.Err(); err != nil {
		return Result{Query: q, Err: fmt.Errorf("%s: %w", q, err)}
	}
	if err := r.checkServed(q); err != nil {
		return Result{Query: q, Err: fmt.Errorf("%s: %w", q, err)}
	}
	qctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	done := make(chan Result, 1)
	start := r.now()
	go func() { done <- r.fetch(q) }()
	select {
	case res := <-done:
		if res.Err != nil && r.now().Sub(start) >= r.opts.Timeout {
			// The HTTP timeout of New, racing the context's: the same timeout.
			res.Err = fmt.Errorf("%w after %v: %w", ErrTimeout, r.opts.Timeout, res.Err)
		}
		if res.Err != nil {
			res.Err = fmt.Errorf("%s: %w", q, res.Err)
		}
		return res
	case <-qctx.Done():
		if ctx.Err() != nil { // the Read's context: do not wait, nothing new starts
			return Result{Query: q, Err: fmt.Errorf("%s: %w", q, ctx.Err())}
		}
		// Wait for the abandoned request before this worker takes the next query, so that no
		// more than Concurrency requests are ever in flight; the HTTP timeout of New ends it
		// about now.
		select {
		case <-done:
		case <-ctx.Done():
		}
		return Result{Query: q, Err: fmt.Errorf("%s: %w after %v", q, ErrTimeout, r.opts.Timeout)}
	}
}

// checkServed is nil when q's API is served, else an error wrapping ErrNotServed or
// discovery's.
func (r *Reader) checkServed(q Query) error {
	gv := CustomGroupVersion
	if q.Type == External {
		gv = ExternalGroupVersion
	}
	// Held while discovery answers, so that the workers of a Read ask once, not each.
	r.mu.Lock()
	e, ok := r.cache[gv]
	if !ok || r.now().Sub(e.at) >= r.opts.DiscoveryTTL {
		served, err := r.served(gv)
		e = servedEntry{served: served, err: err, at: r.now()}
		if err == nil { // an unreachable API server is asked again next time
			r.cache[gv] = e
		}
	}
	r.mu.Unlock()
	switch {
	case e.err != nil:
		return fmt.Errorf("discovery of %s: %w", gv, e.err)
	case !e.served:
		return fmt.Errorf("%w: %s", ErrNotServed, gv)
	}
	return nil
}

// fetch reads q without a timeout of its own.
func (r *Reader) fetch(q Query) Result {
	res := Result{Query: q}
	if q.Metric == "" {
		res.Err = errors.New("no metric name")
		return res
	}
	switch q.Type {
	case External:
		l, err := r.external.NamespacedMetrics(q.Namespace).List(q.Metric, q.selector())
		if err != nil {
			res.Err = err
			return res
		}
		for _, v := range l.Items {
			res.add(v.Value.AsApproximateFloat64(), v.Timestamp.Time, v.WindowSeconds)
		}
	case Object:
		gv, err := schema.ParseGroupVersion(q.Object.APIVersion)
		if err != nil {
			res.Err = fmt.Errorf("described object: %w", err)
			return res
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: q.Object.Kind}
		v, err := r.custom.NamespacedMetrics(q.Namespace).GetForObject(gk, q.Object.Name, q.Metric, q.selector())
		if err != nil {
			res.Err = err
			return res
		}
		res.add(v.Value.AsApproximateFloat64(), v.Timestamp.Time, v.WindowSeconds)
	case Pods:
		sel := q.PodSelector
		if sel == nil {
			sel = labels.Everything()
		}
		l, err := r.custom.NamespacedMetrics(q.Namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, sel, q.Metric, q.selector())
		if err != nil {
			res.Err = err
			return res
		}
		for _, v := range l.Items {
			res.add(v.Value.AsApproximateFloat64(), v.Timestamp.Time, v.WindowSeconds)
		}
	default:
		res.Err = fmt.Errorf("unknown metric type %v", q.Type)
		return res
	}
	if res.Count == 0 {
		res.Err = ErrNoValues
		return res
	}
	res.Average = res.Value / float64(res.Count)
	return res
}

func (res *Result) add(v float64, ts time.Time, window *int64) {
	res.Value += v
	res.Count++
	if res.Timestamp.IsZero() || ts.Before(res.Timestamp) {
		res.Timestamp = ts
	}
	if window != nil {
		res.Window = max(res.Window, time.Duration(*window)*time.Second)
	}
}
