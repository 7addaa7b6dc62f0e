package exporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/debi-scaler/debi/config"
)

// endpointFleet is a configuration of three policies whose qps metrics share one template
// (batchable): a and b on endpoint B, c on global.prometheus_url.
const endpointFleet = `
global: {interval: 15s, prometheus_url: http://prometheus-a:9090}
policies:
%s`

func endpointPolicy(name, ep string) string {
	e := ""
	if ep != "" {
		e = fmt.Sprintf(", endpoint: {url: %q}", ep)
	}
	return fmt.Sprintf(`  - name: %s
    target: {namespace: shop, name: %s}
    algorithm: hpa
    history_step: 15s
    history: 4
    metrics:
      - {name: qps, unit: requests_per_second, query: 'sum(rate(reqs{app="%s"}[1m]))', target: {type: AverageValue, averageValue: "1"}%s}
`, name, name, name, e)
}

// loadFor is a series of requests per second per app, and the sizes of each workload.
func loadFor(rps map[string]float64) string {
	var b strings.Builder
	b.WriteString("load 15s\n")
	for app, r := range rps {
		fmt.Fprintf(&b, "  reqs{app=%q} 0+%gx120\n", app, r*15)
		fmt.Fprintf(&b, "  kube_deployment_spec_replicas{namespace=\"shop\",deployment=%q} 2x120\n", app)
		fmt.Fprintf(&b, "  kube_deployment_status_replicas_ready{namespace=\"shop\",deployment=%q} 2x120\n", app)
	}
	return b.String()
}

// TestEndpointRouting: the queries of a metric on its own endpoint go to that endpoint's client
// (one client per distinct endpoint, built once), batched with the other queries of the same
// endpoint only; the sizes and the metrics without an endpoint stay on the global client.
func TestEndpointRouting(t *testing.T) {
	// Global Prometheus A has app a and b at 100 rps (wrong values for them) and c at 7; B has a
	// at 3 and b at 5. Each policy must read its own server's value.
	a := newEngineQuerier(t, loadFor(map[string]float64{"a": 100, "b": 100, "c": 7}))
	b := newEngineQuerier(t, loadFor(map[string]float64{"a": 3, "b": 5}))
	c := loadConfig(t, fmt.Sprintf(endpointFleet, endpointPolicy("a", "http://prometheus-b:9090")+
		endpointPolicy("b", "http://prometheus-b:9090")+endpointPolicy("c", "")))
	var mu sync.Mutex
	built := 0
	e := newTestExporterWith(t, c, a, func(ep config.Endpoint) (Querier, error) {
		mu.Lock()
		defer mu.Unlock()
		built++
		if ep.URL != "http://prometheus-b:9090" {
			return nil, fmt.Errorf("unexpected endpoint %s", ep.URL)
		}
		return b, nil
	})
	if built != 1 || len(e.endpoints) != 1 {
		t.Fatalf("%d clients built, %d endpoints: want one for B", built, len(e.endpoints))
	}
	// Three batches: replicas and ready_replicas of the three policies on A, qps of a and b on B
	// (c's qps, alone on A, is queried by itself).
	onB := 0
	for _, g := range e.batches {
		switch {
		case g.ep != nil:
			onB++
			if len(g.members) != 2 || !strings.Contains(g.expr, "reqs") {
				t.Errorf("batch on B %s with %d members, want a and b's qps", g.expr, len(g.members))
			}
		case strings.Contains(g.expr, "reqs"):
			t.Errorf("qps batched on A: %s", g.expr)
		}
	}
	if len(e.batches) != 3 || onB != 1 {
		t.Fatalf("%d batches, %d on B: want 3, one on B", len(e.batches), onB)
	}
	t0 := time.Unix(0, 0).Add(10 * time.Minute)
	for k := range 3 {
		e.Step(context.Background(), t0.Add(time.Duration(k)*15*time.Second))
	}
	want := map[string]float64{"a": 3, "b": 5, "c": 7}
	for _, p := range e.snap.Load().policies {
		got := p.metrics[0].demand
		if d := got - want[p.labels[0]]; d > 1e-9 || d < -1e-9 {
			t.Errorf("policy %s: demand %v, want %v from its own endpoint", p.labels[0], got, want[p.labels[0]])
		}
		if p.stale != 0 {
			t.Errorf("policy %s stale", p.labels[0])
		}
	}
	// B answered the batch of a and b, and nothing else: the sizes are A's.
	bi, br := b.counts()
	if bi != 3 || br != 1 { // one instant batch a step, one range batch for the history
		t.Errorf("B answered %d instant and %d range queries, want 3 and 1", bi, br)
	}

	// A reload that keeps the endpoint keeps its client.
	if _, err := e.apply(c, c.Policies, nil); err != nil {
		t.Fatal(err)
	}
	if built != 1 {
		t.Errorf("a reload with the same endpoint built %d clients, want 1", built)
	}
}

