package metricsapi

// Integration tests: metrics served by a test aggregated API server (testenv.MetricsServer),
// registered with a real kube-apiserver through APIService objects, read by the Reader through
// the apiserver's aggregator. The API server comes from KUBECONFIG_DEBI or DEBI_K8S_ASSETS as in
// webhook/integration_test.go; hack/k8s-env.sh gives it the front-proxy flags aggregation needs.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/debi-scaler/debi/internal/testenv"
)

var kubeconfigPath string // set by TestMain

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kubeconfigPath)) }

type kubeEnv struct {
	rc   *rest.Config
	kube kubernetes.Interface
	ns   string
}

func newKubeEnv(t *testing.T) *kubeEnv {
	t.Helper()
	if kubeconfigPath == "" {
		testenv.SkipOrFail(t, "integration test: set KUBECONFIG_DEBI (a kubeconfig from hack/k8s-env.sh up) or DEBI_K8S_ASSETS (the dir hack/k8s-env.sh build prints)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000 // the concurrency test sends 25 reads at once
	e := &kubeEnv{rc: rc, kube: kubernetes.NewForConfigOrDie(rc)}
	e.ns = testenv.KubeNamespace(t, e.kube, "debi-metricsapi")
	return e
}

func TestReadThroughAPIServer(t *testing.T) {
	e := newKubeEnv(t)
	m := testenv.NewMetricsServer(t, e.kube, e.ns, "metrics")
	m.Set("queue_depth", 30, 12.5)
	m.Set("requests_per_second", 250)
	m.Set("latency_seconds", 0.1, 0.3, 0.2)
	queue := labels.SelectorFromSet(labels.Set{"queue": "orders"})
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	qs := []Query{
		{Type: External, Namespace: e.ns, Metric: "queue_depth", Selector: queue},
		{Type: Object, Namespace: e.ns, Metric: "requests_per_second", Object: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		{Type: Pods, Namespace: e.ns, Metric: "latency_seconds", PodSelector: web},
		{Type: External, Namespace: e.ns, Metric: "missing"},
	}

	// Only the external metrics API registered: the custom metrics are not served.
	m.Register(t, e.rc, ExternalGroupVersion)
	r, err := New(e.rc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Read(context.Background(), qs)
	if res[0].Err != nil || res[0].Value != 42.5 {
		t.Errorf("external metric, custom API not registered: %v, %v; want 42.5", res[0].Value, res[0].Err)
	}
	for _, i := range []int{1, 2} {
		if err := res[i].Err; !errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), qs[i].Metric) {
			t.Errorf("%s before custom.metrics.k8s.io was registered: error %v; want ErrNotServed naming it", qs[i], err)
		}
	}

	m.Register(t, e.rc, CustomGroupVersion)
	r, err = New(e.rc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res = r.Read(context.Background(), qs)
	for _, tc := range []struct {
		i              int
		value, average float64
		count          int
		ts             time.Time
		window         time.Duration
	}{
		// 30 + 12.5 over the two series; both at the server's time with a 60 s window.
		{0, 42.5, 21.25, 2, m.TS, time.Minute},
		{1, 250, 250, 1, m.TS, 0},
		// (0.1 + 0.3 + 0.2) over 3 pods; the oldest 2 s before the server's time.
		{2, 0.6, 0.2, 3, m.TS.Add(-2 * time.Second), 0},
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
	if err := res[3].Err; err == nil || !strings.Contains(err.Error(), `external metric "missing"`) {
		t.Errorf("a metric the server does not have: error %v; want one naming it", err)
	}
	// What reached the test server through the aggregator: the selectors, the described
	// object's resource, the user behind the client's token.
	for metric, want := range map[string]string{
		"queue_depth":         "?labelSelector=queue%3Dorders",
		"requests_per_second": "deployments.apps/web?",
		"latency_seconds":     "pods/*?labelSelector=app%3Dweb",
	} {
		found := false
		for q := range m.Seen(metric) {
			found = found || strings.HasPrefix(q, want)
		}
		if !found {
			t.Errorf("%s: the server saw %v; want a read starting %q", metric, m.Seen(metric), want)
		}
	}
	if users := m.Users(); len(users) != 1 || !users["admin"] {
		t.Errorf("X-Remote-User of the metric reads: %v; want the client's user admin, set by the aggregator", users)
	}
}

func TestReadTimeoutThroughAPIServer(t *testing.T) {
	e := newKubeEnv(t)
	m := testenv.NewMetricsServer(t, e.kube, e.ns, "metrics")
	m.Stall("stalled", true)
	for _, n := range []string{"a", "b", "c"} {
		m.Set(n, 1)
	}
	m.Set("pods_metric", 2, 4)
	m.Register(t, e.rc, ExternalGroupVersion, CustomGroupVersion)
	const timeout = 1500 * time.Millisecond
	r, err := New(e.rc, Options{Timeout: timeout, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	qs := []Query{{Type: External, Namespace: e.ns, Metric: "stalled"}}
	for _, n := range []string{"a", "b", "c"} {
		qs = append(qs, Query{Type: External, Namespace: e.ns, Metric: n})
	}
	qs = append(qs, Query{Type: Pods, Namespace: e.ns, Metric: "pods_metric"})
	start := time.Now()
	res := r.Read(context.Background(), qs)
	elapsed := time.Since(start)
	if err := res[0].Err; !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `external metric "stalled"`) {
		t.Errorf("stalled: error %v; want ErrTimeout naming it", err)
	}
	// The other worker read the four others while the stalled metric held its one.
	for _, got := range res[1:] {
		if got.Err != nil || got.Count == 0 {
			t.Errorf("%s: %v, %v", got.Query, got.Value, got.Err)
		}
	}
	if res[4].Average != 3 {
		t.Errorf("pods_metric average %v; want (2 + 4) / 2 = 3", res[4].Average)
	}
	// One timeout, not one per metric, nor an unbounded wait.
	if elapsed < timeout || elapsed > timeout+3*time.Second {
		t.Errorf("Read took %v; want about the timeout %v", elapsed, timeout)
	}
}

func TestReadConcurrencyThroughAPIServer(t *testing.T) {
	e := newKubeEnv(t)
	m := testenv.NewMetricsServer(t, e.kube, e.ns, "metrics")
	const n = 25
	qs := make([]Query, n)
	for i := range qs {
		name := fmt.Sprintf("m%02d", i)
		m.Set(name, float64(i))
		m.Hold(name, 400*time.Millisecond)
		qs[i] = Query{Type: External, Namespace: e.ns, Metric: name}
	}
	m.Register(t, e.rc, ExternalGroupVersion)
	for _, tc := range []struct {
		opts Options
		want int
	}{{Options{}, DefaultConcurrency}, {Options{Concurrency: 4}, 4}} {
		m.ResetPeak()
		r, err := New(e.rc, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range r.Read(context.Background(), qs) {
			if got.Err != nil || got.Value != float64(i) {
				t.Errorf("%s: %v, %v; want %d", got.Query, got.Value, got.Err, i)
			}
		}
		// 25 reads of 400 ms each: the first Concurrency start together.
		if p := m.Peak(); p != tc.want {
			t.Errorf("concurrency %d: the server saw %d reads at once; want %d", tc.opts.Concurrency, p, tc.want)
		}
	}
}
