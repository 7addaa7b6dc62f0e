package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
)

// TestElasticScalerStatus, on a real kube-apiserver: a running webhook reports Validated=False
// (ValidationFailed, target not found) for an ElasticScaler whose target does not exist, True
// once the Deployment is created; a second ElasticScaler on the same target gets
// ValidationFailed naming the first; a decision (an Alertmanager notification) sets
// ScalingCalculated, MetricsPipeline and status.desiredReplicas and records a Scaled Event on the
// object. The log shows `kubectl get elasticscalers` (the Table the API server renders from the
// printer columns) and the conditions and Events `kubectl describe` shows.
func TestElasticScalerStatus(t *testing.T) {
	e := newKubeEnv(t)
	ctx := context.Background()
	e.ApplyFile(t, "../../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	testenv.Poll(t, 20*time.Second, "elasticscalers served", func() bool {
		_, err := e.Dyn.Resource(elasticscaler.Resource).Namespace(e.NS).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	pol := e.NS + ".vllm-scaler"
	prom := testenv.FakePrometheus(t, map[string]float64{
		`debi_load_ratio{policy="` + pol + `",load="w"}`:                            2.0, // utilization 200 % at 2 replicas
		`debi_current_replicas{policy="` + pol + `"}`:                               2,
		`debi_policy_stale{policy="` + pol + `"}`:                                   0,
		`time() - debi_policy_last_success_timestamp_seconds{policy="` + pol + `"}`: 5,
	})
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	file := fmt.Sprintf(`global: {prometheus_url: %q, elastic_scalers: {enabled: true, namespaces: [%s]}}
webhook:
  allow_unauthenticated: true
  tidal: {enabled: false}
  leader_election: {namespace: %s, lease_duration: 3s, renew_deadline: 2s, retry_period: 500ms}
`, prom.URL, e.NS, e.NS)
	if err := os.WriteFile(cfgFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	url := runWebhook(t, webhookOptions{ConfigFile: cfgFile, RestConfig: e.RC}, prometheus.NewRegistry())

	es := e.Dyn.Resource(elasticscaler.Resource).Namespace(e.NS)
	create := func(name string) {
		t.Helper()
		o := testenv.ESObject(e.NS, name, "vllm", time.Now(), "")
		unstructured.RemoveNestedField(o.Object, "metadata", "generation")
		unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(o.Object, "metadata", "uid")
		unstructured.RemoveNestedField(o.Object, "metadata", "creationTimestamp")
		if _, err := es.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *esv1.ElasticScaler {
		t.Helper()
		u, err := es.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var o esv1.ElasticScaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
			t.Fatal(err)
		}
		return &o
	}
	waitCond := func(name, typ string, status metav1.ConditionStatus, reason, contains string) *esv1.ElasticScaler {
		t.Helper()
		var last *esv1.ElasticScaler
		start := time.Now()
		testenv.Poll(t, 30*time.Second, fmt.Sprintf("%s %s=%s %s %q", name, typ, status, reason, contains), func() bool {
			last = get(name)
			c := meta.FindStatusCondition(last.Status.Conditions, typ)
			return c != nil && c.Status == status && c.Reason == reason && strings.Contains(c.Message, contains)
		})
		c := meta.FindStatusCondition(last.Status.Conditions, typ)
		t.Logf("%s: %s=%s reason %s after %v: %s", name, typ, c.Status, c.Reason, time.Since(start).Round(time.Millisecond), c.Message)
		return last
	}

	create("vllm-scaler")
	waitCond("vllm-scaler", esv1.ConditionValidated, metav1.ConditionFalse, esv1.ReasonValidationFailed,
		"spec.targetRef: apps/v1 Deployment "+e.NS+"/vllm not found")
	e.WaitEvent(t, e.NS, "vllm-scaler", "not found")
	getTable(t, e, "after creating vllm-scaler without its Deployment")

	e.Deployment(t, e.NS, "vllm", 2)
	waitCond("vllm-scaler", esv1.ConditionValidated, metav1.ConditionTrue, esv1.ReasonValid, "")

	time.Sleep(1100 * time.Millisecond) // a later creationTimestamp (whole seconds)
	create("vllm-scaler-2")
	waitCond("vllm-scaler-2", esv1.ConditionValidated, metav1.ConditionFalse, esv1.ReasonValidationFailed,
		"is already managed by ElasticScaler "+e.NS+"/vllm-scaler (older)")
	if c := meta.FindStatusCondition(get("vllm-scaler").Status.Conditions, esv1.ConditionValidated); c.Status != metav1.ConditionTrue {
		t.Fatalf("the older object lost: %+v", c)
	}

	// A decision: an Alertmanager notification for the object's policy (act: 2 → 4).
	var code int
	var body string
	testenv.Poll(t, 20*time.Second, "a decision for "+pol, func() bool {
		code, body = testenv.Request(t, "POST", url+"/v1/alertmanager", "",
			string(testenv.AMPayload("firing", map[string]any{"labels": map[string]string{"alertname": "DebiScaleUp", "policy": pol}})))
		return code == 200
	})
	t.Logf("decision: %d %s", code, body)
	if n := e.Replicas(t, e.NS, "Deployment", "vllm"); n != 4 {
		t.Fatalf("Deployment at %d replicas, want 4", n)
	}
	o := waitCond("vllm-scaler", esv1.ConditionScalingCalculated, metav1.ConditionTrue, esv1.ReasonScalingCalculated, "desired 4 from current 2")
	if o.Status.DesiredReplicas == nil || *o.Status.DesiredReplicas != 4 || o.Status.CurrentReplicas == nil || *o.Status.CurrentReplicas != 4 ||
		o.Status.LastScaleTime == nil || o.Status.LastLoad != "2" || o.Status.LastTarget != "1" || o.Status.ObservedGeneration != o.Generation {
		t.Fatalf("status %+v", o.Status)
	}
	if c := meta.FindStatusCondition(o.Status.Conditions, esv1.ConditionMetricsPipeline); c == nil || c.Reason != esv1.ReasonMetricsAvailable {
		t.Fatalf("MetricsPipeline %+v", c)
	}
	ev := e.WaitEvent(t, e.NS, "vllm-scaler", "replicas 2 -> 4")
	if ev.Reason != esv1.EventScaled || ev.Type != "Normal" || ev.InvolvedObject.Kind != "ElasticScaler" {
		t.Fatalf("event %+v", ev)
	}
	getTable(t, e, "after the decision")
	describe(t, e, "vllm-scaler")
	describe(t, e, "vllm-scaler-2")
}

// getTable logs what `kubectl get elasticscalers` prints: the Table the API server renders.
func getTable(t *testing.T, e *testenv.KubeEnv, when string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(e.RC)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", strings.TrimRight(e.RC.Host, "/")+"/apis/elasticscaler.io/v1alpha1/namespaces/"+e.NS+"/elasticscalers", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var tab metav1.Table
	if err := json.Unmarshal(b, &tab); err != nil || resp.StatusCode != 200 {
		t.Fatalf("table: %d %v %s", resp.StatusCode, err, b)
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 8, 3, ' ', 0)
	var head []string
	for _, c := range tab.ColumnDefinitions {
		if c.Priority == 0 {
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range tab.Rows {
		var cells []string
		for i, c := range r.Cells {
			if tab.ColumnDefinitions[i].Priority != 0 {
				continue
			}
			s := fmt.Sprint(c)
			if c == nil || s == "" {
				s = "<none>"
			}
			if tab.ColumnDefinitions[i].Name == "Age" {
				if ts, err := time.Parse(time.RFC3339, s); err == nil {
					s = time.Since(ts).Round(time.Second).String()
				}
			}
			cells = append(cells, s)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	t.Logf("kubectl get elasticscalers -n %s  (%s)\n%s", e.NS, when, sb.String())
}

// describe logs the conditions and Events `kubectl describe elasticscaler` shows.
func describe(t *testing.T, e *testenv.KubeEnv, name string) {
	t.Helper()
	ctx := context.Background()
	u, err := e.Dyn.Resource(elasticscaler.Resource).Namespace(e.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var o esv1.ElasticScaler
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o)
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\nNamespace:\t%s\n", o.Name, o.Namespace)
	fmt.Fprintf(tw, "Status:\n")
	opt := func(p *int32) string {
		if p == nil {
			return "<none>"
		}
		return fmt.Sprint(*p)
	}
	lst := "<none>"
	if o.Status.LastScaleTime != nil {
		lst = o.Status.LastScaleTime.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "  Current Replicas:\t%s\n  Desired Replicas:\t%s\n  Last Scale Time:\t%s\n  Last Load:\t%s\n  Last Target:\t%s\n  Observed Generation:\t%d\n",
		opt(o.Status.CurrentReplicas), opt(o.Status.DesiredReplicas), lst, o.Status.LastLoad, o.Status.LastTarget, o.Status.ObservedGeneration)
	fmt.Fprintf(tw, "Conditions:\n  Type\tStatus\tReason\tMessage\n  ----\t------\t------\t-------\n")
	for _, c := range o.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	fmt.Fprintf(tw, "Events:\n  Type\tReason\tCount\tFrom\tMessage\n  ----\t------\t-----\t----\t-------\n")
	evs, err := e.Kube.CoreV1().Events(e.NS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",involvedObject.kind=ElasticScaler"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", ev.Type, ev.Reason, max(ev.Count, 1), ev.Source.Component, ev.Message)
	}
	_ = tw.Flush()
	t.Logf("kubectl describe elasticscaler %s -n %s\n%s", name, e.NS, sb.String())
}
