package metricsapi

import (
	"fmt"
	"strings"
)

// ResourceQueries are the PromQL of a Resource metric (autoscaling/v2's, the guide's Resource
// type) of one workload.
type ResourceQueries struct {
	// Usage is the workload's total use: cores for cpu, bytes for memory.
	Usage string
	// RequestPerPod is the request of one pod (the mean over the workload's pods), in the same
	// unit: a Utilization target is Usage / (replicas · RequestPerPod).
	RequestPerPod string
}

// ResourceQueriesFor translates the Resource metric resource ("cpu" or "memory") of the
// workload (workloadType as kube-state-metrics names it: deployment, statefulset) into PromQL.
//
// debi reads Resource metrics from Prometheus, over cAdvisor and kube-state-metrics series,
// not from metrics.k8s.io: the forecasts need history, which metrics-server does not keep, and
// Prometheus already scrapes the same cAdvisor figures metrics-server serves. Both reuse the
// recording rules of rules/debi.rules.yaml, the same series the policies' default queries read:
// namespace_workload:debi_cpu_usage_cores:rate1m and namespace_workload:debi_cpu_request_per_pod_cores:avg
// for cpu, namespace_workload:debi_memory_working_set_bytes:sum (container_memory_working_set_bytes,
// what metrics-server and the HPA call a pod's memory use) and
// namespace_workload:debi_memory_request_per_pod_bytes:avg for memory.
func ResourceQueriesFor(resource, namespace, workloadType, workload string) (ResourceQueries, error) {
	if namespace == "" || workloadType == "" || workload == "" {
		return ResourceQueries{}, fmt.Errorf("resource metric %q: namespace, workload type and workload are required", resource)
	}
	wsel := fmt.Sprintf(`namespace=%q,workload_type=%q,workload=%q`, namespace, strings.ToLower(workloadType), workload)
	switch resource {
	case "cpu":
		return ResourceQueries{
			Usage:         fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{%s})`, wsel),
			RequestPerPod: fmt.Sprintf(`max(namespace_workload:debi_cpu_request_per_pod_cores:avg{%s})`, wsel),
		}, nil
	case "memory":
		return ResourceQueries{
			Usage:         fmt.Sprintf(`sum(namespace_workload:debi_memory_working_set_bytes:sum{%s})`, wsel),
			RequestPerPod: fmt.Sprintf(`max(namespace_workload:debi_memory_request_per_pod_bytes:avg{%s})`, wsel),
		}, nil
	}
	return ResourceQueries{}, fmt.Errorf("resource metric %q: debi reads cpu and memory only", resource)
}
