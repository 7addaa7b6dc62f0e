package webhook

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/debi-scaler/debi/config"
	kubepkg "github.com/debi-scaler/debi/internal/kube"
)

// testConfigYAML has a debi policy (web), an hpa policy (db) and a shadow one (batch).
const testConfigYAML = `
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, lower: 0.3, upper: 0.7, tolerance: 0.1, window: 5m}
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
	mu          sync.Mutex
	replicas    map[string]int32 // by target name
	floors      map[string]int32
	annotations map[string]map[string]string // target annotations, by target name
	hpas        map[string]string            // HPA name scaling a target, by target name
	tidals      map[string]*unstructured.Unstructured
	writes      []string
	marks       []string // debi.io/applied annotations written, "ns/name=value"
	markErr     error    // returned by MarkTidal when set
	err         error    // returned by every call when set
	// conflicts makes the next n writes fail with a conflict, after setting the size to
	// conflictSize (someone else wrote in between).
	conflicts    int
	conflictSize int32
	reads        int
}

func newFakeActuator(r map[string]int32) *fakeActuator {
	return &fakeActuator{replicas: r, floors: map[string]int32{}, annotations: map[string]map[string]string{},
		hpas: map[string]string{}, tidals: map[string]*unstructured.Unstructured{}}
}

func (f *fakeActuator) GetScale(_ context.Context, t config.Target) (ScaleInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return ScaleInfo{}, f.err
	}
	n, ok := f.replicas[t.Name]
	if !ok {
		return ScaleInfo{}, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, t.Name)
	}
	return ScaleInfo{Replicas: n, UID: types.UID("uid-" + t.Name), Annotations: f.annotations[t.Name]}, nil
}

func (f *fakeActuator) SetReplicas(_ context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.replicas[t.Name]
	if f.conflicts > 0 {
		f.conflicts--
		f.replicas[t.Name] = f.conflictSize
		return WriteResult{Object: t.Kind + "/" + t.Name, Before: before, After: before, Conflicts: 1},
			apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, t.Name, fmt.Errorf("the object has been modified"))
	}
	if before != cur.Replicas {
		return WriteResult{}, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, t.Name, fmt.Errorf("stale read"))
	}
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

func (f *fakeActuator) ScalingHPA(_ context.Context, t config.Target) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hpas[t.Name], nil
}

func (f *fakeActuator) GetTidal(_ context.Context, _ config.WatchResource, ns, name string) (*unstructured.Unstructured, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.tidals[ns+"/"+name]; ok {
		return u.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "tidal.io", Resource: "tidals"}, name)
}

// MarkTidal records the annotation on the stored Tidal and in marks.
func (f *fakeActuator) MarkTidal(_ context.Context, _ config.WatchResource, ns, name, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.markErr != nil {
		return f.markErr
	}
	u, ok := f.tidals[ns+"/"+name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "tidal.io", Resource: "tidals"}, name)
	}
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["debi.io/applied"] = value // AnnotationTidalApplied
	u.SetAnnotations(a)
	f.marks = append(f.marks, ns+"/"+name+"="+value)
	return nil
}

// tidalObject builds a Tidal as the API server would return it, its status written by its
// controller for its spec (generation 1, observedGeneration 1, Ready True).
func tidalObject(ns, name string, lbls map[string]string, targetRef map[string]any, desired any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal",
		"metadata": map[string]any{"namespace": ns, "name": name, "generation": int64(1)},
		"spec":     map[string]any{},
		"status": map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "RuleActive", "observedGeneration": int64(1)}}},
	}}
	u.SetLabels(lbls)
	if targetRef != nil {
		u.Object["spec"].(map[string]any)["targetRef"] = targetRef
	}
	if desired != nil {
		u.Object["status"].(map[string]any)["desiredReplicas"] = desired
	}
	return u
}

func (f *fakeActuator) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

// staticQuery answers queries from a map. A query missing from the map answers no series
// (ErrNoSeries), except the exporter's health inputs, which answer "fresh" unless the map says
// otherwise: stale 0, age 5 s, bounds that allow anything (floor 0, ceiling 1000), and a window
// load of 0 (the window term then never decides; debi policies read it because the
// configuration's window is never 0: see TestWindowLoad). A NaN
// in the map also answers no series; -1 answers several series.
func staticQuery(m map[string]float64) QueryFunc {
	var mu sync.Mutex
	return func(_ context.Context, expr string) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := m[expr]
		switch {
		case ok && math.IsNaN(v):
			return 0, fmt.Errorf("query %s: %w", expr, ErrNoSeries)
		case ok && v == -1:
			return 0, fmt.Errorf("query %s: %w: 2", expr, ErrSeveralSeries)
		case ok:
			return v, nil
		case strings.HasPrefix(expr, "debi_policy_stale{"):
			return 0, nil
		case strings.HasPrefix(expr, "time() - debi_policy_last_success_timestamp_seconds{"):
			return 5, nil
		case strings.HasPrefix(expr, "debi_load_ratio{") && strings.HasSuffix(expr, `load="window"}`):
			return 0, nil
		case strings.HasPrefix(expr, "debi_decision_floor_replicas{"):
			return 0, nil
		case strings.HasPrefix(expr, "debi_decision_ceiling_replicas{"):
			return 1000, nil
		}
		return 0, fmt.Errorf("query %s: %w", expr, ErrNoSeries)
	}
}

// prometheusDown is a Prometheus that cannot be reached.
func prometheusDown(_ context.Context, expr string) (float64, error) {
	return 0, fmt.Errorf("query %s: dial tcp 127.0.0.1:9: connection refused", expr)
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
	return NewRouter(RouterOptions{scaler: c, token: token, maxBodyBytes: c.cfg.Webhook.MaxBodyBytes,
		timeout: c.cfg.Webhook.DecisionTimeout, Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(),
		Metrics: c.m, Logger: c.log})
}

func prometheusRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func testutilCounter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// apiStatus is an API server error with the given code and reason.
func apiStatus(code int32, reason string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: metav1.StatusReason(reason), Message: reason}}
}

// watchTidals runs c's Tidal watch on an informer cache of its own (dyn's, in the policies'
// namespaces), shut down when it returns.
func watchTidals(ctx context.Context, c *Controller, dyn dynamic.Interface, tc config.TidalConfig) {
	inf := kubepkg.NewInformers(dyn)
	inf.Start(ctx)
	defer inf.Shutdown()
	c.WatchTidals(ctx, inf, tc)
}
