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
	"crypto/rand"
	"encoding/hex"
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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
)

var kubeconfigPath string // set by TestMain

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kubeconfigPath)) }

type kubeEnv struct {
	rc   *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
}

// newKubeEnv returns clients for the test API server and a fresh namespace, or skips.
func newKubeEnv(t testing.TB) *kubeEnv {
	t.Helper()
	if kubeconfigPath == "" {
		testenv.SkipOrFail(t, "integration test: set KUBECONFIG_DEBI (a kubeconfig from hack/k8s-env.sh up) or DEBI_K8S_ASSETS (the dir hack/k8s-env.sh build prints)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 200, 400
	e := &kubeEnv{rc: rc, kube: kubernetes.NewForConfigOrDie(rc), dyn: dynamic.NewForConfigOrDie(rc)}
	e.ns = e.namespace(t, "debi-it")
	return e
}

func (e *kubeEnv) namespace(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func (e *kubeEnv) deployment(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	lbl := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}}}}}}
	if _, err := e.kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *kubeEnv) statefulSet(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	lbl := map[string]string{"app": name}
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lbl}, ServiceName: name,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/db:1"}}}}}}
	if _, err := e.kube.AppsV1().StatefulSets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *kubeEnv) replicas(t testing.TB, ns, kind, name string) int32 {
	t.Helper()
	ctx := context.Background()
	switch kind {
	case "Deployment":
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	case "StatefulSet":
		s, err := e.kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *s.Spec.Replicas
	}
	t.Fatalf("kind %s", kind)
	return 0
}

// applyFile creates every object of a multi-document YAML file (already existing ones are left
// alone); ns, when set, replaces the namespace of namespaced objects.
func (e *kubeEnv) applyFile(t testing.TB, file, ns string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	act, err := NewKubeActuator(e.rc)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvk := u.GroupVersionKind()
		m, err := act.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var r dynamic.ResourceInterface = e.dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			if ns != "" {
				u.SetNamespace(ns)
			}
			if u.GetNamespace() == "debi-system" {
				e.ensureNamespace(t, "debi-system")
			}
			r = e.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := r.Create(context.Background(), u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: create %s %s: %v", file, gvk.Kind, u.GetName(), err)
		}
	}
}

func (e *kubeEnv) ensureNamespace(t testing.TB, name string) {
	_, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// crds installs the test CRDs and waits until they are served.
func (e *kubeEnv) crds(t testing.TB) {
	t.Helper()
	e.applyFile(t, "testdata/crds.yaml", "")
	for _, gvr := range []schema.GroupVersionResource{{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}, {Group: "example.com", Version: "v1", Resource: "workers"}} {
		poll(t, 20*time.Second, "CRD "+gvr.String()+" served", func() bool {
			_, err := e.dyn.Resource(gvr).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
			return err == nil
		})
	}
}

func poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// recorder returns a real event recorder writing to the API server.
func (e *kubeEnv) recorder(t testing.TB, kube kubernetes.Interface) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "debi-webhook"})
}

