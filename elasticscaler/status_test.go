package elasticscaler

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
)

func stateObject(ns, name, tidal string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": name, "namespace": ns, "generation": int64(1), "resourceVersion": "1",
			"creationTimestamp": time.Unix(1_700_000_000, 0).UTC().Format(time.RFC3339)},
		"spec": map[string]any{
			"targetRef": map[string]any{"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal", "name": tidal},
			"trigger":   map[string]any{"type": "StateTrigger", "stateTrigger": map[string]any{}},
		},
	}}
}

// fakeTargets answers get for the objects it holds (kind/namespace/name), 404 otherwise.
type fakeTargets map[string]*unstructured.Unstructured

func (f fakeTargets) get(_ context.Context, t config.Target) (*unstructured.Unstructured, error) {
	if t.Kind == "Unserved" {
		return nil, &RefError{errors.New("no matches for kind \"Unserved\"")}
	}
	if u, ok := f[t.Kind+"/"+t.Namespace+"/"+t.Name]; ok {
		return u, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(t.Kind) + "s"}, t.Name)
}

func testWriter(t *testing.T, targets fakeTargets, objs ...*unstructured.Unstructured) (*StatusWriter, *record.FakeRecorder, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	sch := runtime.NewScheme()
	var ro []runtime.Object
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		ro = append(ro, o.DeepCopy())
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(sch, map[schema.GroupVersionResource]string{Resource: "ElasticScalerList"}, ro...)
	rec := record.NewFakeRecorder(100)
	file, err := config.Load([]byte("webhook: {allow_unauthenticated: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := NewStatusWriter(StatusOptions{Dynamic: dyn, Get: targets.get, Recorder: rec, File: func() *config.Config { return file }})
	w.store = []cache.Store{store}
	w.leader.Store(true)
	return w, rec, dyn
}

func TestStatusValidate(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	deploy := &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment"}}
	tidalWith := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"desiredReplicas": int64(3)}}}
	tidalWithout := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}}
	bad := testenv.ESObject("shop", "bad-alg", "api", base, "")
	_ = unstructured.SetNestedField(bad.Object, "NOPE", "spec", "trigger", "metricsTrigger", "scalingAlgorithm")
	unserved := testenv.ESObject("shop", "unserved", "x", base, "")
	_ = unstructured.SetNestedField(unserved.Object, "Unserved", "spec", "targetRef", "kind")
	w, _, _ := testWriter(t, fakeTargets{
		"Deployment/shop/web": deploy, "Deployment/shop/api": deploy, "Tidal/shop/with": tidalWith, "Tidal/shop/without": tidalWithout,
	},
		testenv.ESObject("shop", "web-old", "web", base, ""),
		testenv.ESObject("shop", "web-new", "web", base.Add(time.Minute), "shadow"),
		testenv.ESObject("shop", "missing", "gone", base, ""),
		bad, unserved,
		stateObject("shop", "st-ok", "with"),
		stateObject("shop", "st-nostatus", "without"),
		stateObject("shop", "st-missing", "nope"),
	)
	got := w.validate(context.Background(), w.objects())
	for key, want := range map[string]string{
		"shop/web-old":     "",
		"shop/web-new":     "spec.targetRef: apps/v1 Deployment shop/web is already managed by ElasticScaler shop/web-old (older): one ElasticScaler per target",
		"shop/missing":     "spec.targetRef: apps/v1 Deployment shop/gone not found",
		"shop/bad-alg":     "spec.trigger.metricsTrigger.scalingAlgorithm",
		"shop/unserved":    `no matches for kind "Unserved"`,
		"shop/st-ok":       "",
		"shop/st-nostatus": "has neither status.replicas nor status.desiredReplicas",
		"shop/st-missing":  "spec.targetRef: tidal.io/v1alpha1 Tidal shop/nope not found",
	} {
		msg := validationMessage(got[key])
		if (want == "") != (msg == "") || !strings.Contains(msg, want) {
			t.Errorf("%s: %q; want %q", key, msg, want)
		}
		t.Logf("%s: %q", key, msg)
	}
}

