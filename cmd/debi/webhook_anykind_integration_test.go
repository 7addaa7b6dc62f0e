package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
)

// modelRoles is a custom resource with a scale subresource (spec.replicas, status.replicas,
// status.selector), shaped like a serving framework's role adapter or a LeaderWorkerSet.
var modelRoles = schema.GroupVersionResource{Group: "serving.example.com", Version: "v1", Resource: "modelroles"}

// installModelRoles installs the ModelRole CRD (idempotent) and waits until ns serves it.
func installModelRoles(ctx context.Context, t *testing.T, e *testenv.KubeEnv) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "modelroles.serving.example.com"},
		"spec": map[string]any{
			"group": "serving.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "modelroles", "singular": "modelrole", "kind": "ModelRole"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}, "scale": map[string]any{
					"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := testenv.SSA(ctx, e.Dyn.Resource(testenv.CRDResource), crd); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 20*time.Second, "modelroles served", func() bool {
		_, err := e.Dyn.Resource(modelRoles).Namespace(e.NS).List(ctx, metav1.ListOptions{})
		return err == nil
	})
}

// modelRole creates a ModelRole of n replicas.
func modelRole(ctx context.Context, t *testing.T, e *testenv.KubeEnv, name string, n int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.example.com/v1", "kind": "ModelRole",
		"metadata": map[string]any{"name": name, "namespace": e.NS},
		"spec":     map[string]any{"replicas": n},
	}}
	if _, err := e.Dyn.Resource(modelRoles).Namespace(e.NS).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// roleReplicas is a ModelRole's size, read through its scale subresource.
func roleReplicas(ctx context.Context, t *testing.T, e *testenv.KubeEnv, name string) int64 {
	t.Helper()
	u, err := e.Dyn.Resource(modelRoles).Namespace(e.NS).Get(ctx, name, metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

// TestWebhookScalesAnyKind: `debi webhook` scales a custom resource with a scale subresource
// (issue 33 item 1) for a file policy and for an ElasticScaler whose targetRef names it, on a
// real kube-apiserver: an alert for each policy resizes its own object through /scale, and
// nothing else; an ElasticScaler with the HPA algorithm gets a Kubernetes HPA on the custom
// resource (the HPA path).
func TestWebhookScalesAnyKind(t *testing.T) {
	e := newKubeEnv(t)
	ctx := context.Background()
	installModelRoles(ctx, t, e)
	modelRole(ctx, t, e, "decode", 2)
	modelRole(ctx, t, e, "decode-es", 2)
	e.ApplyFile(t, "../../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	testenv.Poll(t, 20*time.Second, "elasticscalers served", func() bool {
		_, err := e.Dyn.Resource(elasticscaler.Resource).Namespace(e.NS).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	esObj := func(name, algorithm string, metric map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
			"metadata": map[string]any{"name": name, "namespace": e.NS},
			"spec": map[string]any{
				"targetRef":   map[string]any{"apiVersion": "serving.example.com/v1", "kind": "ModelRole", "name": name},
				"minReplicas": int64(1), "maxReplicas": int64(10),
				"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
					"scalingAlgorithm": algorithm, "metrics": []any{metric}}},
			},
		}}
	}
	// APA acts through the webhook; HPA is the guide's: the webhook's HPA owner creates a
	// Kubernetes HPA on the object and runs the policy in shadow beside it.
	e.EnsureNamespace(t, "debi-system")
	for _, o := range []*unstructured.Unstructured{
		esObj("decode-es", "APA", map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
			"metricsName": "running", "target": "20", "endpoint": "http://prometheus:9090/api/v1/query",
			"query": `sum(vllm:num_requests_running{namespace="` + e.NS + `"})`}}),
		esObj("decode-hpa", "HPA", map[string]any{"type": "Resource", "resource": map[string]any{
			"metricsName": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": int64(70)}}}),
	} {
		if _, err := e.Dyn.Resource(elasticscaler.Resource).Namespace(e.NS).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	modelRole(ctx, t, e, "decode-hpa", 2)
	cfg := filepath.Join(t.TempDir(), "debi.yml")
	testenv.WriteFile(t, cfg, `
global: {elastic_scalers: {enabled: true, namespaces: [`+e.NS+`]}}
webhook: {allow_unauthenticated: true, mode: act, tidal: {enabled: false}, leader_election: {retry_period: 500ms}}
policies:
  - name: decode
    target: {api_version: serving.example.com/v1, kind: ModelRole, namespace: `+e.NS+`, name: decode}
    algorithm: hpa
    scaling: {target: 0.5, max_replicas: 10}
`)
	url := runWebhook(t, webhookOptions{ConfigFile: cfg, RestConfig: e.RC}, prometheus.NewRegistry())

	// No Prometheus: the alerts' annotations decide, the load at 2 replicas: 1.0 against the file
	// policy's target 0.5, 2.0 against the ElasticScaler's reference 1 (its AverageValue metric):
	// 4 replicas each.
	alert := func(policy, load string) (int, string) {
		return testenv.Request(t, "POST", url+"/v1/alertmanager", "", string(testenv.AMPayload("firing", map[string]any{
			"labels":      testenv.AlertLabels("policy", policy, "namespace", e.NS),
			"annotations": map[string]string{"load": load, "current_replicas": "2", "recommended_replicas": "4"},
		})))
	}
	if code, msg := alert("decode", "1.0"); code != 200 {
		t.Fatalf("alert for the file policy: %d %s", code, msg)
	}
	if n := roleReplicas(ctx, t, e, "decode"); n != 4 {
		t.Errorf("file policy: ModelRole decode at %d replicas, want 4", n)
	}
	esPolicy := e.NS + ".decode-es"
	var esAnswer string
	testenv.Poll(t, 20*time.Second, "the ElasticScaler's policy in force", func() bool {
		code, msg := alert(esPolicy, "2.0")
		esAnswer = msg
		return code == 200
	})
	t.Logf("ElasticScaler policy's answer: %s", esAnswer)
	if n := roleReplicas(ctx, t, e, "decode-es"); n != 4 {
		t.Errorf("ElasticScaler: ModelRole decode-es at %d replicas, want 4", n)
	}
	if n := roleReplicas(ctx, t, e, "decode"); n != 4 {
		t.Errorf("the ElasticScaler's alert moved the file policy's object: %d", n)
	}
	// The HPA path: a Kubernetes HPA whose scaleTargetRef is the custom resource.
	testenv.Poll(t, 30*time.Second, "the HPA of decode-hpa", func() bool {
		h, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(e.NS).Get(ctx, "decode-hpa", metav1.GetOptions{})
		if err != nil {
			return false
		}
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "ModelRole" || ref.APIVersion != "serving.example.com/v1" || ref.Name != "decode-hpa" {
			t.Fatalf("the HPA scales %+v, want the ModelRole decode-hpa", ref)
		}
		return true
	})
}
