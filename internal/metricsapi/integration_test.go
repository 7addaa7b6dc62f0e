package metricsapi

// Integration tests: metrics served by a test aggregated API server (metricsServer, in this
// file), registered with a real kube-apiserver through APIService objects, read by the Reader
// through the apiserver's aggregator. The API server comes from KUBECONFIG_DEBI or
// DEBI_K8S_ASSETS as in webhook/integration_test.go; hack/k8s-env.sh gives it the front-proxy
// flags aggregation needs.
//
// Routing: the APIService points at a Service of type ExternalName "127.0.0.1" in the test's
// namespace. kube-apiserver without --enable-aggregator-routing resolves an APIService's Service
// to its cluster IP, or, for an ExternalName Service, to the external name and the APIService's
// port (k8s.io/apiserver/pkg/util/proxy.ResolveCluster): the aggregator dials the test server on
// loopback, which an EndpointSlice (validation refuses loopback addresses) could not name.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/debi-scaler/debi/internal/testenv"
)

var kubeconfigPath string // set by TestMain

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kubeconfigPath)) }

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

type kubeEnv struct {
	rc   *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
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
	e := &kubeEnv{rc: rc, kube: kubernetes.NewForConfigOrDie(rc), dyn: dynamic.NewForConfigOrDie(rc)}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	e.ns = "debi-metricsapi-" + hex.EncodeToString(b)
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{}) })
	return e
}

// metricsServer is a test aggregated API server of external.metrics.k8s.io/v1beta1 and
// custom.metrics.k8s.io/v1beta2. It accepts only the front proxy's client certificate (the CA
// of the extension-apiserver-authentication ConfigMap), as a real adapter does.
type metricsServer struct {
	t   *testing.T
	srv *httptest.Server
	ca  []byte // PEM of the CA of the server's certificate, the APIService's caBundle
	ts  time.Time

	mu       sync.Mutex
	values   map[string][]float64      // by metric name
	hold     map[string]time.Duration  // metric name → how long a read waits before answering
	stall    map[string]bool           // metric name → never answers (until the client gives up)
	seen     map[string]map[string]int // metric name → query string → reads
	users    map[string]bool           // X-Remote-User of metric reads
	cur, max int                       // metric reads in flight, and the most at once
	stop     chan struct{}
}

func newMetricsServer(t *testing.T, e *kubeEnv, svc string) *metricsServer {
	t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientCA := x509.NewCertPool()
	if !clientCA.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		t.Fatal("extension-apiserver-authentication has no requestheader-client-ca-file: the API server lacks the front-proxy flags (--requestheader-client-ca-file, --proxy-client-cert-file…) hack/k8s-env.sh gives it")
	}
	m := &metricsServer{t: t, ts: time.Now().Truncate(time.Second), values: map[string][]float64{}, hold: map[string]time.Duration{},
		stall: map[string]bool{}, seen: map[string]map[string]int{}, users: map[string]bool{}, stop: make(chan struct{})}
	cert, caPEM := serverCert(t, svc+"."+e.ns+".svc") // the name the aggregator verifies
	m.ca = caPEM
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA}
	m.srv.StartTLS()
	t.Cleanup(func() { close(m.stop); m.srv.Close() })
	return m
}

