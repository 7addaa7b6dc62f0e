package testenv

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
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// Metrics APIs served behind a real kube-apiserver's aggregator: a MetricsServer is a test
// aggregated API server of external.metrics.k8s.io/v1beta1 and custom.metrics.k8s.io/v1beta2,
// registered through APIService objects (Register). The API server needs the front-proxy flags
// hack/k8s-env.sh gives it.
//
// Routing: the APIService points at a Service of type ExternalName "127.0.0.1" in the test's
// namespace. kube-apiserver without --enable-aggregator-routing resolves an APIService's Service
// to its cluster IP, or, for an ExternalName Service, to the external name and the APIService's
// port (k8s.io/apiserver/pkg/util/proxy.ResolveCluster): the aggregator dials the test server on
// loopback, which an EndpointSlice (validation refuses loopback addresses) could not name.

// The group versions a MetricsServer serves.
var (
	ExternalMetricsGV = emv1beta1.SchemeGroupVersion
	CustomMetricsGV   = cmv1beta2.SchemeGroupVersion
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// KubeNamespace creates a namespace named prefix-<random> for the test, deleted at cleanup.
func KubeNamespace(t testing.TB, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := prefix + "-" + hex.EncodeToString(b)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// MetricsServer is a test aggregated API server of external.metrics.k8s.io/v1beta1 and
// custom.metrics.k8s.io/v1beta2. It accepts only the front proxy's client certificate (the CA
// of the extension-apiserver-authentication ConfigMap), as a real adapter does. A metric it
// has no values for answers 404.
type MetricsServer struct {
	// TS is the timestamp of the values (the Pods metrics' i-th value is i seconds older).
	TS time.Time

	t       testing.TB
	srv     *httptest.Server
	ca      []byte // PEM of the CA of the server's certificate, the APIService's caBundle
	ns, svc string

	mu       sync.Mutex
	values   map[string][]float64      // by metric name
	hold     map[string]time.Duration  // metric name → how long a read waits before answering
	stall    map[string]bool           // metric name → never answers (until the client gives up)
	seen     map[string]map[string]int // metric name → query string → reads
	users    map[string]bool           // X-Remote-User of metric reads
	cur, max int                       // metric reads in flight, and the most at once
	stop     chan struct{}
}

// NewMetricsServer starts a metrics server for the Service svc of namespace (Register creates
// it), stopped at cleanup.
func NewMetricsServer(t testing.TB, kube kubernetes.Interface, namespace, svc string) *MetricsServer {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientCA := x509.NewCertPool()
	if !clientCA.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		t.Fatal("extension-apiserver-authentication has no requestheader-client-ca-file: the API server lacks the front-proxy flags (--requestheader-client-ca-file, --proxy-client-cert-file…) hack/k8s-env.sh gives it")
	}
	m := &MetricsServer{t: t, TS: time.Now().Truncate(time.Second), ns: namespace, svc: svc, values: map[string][]float64{},
		hold: map[string]time.Duration{}, stall: map[string]bool{}, seen: map[string]map[string]int{}, users: map[string]bool{},
		stop: make(chan struct{})}
	cert, caPEM := serverCert(t, svc+"."+namespace+".svc") // the name the aggregator verifies
	m.ca = caPEM
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA}
	m.srv.StartTLS()
	t.Cleanup(func() { close(m.stop); m.srv.Close() })
	return m
}

// Set makes metric answer values (its series, pods or the object's one value); none makes it
// answer 404.
func (m *MetricsServer) Set(metric string, values ...float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(values) == 0 {
		delete(m.values, metric)
		return
	}
	m.values[metric] = values
}

// Hold makes each read of metric wait d before answering.
func (m *MetricsServer) Hold(metric string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold[metric] = d
}

// Stall makes metric never answer (until the client gives up), or answer again.
func (m *MetricsServer) Stall(metric string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stall[metric] = on
}

// Seen is what reached the server for metric: the path after the namespace and the query
// string, with the number of reads.
func (m *MetricsServer) Seen(metric string) map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.seen[metric])
}