func TestStatusMetricsCondition(t *testing.T) {
	for _, tc := range []struct {
		m      MetricsRead
		status metav1.ConditionStatus
		reason string
	}{
		{MetricsRead{Inputs: 3}, metav1.ConditionTrue, esv1.ReasonMetricsAvailable},
		{MetricsRead{Inputs: 3, Failed: []string{"load: no series"}}, metav1.ConditionFalse, esv1.ReasonMetricsPartialSuccess},
		{MetricsRead{Inputs: 3, Stale: "stale"}, metav1.ConditionFalse, esv1.ReasonMetricsPartialSuccess},
		{MetricsRead{Inputs: 2, Failed: []string{"a", "b"}}, metav1.ConditionFalse, esv1.ReasonMetricsUnavailable},
		{MetricsRead{Inputs: 3, Outage: "connection refused"}, metav1.ConditionFalse, esv1.ReasonMetricsUnavailable},
		{MetricsRead{Inputs: 3, Sources: []string{`q: external metric "q" in namespace "shop": metric timed out`}}, metav1.ConditionFalse, esv1.ReasonMetricsPartialSuccess},
		{MetricsRead{Inputs: 3, Failed: []string{"load@q: no series"}, Sources: []string{`q: external metric "q" in namespace "shop": metric timed out`}}, metav1.ConditionFalse, esv1.ReasonMetricsPartialSuccess},
	} {
		c := MetricsCondition(&tc.m, 2)
		if c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 2 || c.Message == "" {
			t.Errorf("%+v: %+v; want %s %s", tc.m, c, tc.status, tc.reason)
		}
		for _, src := range tc.m.Sources { // a failed metrics-API metric is named with its cause
			if !strings.Contains(c.Message, src) {
				t.Errorf("%+v: message %q does not name %q", tc.m, c.Message, src)
			}
		}
	}
}

func TestStatusApplyDecision(t *testing.T) {
	w := 2.5
	now := time.Unix(1_700_000_123, 0)
	var s esv1.ElasticScalerStatus
	applyDecision(&s, &Decision{Policy: "shop.web", Mode: config.ModeAct, Algorithm: "apa", Trigger: "firing", Time: now,
		Before: 2, After: 4, W: &w, Target: 0.6, Reason: "scale-up", Written: true, Source: "prometheus",
		Metrics: &MetricsRead{Inputs: 3}}, 3, nil)
	c := meta.FindStatusCondition(s.Conditions, esv1.ConditionScalingCalculated)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != esv1.ReasonScalingCalculated {
		t.Fatalf("ScalingCalculated %+v", c)
	}
	if *s.DesiredReplicas != 4 || *s.CurrentReplicas != 4 || s.LastLoad != "2.5" || s.LastTarget != "0.6" ||
		!s.LastScaleTime.Time.Equal(now) || s.ObservedGeneration != 3 {
		t.Fatalf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, esv1.ConditionMetricsPipeline); c == nil || c.Reason != esv1.ReasonMetricsAvailable {
		t.Fatalf("MetricsPipeline %+v", c)
	}
	// A held decision keeps desiredReplicas and lastScaleTime; a Tidal decision leaves MetricsPipeline.
	applyDecision(&s, &Decision{Mode: config.ModeAct, Before: 4, After: 4, Held: "inputs missing"}, 3, nil)
	c = meta.FindStatusCondition(s.Conditions, esv1.ConditionScalingCalculated)
	if c.Status != metav1.ConditionFalse || c.Reason != esv1.ReasonScalingHeld || !strings.Contains(c.Message, "inputs missing") ||
		*s.DesiredReplicas != 4 || !s.LastScaleTime.Time.Equal(now) {
		t.Fatalf("held: %+v %+v", c, s)
	}
	applyDecision(&s, &Decision{Mode: config.ModeAct, Err: errors.New("boom")}, 3, nil)
	if c = meta.FindStatusCondition(s.Conditions, esv1.ConditionScalingCalculated); c.Reason != esv1.ReasonScaleFailed || c.Message != "boom" {
		t.Fatalf("failed: %+v", c)
	}
	if got := decimal(1e21); got != "1e+21" {
		t.Errorf("decimal(1e21) = %q", got)
	}
	if got := decimal(math.Pi); got != "3.14159" {
		t.Errorf("decimal(pi) = %q", got)
	}
}

