package elasticscaler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
)

const ns = "ai-inference"

// guide is the guide's HPA example (apis/testdata/guide-hpa.yaml) as the watch delivers it.
func guide(t *testing.T, uid string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "apis", "testdata", "guide-hpa.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetUID(types.UID(uid))
	return u
}

type env struct {
	t     *testing.T
	dyn   *dynamicfake.FakeDynamicClient
	kube  *kubefake.Clientset
	owner *Owner
	stop  func()
}

func start(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	var esObjs, kubeObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			esObjs = append(esObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{Resource: "ElasticScalerList"}, esObjs...)
	kube := kubefake.NewClientset(kubeObjs...)
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: esv1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "elasticscalers", Namespaced: true, Kind: Kind}}}}
	o := NewOwner(OwnerOptions{Dynamic: dyn, Kube: kube, Namespaces: []string{ns}, MaxRetry: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := o.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	e := &env{t: t, dyn: dyn, kube: kube, owner: o, stop: func() { cancel(); wg.Wait() }}
	t.Cleanup(e.stop)
	return e
}

func (e *env) es() *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.dyn.Resource(Resource).Namespace(ns).Get(context.Background(), "hpa-scaling-example", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

func (e *env) update(u *unstructured.Unstructured) {
	e.t.Helper()
	if _, err := e.dyn.Resource(Resource).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) getHPA(name string) *autoscalingv2.HorizontalPodAutoscaler {
	h, err := e.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return h
}

// writes counts the HPA writes (patch, create, update, delete) of the test's clientset.
func (e *env) writes() (n int) {
	for _, a := range e.kube.Actions() {
		if a.GetResource().Resource == "horizontalpodautoscalers" && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			n++
		}
	}
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkGuideHPA(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler, uid string, maxR int32) {
	t.Helper()
	s := h.Spec
	if s.ScaleTargetRef != (autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "vllm-inference"}) ||
		s.MinReplicas == nil || *s.MinReplicas != 2 || s.MaxReplicas != maxR {
		t.Fatalf("spec %+v", s)
	}
	if len(s.Metrics) != 1 || s.Metrics[0].Type != autoscalingv2.ResourceMetricSourceType || s.Metrics[0].Resource.Name != "cpu" ||
		s.Metrics[0].Resource.Target.Type != autoscalingv2.UtilizationMetricType || *s.Metrics[0].Resource.Target.AverageUtilization != 70 {
		t.Fatalf("metrics %+v", s.Metrics)
	}
	ref := metav1.GetControllerOf(h)
	if ref == nil || ref.APIVersion != "elasticscaler.io/v1alpha1" || ref.Kind != "ElasticScaler" || ref.Name != "hpa-scaling-example" ||
		string(ref.UID) != uid || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("owner references %+v", h.OwnerReferences)
	}
	if h.Labels[LabelManagedBy] != "debi" || h.Labels[LabelName] != "hpa-scaling-example" {
		t.Fatalf("labels %v", h.Labels)
	}
}

// TestCreateAndUpdateOnChange: the guide's object gets its HPA; a change that does not touch the
// HPA's fields (an annotation, the status) writes nothing; maxReplicas changed → the HPA follows;
// an HPA edited by hand is set back.
func TestCreateAndUpdateOnChange(t *testing.T) {
	e := start(t, guide(t, "uid-1"))
	eventually(t, "HPA created", func() bool { return e.getHPA("hpa-scaling-example") != nil })
	checkGuideHPA(t, e.getHPA("hpa-scaling-example"), "uid-1", 10)
	if n := e.writes(); n != 1 {
		t.Fatalf("%d HPA writes, want 1 (one apply)", n)
	}
	var patch k8stesting.PatchAction
	for _, a := range e.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patch = p
		}
	}
	if patch.GetPatchType() != types.ApplyPatchType {
		t.Fatalf("patch type %q, want server-side apply", patch.GetPatchType())
	}

	u := e.es()
	u.SetAnnotations(map[string]string{"example.com/note": "x"})
	e.update(u)
	time.Sleep(300 * time.Millisecond)
	if n := e.writes(); n != 1 {
		t.Fatalf("%d HPA writes after a change not touching the HPA, want 1", n)
	}

	u = e.es()
	if err := unstructured.SetNestedField(u.Object, int64(12), "spec", "maxReplicas"); err != nil {
		t.Fatal(err)
	}
	e.update(u)
	eventually(t, "maxReplicas 12", func() bool { h := e.getHPA("hpa-scaling-example"); return h != nil && h.Spec.MaxReplicas == 12 })
	checkGuideHPA(t, e.getHPA("hpa-scaling-example"), "uid-1", 12)
	if n := e.writes(); n != 2 {
		t.Fatalf("%d HPA writes, want 2", n)
	}

	// Edited by someone else: debi's fields are set back.
	h := e.getHPA("hpa-scaling-example")
	h.Spec.MaxReplicas = 99
	if _, err := e.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Update(context.Background(), h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "maxReplicas set back to 12", func() bool { h := e.getHPA("hpa-scaling-example"); return h.Spec.MaxReplicas == 12 })
	if p := e.owner.Problems(); len(p) != 0 {
		t.Fatalf("problems %v", p)
	}
}

