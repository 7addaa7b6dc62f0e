package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/debi-scaler/debi/config"
)

// testConfigYAML has a debi policy (web), an hpa policy (db) and a shadow one (batch).
const testConfigYAML = `
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, lower: 0.3, upper: 0.7, tolerance: 0.1, window: 0s}
  - name: db
    target: {api_version: apps/v1, kind: StatefulSet, namespace: shop, name: db}
    algorithm: hpa
    request: 1
    scaling: {min_replicas: 1, max_replicas: 10, target: 0.5}
  - name: batch
    target: {namespace: jobs, name: batch}
    algorithm: apa
    request: 1
webhook:
  mode: act
  allow_unauthenticated: true
  queries:
    load_replicas: 'debi_load_replicas{policy="{{.Policy}}"}'
  policies:
    - {name: batch, mode: shadow}
`

func testConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeActuator keeps replicas and HPA floors in memory and records every write.
type fakeActuator struct {
	mu       sync.Mutex
	replicas map[string]int32 // by target name
	floors   map[string]int32
	writes   []string
	err      error // returned by every call when set
}

func newFakeActuator(r map[string]int32) *fakeActuator {
	return &fakeActuator{replicas: r, floors: map[string]int32{}}
}

func (f *fakeActuator) GetScale(_ context.Context, t config.Target) (ScaleInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return ScaleInfo{}, f.err
	}
	n, ok := f.replicas[t.Name]
	if !ok {
		return ScaleInfo{}, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, t.Name)
	}
	return ScaleInfo{Replicas: n, UID: types.UID("uid-" + t.Name)}, nil
}

func (f *fakeActuator) SetReplicas(_ context.Context, t config.Target, n int32, _ ScaleInfo) (WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.replicas[t.Name]
	f.replicas[t.Name] = n
	f.writes = append(f.writes, fmt.Sprintf("%s=%d", t.Name, n))
	return WriteResult{Object: t.Kind + "/" + t.Name, Before: before, After: n}, nil
}

func (f *fakeActuator) SetHPAFloor(_ context.Context, t config.Target, n int32) (WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.floors[t.Name]
	f.floors[t.Name] = n
	f.writes = append(f.writes, fmt.Sprintf("hpa/%s=%d", t.Name, n))
	return WriteResult{Object: "HorizontalPodAutoscaler/" + t.Name, Before: before, After: n}, nil
}

func (f *fakeActuator) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

// staticQuery answers queries from a map; a missing query is an error (as an absent series).
func staticQuery(m map[string]float64) QueryFunc {
	var mu sync.Mutex
	return func(_ context.Context, expr string) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := m[expr]
		if !ok {
			return 0, fmt.Errorf("query %s: want one series, got 0", expr)
		}
		return v, nil
	}
}

// fakePrometheus serves /api/v1/query with one sample per known query.
func fakePrometheus(t testing.TB, values map[string]float64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		res := []any{}
		if v, ok := values[q]; ok {
			res = append(res, map[string]any{"metric": map[string]string{}, "value": []any{float64(time.Now().Unix()), fmt.Sprint(v)}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newTestController(t testing.TB, cfg *config.Config, act Actuator, q QueryFunc, reg prometheus.Registerer) *Controller {
	t.Helper()
	c, err := NewController(cfg, ControllerOptions{Actuator: act, Query: q, Registerer: reg,
		Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testRouter(c *Controller, token string) http.Handler {
	return newRouter(routerOptions{scaler: c, token: token, maxBodyBytes: c.cfg.Webhook.MaxBodyBytes,
		timeout: c.cfg.Webhook.DecisionTimeout, ready: func() error { return nil }, gatherer: prometheus.NewRegistry(),
		metrics: c.m, logger: c.log})
}

// amPayload builds a version 4 notification with one alert per label set.
func amPayload(status string, alerts ...map[string]any) []byte {
	var as []map[string]any
	for _, a := range alerts {
		al := map[string]any{"status": status, "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
			"fingerprint": "abc", "generatorURL": "http://prom/graph"}
		for k, v := range a {
			al[k] = v
		}
		as = append(as, al)
	}
	b, _ := json.Marshal(map[string]any{"version": "4", "status": status, "receiver": "debi", "groupKey": "{}:{policy=\"web\"}",
		"groupLabels": map[string]string{}, "commonLabels": map[string]string{}, "commonAnnotations": map[string]string{},
		"externalURL": "http://am", "truncatedAlerts": 0, "alerts": as, "someFutureField": true})
	return b
}

func labels(kv ...string) map[string]string {
	m := map[string]string{"alertname": "DebiScaleRecommended"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func prometheusRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func testutilCounter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// gaugeValue reads an unlabelled gauge from a registry (NaN when absent).
func gaugeValue(t testing.TB, g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return math.NaN()
}

// testLogger logs through t.Log when -v, else discards.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