// TestStatusSync: a pass writes Validated through the status subresource, a decision of the
// object's policy adds ScalingCalculated with an Event, nothing is written when nothing changed,
// and writes of one object are at least interval apart.
func TestStatusSync(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	obj := testenv.ESObject("shop", "web", "web", base, "shadow")
	w, rec, dyn := testWriter(t, fakeTargets{}, obj)
	clock := base
	w.now = func() time.Time { return clock }
	ctx := context.Background()
	status := func() esv1.ElasticScalerStatus {
		u, err := dyn.Resource(Resource).Namespace("shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var es esv1.ElasticScaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &es); err != nil {
			t.Fatal(err)
		}
		// The cache follows the API server.
		_ = w.store[0].Update(u)
		return es.Status
	}
	w.pass(ctx)
	st := status()
	c := meta.FindStatusCondition(st.Conditions, esv1.ConditionValidated)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != esv1.ReasonValidationFailed || !strings.Contains(c.Message, "shop/web not found") {
		t.Fatalf("Validated %+v", c)
	}
	if ev := <-rec.Events; !strings.HasPrefix(ev, "Warning ValidationFailed spec.targetRef") {
		t.Fatalf("event %q", ev)
	}
	writes := func() int {
		n := 0
		for _, a := range dyn.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	if writes() != 1 {
		t.Fatalf("%d status writes", writes())
	}
	w.pass(ctx) // nothing changed
	if writes() != 1 {
		t.Fatalf("%d status writes after an unchanged pass", writes())
	}

	// The target appears (the cache of the checks expires) and a shadow decision arrives, within
	// the interval: nothing is written until it has passed.
	w.get = fakeTargets{"Deployment/shop/web": {Object: map[string]any{}}}.get
	clock = clock.Add(time.Second)
	w.Observe(Decision{Policy: "shop.web", Mode: config.ModeShadow, Algorithm: "apa", Trigger: "firing", Time: clock,
		Before: 2, After: 5, Reason: "scale-up", Source: "prometheus", Target: 1,
		Metrics: &MetricsRead{Inputs: 4, Failed: []string{"window_load: no series"}}})
	if ev := <-rec.Events; !strings.HasPrefix(ev, "Normal WouldScale") || !strings.Contains(ev, "would scale 2 -> 5") {
		t.Fatalf("event %q", ev)
	}
	w.pass(ctx)
	if writes() != 1 {
		t.Fatalf("written within the interval")
	}
	clock = clock.Add(w.recheck)
	w.pass(ctx)
	if writes() != 2 {
		t.Fatalf("%d writes", writes())
	}
	st = status()
	for typ, reason := range map[string]string{
		esv1.ConditionValidated: esv1.ReasonValid, esv1.ConditionScalingCalculated: esv1.ReasonScalingCalculated,
		esv1.ConditionMetricsPipeline: esv1.ReasonMetricsPartialSuccess,
	} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Reason != reason {
			t.Errorf("%s: %+v; want %s", typ, c, reason)
		}
	}
	if st.DesiredReplicas == nil || *st.DesiredReplicas != 5 || *st.CurrentReplicas != 2 || st.LastScaleTime != nil || st.ObservedGeneration != 1 {
		t.Fatalf("status %+v", st)
	}
	// A decision of a file policy, or of an unknown object, is not the writer's.
	w.Observe(Decision{Policy: "shop.other", Mode: config.ModeAct, Written: true})
	w.Observe(Decision{Policy: "web", Mode: config.ModeAct, Written: true})
	select {
	case ev := <-rec.Events:
		t.Fatalf("unexpected event %q", ev)
	default:
	}
	// A non-leader writes decisions but leaves Validated alone.
	w.leader.Store(false)
	w.get = fakeTargets{}.get
	clock = clock.Add(time.Hour)
	w.Observe(Decision{Policy: "shop.web", Mode: config.ModeAct, Algorithm: "apa", Time: clock,
		Before: 2, After: 3, Written: true, Reason: "scale-up"})
	if ev := <-rec.Events; !strings.HasPrefix(ev, "Normal Scaled") {
		t.Fatalf("event %q", ev)
	}
	w.pass(ctx)
	st = status()
	if c := meta.FindStatusCondition(st.Conditions, esv1.ConditionValidated); c.Reason != esv1.ReasonValid {
		t.Fatalf("a non-leader changed Validated: %+v", c)
	}
	if *st.DesiredReplicas != 3 || *st.CurrentReplicas != 3 || st.LastScaleTime == nil {
		t.Fatalf("status %+v", st)
	}
}

