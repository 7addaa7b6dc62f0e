package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// fakeDiscovery is an API server that serves discovery only: the core group, and
// elasticscaler.io once installed is set; it counts discovery requests and keeps the last user
// agent.
type fakeDiscovery struct {
	installed atomic.Bool
	requests  atomic.Int64
	mu        sync.Mutex
	userAgent string
}

func (f *fakeDiscovery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	f.userAgent = r.UserAgent()
	f.mu.Unlock()
	es := metav1.GroupVersionForDiscovery{GroupVersion: "elasticscaler.io/v1alpha1", Version: "v1alpha1"}
	var body any
	switch r.URL.Path {
	case "/api":
		body = metav1.APIVersions{Versions: []string{"v1"}}
	case "/api/v1":
		body = metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get"}}}}
	case "/apis":
		l := metav1.APIGroupList{}
		if f.installed.Load() {
			l.Groups = append(l.Groups, metav1.APIGroup{Name: "elasticscaler.io", Versions: []metav1.GroupVersionForDiscovery{es}, PreferredVersion: es})
		}
		body = l
	case "/apis/elasticscaler.io/v1alpha1":
		if !f.installed.Load() {
			http.NotFound(w, r)
			return
		}
		body = metav1.APIResourceList{GroupVersion: es.GroupVersion, APIResources: []metav1.APIResource{
			{Name: "elasticscalers", Kind: "ElasticScaler", Namespaced: true, Verbs: metav1.Verbs{"get"}}}}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// TestClients: the clients of one configuration carry its user agent, and the Mapper finds a
// kind installed after its first discovery, rediscovering only for a kind it does not know.
func TestClients(t *testing.T) {
	f := &fakeDiscovery{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rc, err := RestConfig(&rest.Config{Host: srv.URL}, "", "debi-test", 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubernetes == nil || c.Dynamic == nil || c.Discovery == nil || c.Mapper.DeferredDiscoveryRESTMapper == nil {
		t.Fatalf("NewClients = %+v: a client is missing", c)
	}
	if f.requests.Load() != 0 {
		t.Errorf("NewClients made %d requests, want none before use", f.requests.Load())
	}

	pod := schema.GroupKind{Kind: "Pod"}
	if m, err := c.Mapper.RESTMapping(pod, "v1"); err != nil || m.Resource.Resource != "pods" {
		t.Fatalf("Pod: %v, %v", m, err)
	}
	f.mu.Lock()
	ua := f.userAgent
	f.mu.Unlock()
	if ua != "debi-test" {
		t.Errorf("user agent %q, want debi-test", ua)
	}
	n := f.requests.Load()
	if _, err := c.Mapper.RESTMapping(pod, "v1"); err != nil || f.requests.Load() != n {
		t.Errorf("a known kind: err %v, %d more requests, want none (cached)", err, f.requests.Load()-n)
	}

	es := schema.GroupKind{Group: "elasticscaler.io", Kind: "ElasticScaler"}
	if _, err := c.Mapper.RESTMapping(es, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("ElasticScaler before its CRD: err %v, want no match", err)
	}
	f.installed.Store(true) // the CRD installed after the first discovery
	if m, err := c.Mapper.RESTMapping(es, "v1alpha1"); err != nil || m.Resource.Resource != "elasticscalers" {
		t.Fatalf("ElasticScaler after its CRD: %v, %v", m, err)
	}
}

// TestClientsShareRateLimit: the clients built from one RestConfig, and from a copy of it (as
// the metrics APIs' reader makes), draw on one token bucket: once two requests through two of
// them have spent a burst of 2, a third client has to wait.
func TestClientsShareRateLimit(t *testing.T) {
	f := &fakeDiscovery{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rc, err := RestConfig(&rest.Config{Host: srv.URL}, "", "debi-test", 0.001, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewClients(rc)
	if err != nil {
		t.Fatal(err)
	}
	if a.Kubernetes.CoreV1().RESTClient().GetRateLimiter() != b.Kubernetes.AppsV1().RESTClient().GetRateLimiter() {
		t.Error("two clients of one configuration have rate limiters of their own")
	}
	ctx := context.Background()
	if err := a.Kubernetes.CoreV1().RESTClient().Get().AbsPath("/api").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Discovery.ServerResourcesForGroupVersion("v1"); err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(rest.CopyConfig(rc))
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Kubernetes.CoreV1().RESTClient().Get().AbsPath("/api").Do(tctx).Error(); err == nil {
		t.Error("a third request within the burst of 2 was not held back by the shared rate limit")
	}
	if n := f.requests.Load(); n != 2 {
		t.Errorf("%d requests reached the server, want 2", n)
	}
}