func (e *kubeEnv) waitEvent(t testing.TB, ns, object, contains string) corev1.Event {
	t.Helper()
	var found corev1.Event
	poll(t, 10*time.Second, fmt.Sprintf("event on %s containing %q", object, contains), func() bool {
		evs, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, contains) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
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
	e.crds(t)
	e.deployment(t, e.ns, "web", 4)
	e.statefulSet(t, e.ns, "db", 1)
	worker := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Worker",
		"metadata": map[string]any{"name": "workers", "namespace": e.ns}, "spec": map[string]any{"replicas": int64(1)}}}
	workers := e.dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "workers"}).Namespace(e.ns)
	if _, err := workers.Create(context.Background(), worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	act, err := NewKubeActuator(e.rc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewController(itConfig(t, e.ns, "act"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, e.kube)})
	if err != nil {
		t.Fatal(err)
	}
	msg := mustDecode(t, amPayload("firing",
		map[string]any{"labels": labels("policy", "web", "namespace", e.ns)},
		map[string]any{"labels": labels("policy", "db", "namespace", e.ns)}))
	if _, err := c.Alerts(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	// web: 4 -> 6 (see TestAlertDecisionFromPrometheus); db (hpa, target 0.5): W 0.9 at 1
	// replica, ceil(1·0.9/0.5) = 2.
	if got := e.replicas(t, e.ns, "Deployment", "web"); got != 6 {
		t.Errorf("deployment replicas = %d, want 6", got)
	}
	if got := e.replicas(t, e.ns, "StatefulSet", "db"); got != 2 {
		t.Errorf("statefulset replicas = %d, want 2", got)
	}
	ev := e.waitEvent(t, e.ns, "web", "replicas 4 -> 6")
	if ev.Reason != "DebiScaled" || ev.InvolvedObject.Kind != "Deployment" || ev.InvolvedObject.UID == "" ||
		!strings.Contains(ev.Message, "W=0.900 (source prometheus), target utilization=0.567") {
		t.Errorf("event = %s %s %+v", ev.Reason, ev.Message, ev.InvolvedObject)
	}
	e.waitEvent(t, e.ns, "db", "replicas 1 -> 2")

	d1, _ := e.kube.AppsV1().Deployments(e.ns).Get(context.Background(), "web", metav1.GetOptions{})
	if _, err := c.Alerts(context.Background(), msg); err != nil { // Alertmanager's repeat
		t.Fatal(err)
	}
	d2, _ := e.kube.AppsV1().Deployments(e.ns).Get(context.Background(), "web", metav1.GetOptions{})
	if d1.ResourceVersion != d2.ResourceVersion || *d2.Spec.Replicas != 6 {
		t.Errorf("repeat notification changed the Deployment: rv %s -> %s, replicas %d", d1.ResourceVersion, d2.ResourceVersion, *d2.Spec.Replicas)
	}

	// A custom resource with a scale subresource, driven by a pushed Tidal event: the webhook
	// reads the Tidal (bound by its targetRef) from the API server.
	e.tidalObject(t, e.ns, "t", nil, map[string]any{"apiVersion": "example.com/v1", "kind": "Worker", "name": "workers"}, 3)
	if _, err := c.Tidal(context.Background(), &TidalEvent{Namespace: e.ns, Name: "t"}); err != nil {
		t.Fatal(err)
	}
	u, err := workers.Get(context.Background(), "workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); n != 3 {
		t.Errorf("worker spec.replicas = %d, want 3", n)
	}
	e.waitEvent(t, e.ns, "workers", "replicas 1 -> 3 (tidal)")

	// A ReplicaSet, through a pushed Tidal bound by its labels.
	lbl := map[string]string{"app": "rs"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: e.ns}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/rs:1"}}}}}}
	if _, err := e.kube.AppsV1().ReplicaSets(e.ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tidalObject(t, e.ns, "t2", map[string]any{LabelScalerName: "rs", LabelScalerNamespace: e.ns}, nil, 4)
	if _, err := c.Tidal(context.Background(), &TidalEvent{Namespace: e.ns, Name: "t2"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.kube.AppsV1().ReplicaSets(e.ns).Get(context.Background(), "rs", metav1.GetOptions{}); *got.Spec.Replicas != 4 {
		t.Errorf("replicaset replicas = %d, want 4", *got.Spec.Replicas)
	}
}

// TestKubeConflicts provokes real optimistic-concurrency conflicts: between the read and the
// write of the scale subresource another writer changes the Deployment. One conflict is retried
// and the other writer's change survives; conflicts that never end become a 503 (retry).
func TestKubeConflicts(t *testing.T) {
	e := newKubeEnv(t)
	e.deployment(t, e.ns, "web", 4)
	act, err := NewKubeActuator(e.rc)
	if err != nil {
		t.Fatal(err)
	}
	bump := func(i int) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"other-writer":"%d","seq":"%d"}}}`, i, time.Now().UnixNano())
		if _, err := e.kube.AppsV1().Deployments(e.ns).Patch(context.Background(), "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	}
	act.beforeWrite = func(attempt int) {
		if attempt == 1 {
			bump(attempt)
		}
	}
	c := newTestController(t, itConfig(t, e.ns, "act"), act, itQuery(), prometheusRegistry())
	outs, err := c.Alerts(context.Background(), mustDecode(t, amPayload("firing", map[string]any{"labels": labels("policy", "web")})))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := e.kube.AppsV1().Deployments(e.ns).Get(context.Background(), "web", metav1.GetOptions{})
	if *d.Spec.Replicas != 6 || d.Annotations["other-writer"] != "1" || !outs[0].Written {
		t.Fatalf("replicas %d annotations %v outcome %+v: want 6 and the other writer's annotation kept", *d.Spec.Replicas, d.Annotations, outs[0])
	}
	if got := testutilCounter(c.m.conflicts.WithLabelValues("web")); got != 1 {
		t.Errorf("conflicts counted = %v, want 1", got)
	}

	// Endless conflicts: give up after the backoff and ask Alertmanager to retry.
	act.beforeWrite = bump
	act.Backoff = wait.Backoff{Steps: 3, Duration: 5 * time.Millisecond, Factor: 1}
	e.tidalObject(t, e.ns, "t", map[string]any{LabelScalerName: "web"}, nil, 9)
	_, err = c.Tidal(context.Background(), &TidalEvent{Namespace: e.ns, Name: "t"})
	if errorCode(err) != http.StatusServiceUnavailable || !apierrors.IsConflict(err) {
		t.Fatalf("endless conflicts: %v (code %d), want 503 wrapping a conflict", err, errorCode(err))
	}
	if got := e.replicas(t, e.ns, "Deployment", "web"); got != 6 {
		t.Errorf("replicas = %d after failed write, want 6", got)
	}
}

// TestKubeHPAFloor: mode hpa-floor raises a real HPA's minReplicas to the decision, records the
// HPA's own minimum in an annotation, retries a real conflict on the HPA, lets the floor fall
// back to its minimum, and never touches the Deployment's replicas.
func TestKubeHPAFloor(t *testing.T) {
	e := newKubeEnv(t)
	e.deployment(t, e.ns, "web", 4)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web-hpa", Namespace: e.ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](3), MaxReplicas: 12,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}}
	hpas := e.kube.AutoscalingV2().HorizontalPodAutoscalers(e.ns)
	if _, err := hpas.Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	act, err := NewKubeActuator(e.rc)
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
	c, err := NewController(itConfig(t, e.ns, "hpa-floor"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, e.kube), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alerts(context.Background(), mustDecode(t, amPayload("firing", map[string]any{"labels": labels("policy", "web")}))); err != nil {
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
	if got := e.replicas(t, e.ns, "Deployment", "web"); got != 4 {
		t.Errorf("deployment replicas = %d, want 4 untouched (the HPA scales it)", got)
	}
	e.waitEvent(t, e.ns, "web", "HorizontalPodAutoscaler/web-hpa minReplicas 3 -> 6")
	// The forecast falls: the floor returns to the HPA's own minimum, not below.
	e.crds(t)
	e.tidalObject(t, e.ns, "t", map[string]any{LabelScalerName: "web"}, nil, 2)
	if _, err := c.Tidal(context.Background(), &TidalEvent{Namespace: e.ns, Name: "t"}); err != nil {
		t.Fatal(err)
	}
	h, _ = hpas.Get(context.Background(), "web-hpa", metav1.GetOptions{})
	if *h.Spec.MinReplicas != 3 {
		t.Errorf("minReplicas = %d, want back at base 3", *h.Spec.MinReplicas)
	}
	// db has no HPA: hpa-floor cannot act, a permanent error.
	e.statefulSet(t, e.ns, "db", 1)
	_, err = c.Alerts(context.Background(), mustDecode(t, amPayload("firing", map[string]any{"labels": labels("policy", "db")})))
	if errorCode(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "no HorizontalPodAutoscaler") {
		t.Errorf("no HPA: %v", err)
	}
	// Mode act on the target the real HPA scales: refused, nothing written.
	actC := newTestController(t, itConfig(t, e.ns, "act"), act, itQuery(), nil)
	_, err = actC.Alerts(context.Background(), mustDecode(t, amPayload("firing", map[string]any{"labels": labels("policy", "web")})))
	if errorCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "HorizontalPodAutoscaler "+e.ns+"/web-hpa already scales") {
		t.Errorf("act under an HPA: %v (code %d), want 409", err, errorCode(err))
	}
	if got := e.replicas(t, e.ns, "Deployment", "web"); got != 4 {
		t.Errorf("deployment replicas = %d after a refused act, want 4", got)
	}
}

// TestTidalWatchWithoutCRD: on a cluster that does not serve the configured resource the watch
// waits quietly (debi_webhook_tidal_watch_enabled 0) instead of failing lists forever, and
// starts once the resource is served.
func TestTidalWatchWithoutCRD(t *testing.T) {
	e := newKubeEnv(t)
	e.crds(t)
	e.deployment(t, e.ns, "web", 4)
	act, err := NewKubeActuator(e.rc)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheusRegistry()
	c := newTestController(t, itConfig(t, e.ns, "act"), act, itQuery(), reg)
	old := discoveryRecheck
	discoveryRecheck = 200 * time.Millisecond
	defer func() { discoveryRecheck = old }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	missing := config.TidalConfig{Resources: []config.WatchResource{{Group: "nope.example.com", Version: "v1", Resource: "tidals"}}, ResyncPeriod: time.Minute}
	go func() { c.WatchTidals(ctx, act.Dynamic(), missing); close(done) }()
	time.Sleep(time.Second)
	if v := gaugeValue(t, reg, "debi_webhook_tidal_watch_enabled"); v != 0 {
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
	go c.WatchTidals(ctx, act.Dynamic(), served)
	e.tidal(t, e.ns, "tw", "web", 5)
	poll(t, 20*time.Second, "the watch to scale web to 5", func() bool { return e.replicas(t, e.ns, "Deployment", "web") == 5 })
	if v := gaugeValue(t, reg, "debi_webhook_tidal_watch_enabled"); v != 1 {
		t.Errorf("tidal_watch_enabled = %v while watching, want 1", v)
	}
}

func (e *kubeEnv) tidal(t testing.TB, ns, name, policy string, desired int64) {
	t.Helper()
	e.tidalObject(t, ns, name, map[string]any{LabelScalerName: policy, LabelScalerNamespace: ns},
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": ns}, desired)
}

// tidalObject creates or updates a Tidal with the given labels and targetRef (nil: none) and
// sets status.desiredReplicas through the status subresource, as its controller would: with
// observedGeneration its generation and Ready True.
func (e *kubeEnv) tidalObject(t testing.TB, ns, name string, lbls, targetRef map[string]any, desired int64) {
	t.Helper()
	e.tidalObjectStatus(t, ns, name, lbls, targetRef, desired, 0, "True")
}

// tidalObjectStatus is tidalObject with a status lag generations behind the spec (1: a status
// that predates the spec) and a Ready condition ready ("": none).
func (e *kubeEnv) tidalObjectStatus(t testing.TB, ns, name string, lbls, targetRef map[string]any, desired, lag int64, ready string) {
	t.Helper()
	e.writeTidal(t, ns, name, lbls, targetRef, desired, lag, ready, "")
}

// tidalFired is tidal with status.lastScheduleTime fired: the firing of the rule in force, as
// the Tidal controller writes it.
func (e *kubeEnv) tidalFired(t testing.TB, ns, name, policy string, desired int64, fired string) {
	t.Helper()
	e.writeTidal(t, ns, name, map[string]any{LabelScalerName: policy, LabelScalerNamespace: ns},
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": ns}, desired, 0, "True", fired)
}

// writeTidal is tidalObjectStatus with status.lastScheduleTime fired ("": none).
func (e *kubeEnv) writeTidal(t testing.TB, ns, name string, lbls, targetRef map[string]any, desired, lag int64, ready, fired string) {
	t.Helper()
	tidals := e.dyn.Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}).Namespace(ns)
	u, err := tidals.Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		meta := map[string]any{"name": name, "namespace": ns}
		if lbls != nil {
			meta["labels"] = lbls
		}
		spec := map[string]any{}
		if targetRef != nil {
			spec["targetRef"] = targetRef
		}
		u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal", "metadata": meta, "spec": spec}}
		if u, err = tidals.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, desired, "status", "desiredReplicas")
	gen := u.GetGeneration() - lag
	_ = unstructured.SetNestedField(u.Object, gen, "status", "observedGeneration")
	unstructured.RemoveNestedField(u.Object, "status", "conditions")
	if ready != "" {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": ready, "reason": "RuleActive",
			"message": "test", "observedGeneration": gen, "lastTransitionTime": "2026-01-01T00:00:00Z"}}, "status", "conditions")
	}
	if fired != "" {
		_ = unstructured.SetNestedField(u.Object, fired, "status", "lastScheduleTime")
	}
	if _, err := tidals.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRunTidalWatchAndLeaderElection runs the whole webhook (New, Run) twice against the API server:
// both serve HTTP, exactly one holds the Lease and watches Tidals; a Tidal's
// status.desiredReplicas (written through the status subresource) reaches the Deployment, a
// pushed event to the follower too (with the bearer token; without it 401); when the leader stops,
// the follower takes the Lease and follows the next Tidal change.
func TestRunTidalWatchAndLeaderElection(t *testing.T) {
	e := newKubeEnv(t)
	e.crds(t)
	e.deployment(t, e.ns, "web", 4)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "debi.yml")
	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	pushTokenFile := filepath.Join(dir, "push-token")
	_ = os.WriteFile(pushTokenFile, []byte("push-s3cret\n"), 0o600)
	b, _ := os.ReadFile("testdata/run-config.yml.tmpl")
	cfgText := strings.NewReplacer("NAMESPACE", e.ns, "PUSHTOKENFILE", pushTokenFile, "TOKENFILE", tokenFile).Replace(string(b))
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	type inst struct {
		url    string
		done   chan error
		reg    *prometheus.Registry
		cancel context.CancelFunc
		err    error
		exited bool
	}
	var insts []*inst
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheusRegistry()
		s, err := New(Options{ConfigFile: cfgFile, Listener: l, RestConfig: e.rc}, testLogger(t), reg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		in := &inst{url: "http://" + l.Addr().String(), done: make(chan error, 1), reg: reg, cancel: cancel}
		go func() { in.done <- s.Run(ctx) }()
		insts = append(insts, in)
	}
	stop := func(in *inst) {
		if in.exited {
			return
		}
		in.cancel()
		select {
		case err := <-in.done:
			in.exited = true
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not stop")
		}
	}
	defer func() {
		for _, in := range insts {
			stop(in)
		}
	}()
	for _, in := range insts {
		poll(t, 20*time.Second, "readyz", func() bool {
			resp, err := http.Get(in.url + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	// Exactly one leader.
	var leaders int
	poll(t, 20*time.Second, "a leader", func() bool {
		leaders = 0
		for _, in := range insts {
			if gaugeValue(t, in.reg, "debi_webhook_leader") == 1 {
				leaders++
			}
		}
		return leaders >= 1
	})
	time.Sleep(time.Second)
	leaders = 0
	for _, in := range insts {
		if gaugeValue(t, in.reg, "debi_webhook_leader") == 1 {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders, want 1", leaders)
	}
	lease, err := e.kube.CoordinationV1().Leases(e.ns).Get(context.Background(), "debi-webhook", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease %+v, %v", lease, err)
	}

	e.tidal(t, e.ns, "tidal-frequent-test", "web", 5)
	poll(t, 20*time.Second, "watched Tidal to scale web to 5", func() bool { return e.replicas(t, e.ns, "Deployment", "web") == 5 })
	e.tidal(t, e.ns, "tidal-frequent-test", "web", 7)
	poll(t, 20*time.Second, "watched Tidal to scale web to 7", func() bool { return e.replicas(t, e.ns, "Deployment", "web") == 7 })

	// Push, with the push token, to the replica that does not lead: HTTP is served by all. The
	// pushed Tidal is bound by its targetRef, without the label the watch selects, so only the
	// push can act on it; the event's body claims another count, which is not believed.
	e.tidalObject(t, e.ns, "pushed", nil, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, 3)
	body := fmt.Sprintf(`{"namespace":%q,"name":"pushed","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":19}}`, e.ns)
	for _, tc := range []struct {
		token string
		code  int
	}{{"", 401}, {"s3cret", 401}, {"push-s3cret", 200}} {
		req, _ := http.NewRequest(http.MethodPost, insts[1].url+"/v1/tidal", strings.NewReader(body))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("push with token %q: %d, want %d", tc.token, resp.StatusCode, tc.code)
		}
	}
	if got := e.replicas(t, e.ns, "Deployment", "web"); got != 3 {
		t.Errorf("replicas after push = %d, want 3", got)
	}
	resp, err := http.Get(insts[0].url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb := new(bytes.Buffer)
	_, _ = mb.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(mb.String(), "debi_webhook_build_info") {
		t.Error("/metrics lacks debi_webhook_build_info")
	}

	// Failover: stop the leader; the other replica takes the released Lease and follows the Tidal.
	leader, follower := insts[0], insts[1]
	if gaugeValue(t, leader.reg, "debi_webhook_leader") != 1 {
		leader, follower = follower, leader
	}
	stop(leader)
	poll(t, 20*time.Second, "the follower to take the lease", func() bool { return gaugeValue(t, follower.reg, "debi_webhook_leader") == 1 })
	e.tidal(t, e.ns, "tidal-frequent-test", "web", 4)
	poll(t, 20*time.Second, "the new leader to scale web to 4", func() bool { return e.replicas(t, e.ns, "Deployment", "web") == 4 })
}

// TestRBAC applies deploy/base/webhook-*.yaml, binds the scaler role in one namespace, and
// impersonates the ServiceAccount: it may scale its configured targets there (and record Events,
// list Tidals, hold the Lease), and is forbidden elsewhere and beyond the scale subresource.
func TestRBAC(t *testing.T) {
	e := newKubeEnv(t)
	e.crds(t)
	e.applyFile(t, "../deploy/base/webhook-rbac.yaml", "")
	e.applyFile(t, "../deploy/base/webhook-target-rolebinding.yaml", e.ns)
	other := e.namespace(t, "debi-other")
	e.deployment(t, e.ns, "web", 4)
	e.statefulSet(t, e.ns, "db", 1)
	e.deployment(t, other, "web", 4)

	sa := rest.CopyConfig(e.rc)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:debi-system:debi-webhook"}
	saKube := kubernetes.NewForConfigOrDie(sa)
	act, err := NewKubeActuator(sa)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Allowed: the configured targets, through the controller, with an Event.
	c, err := NewController(itConfig(t, e.ns, "act"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, saKube)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alerts(ctx, mustDecode(t, amPayload("firing", map[string]any{"labels": labels("policy", "web")}, map[string]any{"labels": labels("policy", "db")}))); err != nil {
		t.Fatalf("as the ServiceAccount: %v", err)
	}
	if e.replicas(t, e.ns, "Deployment", "web") != 6 || e.replicas(t, e.ns, "StatefulSet", "db") != 2 {
		t.Error("configured targets not scaled")
	}
	e.waitEvent(t, e.ns, "web", "replicas 4 -> 6")
	if _, err := e.dyn.Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}).Namespace(e.ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("admin list tidals: %v", err)
	}
	if _, err := dynamic.NewForConfigOrDie(sa).Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}).Namespace(e.ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("SA list tidals: %v", err)
	}
	// The Tidal path records debi.io/applied on a Tidal (a metadata patch), through the
	// controller; the Tidal's status stays its controller's.
	e.tidal(t, e.ns, "rbac-tidal", "web", 7)
	if _, err := c.Tidal(ctx, &TidalEvent{Namespace: e.ns, Name: "rbac-tidal"}); err != nil {
		t.Errorf("as the ServiceAccount, a Tidal applied and recorded: %v", err)
	}
	saTidals := dynamic.NewForConfigOrDie(sa).Resource(schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"})
	if u, err := saTidals.Namespace(e.ns).Get(ctx, "rbac-tidal", metav1.GetOptions{}); err != nil || u.GetAnnotations()["debi.io/applied"] != "1/7/web/"+e.ns+"/Deployment/web" {
		t.Errorf("debi.io/applied after the Tidal: %v %v", err, u)
	}
	if _, err := saTidals.Namespace(e.ns).Patch(ctx, "rbac-tidal", types.MergePatchType, []byte(`{"status":{"desiredReplicas":1}}`), metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Errorf("SA patch tidals/status = %v, want forbidden", err)
	}
	if _, err := saTidals.Namespace(other).Patch(ctx, "any", types.MergePatchType, []byte(`{"metadata":{"annotations":{"debi.io/applied":"x"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("SA patch a Tidal in an unbound namespace = %v, want forbidden", err)
	}
	if _, err := saKube.CoordinationV1().Leases("debi-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("SA list leases = %v, want forbidden (only get/create/update)", err)
	}
	e.ensureNamespace(t, "debi-system")
	le := config.LeaderElectionConfig{Namespace: "debi-system", Name: "debi-webhook-rbac-" + e.ns, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	var led atomic.Bool
	_ = RunLeaderElected(lctx, saKube, le, "rbac-test", testLogger(t), func(bool) {}, func(ctx context.Context) { led.Store(true); lcancel() })
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
	if _, err := saKube.AppsV1().Deployments(e.ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":9}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patch the Deployment itself: %v, want forbidden", err)
	}
	if _, err := saKube.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: %v, want forbidden", err)
	}
	if err := saKube.AppsV1().Deployments(e.ns).Delete(ctx, "web", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete the Deployment: %v, want forbidden", err)
	}
	if got := e.replicas(t, other, "Deployment", "web"); got != 4 {
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
	e.deployment(t, e.ns, "web", 4)
	act, err := NewKubeActuator(e.rc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewController(itConfig(t, e.ns, "act"), ControllerOptions{Actuator: act, Query: itQuery(), Recorder: e.recorder(t, e.kube), Logger: testLogger(t)})
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
	poll(t, 20*time.Second, "alertmanager ready", func() bool {
		resp, err := http.Get(amURL + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	alert, _ := json.Marshal([]map[string]any{{
		"labels":      map[string]string{"alertname": "DebiScaleRecommended", "policy": "web", "namespace": e.ns, "severity": "info"},
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
	poll(t, 30*time.Second, "Alertmanager -> webhook -> API server", func() bool { return e.replicas(t, e.ns, "Deployment", "web") == 6 })
	t.Logf("alert posted to Alertmanager -> Deployment scaled in %v (%d webhook calls)", time.Since(start).Round(time.Millisecond), hits.Load())
	e.waitEvent(t, e.ns, "web", "replicas 4 -> 6")
	if n := testutilCounter(c.m.notifications.WithLabelValues("alertmanager", "200")); n < 1 {
		t.Errorf("notifications{code=200} = %v", n)
	}

	// Resolve it: Alertmanager sends "resolved", which the webhook acknowledges without scaling back.
	resolved, _ := json.Marshal([]map[string]any{{
		"labels":   map[string]string{"alertname": "DebiScaleRecommended", "policy": "web", "namespace": e.ns, "severity": "info"},
		"startsAt": start.Add(-time.Minute).Format(time.RFC3339), "endsAt": time.Now().Add(-time.Second).Format(time.RFC3339),
	}})
	if resp, err = http.Post(amURL+"/api/v2/alerts", "application/json", bytes.NewReader(resolved)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	poll(t, 30*time.Second, "resolved notification", func() bool {
		return testutilCounter(c.m.decisions.WithLabelValues("web", "none", "resolved")) >= 1
	})
	if got := e.replicas(t, e.ns, "Deployment", "web"); got != 6 {
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
