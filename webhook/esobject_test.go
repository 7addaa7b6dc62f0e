package webhook

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// esObject is an ExternalServer ElasticScaler on Deployment target, created at created.
func esObject(ns, name, target string, created time.Time, mode string) *unstructured.Unstructured {
	spec := map[string]any{
		"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
		"minReplicas": int64(1), "maxReplicas": int64(10),
		"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
			"scalingAlgorithm": "APA",
			"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
				"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
				"query": `sum(rate(http_requests_total{job="` + target + `"}[1m]))`}}},
		}},
	}
	if mode != "" {
		spec["debi"] = map[string]any{"mode": mode}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": name, "namespace": ns, "generation": int64(1), "resourceVersion": "1",
			"uid": "uid-" + name, "creationTimestamp": created.UTC().Format(time.RFC3339)},
		"spec": spec,
	}}
	return u
}
