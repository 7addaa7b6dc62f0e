package elasticscaler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/webhook"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// startAPIServer starts a real etcd + kube-apiserver with hack/k8s-env.sh (the recipe of
// apis/integration_test.go). No controller-manager runs: no garbage collector, no HPA controller.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", testenv.APIServer(t))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	return rc
}

func decodeYAML(t *testing.T, b []byte) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// ssa applies obj as a user would (kubectl apply --server-side), strictly.
func ssa(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "kubectl", Force: new(true), FieldValidation: "Strict"})
}

// TestHPAOwnerOnAPIServer: on a real kube-apiserver with the CRDs, the guide's HPA example gets
// its autoscaling/v2 HPA (scaleTargetRef, bounds, cpu 70 %, owner reference); the HPA follows a
// maxReplicas change; the switch to APA deletes it, the switch back recreates it; deleting the
// object deletes it (explicitly: no garbage collector runs here); a foreign HPA of an object's
// name is left alone and reported.
func TestHPAOwnerOnAPIServer(t *testing.T) {
	rc := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "crds", "elasticscaler.io_elasticscalers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssa(ctx, dyn.Resource(crdGVR), decodeYAML(t, b)); err != nil {
		t.Fatal(err)
	}
	const ns = "ai-inference"
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := ssa(ctx, dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), nsObj); err != nil {
		t.Fatal(err)
	}

	// The owner runs as the webhook's ServiceAccount with deploy/'s RBAC (impersonation): least
	// privilege is enough. (This API server does not enable OwnerReferencesPermissionEnforcement,
	// so the elasticscalers/finalizers grant blockOwnerDeletion needs is not exercised.)
	applyRBAC(ctx, t, dyn, ns)
	sa := rest.CopyConfig(rc)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:debi-system:debi-webhook"}
	saDyn, saKube := dynamic.NewForConfigOrDie(sa), kubernetes.NewForConfigOrDie(sa)
	if _, err := saKube.AutoscalingV2().HorizontalPodAutoscalers("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount lists HPAs outside the ElasticScaler namespaces: %v, want forbidden", err)
	}

	// The owner starts before the CRD is served or right after: it waits for discovery.
	owner := elasticscaler.NewOwner(elasticscaler.OwnerOptions{Dynamic: saDyn, Kube: saKube, Namespaces: []string{ns}, Recheck: 200 * time.Millisecond,
		MaxRetry: time.Second, Logger: slog.New(slog.NewTextHandler(logTo(t), nil))})
	octx, ostop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := owner.Run(octx); err != nil {
			t.Error(err)
		}
	}()
	defer func() { ostop(); wg.Wait() }()

	es := dyn.Resource(elasticscaler.Resource).Namespace(ns)
	hpas := kube.AutoscalingV2().HorizontalPodAutoscalers(ns)
	get := func(name string) *autoscalingv2.HorizontalPodAutoscaler {
		h, err := hpas.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out: %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fixture, err := os.ReadFile(filepath.Join("..", "apis", "testdata", "guide-hpa.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj *unstructured.Unstructured
	for { // the CRD just installed: served once a create answers
		if obj, err = ssa(ctx, es, decodeYAML(t, fixture)); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create the guide's object: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	const name = "hpa-scaling-example"

	wait("HPA created", func() bool { return get(name) != nil })
	h := get(name)
	s := h.Spec
	ref := metav1.GetControllerOf(h)
	if s.ScaleTargetRef != (autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "vllm-inference"}) ||
		*s.MinReplicas != 2 || s.MaxReplicas != 10 || len(s.Metrics) != 1 || s.Metrics[0].Resource.Name != "cpu" ||
		s.Metrics[0].Resource.Target.Type != autoscalingv2.UtilizationMetricType || *s.Metrics[0].Resource.Target.AverageUtilization != 70 {
		t.Fatalf("HPA spec %+v", s)
	}
	if ref == nil || ref.Kind != "ElasticScaler" || ref.APIVersion != "elasticscaler.io/v1alpha1" || ref.Name != name ||
		ref.UID != obj.GetUID() || !*ref.BlockOwnerDeletion {
		t.Fatalf("owner references %+v (object uid %s)", h.OwnerReferences, obj.GetUID())
	}
	managers := map[string]bool{}
	for _, mf := range h.ManagedFields {
		managers[mf.Manager+"/"+string(mf.Operation)] = true
	}
	if !managers["debi/Apply"] {
		t.Fatalf("managed fields %v, want debi/Apply", managers)
	}
	t.Logf("HPA %s/%s: target %s/%s min %d max %d cpu %d%% owner %s %s (uid %s)", ns, name, s.ScaleTargetRef.Kind, s.ScaleTargetRef.Name,
		*s.MinReplicas, s.MaxReplicas, *s.Metrics[0].Resource.Target.AverageUtilization, ref.Kind, ref.Name, ref.UID)
	rv := h.ResourceVersion

	// A status write (as debi's status writer does) changes nothing of the HPA.
	st := obj.DeepCopy()
	_ = unstructured.SetNestedField(st.Object, int64(3), "status", "currentReplicas")
	if _, err := es.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := get(name).ResourceVersion; got != rv {
		t.Fatalf("HPA written on a status change (resourceVersion %s → %s)", rv, got)
	}

	apply := func(mut func(*unstructured.Unstructured)) {
		t.Helper()
		o := decodeYAML(t, fixture)
		mut(o)
		if _, err := ssa(ctx, es, o); err != nil {
			t.Fatal(err)
		}
	}
	apply(func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, int64(12), "spec", "maxReplicas")
	})
	wait("maxReplicas 12", func() bool { return get(name).Spec.MaxReplicas == 12 })
	t.Log("maxReplicas 10 → 12: the HPA followed")

	apply(func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "APA", "spec", "trigger", "metricsTrigger", "scalingAlgorithm")
	})
	wait("HPA deleted on the switch to APA", func() bool { return get(name) == nil })
	t.Log("scalingAlgorithm HPA → APA: the HPA was deleted")

	apply(func(o *unstructured.Unstructured) {})
	wait("HPA recreated on the switch back", func() bool { return get(name) != nil })
	if h2 := get(name); h2.UID == h.UID || h2.Spec.MaxReplicas != 10 {
		t.Fatalf("not recreated as the object says: uid %s (was %s), max %d", h2.UID, h.UID, h2.Spec.MaxReplicas)
	}
	t.Log("scalingAlgorithm APA → HPA: the HPA was recreated")

	if err := es.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("HPA deleted with the object", func() bool { return get(name) == nil })
	t.Log("ElasticScaler deleted: the HPA was deleted (by debi: this API server runs no garbage collector)")

	// A foreign HPA of the object's name.
	foreign := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "theirs"},
			MinReplicas:    new(int32(1)), MaxReplicas: 4,
		},
	}
	foreign, err = hpas.Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apply(func(o *unstructured.Unstructured) { o.SetName("foreign") })
	key := ns + "/foreign"
	wait("foreign HPA reported", func() bool { return strings.Contains(owner.Problems()[key], "does not own") })
	t.Logf("Problems()[%s] = %s", key, owner.Problems()[key])
	time.Sleep(2 * time.Second) // retries
	if h := get("foreign"); h.ResourceVersion != foreign.ResourceVersion || len(h.OwnerReferences) != 0 {
		t.Fatalf("foreign HPA touched: %+v", h)
	}
	if err := es.Delete(ctx, "foreign", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("problem cleared", func() bool { return owner.Problems()[key] == "" })
	time.Sleep(time.Second)
	if h := get("foreign"); h == nil || h.ResourceVersion != foreign.ResourceVersion {
		t.Fatal("foreign HPA deleted or changed with the object")
	}
	t.Log("foreign HPA of the same name: left alone and reported; still there after the object's deletion")
}

