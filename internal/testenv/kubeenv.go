package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// TidalResource is the test CRDs' Tidal (tidal.io/v1alpha1 tidals, testdata/crds.yaml).
var TidalResource = schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}

// KubeEnv is an integration test's clients for the API server of RunWithAPIServer, and the
// test's own namespace NS.
type KubeEnv struct {
	RC   *rest.Config
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	NS   string
}

// NewKubeEnv returns clients for the API server whose kubeconfig is kubeconfig (what
// RunWithAPIServer set) and a fresh namespace; with no kubeconfig the test skips, or fails as
// SkipOrFail says.
func NewKubeEnv(t testing.TB, kubeconfig string) *KubeEnv {
	t.Helper()
	if kubeconfig == "" {
		SkipOrFail(t, "integration test: set KUBECONFIG_DEBI (a kubeconfig from hack/k8s-env.sh up) or DEBI_K8S_ASSETS (the dir hack/k8s-env.sh build prints)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 200, 400
	e := &KubeEnv{RC: rc, Kube: kubernetes.NewForConfigOrDie(rc), Dyn: dynamic.NewForConfigOrDie(rc)}
	e.NS = e.Namespace(t, "debi-it")
	return e
}

// Namespace creates a namespace named prefix and a random suffix, deleted at cleanup.
func (e *KubeEnv) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	if _, err := e.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// Deployment creates the Deployment ns/name at replicas (no pods run: there is no
// controller-manager).
func (e *KubeEnv) Deployment(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	lbl := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}}}}}}
	if _, err := e.Kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// StatefulSet creates the StatefulSet ns/name at replicas.
func (e *KubeEnv) StatefulSet(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	lbl := map[string]string{"app": name}
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lbl}, ServiceName: name,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/db:1"}}}}}}
	if _, err := e.Kube.AppsV1().StatefulSets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Replicas is spec.replicas of the Deployment or StatefulSet (kind) ns/name.
func (e *KubeEnv) Replicas(t testing.TB, ns, kind, name string) int32 {
	t.Helper()
	ctx := context.Background()
	switch kind {
	case "Deployment":
		d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	case "StatefulSet":
		s, err := e.Kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *s.Spec.Replicas
	}
	t.Fatalf("kind %s", kind)
	return 0
}

// ApplyFile creates every object of a multi-document YAML file (already existing ones are left
// alone); ns, when set, replaces the namespace of namespaced objects.
func (e *KubeEnv) ApplyFile(t testing.TB, file, ns string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// A mapper of its own, which discovers a CRD installed since the last call.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
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
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var r dynamic.ResourceInterface = e.Dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			if ns != "" {
				u.SetNamespace(ns)
			}
			if u.GetNamespace() == "debi-system" {
				e.EnsureNamespace(t, "debi-system")
			}
			r = e.Dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := r.Create(context.Background(), u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: create %s %s: %v", file, gvk.Kind, u.GetName(), err)
		}
	}
}

// EnsureNamespace creates the namespace name unless it exists.
func (e *KubeEnv) EnsureNamespace(t testing.TB, name string) {
	_, err := e.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// CRDs installs the test CRDs (testdata/crds.yaml: tidal.io Tidals, example.com Workers) and
// waits until they are served.
func (e *KubeEnv) CRDs(t testing.TB) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	e.ApplyFile(t, filepath.Join(filepath.Dir(file), "testdata", "crds.yaml"), "")
	for _, gvr := range []schema.GroupVersionResource{TidalResource, {Group: "example.com", Version: "v1", Resource: "workers"}} {
		Poll(t, 20*time.Second, "CRD "+gvr.String()+" served", func() bool {
			_, err := e.Dyn.Resource(gvr).Namespace(e.NS).List(context.Background(), metav1.ListOptions{})
			return err == nil
		})
	}
}

// Poll waits up to timeout for cond, checked every 50 ms; it fails the test, saying what it
// waited for, when cond stays false.
func Poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// WaitEvent waits for an Event on object in ns whose message contains contains.
func (e *KubeEnv) WaitEvent(t testing.TB, ns, object, contains string) corev1.Event {
	t.Helper()
	var found corev1.Event
	Poll(t, 10*time.Second, fmt.Sprintf("event on %s containing %q", object, contains), func() bool {
		evs, err := e.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
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

// The labels binding a Tidal to a policy (elasticscaler.TidalLabelScalerName and
// TidalLabelScalerNamespace, which testenv cannot import).
const (
	labelScalerName      = "elasticscaler.io/name"
	labelScalerNamespace = "elasticscaler.io/namespace"
)

// Tidal creates or updates the Tidal ns/name bound to policy by its labels, targeting the
// Deployment web, with status.desiredReplicas desired (TidalObject).
func (e *KubeEnv) Tidal(t testing.TB, ns, name, policy string, desired int64) {
	t.Helper()
	e.TidalObject(t, ns, name, map[string]any{labelScalerName: policy, labelScalerNamespace: ns},
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": ns}, desired)
}

// TidalObject creates or updates a Tidal with the given labels and targetRef (nil: none) and
// sets status.desiredReplicas through the status subresource, as its controller would: with
// observedGeneration its generation and Ready True.
func (e *KubeEnv) TidalObject(t testing.TB, ns, name string, lbls, targetRef map[string]any, desired int64) {
	t.Helper()
	e.TidalObjectStatus(t, ns, name, lbls, targetRef, desired, 0, "True")
}

// TidalObjectStatus is TidalObject with a status lag generations behind the spec (1: a status
// that predates the spec) and a Ready condition ready ("": none).
func (e *KubeEnv) TidalObjectStatus(t testing.TB, ns, name string, lbls, targetRef map[string]any, desired, lag int64, ready string) {
	t.Helper()
	e.WriteTidal(t, ns, name, lbls, targetRef, desired, lag, ready, "")
}

// TidalFired is Tidal with status.lastScheduleTime fired: the firing of the rule in force, as
// the Tidal controller writes it.
func (e *KubeEnv) TidalFired(t testing.TB, ns, name, policy string, desired int64, fired string) {
	t.Helper()
	e.WriteTidal(t, ns, name, map[string]any{labelScalerName: policy, labelScalerNamespace: ns},
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": ns}, desired, 0, "True", fired)
}

// WriteTidal is TidalObjectStatus with status.lastScheduleTime fired ("": none).
func (e *KubeEnv) WriteTidal(t testing.TB, ns, name string, lbls, targetRef map[string]any, desired, lag int64, ready, fired string) {
	t.Helper()
	tidals := e.Dyn.Resource(TidalResource).Namespace(ns)
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

// TidalApplied is the Tidal NS/name's debi.io/applied annotation, its generation and its
// status.observedGeneration.
func (e *KubeEnv) TidalApplied(t testing.TB, name string) (annotation string, generation, observed int64) {
	t.Helper()
	u, err := e.Dyn.Resource(TidalResource).Namespace(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	observed, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return u.GetAnnotations()["debi.io/applied"], u.GetGeneration(), observed
}