// Users are the X-Remote-User headers of the metric reads (the aggregator sets them).
func (m *MetricsServer) Users() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.users)
}

// Peak is the most metric reads in flight at once since the last ResetPeak.
func (m *MetricsServer) Peak() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// ResetPeak starts counting Peak again.
func (m *MetricsServer) ResetPeak() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.max = 0
}

func (m *MetricsServer) port() int32 {
	_, p, _ := net.SplitHostPort(m.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

func (m *MetricsServer) serve(w http.ResponseWriter, r *http.Request) {
	if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "front-proxy-client" {
		http.Error(w, "not the front proxy: "+cn, http.StatusForbidden)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) == 3 && parts[0] == "apis" { // discovery of a group version
		resources := []metav1.APIResource{{Name: "*", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}}}
		if parts[1] == CustomMetricsGV.Group {
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
	if parts[1] == ExternalMetricsGV.Group {
		l := emv1beta1.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: ExternalMetricsGV.String()}}
		for _, v := range vs {
			l.Items = append(l.Items, emv1beta1.ExternalMetricValue{MetricName: metric, Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
				Timestamp: metav1.NewTime(m.TS), WindowSeconds: ptr.To(int64(60))})
		}
		writeJSON(w, l)
		return
	}
	l := cmv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: CustomMetricsGV.String()}}
	for i, v := range vs {
		l.Items = append(l.Items, cmv1beta2.MetricValue{DescribedObject: corev1.ObjectReference{Name: fmt.Sprintf("obj-%d", i)},
			Metric: cmv1beta2.MetricIdentifier{Name: metric}, Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
			Timestamp: metav1.NewTime(m.TS.Add(-time.Duration(i) * time.Second))})
	}
	writeJSON(w, l)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// serverCert is a certificate for dnsName and the PEM of the CA that signed it.
func serverCert(t testing.TB, dnsName string) (tls.Certificate, []byte) {
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

// Register points the APIServices of gvs at m through its ExternalName Service, and waits until
// they are Available and discovery serves them. The APIServices are deleted at cleanup.
func (m *MetricsServer) Register(t testing.TB, rc *rest.Config, gvs ...schema.GroupVersion) {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	if _, err := kube.CoreV1().Services(m.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: m.svc, Namespace: m.ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	d := discovery.NewDiscoveryClientForConfigOrDie(rc)
	for _, gv := range gvs {
		name := gv.Version + "." + gv.Group
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"group": gv.Group, "version": gv.Version, "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
				"caBundle": base64.StdEncoding.EncodeToString(m.ca), "service": map[string]any{"namespace": m.ns, "name": m.svc, "port": int64(m.port())}},
		}}
		// A previous test's APIService of the same name may still be going away.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(apiServiceGVR).Create(ctx, obj, metav1.CreateOptions{})
			return err == nil, ignoreAlreadyExists(err)
		}); err != nil {
			t.Fatalf("create APIService %s: %v", name, err)
		}
		t.Cleanup(func() { _ = dyn.Resource(apiServiceGVR).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			last = fmt.Sprint(conds)
			for _, c := range conds {
				c := c.(map[string]any)
				if c["type"] == "Available" && c["status"] == "True" {
					_, err := d.ServerResourcesForGroupVersion(gv.String())
					return err == nil, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("APIService %s not available: %v; conditions %s", name, err, last)
		}
	}
}

// Unregister deletes the APIService of gv and waits until discovery no longer serves it.
func (m *MetricsServer) Unregister(t testing.TB, rc *rest.Config, gv schema.GroupVersion) {
	t.Helper()
	ctx := context.Background()
	name := gv.Version + "." + gv.Group
	if err := dynamic.NewForConfigOrDie(rc).Resource(apiServiceGVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete APIService %s: %v", name, err)
	}
	d := discovery.NewDiscoveryClientForConfigOrDie(rc)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := d.ServerResourcesForGroupVersion(gv.String())
		return err != nil, nil
	}); err != nil {
		t.Fatalf("APIService %s still served: %v", name, err)
	}
}

func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
