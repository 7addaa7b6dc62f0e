package metricsapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
)

// fakeAPI is both metrics clients over one function. client-go's fakes hold a lock while their
// reactors run, so they cannot show concurrency.
type fakeAPI struct {
	// get answers a query: the values of its series or pods, or an error.
	get func(q Query) ([]float64, error)
	ts  time.Time
}

func (f *fakeAPI) NamespacedMetrics(ns string) externalclient.MetricsInterface {
	return fakeExternalNS{f, ns}
}

type fakeExternalNS struct {
	f  *fakeAPI
	ns string
}

func (n fakeExternalNS) List(metric string, sel labels.Selector) (*emv1beta1.ExternalMetricValueList, error) {
	vs, err := n.f.get(Query{Type: External, Namespace: n.ns, Metric: metric, Selector: sel})
	if err != nil {
		return nil, err
	}
	l := &emv1beta1.ExternalMetricValueList{}
	for i, v := range vs {
		l.Items = append(l.Items, emv1beta1.ExternalMetricValue{MetricName: metric, Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
			Timestamp: metav1.NewTime(n.f.ts.Add(-time.Duration(i) * time.Second)), WindowSeconds: ptr.To(int64(30 * (i + 1)))})
	}
	return l, nil
}

type fakeCustom struct{ f *fakeAPI }

func (c fakeCustom) RootScopedMetrics() customclient.MetricsInterface { return fakeCustomNS{c.f, ""} }
func (c fakeCustom) NamespacedMetrics(ns string) customclient.MetricsInterface {
	return fakeCustomNS{c.f, ns}
}

type fakeCustomNS struct {
	f  *fakeAPI
	ns string
}

func (n fakeCustomNS) GetForObject(gk schema.GroupKind, name, metric string, sel labels.Selector) (*cmv1beta2.MetricValue, error) {
	vs, err := n.f.get(Query{Type: Object, Namespace: n.ns, Metric: metric, Selector: sel, Object: ObjectRef{APIVersion: gk.Group, Kind: gk.Kind, Name: name}})
	if err != nil {
		return nil, err
	}
	if len(vs) != 1 {
		return nil, fmt.Errorf("the custom metrics API server returned %v results when we asked for exactly one", len(vs))
	}
	return &cmv1beta2.MetricValue{Value: *resource.NewMilliQuantity(int64(vs[0]*1000), resource.DecimalSI), Timestamp: metav1.NewTime(n.f.ts)}, nil
}

func (n fakeCustomNS) GetForObjects(gk schema.GroupKind, podSel labels.Selector, metric string, sel labels.Selector) (*cmv1beta2.MetricValueList, error) {
	vs, err := n.f.get(Query{Type: Pods, Namespace: n.ns, Metric: metric, Selector: sel, PodSelector: podSel})
	if err != nil {
		return nil, err
	}
	l := &cmv1beta2.MetricValueList{}
	for _, v := range vs {
		l.Items = append(l.Items, cmv1beta2.MetricValue{Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI), Timestamp: metav1.NewTime(n.f.ts)})
	}
	return l, nil
}

func newFakeReader(served ServedFunc, get func(Query) ([]float64, error), opts Options) *Reader {
	f := &fakeAPI{get: get, ts: time.Unix(1_700_000_000, 0)}
	if served == nil {
		served = func(schema.GroupVersion) (bool, error) { return true, nil }
	}
	return NewForClients(served, f, fakeCustom{f}, opts)
}

