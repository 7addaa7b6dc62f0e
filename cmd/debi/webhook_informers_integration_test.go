package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/webhook"
)

// apiCounter counts the LIST and WATCH requests of a client, by resource.
type apiCounter struct {
	mu sync.Mutex
	n  map[string]int // "<resource> LIST|WATCH" → requests
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// counted is a copy of rc whose requests to the collections of resources are counted.
func (c *apiCounter) counted(rc *rest.Config, resources ...string) *rest.Config {
	rc = rest.CopyConfig(rc)
	c.n = map[string]int{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			res := path.Base(r.URL.Path)
			for _, want := range resources {
				if r.Method == http.MethodGet && res == want {
					verb := "LIST"
					if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
						verb = "WATCH"
					}
					c.mu.Lock()
					c.n[res+" "+verb]++
					c.mu.Unlock()
				}
			}
			return rt.RoundTrip(r)
		})
	})
	return rc
}

func (c *apiCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *apiCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, v := range c.n {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestWebhookOneWatchPerResource: one webhook process with global.elastic_scalers and the Tidal
// watch on — the ElasticScaler status writer, the ElasticScaler source (with its Tidal cache for
// StateTrigger objects), the HPA owner and the Tidal watch all read ElasticScalers or Tidals —
// lists and watches each resource once (internal/kube.Informers), also after the Tidal watch was
// restarted by an ElasticScaler's change and by a reload. Every request of the process to the
// collections is counted on the wire.
func TestWebhookOneWatchPerResource(t *testing.T) {
	e := newKubeEnv(t)
	ctx := context.Background()
	e.ApplyFile(t, "../../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	e.ApplyFile(t, "../../deploy/crds/tidal.io_tidals.yaml", "")
	esGVR := schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}
	for _, gvr := range []schema.GroupVersionResource{esGVR, testenv.TidalResource} {
		testenv.Poll(t, 20*time.Second, gvr.Resource+" served", func() bool {
			_, err := e.Dyn.Resource(gvr).Namespace(e.NS).List(ctx, metav1.ListOptions{})
			return err == nil
		})
	}
	e.Deployment(t, e.NS, "web", 3)
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	file := fmt.Sprintf(`global: {elastic_scalers: {enabled: true, namespaces: [%[1]s]}}
policies:
  - name: web
    target: {namespace: %[1]s, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 1, max_replicas: 10, window: 0s}
webhook:
  allow_unauthenticated: true
  tidal: {enabled: true, resync_period: 1s}
  leader_election: {namespace: %[1]s, lease_duration: 3s, renew_deadline: 2s, retry_period: 500ms}
`, e.NS)
	if err := os.WriteFile(cfgFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var c apiCounter
	rc := c.counted(e.RC, "elasticscalers", "tidals", "horizontalpodautoscalers")
	reg := prometheus.NewRegistry()
	url := runWebhook(t, webhookOptions{ConfigFile: cfgFile, RestConfig: rc, EnableLifecycle: true}, reg)

	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": "api-scaler", "namespace": e.NS},
		"spec": map[string]any{
			"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
			"minReplicas": int64(1), "maxReplicas": int64(10),
			"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
				"scalingAlgorithm": "APA",
				"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
					"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
					"query": `sum(rate(http_requests_total{job="api"}[1m]))`}}},
			}},
		},
	}}
	if _, err := e.Dyn.Resource(esGVR).Namespace(e.NS).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tidal := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal",
		"metadata": map[string]any{"name": "web-tidal", "namespace": e.NS, "labels": map[string]any{webhook.LabelScalerName: "web"}},
		"spec": map[string]any{"targetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
			"triggers": map[string]any{"times": map[string]any{"rules": []any{
				map[string]any{"name": "night", "cron": "0 0 22 * * *", "replicas": int64(2)}}}}},
	}}
	if _, err := e.Dyn.Resource(testenv.TidalResource).Namespace(e.NS).Create(ctx, tidal, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := `policy="` + e.NS + `.api-scaler"`
	// Every consumer is running: the object's policy is in force (the ElasticScaler source;
	// the Tidal watch restarted with it), the Tidal watch is on, the HPA owner watches debi's
	// HPAs (after its ElasticScaler cache), the status writer wrote the object's status.
	testenv.Poll(t, 30*time.Second, "every consumer running", func() bool {
		u, err := e.Dyn.Resource(esGVR).Namespace(e.NS).Get(ctx, "api-scaler", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return len(conds) > 0 && strings.Contains(metricsBody(url), policy) &&
			testenv.GaugeValue(t, reg, "debi_webhook_tidal_watch_enabled") == 1 && c.get("horizontalpodautoscalers WATCH") >= 1
	})
	// A change of the object (a new policy set: the Tidal watch restarts) and a reload (again).
	u, err := e.Dyn.Resource(esGVR).Namespace(e.NS).Get(ctx, "api-scaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "shadow", "spec", "debi", "mode")
	if _, err := e.Dyn.Resource(esGVR).Namespace(e.NS).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 20*time.Second, "mode shadow in force", func() bool {
		return strings.Contains(metricsBody(url), `mode="shadow",`+policy)
	})
	if err := os.WriteFile(cfgFile, []byte(file+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, msg := testenv.Request(t, "POST", url+"/-/reload", "", ""); code != 200 {
		t.Fatalf("reload: %d %s", code, msg)
	}
	testenv.Poll(t, 20*time.Second, "the Tidal watch again", func() bool { return testenv.GaugeValue(t, reg, "debi_webhook_tidal_watch_enabled") == 1 })
	time.Sleep(3 * time.Second) // room for any late list or watch (and a few Tidal watch resyncs)
	t.Logf("LIST/WATCH requests of one webhook process: %s", c.String())
	for _, r := range []string{"elasticscalers", "tidals"} {
		if n := c.get(r + " WATCH"); n != 1 {
			t.Errorf("%s: %d watches, want 1 (%s)", r, n, c.String())
		}
		if n := c.get(r + " LIST"); n > 1 {
			t.Errorf("%s: %d lists, want at most 1 (%s)", r, n, c.String())
		}
	}
}

func metricsBody(url string) string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
