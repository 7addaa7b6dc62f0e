package exporter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/debi-scaler/debi/config"
)

// anyKindLoad is cAdvisor and kube-state-metrics over an hour in namespace llm: the ModelRole
// decode owns its pods decode-0 and decode-1 directly, the Argo Rollout api owns ReplicaSet
// api-7f (pods api-7f-a, api-7f-b), a Deployment api owns ReplicaSet api-5c (pod api-5c-a) and
// another ModelRole, prefill, owns prefill-0; each pod uses 0.5 cores (a counter rising 15 every 30 s)
// and requests 2 cores.
const anyKindLoad = `
load 30s
  container_cpu_usage_seconds_total{namespace="llm",pod="decode-0",container="vllm",image="vllm"} 0+15x120
  container_cpu_usage_seconds_total{namespace="llm",pod="decode-1",container="vllm",image="vllm"} 0+15x120
  container_cpu_usage_seconds_total{namespace="llm",pod="api-7f-a",container="app",image="app"} 0+15x120
  container_cpu_usage_seconds_total{namespace="llm",pod="api-7f-b",container="app",image="app"} 0+15x120
  container_cpu_usage_seconds_total{namespace="llm",pod="api-5c-a",container="app",image="app"} 0+15x120
  container_cpu_usage_seconds_total{namespace="llm",pod="prefill-0",container="vllm",image="vllm"} 0+15x120
  kube_pod_owner{namespace="llm",pod="decode-0",owner_kind="ModelRole",owner_name="decode"} 1x120
  kube_pod_owner{namespace="llm",pod="decode-1",owner_kind="ModelRole",owner_name="decode"} 1x120
  kube_pod_owner{namespace="llm",pod="prefill-0",owner_kind="ModelRole",owner_name="prefill"} 1x120
  kube_pod_owner{namespace="llm",pod="api-7f-a",owner_kind="ReplicaSet",owner_name="api-7f"} 1x120
  kube_pod_owner{namespace="llm",pod="api-7f-b",owner_kind="ReplicaSet",owner_name="api-7f"} 1x120
  kube_pod_owner{namespace="llm",pod="api-5c-a",owner_kind="ReplicaSet",owner_name="api-5c"} 1x120
  kube_replicaset_owner{namespace="llm",replicaset="api-7f",owner_kind="Rollout",owner_name="api"} 1x120
  kube_replicaset_owner{namespace="llm",replicaset="api-5c",owner_kind="Deployment",owner_name="api"} 1x120
  kube_pod_container_resource_requests{namespace="llm",pod="decode-0",container="vllm",resource="cpu"} 2x120
  kube_pod_container_resource_requests{namespace="llm",pod="decode-1",container="vllm",resource="cpu"} 2x120
  kube_pod_container_resource_requests{namespace="llm",pod="api-7f-a",container="app",resource="cpu"} 2x120
  kube_pod_container_resource_requests{namespace="llm",pod="api-7f-b",container="app",resource="cpu"} 2x120
`

// TestHistoryFallbackAnyKind: the day-one fallback of a target of another kind, evaluated by
// Prometheus's engine on kube-state-metrics-shaped series, sums the pods the target owns,
// directly (a role adapter) or through a ReplicaSet (an Argo Rollout), and no one else's — not
// those of a Deployment or another object of the same name or kind.
func TestHistoryFallbackAnyKind(t *testing.T) {
	q := newEngineQuerier(t, anyKindLoad)
	at := time.Unix(0, 0).Add(30 * time.Minute)
	for _, tc := range []struct {
		target      config.Target
		pods        int
		demand, req float64
	}{
		{config.Target{APIVersion: "serving.example.com/v1", Kind: "ModelRole", Namespace: "llm", Name: "decode"}, 2, 1, 2},
		{config.Target{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: "llm", Name: "api"}, 2, 1, 2},
	} {
		c, err := config.Load([]byte("policies:\n  - name: p\n    target: {api_version: " + tc.target.APIVersion + ", kind: " + tc.target.Kind +
			", namespace: llm, name: " + tc.target.Name + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		fb := c.Policies[0].HistoryFallback()
		if fb.Demand == "" || fb.Request == "" {
			t.Fatalf("%s: no fallback: %+v", tc.target, fb)
		}
		for _, f := range []struct {
			name, expr string
			want       float64
		}{{"demand", fb.Demand, tc.demand}, {"request", fb.Request, tc.req}} {
			v, err := instantValue(context.Background(), q, f.expr, at)
			if err != nil || math.Abs(v-f.want) > 1e-9 {
				t.Errorf("%s %s = %v (err %v), want %v (%d pods)\n%s", tc.target, f.name, v, err, f.want, tc.pods, f.expr)
			}
		}
	}
	// A Deployment named api keeps its own fallback: its pod only.
	c, _ := config.Load([]byte("policies:\n  - name: p\n    target: {namespace: llm, name: api}\n"))
	if v, err := instantValue(context.Background(), q, c.Policies[0].HistoryFallback().Demand, at); err != nil || math.Abs(v-0.5) > 1e-9 {
		t.Errorf("Deployment api demand = %v (err %v), want 0.5 (one pod)", v, err)
	}
}