// TestSwitchAwayDeletes: HPA → APA deletes the HPA the object owns; back to HPA recreates it;
// a StateTrigger too deletes it.
func TestSwitchAwayDeletes(t *testing.T) {
	e := start(t, guide(t, "uid-1"))
	eventually(t, "HPA created", func() bool { return e.getHPA("hpa-scaling-example") != nil })
	set := func(alg string) {
		u := e.es()
		if err := unstructured.SetNestedField(u.Object, alg, "spec", "trigger", "metricsTrigger", "scalingAlgorithm"); err != nil {
			t.Fatal(err)
		}
		e.update(u)
	}
	set("APA")
	eventually(t, "HPA deleted on the switch to APA", func() bool { return e.getHPA("hpa-scaling-example") == nil })
	set("hpa") // case-insensitive
	eventually(t, "HPA recreated", func() bool { return e.getHPA("hpa-scaling-example") != nil })
	checkGuideHPA(t, e.getHPA("hpa-scaling-example"), "uid-1", 10)

	u := e.es()
	unstructured.RemoveNestedField(u.Object, "spec", "trigger", "metricsTrigger")
	_ = unstructured.SetNestedField(u.Object, "StateTrigger", "spec", "trigger", "type")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{}, "spec", "trigger", "stateTrigger")
	e.update(u)
	eventually(t, "HPA deleted on the switch to a StateTrigger", func() bool { return e.getHPA("hpa-scaling-example") == nil })
}

// TestDeletion: the object deleted → its HPA deleted (explicitly; the garbage collector would
// too, through the owner reference).
func TestDeletion(t *testing.T) {
	e := start(t, guide(t, "uid-1"))
	eventually(t, "HPA created", func() bool { return e.getHPA("hpa-scaling-example") != nil })
	if err := e.dyn.Resource(Resource).Namespace(ns).Delete(context.Background(), "hpa-scaling-example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "HPA deleted", func() bool { return e.getHPA("hpa-scaling-example") == nil })
}

// TestOrphanAtStart: an HPA of debi's whose object is gone (deleted while debi was down) is
// deleted when the owner starts.
func TestOrphanAtStart(t *testing.T) {
	orphan := owned("hpa-scaling-example", "uid-gone")
	e := start(t, orphan)
	eventually(t, "orphan HPA deleted", func() bool { return e.getHPA("hpa-scaling-example") == nil })
}

func owned(name, uid string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("hpa-" + uid),
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelName: name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "elasticscaler.io/v1alpha1", Kind: Kind, Name: name,
				UID: types.UID(uid), Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "old"},
			MaxReplicas:    3,
		},
	}
}

// TestEarlierObjectsHPAReplaced: debi's HPA of an earlier object of the same name (another UID)
// is replaced by the new object's.
func TestEarlierObjectsHPAReplaced(t *testing.T) {
	e := start(t, owned("hpa-scaling-example", "uid-old"), guide(t, "uid-new"))
	eventually(t, "HPA of the new object", func() bool {
		h := e.getHPA("hpa-scaling-example")
		return h != nil && len(h.OwnerReferences) == 1 && h.OwnerReferences[0].UID == "uid-new"
	})
	checkGuideHPA(t, e.getHPA("hpa-scaling-example"), "uid-new", 10)
}

// TestForeignHPAUntouched: an HPA of the object's name that the object does not own is never
// written nor deleted — not on create, not on a switch away, not on deletion — and is reported
// in Problems until it is gone.
func TestForeignHPAUntouched(t *testing.T) {
	foreign := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-scaling-example", Namespace: ns, UID: "foreign", Labels: map[string]string{"team": "a"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "theirs"},
			MinReplicas:    new(int32(1)), MaxReplicas: 5,
		},
	}
	// Also one with debi's labels but another controller: still not ours.
	other := owned("other", "uid-x")
	other.OwnerReferences[0].Kind = "Deployment"
	e := start(t, foreign, other, guide(t, "uid-1"))
	key := ns + "/hpa-scaling-example"
	eventually(t, "problem reported", func() bool { return strings.Contains(e.owner.Problems()[key], "does not own") })
	t.Log(e.owner.Problems()[key])
	time.Sleep(500 * time.Millisecond) // a few retries
	if n := e.writes(); n != 0 {
		t.Fatalf("%d HPA writes, want none", n)
	}
	if h := e.getHPA("hpa-scaling-example"); h.Spec.ScaleTargetRef.Name != "theirs" || h.Spec.MaxReplicas != 5 || len(h.OwnerReferences) != 0 {
		t.Fatalf("foreign HPA changed: %+v", h)
	}
	u := e.es()
	_ = unstructured.SetNestedField(u.Object, "APA", "spec", "trigger", "metricsTrigger", "scalingAlgorithm")
	e.update(u)
	eventually(t, "problem cleared on the switch away", func() bool { return e.owner.Problems()[key] == "" })
	if err := e.dyn.Resource(Resource).Namespace(ns).Delete(context.Background(), "hpa-scaling-example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := e.writes(); n != 0 {
		t.Fatalf("%d HPA writes, want none", n)
	}
	if e.getHPA("hpa-scaling-example") == nil || e.getHPA("other") == nil {
		t.Fatal("a foreign HPA was deleted")
	}
}

