package exporter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// scaleCRD is a CRD of kind kind (plural plural) in group serving.example.com whose scale
// subresource reads spec.replicas and status.replicas, and status.selector when selector is
// set: shaped like a LeaderWorkerSet or a RoleBasedGroup scaling adapter.
func scaleCRD(plural, kind string, selector bool) *unstructured.Unstructured {
	scale := map[string]any{"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
	if selector {
		scale["labelSelectorPath"] = ".status.selector"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".serving.example.com"},
		"spec": map[string]any{
			"group": "serving.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}, "scale": scale},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

// installScaleCRD creates a scaleCRD and waits until its objects are served.
func installScaleCRD(t *testing.T, dyn dynamic.Interface, plural, kind string, selector bool) schema.GroupVersionResource {
	t.Helper()
	ctx := context.Background()
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crd).Create(ctx, scaleCRD(plural, kind, selector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "serving.example.com", Version: "v1", Resource: plural}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{}); err == nil {
			return gvr
		} else if time.Now().After(deadline) {
			t.Fatalf("%s not served: %v", plural, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createScaled creates an object of gvr with spec.replicas and, in its status, status.replicas
// and the selector ("" none).
func createScaled(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, kind, name string, replicas int64, selector string) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.example.com/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"replicas": replicas},
	}}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := map[string]any{"replicas": replicas}
	if selector != "" {
		status["selector"] = selector
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Namespace("default").Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestTargetPodsAnyKind: on a real kube-apiserver, a policy whose target is a custom resource
// with a scale subresource gets its pods (those its status.selector selects, and no other pod
// of the namespace) and its size published as debi_target_pod_info and
// debi_target_spec_replicas, which the recording rules turn into the default queries' series
// (rules/tests). A target whose scale subresource has no status.selector publishes nothing and
// is named in the log with reason no_pod_selector; a Deployment's pods are left to
// kube-state-metrics.
func TestTargetPodsAnyKind(t *testing.T) {
	rc := startKubeAPIServer(t)
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	roles := installScaleCRD(t, dyn, "modelroles", "ModelRole", true)
	widgets := installScaleCRD(t, dyn, "widgets", "Widget", false)
	createScaled(t, dyn, roles, "ModelRole", "decode", 3, "app=vllm,role=decode")
	createScaled(t, dyn, widgets, "Widget", "w", 2, "")
	ctx := context.Background()
	for name, role := range map[string]string{"decode-a": "decode", "decode-b": "decode", "prefill-a": "prefill"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "vllm", "role": role}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai"}}},
		}
		if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	e, reg, logs := newLoggedExporter(t, `
policies:
  - name: decode
    target: {api_version: serving.example.com/v1, kind: ModelRole, namespace: default, name: decode}
    algorithm: hpa
  - name: decode-shadow
    target: {api_version: serving.example.com/v1, kind: ModelRole, namespace: default, name: decode}
    algorithm: hpa
  - name: widget
    target: {api_version: serving.example.com/v1, kind: Widget, namespace: default, name: w}
    algorithm: hpa
  - name: web
    target: {kind: Deployment, namespace: default, name: web}
    algorithm: hpa
`, &fakeQuerier{byExpr: map[string]series{}})
	e.sources.build = newSourceClients(newKubeConn(rc, ""))
	e.Step(ctx, t0)

	for _, pol := range []string{"decode", "decode-shadow"} {
		for _, pod := range []string{"decode-a", "decode-b"} {
			if v, ok := value(t, reg, "debi_target_pod_info", pol, "pod", pod); !ok || v != 1 {
				t.Errorf("debi_target_pod_info{policy=%q,pod=%q} = %v (present %v), want 1", pol, pod, v, ok)
			}
		}
		if _, ok := value(t, reg, "debi_target_pod_info", pol, "pod", "prefill-a"); ok {
			t.Errorf("policy %s: prefill-a is published although the selector does not select it", pol)
		}
		if v := gauge(t, reg, "debi_target_spec_replicas", pol); v != 3 {
			t.Errorf("debi_target_spec_replicas{policy=%q} = %v, want 3", pol, v)
		}
	}
	if _, ok := value(t, reg, "debi_target_spec_replicas", "widget"); ok {
		t.Error("a target without status.selector has a published size")
	}
	if v := gauge(t, reg, "debi_target_pods_errors_total", "widget"); v != 1 {
		t.Errorf("debi_target_pods_errors_total{policy=widget} = %v, want 1", v)
	}
	out := logs.String()
	if !strings.Contains(out, "reason=no_pod_selector") || !strings.Contains(out, "status.selector") || !strings.Contains(out, "policies[2].target") {
		t.Errorf("the log does not name the widget's missing status.selector:\n%s", out)
	}
	for _, name := range []string{"debi_target_pod_info", "debi_target_spec_replicas", "debi_target_pods_errors_total"} {
		if _, ok := value(t, reg, name, "web"); ok {
			t.Errorf("%s published for a Deployment, whose pods kube-state-metrics relabels", name)
		}
	}

	// Scaled and a pod gone: the next step publishes the new size and pods.
	if _, err := dyn.Resource(roles).Namespace("default").Patch(ctx, "decode", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CoreV1().Pods("default").Delete(ctx, "decode-b", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for step := 1; ; step++ {
		e.Step(ctx, t0.Add(time.Duration(step)*e.interval))
		_, stale := value(t, reg, "debi_target_pod_info", "decode", "pod", "decode-b")
		v, _ := value(t, reg, "debi_target_spec_replicas", "decode")
		if !stale && v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a scale to 1 and decode-b deleted: decode-b published %v, size %v", stale, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
