package elasticscaler_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
)

// TestHPAOwnerOnAPIServer: on a real kube-apiserver with the CRDs, the guide's HPA example gets
// its autoscaling/v2 HPA (scaleTargetRef, bounds, cpu 70 %, owner reference); the HPA follows a
// maxReplicas change; the switch to APA deletes it, the switch back recreates it; deleting the
// object deletes it (explicitly: no garbage collector runs here); a foreign HPA of an object's
// name is left alone and reported.
func TestHPAOwnerOnAPIServer(t *testing.T) {
	rc := testenv.APIServerConfig(t)
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
	const ns = "ai-inference"
	// Not waited for: the owner starts before the CRD is served or right after.
	testenv.InstallCRD(ctx, t, dyn, filepath.Join("..", "deploy", "crds", "elasticscaler.io_elasticscalers.yaml"), schema.GroupVersionResource{}, ns)

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
		MaxRetry: time.Second, Logger: slog.New(slog.NewTextHandler(testenv.LogTo(t), nil))})
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
		if obj, err = testenv.SSA(ctx, es, testenv.DecodeYAML(t, fixture)); err == nil {
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
		o := testenv.DecodeYAML(t, fixture)
		mut(o)
		if _, err := testenv.SSA(ctx, es, o); err != nil {
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
			o := testenv.DecodeYAML(t, []byte(doc))
			if o.GetKind() == "RoleBinding" && o.GetName() != "debi-webhook-elasticscaler" {
				continue
			}
			ri := dynamic.ResourceInterface(dyn.Resource(gvr[o.GetKind()]))
			if o.GetKind() == "RoleBinding" {
				o.SetNamespace(ns)
				ri = dyn.Resource(gvr[o.GetKind()]).Namespace(ns)
			}
			if _, err := testenv.SSA(ctx, ri, o); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}
