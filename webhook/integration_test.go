package webhook

// Integration tests: a real kube-apiserver + etcd (and a real Alertmanager for the chain test).
//
// How they get an API server (checked in this order):
//
//	KUBECONFIG_DEBI=<file>   use a running one: `hack/k8s-env.sh up` writes .k8s-state/kubeconfig
//	DEBI_K8S_ASSETS=<dir>    TestMain starts one with `hack/k8s-env.sh up` (KUBEBUILDER_ASSETS=<dir>,
//	                         K8S_STATE in a temp dir, ≈4 s) and stops it with `down` afterwards;
//	                         <dir> is what `hack/k8s-env.sh build` prints
//	neither                  every integration test skips, saying so
//
// The chain test also needs DEBI_ALERTMANAGER_DIR=<dir holding alertmanager> (what
// `hack/servers.sh alertmanager` prints). The API server has no controller-manager: Deployments
// get no pods, which the scale subresource does not need. Each test works in its own namespace.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/process"
	"github.com/debi-scaler/debi/internal/testenv"
)

var kubeconfigPath string // set by TestMain

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kubeconfigPath)) }

// kubeEnv is testenv.KubeEnv with this package's own helpers.
type kubeEnv struct{ *testenv.KubeEnv }

// newKubeEnv returns clients for the test API server and a fresh namespace, or skips.
func newKubeEnv(t testing.TB) *kubeEnv { return &kubeEnv{testenv.NewKubeEnv(t, kubeconfigPath)} }

// recorder returns a real event recorder writing to the API server.
func (e *kubeEnv) recorder(t testing.TB, kube kubernetes.Interface) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "debi-webhook"})
}

// itConfig is a configuration for namespace ns: web (debi, Deployment), db (hpa, StatefulSet),
// workers (apa, the Worker custom resource).
func itConfig(t testing.TB, ns, mode string) *config.Config {
	return testConfig(t, fmt.Sprintf(`
policies:
  - name: web
    target: {namespace: %[1]s, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, window: 0s}
  - name: db
    target: {kind: StatefulSet, namespace: %[1]s, name: db}
    algorithm: hpa
    request: 1
    scaling: {min_replicas: 1, max_replicas: 10, target: 0.5}
  - name: workers
    target: {api_version: example.com/v1, kind: Worker, namespace: %[1]s, name: workers}
    algorithm: apa
    request: 1
    queries: {replicas: 'max(worker_spec_replicas)', ready_replicas: 'max(worker_ready_replicas)'}
    scaling: {min_replicas: 1, max_replicas: 10}
  - name: rs
    target: {kind: ReplicaSet, namespace: %[1]s, name: rs}
    algorithm: hpa
    request: 1
    queries: {replicas: 'max(rs_spec_replicas)', ready_replicas: 'max(rs_ready_replicas)'}
webhook:
  mode: %[2]s
  allow_unauthenticated: true
  queries:
    load_replicas: 'debi_load_replicas{policy="{{.Policy}}"}'
  leader_election: {namespace: %[1]s, lease_duration: 3s, renew_deadline: 2s, retry_period: 500ms}
`, ns, mode))
}

func itQuery() QueryFunc {
	return staticQuery(map[string]float64{
		qWebLoad: 0.9, qWebReplicas: 4,
		`debi_load_ratio{policy="db",load="w"}`: 0.9, `debi_load_replicas{policy="db"}`: 1,
	})
}

