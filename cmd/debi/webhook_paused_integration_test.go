package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	esv1 "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/debi-scaler/debi/webhook"
)

// TestElasticScalerPausedReplicas, on a real kube-apiserver, KEDA's paused-replicas as
// spec.debi.pausedReplicas: a negative count is refused by the API server naming the field; an
// ElasticScaler created paused at 3 has its Deployment (at 2) scaled to 3 by a running webhook
// with no alert; a notification whose load asks for 4 then writes nothing (reason
// paused-replicas); a resize by hand to 5 is put back to 3 by the next notification; the status
// says status.pausedReplicas 3 and the metrics debi_webhook_policy_paused_replicas 3. Without
// pausedReplicas the load decides again: W = 2.0 measured at 2 replicas is 4 pods of demand, at
// APA's utilization target 1 that is 4 replicas. The Deployment's whole write history is
// 2 → 3 → 5 → 3 → 4.
func TestElasticScalerPausedReplicas(t *testing.T) {
	e := newKubeEnv(t)
	ctx := context.Background()
	e.ApplyFile(t, "../../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	testenv.Poll(t, 20*time.Second, "elasticscalers served", func() bool {
		_, err := e.Dyn.Resource(elasticscaler.Resource).Namespace(e.NS).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	e.Deployment(t, e.NS, "vllm", 2)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	pol := e.NS + ".vllm-scaler"
	prom := testenv.FakePrometheus(t, map[string]float64{
		`debi_load_ratio{policy="` + pol + `",load="w"}`:                            2.0,
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

	obj := func(paused any) *unstructured.Unstructured {
		o := testenv.ESObject(e.NS, "vllm-scaler", "vllm", time.Now(), "")
		for _, f := range []string{"generation", "resourceVersion", "uid", "creationTimestamp"} {
			unstructured.RemoveNestedField(o.Object, "metadata", f)
		}
		_ = unstructured.SetNestedField(o.Object, paused, "spec", "debi", "pausedReplicas")
		return o
	}
	if _, err := es.Create(ctx, obj(int64(-1)), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.debi.pausedReplicas") {
		t.Fatalf("pausedReplicas -1 created (err %v), want refused naming spec.debi.pausedReplicas", err)
	} else {
		t.Logf("pausedReplicas -1: %v", err)
	}
	if _, err := es.Create(ctx, obj(int64(3)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "the Deployment pinned at 3 with no alert", func() bool { return e.Replicas(t, e.NS, "Deployment", "vllm") == 3 })

	alert := func() webhook.Outcome {
		t.Helper()
		var code int
		var body string
		testenv.Poll(t, 20*time.Second, "a decision for "+pol, func() bool {
			code, body = testenv.Request(t, "POST", url+"/v1/alertmanager", "",
				string(testenv.AMPayload("firing", map[string]any{"labels": map[string]string{"alertname": "DebiScaleRecommended", "policy": pol}})))
			return code == 200
		})
		var res struct{ Outcomes []webhook.Outcome }
		if err := json.Unmarshal([]byte(body), &res); err != nil || len(res.Outcomes) != 1 {
			t.Fatalf("answer %s: %v", body, err)
		}
		return res.Outcomes[0]
	}
	if o := alert(); o.After != 3 || o.Written || o.Reason != webhook.ReasonPausedReplicas || o.PausedReplicas == nil || *o.PausedReplicas != 3 {
		t.Fatalf("notification while paused at 3: %+v; want 3, nothing written, reason %s", o, webhook.ReasonPausedReplicas)
	} else {
		t.Logf("notification while paused: %d -> %d (%s), written %v", o.Before, o.After, o.Reason, o.Written)
	}
	scale, err := e.Kube.AppsV1().Deployments(e.NS).GetScale(ctx, "vllm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 5 // by hand
	if _, err := e.Kube.AppsV1().Deployments(e.NS).UpdateScale(ctx, "vllm", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Sync(t, "vllm")
	if o := alert(); o.Before != 5 || o.After != 3 || !o.Written || o.Reason != webhook.ReasonPausedReplicas {
		t.Fatalf("notification after a resize to 5: %+v; want 5 -> 3 written", o)
	} else {
		t.Logf("notification after a resize by hand: %d -> %d (%s), written %v", o.Before, o.After, o.Reason, o.Written)
	}

	var st esv1.ElasticScaler
	testenv.Poll(t, 30*time.Second, "status.pausedReplicas 3", func() bool {
		u, err := es.Get(ctx, "vllm-scaler", metav1.GetOptions{})
		if err != nil || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &st) != nil {
			return false
		}
		c := meta.FindStatusCondition(st.Status.Conditions, esv1.ConditionScalingCalculated)
		return st.Status.PausedReplicas != nil && *st.Status.PausedReplicas == 3 && c != nil && strings.Contains(c.Message, "desired 3 from current 5 ("+webhook.ReasonPausedReplicas+")")
	})
	t.Logf("status: pausedReplicas %d, desiredReplicas %d, ScalingCalculated %q", *st.Status.PausedReplicas, *st.Status.DesiredReplicas,
		meta.FindStatusCondition(st.Status.Conditions, esv1.ConditionScalingCalculated).Message)
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`debi_webhook_policy_paused_replicas{policy="` + pol + `"} 3`, `debi_webhook_policy_paused{policy="` + pol + `"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Unpaused: the load decides again.
	u, err := es.Get(ctx, "vllm-scaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "spec", "debi", "pausedReplicas")
	if _, err := es.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var o webhook.Outcome
	testenv.Poll(t, 30*time.Second, "a load decision once unpaused", func() bool {
		o = alert()
		return o.Reason != webhook.ReasonPausedReplicas
	})
	if o.Before != 3 || o.After != 4 || !o.Written || o.PausedReplicas != nil {
		t.Fatalf("unpaused: %+v; want 3 -> 4 written by the load", o)
	}
	if got, want := h.Sync(t, "vllm"), []int32{2, 3, 5, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("write history %v, want %v", got, want)
	}
	getTable(t, e, "after the pause")
}