func (m *metricsServer) port() int32 {
	_, p, _ := net.SplitHostPort(m.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

func (m *metricsServer) serve(w http.ResponseWriter, r *http.Request) {
	if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "front-proxy-client" {
		http.Error(w, "not the front proxy: "+cn, http.StatusForbidden)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) == 3 && parts[0] == "apis" { // discovery of a group version
		resources := []metav1.APIResource{{Name: "*", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}}}
		if parts[1] == CustomGroupVersion.Group {
			resources = []metav1.APIResource{{Name: "pods/*", Namespaced: true, Kind: "MetricValueList", Verbs: []string{"get"}}}
		}
		writeJSON(w, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: parts[1] + "/" + parts[2], APIResources: resources})
		return
	}
	// external: apis/G/V/namespaces/NS/METRIC; custom: apis/G/V/namespaces/NS/RESOURCE/NAME/METRIC
	if len(parts) < 6 || parts[3] != "namespaces" {
		http.NotFound(w, r)
		return
	}
	metric := parts[len(parts)-1]
	m.mu.Lock()
	m.users[r.Header.Get("X-Remote-User")] = true
	if m.seen[metric] == nil {
		m.seen[metric] = map[string]int{}
	}
	m.seen[metric][strings.Join(parts[5:len(parts)-1], "/")+"?"+r.URL.RawQuery]++
	m.cur++
	m.max = max(m.max, m.cur)
	vs, ok := m.values[metric]
	hold, stall := m.hold[metric], m.stall[metric]
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.cur--; m.mu.Unlock() }()
	if stall {
		select { // until the aggregator, whose client gave up, cancels the request
		case <-r.Context().Done():
		case <-m.stop:
		}
		return
	}
	time.Sleep(hold)
	if !ok {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"no metric `+metric+`"}`, http.StatusNotFound)
		return
	}
	if parts[1] == ExternalGroupVersion.Group {
		l := emv1beta1.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: ExternalGroupVersion.String()}}
		for _, v := range vs {
			l.Items = append(l.Items, emv1beta1.ExternalMetricValue{MetricName: metric, Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
				Timestamp: metav1.NewTime(m.ts), WindowSeconds: ptr.To(int64(60))})
		}
		writeJSON(w, l)
		return
	}
	l := cmv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: CustomGroupVersion.String()}}
	for i, v := range vs {
		l.Items = append(l.Items, cmv1beta2.MetricValue{DescribedObject: corev1.ObjectReference{Name: fmt.Sprintf("obj-%d", i)},
			Metric: cmv1beta2.MetricIdentifier{Name: metric}, Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
			Timestamp: metav1.NewTime(m.ts.Add(-time.Duration(i) * time.Second))})
	}
	writeJSON(w, l)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (m *metricsServer) peak() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// serverCert is a certificate for dnsName and the PEM of the CA that signed it.
func serverCert(t *testing.T, dnsName string) (tls.Certificate, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metrics-test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// register points the APIServices of gvs at m through an ExternalName Service named svc, and
// waits until they are Available and discovery serves them.
func (e *kubeEnv) register(t *testing.T, m *metricsServer, svc string, gvs ...schema.GroupVersion) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.kube.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: e.ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	d := discovery.NewDiscoveryClientForConfigOrDie(e.rc)
	for _, gv := range gvs {
		name := gv.Version + "." + gv.Group
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"group": gv.Group, "version": gv.Version, "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
				"caBundle": base64.StdEncoding.EncodeToString(m.ca), "service": map[string]any{"namespace": e.ns, "name": svc, "port": int64(m.port())}},
		}}
		// A previous test's APIService of the same name may still be going away.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := e.dyn.Resource(apiServiceGVR).Create(ctx, obj, metav1.CreateOptions{})
			return err == nil, ignoreAlreadyExists(err)
		}); err != nil {
			t.Fatalf("create APIService %s: %v", name, err)
		}
		t.Cleanup(func() { _ = e.dyn.Resource(apiServiceGVR).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := e.dyn.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			last = fmt.Sprint(conds)
			for _, c := range conds {
				c := c.(map[string]any)
				if c["type"] == "Available" && c["status"] == "True" {
					ok, err := DiscoveryServed(d)(gv)
					return ok && err == nil, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("APIService %s not available: %v; conditions %s", name, err, last)
		}
	}
}

func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func TestReadThroughAPIServer(t *testing.T) {
	e := newKubeEnv(t)
	m := newMetricsServer(t, e, "metrics")
	m.values["queue_depth"] = []float64{30, 12.5}
	m.values["requests_per_second"] = []float64{250}
	m.values["latency_seconds"] = []float64{0.1, 0.3, 0.2}
	queue := labels.SelectorFromSet(labels.Set{"queue": "orders"})
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	qs := []Query{
		{Type: External, Namespace: e.ns, Metric: "queue_depth", Selector: queue},
		{Type: Object, Namespace: e.ns, Metric: "requests_per_second", Object: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		{Type: Pods, Namespace: e.ns, Metric: "latency_seconds", PodSelector: web},
		{Type: External, Namespace: e.ns, Metric: "missing"},
	}

	// Only the external metrics API registered: the custom metrics are not served.
	e.register(t, m, "metrics", ExternalGroupVersion)
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

	e.register(t, m, "metrics", CustomGroupVersion)
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
		{0, 42.5, 21.25, 2, m.ts, time.Minute},
		{1, 250, 250, 1, m.ts, 0},
		// (0.1 + 0.3 + 0.2) over 3 pods; the oldest 2 s before the server's time.
		{2, 0.6, 0.2, 3, m.ts.Add(-2 * time.Second), 0},
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
	m.mu.Lock()
	defer m.mu.Unlock()
	for metric, want := range map[string]string{
		"queue_depth":         "?labelSelector=queue%3Dorders",
		"requests_per_second": "deployments.apps/web?",
		"latency_seconds":     "pods/*?labelSelector=app%3Dweb",
	} {
		found := false
		for q := range m.seen[metric] {
			found = found || strings.HasPrefix(q, want)
		}
		if !found {
			t.Errorf("%s: the server saw %v; want a read starting %q", metric, m.seen[metric], want)
		}
	}
	if len(m.users) != 1 || !m.users["admin"] {
		t.Errorf("X-Remote-User of the metric reads: %v; want the client's user admin, set by the aggregator", m.users)
	}
}

func TestReadTimeoutThroughAPIServer(t *testing.T) {
	e := newKubeEnv(t)
	m := newMetricsServer(t, e, "metrics")
	m.stall["stalled"] = true
	for _, n := range []string{"a", "b", "c"} {
		m.values[n] = []float64{1}
	}
	m.values["pods_metric"] = []float64{2, 4}
	e.register(t, m, "metrics", ExternalGroupVersion, CustomGroupVersion)
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
	m := newMetricsServer(t, e, "metrics")
	const n = 25
	qs := make([]Query, n)
	for i := range qs {
		name := fmt.Sprintf("m%02d", i)
		m.values[name] = []float64{float64(i)}
		m.hold[name] = 400 * time.Millisecond
		qs[i] = Query{Type: External, Namespace: e.ns, Metric: name}
	}
	e.register(t, m, "metrics", ExternalGroupVersion)
	for _, tc := range []struct {
		opts Options
		want int
	}{{Options{}, DefaultConcurrency}, {Options{Concurrency: 4}, 4}} {
		m.mu.Lock()
		m.max = 0
		m.mu.Unlock()
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
		if p := m.peak(); p != tc.want {
			t.Errorf("concurrency %d: the server saw %d reads at once; want %d", tc.opts.Concurrency, p, tc.want)
		}
	}
}