// TestKubeAct: mode act patches a Deployment and a StatefulSet through their scale subresource
// (debi and hpa policies), a custom resource through its scale subresource (Tidal push), records
// an Event with the inputs, and a repeated notification writes nothing (same resourceVersion).
func TestKubeAct(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	e.StatefulSet(t, e.NS, "db", 1)
	worker := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Worker",
		"metadata": map[string]any{"name": "workers", "namespace": e.NS}, "spec": map[string]any{"replicas": int64(1)}}}
	workers := e.Dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "workers"}).Namespace(e.NS)
	if _, err := workers.Create(context.Background(), worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	act, err := NewKubeActuator(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewController(itConfig(t, e.NS, "act"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, e.Kube)})
	if err != nil {
		t.Fatal(err)
	}
	msg := mustDecode(t, testenv.AMPayload("firing",
		map[string]any{"labels": testenv.AlertLabels("policy", "web", "namespace", e.NS)},
		map[string]any{"labels": testenv.AlertLabels("policy", "db", "namespace", e.NS)}))
	if _, err := c.Alerts(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	// web: 4 -> 6 (see TestAlertDecisionFromPrometheus); db (hpa, target 0.5): W 0.9 at 1
	// replica, ceil(1·0.9/0.5) = 2.
	if got := e.Replicas(t, e.NS, "Deployment", "web"); got != 6 {
		t.Errorf("deployment replicas = %d, want 6", got)
	}
	if got := e.Replicas(t, e.NS, "StatefulSet", "db"); got != 2 {
		t.Errorf("statefulset replicas = %d, want 2", got)
	}
	ev := e.WaitEvent(t, e.NS, "web", "replicas 4 -> 6")
	if ev.Reason != "DebiScaled" || ev.InvolvedObject.Kind != "Deployment" || ev.InvolvedObject.UID == "" ||
		!strings.Contains(ev.Message, "W=0.900 (source prometheus), target utilization=0.567") {
		t.Errorf("event = %s %s %+v", ev.Reason, ev.Message, ev.InvolvedObject)
	}
	e.WaitEvent(t, e.NS, "db", "replicas 1 -> 2")

	d1, _ := e.Kube.AppsV1().Deployments(e.NS).Get(context.Background(), "web", metav1.GetOptions{})
	if _, err := c.Alerts(context.Background(), msg); err != nil { // Alertmanager's repeat
		t.Fatal(err)
	}
	d2, _ := e.Kube.AppsV1().Deployments(e.NS).Get(context.Background(), "web", metav1.GetOptions{})
	if d1.ResourceVersion != d2.ResourceVersion || *d2.Spec.Replicas != 6 {
		t.Errorf("repeat notification changed the Deployment: rv %s -> %s, replicas %d", d1.ResourceVersion, d2.ResourceVersion, *d2.Spec.Replicas)
	}

	// A custom resource with a scale subresource, driven by a pushed Tidal event: the webhook
	// reads the Tidal (bound by its targetRef) from the API server.
	e.TidalObject(t, e.NS, "t", nil, map[string]any{"apiVersion": "example.com/v1", "kind": "Worker", "name": "workers"}, 3)
	if _, err := c.Tidal(context.Background(), &TidalEvent{Namespace: e.NS, Name: "t"}); err != nil {
		t.Fatal(err)
	}
	u, err := workers.Get(context.Background(), "workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); n != 3 {
		t.Errorf("worker spec.replicas = %d, want 3", n)
	}
	e.WaitEvent(t, e.NS, "workers", "replicas 1 -> 3 (tidal)")

	// A ReplicaSet, through a pushed Tidal bound by its labels.
	lbl := map[string]string{"app": "rs"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: e.NS}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/rs:1"}}}}}}
	if _, err := e.Kube.AppsV1().ReplicaSets(e.NS).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.TidalObject(t, e.NS, "t2", map[string]any{LabelScalerName: "rs", LabelScalerNamespace: e.NS}, nil, 4)
	if _, err := c.Tidal(context.Background(), &TidalEvent{Namespace: e.NS, Name: "t2"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Kube.AppsV1().ReplicaSets(e.NS).Get(context.Background(), "rs", metav1.GetOptions{}); *got.Spec.Replicas != 4 {
		t.Errorf("replicaset replicas = %d, want 4", *got.Spec.Replicas)
	}
}

// TestKubeConflicts provokes real optimistic-concurrency conflicts: between the read and the
// write of the scale subresource another writer changes the Deployment. One conflict is retried
// and the other writer's change survives; conflicts that never end become a 503 (retry).
func TestKubeConflicts(t *testing.T) {
	e := newKubeEnv(t)
	e.Deployment(t, e.NS, "web", 4)
	act, err := NewKubeActuator(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	bump := func(i int) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"other-writer":"%d","seq":"%d"}}}`, i, time.Now().UnixNano())
		if _, err := e.Kube.AppsV1().Deployments(e.NS).Patch(context.Background(), "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	}
	act.beforeWrite = func(attempt int) {
		if attempt == 1 {
			bump(attempt)
		}
	}
	c := newTestController(t, itConfig(t, e.NS, "act"), act, itQuery(), prometheusRegistry())
	outs, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := e.Kube.AppsV1().Deployments(e.NS).Get(context.Background(), "web", metav1.GetOptions{})
	if *d.Spec.Replicas != 6 || d.Annotations["other-writer"] != "1" || !outs[0].Written {
		t.Fatalf("replicas %d annotations %v outcome %+v: want 6 and the other writer's annotation kept", *d.Spec.Replicas, d.Annotations, outs[0])
	}
	if got := testutilCounter(c.m.conflicts.WithLabelValues("web")); got != 1 {
		t.Errorf("conflicts counted = %v, want 1", got)
	}

	// Endless conflicts: give up after the backoff and ask Alertmanager to retry.
	act.beforeWrite = bump
	act.Backoff = wait.Backoff{Steps: 3, Duration: 5 * time.Millisecond, Factor: 1}
	e.TidalObject(t, e.NS, "t", map[string]any{LabelScalerName: "web"}, nil, 9)
	_, err = c.Tidal(context.Background(), &TidalEvent{Namespace: e.NS, Name: "t"})
	if errorCode(err) != http.StatusServiceUnavailable || !apierrors.IsConflict(err) {
		t.Fatalf("endless conflicts: %v (code %d), want 503 wrapping a conflict", err, errorCode(err))
	}
	if got := e.Replicas(t, e.NS, "Deployment", "web"); got != 6 {
		t.Errorf("replicas = %d after failed write, want 6", got)
	}
}

// TestKubeHPAFloor: mode hpa-floor raises a real HPA's minReplicas to the decision, records the
// HPA's own minimum in an annotation, retries a real conflict on the HPA, lets the floor fall
// back to its minimum, and never touches the Deployment's replicas.
func TestKubeHPAFloor(t *testing.T) {
	e := newKubeEnv(t)
	e.Deployment(t, e.NS, "web", 4)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web-hpa", Namespace: e.NS},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](3), MaxReplicas: 12,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}}
	hpas := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(e.NS)
	if _, err := hpas.Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	act, err := NewKubeActuator(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	// Another writer touches the HPA between the read and the write of the first attempt: a real
	// conflict, retried, and the other writer's change kept.
	act.beforeWrite = func(attempt int) {
		if attempt == 1 {
			if _, err := hpas.Patch(context.Background(), "web-hpa", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}
	}
	reg := prometheusRegistry()
	c, err := NewController(itConfig(t, e.NS, "hpa-floor"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, e.Kube), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))); err != nil {
		t.Fatal(err)
	}
	h, _ := hpas.Get(context.Background(), "web-hpa", metav1.GetOptions{})
	if *h.Spec.MinReplicas != 6 || h.Annotations[AnnotationBaseMinReplicas] != "3" || h.Labels["touched"] != "yes" {
		t.Fatalf("minReplicas %d annotations %v labels %v: want floor 6, base 3 and the other writer's label", *h.Spec.MinReplicas, h.Annotations, h.Labels)
	}
	if got := testutilCounter(c.m.conflicts.WithLabelValues("web")); got != 1 {
		t.Errorf("conflicts = %v, want 1", got)
	}
	act.beforeWrite = nil
	if got := e.Replicas(t, e.NS, "Deployment", "web"); got != 4 {
		t.Errorf("deployment replicas = %d, want 4 untouched (the HPA scales it)", got)
	}
	e.WaitEvent(t, e.NS, "web", "HorizontalPodAutoscaler/web-hpa minReplicas 3 -> 6")
	// The forecast falls: the floor returns to the HPA's own minimum, not below.
	e.CRDs(t)
	e.TidalObject(t, e.NS, "t", map[string]any{LabelScalerName: "web"}, nil, 2)
	if _, err := c.Tidal(context.Background(), &TidalEvent{Namespace: e.NS, Name: "t"}); err != nil {
		t.Fatal(err)
	}
	h, _ = hpas.Get(context.Background(), "web-hpa", metav1.GetOptions{})
	if *h.Spec.MinReplicas != 3 {
		t.Errorf("minReplicas = %d, want back at base 3", *h.Spec.MinReplicas)
	}
	// db has no HPA: hpa-floor cannot act, a permanent error.
	e.StatefulSet(t, e.NS, "db", 1)
	_, err = c.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "db")})))
	if errorCode(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "no HorizontalPodAutoscaler") {
		t.Errorf("no HPA: %v", err)
	}
	// Mode act on the target the real HPA scales: refused, nothing written.
	actC := newTestController(t, itConfig(t, e.NS, "act"), act, itQuery(), nil)
	_, err = actC.Alerts(context.Background(), mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})))
	if errorCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "HorizontalPodAutoscaler "+e.NS+"/web-hpa already scales") {
		t.Errorf("act under an HPA: %v (code %d), want 409", err, errorCode(err))
	}
	if got := e.Replicas(t, e.NS, "Deployment", "web"); got != 4 {
		t.Errorf("deployment replicas = %d after a refused act, want 4", got)
	}
}

// TestTidalWatchWithoutCRD: on a cluster that does not serve the configured resource the watch
// waits quietly (debi_webhook_tidal_watch_enabled 0) instead of failing lists forever, and
// starts once the resource is served.
func TestTidalWatchWithoutCRD(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.Deployment(t, e.NS, "web", 4)
	act, err := NewKubeActuator(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheusRegistry()
	c := newTestController(t, itConfig(t, e.NS, "act"), act, itQuery(), reg)
	old := DiscoveryRecheck
	DiscoveryRecheck = 200 * time.Millisecond
	defer func() { DiscoveryRecheck = old }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	missing := config.TidalConfig{Resources: []config.WatchResource{{Group: "nope.example.com", Version: "v1", Resource: "tidals"}}, ResyncPeriod: time.Minute}
	go func() { watchTidals(ctx, c, act.Dynamic(), missing); close(done) }()
	time.Sleep(time.Second)
	if v := testenv.GaugeValue(t, reg, "debi_webhook_tidal_watch_enabled"); v != 0 {
		t.Errorf("tidal_watch_enabled = %v without the resource, want 0", v)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting watch did not stop")
	}
	// The served resource: the watch runs and acts.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	served := config.TidalConfig{Resources: []config.WatchResource{{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}}, ResyncPeriod: time.Minute}
	go watchTidals(ctx, c, act.Dynamic(), served)
	e.Tidal(t, e.NS, "tw", "web", 5)
	testenv.Poll(t, 20*time.Second, "the watch to scale web to 5", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 5 })
	if v := testenv.GaugeValue(t, reg, "debi_webhook_tidal_watch_enabled"); v != 1 {
		t.Errorf("tidal_watch_enabled = %v while watching, want 1", v)
	}
}

// TestRBAC applies deploy/base/webhook-*.yaml, binds the scaler role in one namespace, and
// impersonates the ServiceAccount: it may scale its configured targets there (and record Events,
// list Tidals, hold the Lease), and is forbidden elsewhere and beyond the scale subresource.
func TestRBAC(t *testing.T) {
	e := newKubeEnv(t)
	e.CRDs(t)
	e.ApplyFile(t, "../deploy/base/webhook-rbac.yaml", "")
	e.ApplyFile(t, "../deploy/base/webhook-target-rolebinding.yaml", e.NS)
	other := e.Namespace(t, "debi-other")
	e.Deployment(t, e.NS, "web", 4)
	e.StatefulSet(t, e.NS, "db", 1)
	e.Deployment(t, other, "web", 4)

	sa := rest.CopyConfig(e.RC)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:debi-system:debi-webhook"}
	saKube := kubernetes.NewForConfigOrDie(sa)
	act, err := NewKubeActuator(sa)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Allowed: the configured targets, through the controller, with an Event.
	c, err := NewController(itConfig(t, e.NS, "act"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, saKube)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alerts(ctx, mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}, map[string]any{"labels": testenv.AlertLabels("policy", "db")}))); err != nil {
		t.Fatalf("as the ServiceAccount: %v", err)
	}
	if e.Replicas(t, e.NS, "Deployment", "web") != 6 || e.Replicas(t, e.NS, "StatefulSet", "db") != 2 {
		t.Error("configured targets not scaled")
	}
	e.WaitEvent(t, e.NS, "web", "replicas 4 -> 6")
	if _, err := e.Dyn.Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}).Namespace(e.NS).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("admin list tidals: %v", err)
	}
	if _, err := dynamic.NewForConfigOrDie(sa).Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}).Namespace(e.NS).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("SA list tidals: %v", err)
	}
	// The Tidal path records debi.io/applied on a Tidal (a metadata patch), through the
	// controller; the Tidal's status stays its controller's.
	e.Tidal(t, e.NS, "rbac-tidal", "web", 7)
	if _, err := c.Tidal(ctx, &TidalEvent{Namespace: e.NS, Name: "rbac-tidal"}); err != nil {
		t.Errorf("as the ServiceAccount, a Tidal applied and recorded: %v", err)
	}
	saTidals := dynamic.NewForConfigOrDie(sa).Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"})
	if u, err := saTidals.Namespace(e.NS).Get(ctx, "rbac-tidal", metav1.GetOptions{}); err != nil || u.GetAnnotations()["debi.io/applied"] != "1/7/web/"+e.NS+"/Deployment/web" {
		t.Errorf("debi.io/applied after the Tidal: %v %v", err, u)
	}
	if _, err := saTidals.Namespace(e.NS).Patch(ctx, "rbac-tidal", types.MergePatchType, []byte(`{"status":{"desiredReplicas":1}}`), metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Errorf("SA patch tidals/status = %v, want forbidden", err)
	}
	if _, err := saTidals.Namespace(other).Patch(ctx, "any", types.MergePatchType, []byte(`{"metadata":{"annotations":{"debi.io/applied":"x"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("SA patch a Tidal in an unbound namespace = %v, want forbidden", err)
	}
	if _, err := saKube.CoordinationV1().Leases("debi-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("SA list leases = %v, want forbidden (only get/create/update)", err)
	}
	e.EnsureNamespace(t, "debi-system")
	le := config.LeaderElectionConfig{Namespace: "debi-system", Name: "debi-webhook-rbac-" + e.NS, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	var led atomic.Bool
	_ = process.RunLeaderElected(lctx, saKube, le, "rbac-test", testenv.Logger(t), func(bool) {}, func(ctx context.Context) { led.Store(true); lcancel() })
	lcancel()
	if !led.Load() {
		t.Error("the ServiceAccount could not take the Lease")
	}

	// Forbidden: the same kind in a namespace without the binding.
	target := config.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: other, Name: "web"}
	if _, err := act.SetReplicas(ctx, target, 9, ScaleInfo{}); !apierrors.IsForbidden(err) {
		t.Errorf("scale in unbound namespace: %v, want forbidden", err)
	}
	// Forbidden: anything but the scale subresource, even on a configured target.
	if _, err := saKube.AppsV1().Deployments(e.NS).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":9}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patch the Deployment itself: %v, want forbidden", err)
	}
	if _, err := saKube.CoreV1().Secrets(e.NS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: %v, want forbidden", err)
	}
	if err := saKube.AppsV1().Deployments(e.NS).Delete(ctx, "web", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete the Deployment: %v, want forbidden", err)
	}
	if got := e.Replicas(t, other, "Deployment", "web"); got != 4 {
		t.Errorf("unbound namespace's deployment = %d, want 4", got)
	}
}

// TestChainAlertmanager: a real Alertmanager receives an alert on its API and posts it, with the
// bearer token, to the webhook, which patches the real API server.
func TestChainAlertmanager(t *testing.T) {
	amDir := os.Getenv("DEBI_ALERTMANAGER_DIR")
	if amDir == "" {
		testenv.SkipOrFail(t, "chain test: set DEBI_ALERTMANAGER_DIR to the directory hack/servers.sh alertmanager prints")
	}
	e := newKubeEnv(t)
	e.Deployment(t, e.NS, "web", 4)
	act, err := NewKubeActuator(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewController(itConfig(t, e.NS, "act"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, e.Kube), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	h := testRouter(c, "chain-token")
	wh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); h.ServeHTTP(w, r) }))
	defer wh.Close()

	dir := t.TempDir()
	amCfg := fmt.Sprintf(`route:
  receiver: debi
  group_by: [policy]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1m
receivers:
  - name: debi
    webhook_configs:
      - url: %s/v1/alertmanager
        send_resolved: true
        http_config:
          authorization: {type: Bearer, credentials: chain-token}
`, wh.URL)
	_ = os.WriteFile(filepath.Join(dir, "am.yml"), []byte(amCfg), 0o600)
	port := freePort(t)
	am := exec.Command(filepath.Join(amDir, "alertmanager"), "--config.file="+filepath.Join(dir, "am.yml"),
		"--storage.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+port, "--cluster.listen-address=")
	am.Stdout, am.Stderr = os.Stderr, os.Stderr
	if !testing.Verbose() {
		am.Stdout, am.Stderr = nil, nil
	}
	if err := am.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = am.Process.Kill(); _ = am.Wait() }()
	amURL := "http://127.0.0.1:" + port
	testenv.Poll(t, 20*time.Second, "alertmanager ready", func() bool {
		resp, err := http.Get(amURL + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	alert, _ := json.Marshal([]map[string]any{{
		"labels":      map[string]string{"alertname": "DebiScaleRecommended", "policy": "web", "namespace": e.NS, "severity": "info"},
		"annotations": map[string]string{"summary": "scale web", "load": "0.9", "current_replicas": "4"},
	}})
	start := time.Now()
	resp, err := http.Post(amURL+"/api/v2/alerts", "application/json", bytes.NewReader(alert))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("post alert: %d", resp.StatusCode)
	}
	testenv.Poll(t, 30*time.Second, "Alertmanager -> webhook -> API server", func() bool { return e.Replicas(t, e.NS, "Deployment", "web") == 6 })
	t.Logf("alert posted to Alertmanager -> Deployment scaled in %v (%d webhook calls)", time.Since(start).Round(time.Millisecond), hits.Load())
	e.WaitEvent(t, e.NS, "web", "replicas 4 -> 6")
	if n := testutilCounter(c.m.notifications.WithLabelValues("alertmanager", "200")); n < 1 {
		t.Errorf("notifications{code=200} = %v", n)
	}

	// Resolve it: Alertmanager sends "resolved", which the webhook acknowledges without scaling back.
	resolved, _ := json.Marshal([]map[string]any{{
		"labels":   map[string]string{"alertname": "DebiScaleRecommended", "policy": "web", "namespace": e.NS, "severity": "info"},
		"startsAt": start.Add(-time.Minute).Format(time.RFC3339), "endsAt": time.Now().Add(-time.Second).Format(time.RFC3339),
	}})
	if resp, err = http.Post(amURL+"/api/v2/alerts", "application/json", bytes.NewReader(resolved)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testenv.Poll(t, 30*time.Second, "resolved notification", func() bool {
		return testutilCounter(c.m.decisions.WithLabelValues("web", "none", "resolved")) >= 1
	})
	if got := e.Replicas(t, e.NS, "Deployment", "web"); got != 6 {
		t.Errorf("replicas after resolved = %d, want 6 (resolved is not an order to scale back)", got)
	}
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
