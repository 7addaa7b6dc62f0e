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
// Prometheus already scrapes the same cAdvisor figures metrics-server serves. cpu reuses the
// recording rules of rules/debi.rules.yaml (namespace_workload:debi_cpu_usage_cores:rate1m and
// namespace_workload:debi_cpu_request_per_pod_cores:avg), the same series the policies' default
// queries read; memory, which has no recording rule, sums container_memory_working_set_bytes
// (what metrics-server and the HPA call a pod's memory use) over the workload's containers
// through the pod-to-workload rule namespace_workload_pod:debi_kube_pod_owner:relabel, and
// averages kube_pod_container_resource_requests{resource="memory"} the same way.
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
		// Container cgroups only: the pod-level cgroup (container="") would double the figure
		// and the pause container (container="POD") is not the workload's, as in the cpu rule.
		owner := fmt.Sprintf(`namespace_workload_pod:debi_kube_pod_owner:relabel{%s}`, wsel)
		return ResourceQueries{
			Usage: fmt.Sprintf(`sum(sum by (namespace, pod) (container_memory_working_set_bytes{namespace=%q, container!="", container!="POD", image!=""}) * on (namespace, pod) %s)`,
				namespace, owner),
			RequestPerPod: fmt.Sprintf(`avg(sum by (namespace, pod) (kube_pod_container_resource_requests{namespace=%q, resource="memory"}) * on (namespace, pod) %s)`,
				namespace, owner),
		}, nil
	}
	return ResourceQueries{}, fmt.Errorf("resource metric %q: debi reads cpu and memory only", resource)
}