// logTo is a slog handler's writer logging to t until t's end (client-go's klog, which the
// webhook points at its first logger for the life of the process, may log later).
func logTo(t *testing.T) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return w
}

// applyRBAC applies deploy/base's ElasticScaler ClusterRoles and binds the webhook's in ns.
func applyRBAC(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) {
	t.Helper()
	gvr := map[string]schema.GroupVersionResource{
		"ClusterRole": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"RoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	for _, f := range []string{"elastic-scaler-rbac.yaml", "elastic-scaler-rolebinding.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "base", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			o := decodeYAML(t, []byte(doc))
			if o.GetKind() == "RoleBinding" && o.GetName() != "debi-webhook-elasticscaler" {
				continue
			}
			ri := dynamic.ResourceInterface(dyn.Resource(gvr[o.GetKind()]))
			if o.GetKind() == "RoleBinding" {
				o.SetNamespace(ns)
				ri = dyn.Resource(gvr[o.GetKind()]).Namespace(ns)
			}
			if _, err := ssa(ctx, ri, o); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// TestWebhookRunsHPAOwner: `debi webhook` with global.elastic_scalers (leader election on, its
// Lease <name>-hpa) creates the guide's HPA and runs the object's policy in shadow mode only (the
// Kubernetes HPA scales; debi compares); deleting the object deletes the HPA.
func TestWebhookRunsHPAOwner(t *testing.T) {
	rc := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "crds", "elasticscaler.io_elasticscalers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssa(ctx, dyn.Resource(crdGVR), decodeYAML(t, b)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ai-inference", "debi-system"} {
		nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": n}}}
		if _, err := ssa(ctx, dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), nsObj); err != nil {
			t.Fatal(err)
		}
	}
	// Served before the webhook starts: its watches look again only every minute.
	for {
		if _, err := dyn.Resource(elasticscaler.Resource).Namespace("ai-inference").List(ctx, metav1.ListOptions{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("elasticscalers not served")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	file := "global: {elastic_scalers: {enabled: true, namespaces: [ai-inference]}}\n" +
		"webhook: {allow_unauthenticated: true, tidal: {enabled: false}, leader_election: {retry_period: 500ms}}\n"
	if err := os.WriteFile(cfgFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.New(webhook.Options{ConfigFile: cfgFile, RestConfig: rc, Listener: l},
		slog.New(slog.NewTextHandler(logTo(t), nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	wctx, wstop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wh.Run(wctx) }()
	defer func() {
		wstop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("webhook Run = %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("webhook Run did not stop")
		}
	}()

	fixture, err := os.ReadFile(filepath.Join("..", "apis", "testdata", "guide-hpa.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	es := dyn.Resource(elasticscaler.Resource).Namespace("ai-inference")
	for {
		if _, err = ssa(ctx, es, decodeYAML(t, fixture)); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create the guide's object: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	hpas := kube.AutoscalingV2().HorizontalPodAutoscalers("ai-inference")
	for {
		h, err := hpas.Get(ctx, "hpa-scaling-example", metav1.GetOptions{})
		if err == nil {
			t.Logf("HPA created by the webhook: max %d, owner %s", h.Spec.MaxReplicas, h.OwnerReferences[0].Name)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no HPA: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := kube.CoordinationV1().Leases("debi-system").Get(ctx, "debi-webhook-hpa", metav1.GetOptions{}); err != nil {
		t.Fatalf("the HPA owner's Lease: %v", err)
	}
	const shadow = `debi_webhook_policy_info{algorithm="hpa",mode="shadow",policy="ai-inference.hpa-scaling-example"} 1`
	var body string
	for !strings.Contains(body, shadow) {
		if ctx.Err() != nil {
			t.Fatalf("policy not in shadow mode; policy info:\n%s", grepLines(body, "debi_webhook_policy_info"))
		}
		time.Sleep(100 * time.Millisecond)
		if resp, err := http.Get("http://" + l.Addr().String() + "/metrics"); err == nil {
			bb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(bb)
		}
	}
	t.Log(shadow)
	if err := es.Delete(ctx, "hpa-scaling-example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := hpas.Get(ctx, "hpa-scaling-example", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("HPA not deleted with the object")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