// TestStatusHPAProblems: the HPA owner's problems (a foreign HPA in the way) fail the object's
// Validated condition; a problem of an object that no longer exists is dropped.
func TestStatusHPAProblems(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	deploy := &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment"}}
	w, _, _ := testWriter(t, fakeTargets{"Deployment/shop/web": deploy}, testenv.ESObject("shop", "web", "web", base, ""))
	w.hpaProblems = func() map[string]string {
		return map[string]string{"shop/web": "HorizontalPodAutoscaler shop/web exists and is not owned by this ElasticScaler", "shop/gone": "x"}
	}
	got := w.validate(context.Background(), w.objects())
	if msg := validationMessage(got["shop/web"]); !strings.Contains(msg, "the Kubernetes HPA of the HPA algorithm: HorizontalPodAutoscaler shop/web exists") {
		t.Errorf("shop/web: %q, want the HPA owner's problem", msg)
	}
	if _, ok := got["shop/gone"]; ok {
		t.Errorf("a problem of an object that does not exist was reported: %v", got)
	}
}

// TestMetricsConditionNamesEndpoint: the MetricsPipeline condition of an object whose
// ExternalServer metric on its own endpoint is missing names the metric and the endpoint
// (password redacted, the query API's path dropped); a stale policy names its metrics on their
// own endpoints; a metric on the global Prometheus is named as before.
func TestMetricsConditionNamesEndpoint(t *testing.T) {
	es := guideScaler(t, "guide-custom-algorithm.yaml")
	mt := es.Spec.Trigger.MetricsTrigger
	mt.Metrics[0].ExternalServer.Endpoint = "https://debi:pw@prometheus-b:9090/api/v1/query"
	mt.Metrics[0].ExternalServer.Protocol = "https"
	eps := objectEndpoints(es)
	if len(eps) != 1 || eps[""] != "https://debi:xxxxx@prometheus-b:9090" {
		t.Fatalf("endpoints of the single-metric object %v", eps)
	}
	c := MetricsCondition(MetricsRead{Inputs: 4, Failed: []string{"load: no series"}}.withEndpoints(eps), 1)
	if !strings.Contains(c.Message, "load: no series (metric of the policy reads endpoint https://debi:xxxxx@prometheus-b:9090)") || strings.Contains(c.Message, "pw@") {
		t.Errorf("message %q: want the metric's endpoint, its password redacted", c.Message)
	}
	// Two metrics, one on its own endpoint.
	second := mt.Metrics[0]
	second.ExternalServer = second.ExternalServer.DeepCopy()
	second.ExternalServer.MetricsName = "qps"
	first := mt.Metrics[0]
	first.ExternalServer = nil
	first.Type = "Resource"
	mt.Metrics = append(mt.Metrics[:0], first, second)
	eps = objectEndpoints(es)
	c = MetricsCondition(MetricsRead{Inputs: 4, Failed: []string{"load@qps: no series", "load@cpu: no series"}, Stale: "stale"}.withEndpoints(eps), 1)
	if !strings.Contains(c.Message, "load@qps: no series (metric qps reads endpoint https://debi:xxxxx@prometheus-b:9090)") ||
		strings.Contains(c.Message, "metric cpu reads") || !strings.HasSuffix(c.Message, "stale; metric qps reads endpoint https://debi:xxxxx@prometheus-b:9090") {
		t.Errorf("message %q", c.Message)
	}
	if m := (MetricsRead{Inputs: 2, Failed: []string{"load: no series"}}).withEndpoints(nil); m.Failed[0] != "load: no series" {
		t.Errorf("a metric on the global Prometheus: %q", m.Failed[0])
	}
}