// TestEndpointDown: a metric whose endpoint does not answer is missing with an error naming the
// policy's field, the metric and the endpoint; the other policies run.
func TestEndpointDown(t *testing.T) {
	a := newEngineQuerier(t, loadFor(map[string]float64{"a": 100, "c": 7}))
	down := &fakeQuerier{down: true}
	c := loadConfig(t, fmt.Sprintf(endpointFleet, endpointPolicy("a", "http://prometheus-b:9090")+endpointPolicy("c", "")))
	e := newTestExporterWith(t, c, a, func(config.Endpoint) (Querier, error) { return down, nil })
	t0 := time.Unix(0, 0).Add(10 * time.Minute)
	ps := e.policies[0]
	_, err := e.instant(context.Background(), ps, qDemand, ps.queries()[qDemand], t0)
	if !errors.Is(err, errDown) {
		t.Fatalf("err %v, want the endpoint's", err)
	}
	msg := ps.queryError(qDemand, err).Error()
	for _, w := range []string{"policies[0].metrics[0].query", `metric "qps"`, "endpoint http://prometheus-b:9090"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not name %s", msg, w)
		}
	}
	for k := range 2 {
		e.Step(context.Background(), t0.Add(time.Duration(k)*15*time.Second))
	}
	for _, p := range e.snap.Load().policies {
		if wantStale := p.labels[0] == "a"; (p.stale == 1) != wantStale {
			t.Errorf("policy %s stale %v, want %v", p.labels[0], p.stale, wantStale)
		}
	}
}

// newTestExporterWith is New with the endpoints' clients from build.
func newTestExporterWith(t *testing.T, c *config.Config, q Querier, build EndpointQuerier) *Exporter {
	t.Helper()
	e, err := newExporter(c, c.Policies, q, nil, prometheus.NewRegistry(), build)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestEndpointClientSettings: an endpoint's client sends its own credentials (bearer token,
// basic auth) and never the global ones.
func TestEndpointClientSettings(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[600,"42"]}]}}`)
	}))
	defer srv.Close()
	for _, tc := range []struct{ http, want string }{
		{"{authorization: {credentials: tok-b}}", "Bearer tok-b"},
		{"{basic_auth: {username: debi, password: pw}}", "Basic ZGViaTpwdw=="}, // base64("debi:pw")
		{"", ""}, // the default client: not global.http_config's token
	} {
		hc := ""
		if tc.http != "" {
			hc = ", http_config: " + tc.http
		}
		c := loadConfig(t, fmt.Sprintf(`
global: {prometheus_url: http://prometheus-a:9090, http_config: {authorization: {credentials: global-token}}}
policies:
  - name: a
    target: {namespace: shop, name: a}
    algorithm: hpa
    metrics:
      - {name: qps, unit: requests_per_second, query: 'sum(rate(reqs[1m]))', target: {type: AverageValue, averageValue: "1"}, endpoint: {url: %q%s}}
`, srv.URL, hc))
		ep := c.Policies[0].ScaleMetrics()[0].Endpoint
		q, err := NewEndpointQuerier(*ep)
		if err != nil {
			t.Fatal(err)
		}
		v, err := instantValue(context.Background(), q, "sum(rate(reqs[1m]))", time.Unix(600, 0))
		if err != nil || v != 42 {
			t.Fatalf("%s: %v, %v; want 42", tc.http, v, err)
		}
		mu.Lock()
		if got := auth[len(auth)-1]; got != tc.want {
			t.Errorf("http_config %s: Authorization %q, want %q", tc.http, got, tc.want)
		}
		mu.Unlock()
	}
}

// TestEndpointClientError: an endpoint whose client cannot be built (a CA file that does not
// exist) fails New with an error naming the policy's endpoint field and the metric.
func TestEndpointClientError(t *testing.T) {
	c := loadConfig(t, `
global: {prometheus_url: http://prometheus-a:9090}
policies:
  - name: a
    target: {namespace: shop, name: a}
    algorithm: hpa
    metrics:
      - {name: qps, unit: requests_per_second, query: 'sum(rate(reqs[1m]))', target: {type: AverageValue, averageValue: "1"},
         endpoint: {url: 'https://prometheus-b:9090', http_config: {tls_config: {ca_file: /nonexistent/ca.pem}}}}
`)
	_, err := New(c, c.Policies, &fakeQuerier{}, nil, prometheus.NewRegistry())
	if err == nil || !strings.Contains(err.Error(), `policies[0].metrics[0].endpoint (policy "a", metric "qps")`) || !strings.Contains(err.Error(), "ca.pem") {
		t.Fatalf("New: %v, want an error naming policies[0].metrics[0].endpoint and the CA file", err)
	}
}