// TestWaitsUntilServed: without the CRD served, Run waits and returns nil at the end.
func TestWaitsUntilServed(t *testing.T) {
	kube := kubefake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := RunOwner(ctx, OwnerOptions{Kube: kube, Recheck: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

// TestMetricMapping: every metric type the HPA path accepts, in HPA's shapes.
func TestMetricMapping(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "a"}}
	for _, tc := range []struct {
		name string
		in   esv1.MetricSpec
		want autoscalingv2.MetricSpec
	}{
		{"resource cpu utilization",
			esv1.MetricSpec{Type: esv1.ResourceMetricSourceType, Resource: &esv1.ResourceMetricSource{MetricsName: "cpu",
				Target: esv1.MetricTarget{Type: esv1.UtilizationMetricType, AverageUtilization: new(int32(70))}}},
			autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(int32(70))}}}},
		{"resource memory average value",
			esv1.MetricSpec{Type: esv1.ResourceMetricSourceType, Resource: &esv1.ResourceMetricSource{MetricsName: "memory",
				Target: esv1.MetricTarget{Type: esv1.AverageValueMetricType, AverageValue: q("512Mi")}}},
			autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "memory",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("512Mi")}}}},
		{"external value",
			esv1.MetricSpec{Type: esv1.ExternalMetricSourceType, External: &esv1.ExternalMetricSource{
				Metric: esv1.MetricIdentifier{Name: "queue_depth", Selector: sel}, Target: esv1.MetricTarget{Type: esv1.ValueMetricType, Value: q("30")}}},
			autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth", Selector: sel}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("30")}}}},
		{"custom pods",
			esv1.MetricSpec{Type: esv1.CustomMetricSourceType, Custom: &esv1.CustomMetricSource{
				Metric: esv1.MetricIdentifier{Name: "rps"}, Target: esv1.MetricTarget{Type: esv1.AverageValueMetricType, AverageValue: q("100")}}},
			autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("100")}}}},
		{"custom object",
			esv1.MetricSpec{Type: esv1.CustomMetricSourceType, Custom: &esv1.CustomMetricSource{
				Metric: esv1.MetricIdentifier{Name: "hits"}, DescribedObject: &esv1.CrossVersionObjectReference{Kind: "Ingress", Name: "main", APIVersion: "networking.k8s.io/v1"},
				Target: esv1.MetricTarget{Type: esv1.ValueMetricType, Value: q("2k")}}},
			autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: "Ingress", Name: "main", APIVersion: "networking.k8s.io/v1"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("2k")}}}},
	} {
		got, err := Metric(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		h1 := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{got}}}
		h2 := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{tc.want}}}
		if h1.Spec.Metrics[0].Type != h2.Spec.Metrics[0].Type || !semanticEqual(h1.Spec.Metrics, h2.Spec.Metrics) {
			t.Errorf("%s: got %+v want %+v", tc.name, got, tc.want)
		}
	}
	if _, err := Metric(esv1.MetricSpec{Type: esv1.ExternalServerMetricSourceType, ExternalServer: &esv1.ExternalServerMetricSource{}}); err == nil {
		t.Error("ExternalServer converted")
	}
}

// TestMatchesIgnoresOthersFields: behavior set by another manager, or a quantity spelled
// differently, is not a difference.
func TestMatchesIgnoresOthersFields(t *testing.T) {
	var es esv1.ElasticScaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(guide(t, "u").Object, &es); err != nil {
		t.Fatal(err)
	}
	es.Spec.Trigger.MetricsTrigger.Metrics[0].Resource.Target = esv1.MetricTarget{Type: esv1.AverageValueMetricType, AverageValue: q("0.5")}
	want, err := Desired(&es)
	if err != nil {
		t.Fatal(err)
	}
	have := want.DeepCopy()
	have.Spec.Metrics[0].Resource.Target.AverageValue = q("500m")
	have.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	have.Labels["team"] = "a"
	if !Matches(have, want) {
		t.Fatal("not matching")
	}
	have.Spec.MaxReplicas++
	if Matches(have, want) {
		t.Fatal("maxReplicas difference not seen")
	}
	es.Spec.Trigger.MetricsTrigger.ScalingAlgorithm = "APA"
	if _, err := Desired(&es); err == nil {
		t.Fatal("Desired of an APA object")
	}
}

func semanticEqual(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }
