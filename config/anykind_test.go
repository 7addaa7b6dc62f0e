package config

import (
	"strings"
	"testing"
)

// TestAnyKindDefaults: a target of any kind with a scale subresource (an Argo Rollout, a
// LeaderWorkerSet, a serving framework's role adapter) gets every default query, built on the
// pods and size the exporter publishes from its scale subresource; Deployments and
// StatefulSets keep kube-state-metrics' series.
func TestAnyKindDefaults(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		scale            bool
		replicas, ready  string
	}{
		{"argoproj.io/v1alpha1", "Rollout", true,
			`max(debi_target_spec_replicas{namespace="shop",workload_type="rollout",workload="web"})`,
			`sum(kube_pod_status_ready{namespace="shop",condition="true"} * on (namespace, pod) group_left () namespace_workload_pod:debi_kube_pod_owner:relabel{namespace="shop",workload_type="rollout",workload="web"})`},
		{"leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", true,
			`max(debi_target_spec_replicas{namespace="shop",workload_type="leaderworkerset",workload="web"})`, ""},
		{"apps/v1", "ReplicaSet", true,
			`max(debi_target_spec_replicas{namespace="shop",workload_type="replicaset",workload="web"})`, ""},
		{"apps/v1", "StatefulSet", false,
			`max(kube_statefulset_spec_replicas{namespace="shop",statefulset="web"})`,
			`max(kube_statefulset_status_replicas_ready{namespace="shop",statefulset="web"})`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			c, err := Load([]byte(`policies:
  - name: web
    target: {api_version: ` + tc.apiVersion + `, kind: ` + tc.kind + `, namespace: shop, name: web}
    algorithm: hpa
`))
			if err != nil {
				t.Fatalf("a %s target with default queries: %v", tc.kind, err)
			}
			p := c.Policies[0]
			if got := p.Target.PodsFromScale(); got != tc.scale {
				t.Errorf("PodsFromScale = %v, want %v", got, tc.scale)
			}
			if p.Queries.Replicas != tc.replicas {
				t.Errorf("replicas = %s\nwant %s", p.Queries.Replicas, tc.replicas)
			}
			if tc.ready != "" && p.Queries.ReadyReplicas != tc.ready {
				t.Errorf("ready_replicas = %s\nwant %s", p.Queries.ReadyReplicas, tc.ready)
			}
			wl := `workload_type="` + strings.ToLower(tc.kind) + `",workload="web"`
			if !strings.Contains(p.Queries.Demand, wl) || !strings.Contains(p.Queries.Request, wl) {
				t.Errorf("demand %s and request %s should read the workload rules of %s", p.Queries.Demand, p.Queries.Request, wl)
			}
		})
	}
}
