package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
)

// BenchmarkNotify measures notifications over real HTTP on loopback, one at a time as
// Alertmanager sends them to one receiver: throughput (notifications/s) and p50/p99 latency.
//
//   - decision: HTTP + decode + a query to a fake Prometheus over HTTP + algorithm + in-memory
//     actuator (no API server);
//   - decision+patch: the same against the real API server (GET scale + PUT scale + Event);
//     needs KUBECONFIG_DEBI or DEBI_K8S_ASSETS, else skipped.
//
// One Prometheus query per decision (load_replicas and window_load off; with the defaults there
// are three). The load alternates so every notification changes the size (apa, target 0.5: W 1.0 at 2
// replicas -> 4; W 0.25 at 4 -> 2), so each one in decision+patch really writes.
//
//	go test ./webhook -run '^$' -bench Notify -benchtime 2000x
func BenchmarkNotify(b *testing.B) {
	b.Run("decision", func(b *testing.B) {
		act := newFakeActuator(map[string]int32{"load": 2})
		benchNotify(b, "bench", act, func() int32 { return act.replicas["load"] })
	})
	b.Run("decision+patch", func(b *testing.B) {
		e := newKubeEnv(b)
		e.Deployment(b, e.NS, "load", 2)
		rc := rest.CopyConfig(e.RC)
		rc.QPS, rc.Burst = 5000, 10000 // measure the server, not client-go's rate limiter
		act, err := NewKubeActuator(rc)
		if err != nil {
			b.Fatal(err)
		}
		benchNotify(b, e.NS, act, func() int32 { return e.Replicas(b, e.NS, "Deployment", "load") })
	})
}

func benchNotify(b *testing.B, ns string, act Actuator, replicas func() int32) {
	var calls atomic.Int64
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := "1.0"
		if calls.Add(1)%2 == 0 {
			v = "0.25"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,%q]}]}}`, time.Now().Unix(), v)
	}))
	defer prom.Close()
	cfg := testConfig(b, fmt.Sprintf(`
policies:
  - name: load
    target: {namespace: %s, name: load}
    algorithm: apa
    request: 1
    scaling: {min_replicas: 1, max_replicas: 10, target: 0.5}
webhook: {mode: act, allow_unauthenticated: true, queries: {load_replicas: none, window_load: none}}
`, ns))
	q := promQuery(b, prom.URL, 0)
	c, err := NewController(cfg, ControllerOptions{Actuator: act, Query: q})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(NewRouter(RouterOptions{scaler: c, token: "t", maxBodyBytes: config.DefaultWebhookMaxBodyBytes,
		timeout: 10 * time.Second, Ready: func() error { return nil }, Gatherer: prometheusRegistry(), Metrics: c.m, Logger: c.log}))
	defer srv.Close()
	body := testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "load", "namespace", ns)})
	client := srv.Client()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/alertmanager", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// b.N alternations starting at 2: an odd count ends at 4, an even one back at 2.
	want := int32(2)
	if b.N%2 == 1 {
		want = 4
	}
	if got := replicas(); got != want {
		b.Fatalf("after %d notifications replicas = %d, want %d", b.N, got, want)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "notifications/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