func TestReadValues(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"queue": "orders"})
	values := map[string][]float64{"queue_depth": {30, 12.5}, "rps": {250}, "latency": {0.1, 0.3, 0.2}, "empty": {}}
	r := newFakeReader(nil, func(q Query) ([]float64, error) {
		if q.Metric == "broken" {
			return nil, errors.New("the server is currently unable to handle the request")
		}
		if q.Type == External && q.Selector.String() != sel.String() {
			return nil, fmt.Errorf("selector %q not passed on", q.Selector)
		}
		return values[q.Metric], nil
	}, Options{})
	qs := []Query{
		{Type: External, Namespace: "shop", Metric: "queue_depth", Selector: sel},
		{Type: Object, Namespace: "shop", Metric: "rps", Object: ObjectRef{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "front"}},
		{Type: Pods, Namespace: "shop", Metric: "latency"},
		{Type: Pods, Namespace: "shop", Metric: "empty"},
		{Type: External, Namespace: "shop", Metric: "broken", Selector: sel},
		{Type: Object, Namespace: "shop", Metric: "rps", Object: ObjectRef{APIVersion: "a/b/c", Kind: "Ingress", Name: "front"}},
		{Type: External, Namespace: "shop"},
	}
	res := r.Read(context.Background(), qs)
	if len(res) != len(qs) {
		t.Fatalf("%d results for %d queries", len(res), len(qs))
	}
	ts := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		i              int
		value, average float64
		count          int
		ts             time.Time
		window         time.Duration
	}{
		// 30 + 12.5 over two series; the second is 1 s older and its window 60 s.
		{0, 42.5, 21.25, 2, ts.Add(-time.Second), time.Minute},
		{1, 250, 250, 1, ts, 0},
		// (0.1 + 0.3 + 0.2) / 3 pods.
		{2, 0.6, 0.2, 3, ts, 0},
	} {
		got := res[tc.i]
		if got.Err != nil {
			t.Errorf("%s: %v", qs[tc.i], got.Err)
			continue
		}
		if !near(got.Value, tc.value) || !near(got.Average, tc.average) || got.Count != tc.count || !got.Timestamp.Equal(tc.ts) || got.Window != tc.window {
			t.Errorf("%s = value %v average %v count %d at %v window %v; want %v %v %d %v %v", qs[tc.i],
				got.Value, got.Average, got.Count, got.Timestamp, got.Window, tc.value, tc.average, tc.count, tc.ts, tc.window)
		}
	}
	for _, tc := range []struct {
		i    int
		is   error
		want string
	}{
		{3, ErrNoValues, `pods metric "empty" in namespace "shop"`},
		{4, nil, `external metric "broken" in namespace "shop": the server is currently unable`},
		{5, nil, `object metric "rps" of Ingress "front"`},
		{6, nil, `no metric name`},
	} {
		err := res[tc.i].Err
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: error %v; want one containing %q (is %v)", qs[tc.i], err, tc.want, tc.is)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestReadNotServed(t *testing.T) {
	var asked atomic.Int32
	discoveryDown := true
	served := func(gv schema.GroupVersion) (bool, error) {
		asked.Add(1)
		if gv == CustomGroupVersion && discoveryDown {
			return false, errors.New("connection refused")
		}
		return gv == ExternalGroupVersion, nil
	}
	r := newFakeReader(served, func(Query) ([]float64, error) { return []float64{1}, nil }, Options{DiscoveryTTL: time.Hour})
	now := time.Unix(1_700_000_000, 0)
	r.now = func() time.Time { return now }
	qs := []Query{{Type: External, Namespace: "a", Metric: "e"}, {Type: Pods, Namespace: "a", Metric: "p"}}

	res := r.Read(context.Background(), qs)
	if res[0].Err != nil || res[0].Value != 1 {
		t.Errorf("external: %+v", res[0])
	}
	if err := res[1].Err; err == nil || errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), `pods metric "p"`) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("pods with discovery failing: error %v; want discovery's, naming the metric", err)
	}
	discoveryDown = false
	res = r.Read(context.Background(), qs) // discovery's failure was not cached: asked again
	if err := res[1].Err; !errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), `pods metric "p"`) {
		t.Errorf("pods, custom metrics not served: error %v; want ErrNotServed naming the metric", err)
	}
	// First Read: external (cached) and custom (failed); second: custom again (cached now).
	if n := asked.Load(); n != 3 {
		t.Errorf("discovery asked %d times; want 3", n)
	}
	r.Read(context.Background(), qs)
	if n := asked.Load(); n != 3 {
		t.Errorf("discovery asked %d times within the TTL; want still 3", n)
	}
	now = now.Add(time.Hour)
	r.Read(context.Background(), append(qs, qs...)) // workers missing the cache together ask once
	if n := asked.Load(); n != 5 {
		t.Errorf("discovery asked %d times after the TTL; want 5", n)
	}
}

func TestReadTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	r := newFakeReader(nil, func(q Query) ([]float64, error) {
		if q.Metric == "stalled" {
			time.Sleep(2 * timeout) // beyond the timeout, as an HTTP timeout slightly later
		}
		return []float64{7}, nil
	}, Options{Timeout: timeout, Concurrency: 2})
	qs := []Query{{Type: External, Metric: "stalled"}, {Type: External, Metric: "a"}, {Type: Pods, Metric: "b"}, {Type: External, Metric: "c"}}
	start := time.Now()
	res := r.Read(context.Background(), qs)
	// The stalled metric holds one of the two workers; the other reads a, b and c meanwhile.
	if d := time.Since(start); d > 10*timeout {
		t.Errorf("Read took %v", d)
	}
	if err := res[0].Err; !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `"stalled"`) {
		t.Errorf("stalled: error %v; want ErrTimeout naming it", err)
	}
	for _, got := range res[1:] {
		if got.Err != nil || got.Value != 7 {
			t.Errorf("%s: %v, %v; want 7", got.Query, got.Value, got.Err)
		}
	}
}

func TestReadConcurrency(t *testing.T) {
	for _, tc := range []struct {
		opts    Options
		queries int
		want    int32
	}{
		{Options{Concurrency: 3}, 20, 3},
		{Options{}, 40, DefaultConcurrency},
		{Options{Concurrency: 8}, 5, 5}, // fewer queries than workers
	} {
		t.Run(fmt.Sprintf("%d_%d", tc.opts.Concurrency, tc.queries), func(t *testing.T) {
			var cur, peak atomic.Int32
			var mu sync.Mutex
			r := newFakeReader(nil, func(Query) ([]float64, error) {
				n := cur.Add(1)
				mu.Lock()
				peak.Store(max(peak.Load(), n))
				mu.Unlock()
				time.Sleep(30 * time.Millisecond)
				cur.Add(-1)
				return []float64{1}, nil
			}, tc.opts)
			qs := make([]Query, tc.queries)
			for i := range qs {
				qs[i] = Query{Type: External, Metric: fmt.Sprintf("m%d", i)}
			}
			for _, res := range r.Read(context.Background(), qs) {
				if res.Err != nil {
					t.Fatal(res.Err)
				}
			}
			if p := peak.Load(); p != tc.want {
				t.Errorf("at most %d metrics read at once; want %d", p, tc.want)
			}
		})
	}
}

func TestReadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := newFakeReader(nil, func(Query) ([]float64, error) { return []float64{1}, nil }, Options{})
	for _, res := range r.Read(ctx, []Query{{Type: External, Metric: "a"}, {Type: Object, Metric: "b"}}) {
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("%s: error %v; want context.Canceled", res.Query, res.Err)
		}
	}
	if got := r.Read(context.Background(), nil); len(got) != 0 {
		t.Errorf("no queries: %v", got)
	}
}

func TestDiscoveryServed(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: ExternalGroupVersion.String(), APIResources: []metav1.APIResource{{Name: "queue_depth"}}},
	}}}
	served := DiscoveryServed(d)
	if ok, err := served(ExternalGroupVersion); !ok || err != nil {
		t.Errorf("external: %v, %v; want served", ok, err)
	}
	if ok, err := served(CustomGroupVersion); ok || err != nil {
		t.Errorf("custom: %v, %v; want not served, no error", ok, err)
	}
}
