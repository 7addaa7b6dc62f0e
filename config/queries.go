package config

import (
	"fmt"
	"math"

	"github.com/prometheus/prometheus/promql/parser"
)

// Queries are the PromQL expressions of one policy. Each must return one series.
type Queries struct {
	// Demand is the workload's CPU use in cores, D(t).
	Demand string `yaml:"demand"`
	// Replicas is the spec replica count N(t). The default reads kube-state-metrics for a
	// Deployment or a StatefulSet, and debi_target_spec_replicas (the exporter's read of the
	// target's scale subresource) for any other kind.
	Replicas string `yaml:"replicas"`
	// ReadyReplicas is the ready replica count Nr(t). The default reads kube-state-metrics for a
	// Deployment or a StatefulSet, and counts the Ready pods of the scale subresource's
	// status.selector (debi_target_pod_info) for any other kind.
	ReadyReplicas string `yaml:"ready_replicas"`
	// Request is the CPU request of one pod in cores; leave empty and set policy.request for a
	// fixed value.
	Request string `yaml:"request"`
	// Endpoint is the Prometheus-compatible API that demand and request go to, with its own HTTP
	// client settings (the metrics list sets each metric's endpoint instead); replicas and
	// ready_replicas are read from global.prometheus_url. Default global.prometheus_url.
	Endpoint *Endpoint `yaml:"endpoint"`
}

// policyQueries checks the policy's request, fills its metrics and queries from their defaults
// and checks the queries.
func (c *Config) policyQueries(p *Policy, path string, targetOK bool, errs *errList) {
	if p.Request < 0 || math.IsNaN(p.Request) || math.IsInf(p.Request, 0) {
		errs.addf(path+".request", "must be a positive number of cores, got %v", p.Request)
	} else if p.Request > 0 && p.Queries.Request != "" {
		errs.addf(path+".request", "set either a fixed request or queries.request, not both")
	}
	// The default queries are built from the target: with an invalid one, only the queries the
	// file sets are checked.
	c.metricDefaults(p, path, targetOK, errs)
	zeroNeedsWake(p, path, errs)
	if p.Queries.Endpoint != nil && len(p.Metrics.List) > 0 {
		errs.addf(path+".queries.endpoint", "set the endpoint of each metric in the metrics list (metrics[].endpoint), not the policy's")
	} else {
		c.checkEndpoint(&p.Queries.Endpoint, path+".queries.endpoint", errs)
	}
	if targetOK {
		c.queryDefaults(p)
	}
	several := len(p.Metrics.List) > 0
	for _, q := range []struct{ field, expr string }{
		{"demand", p.Queries.Demand}, {"replicas", p.Queries.Replicas},
		{"ready_replicas", p.Queries.ReadyReplicas}, {"request", p.Queries.Request},
	} {
		qpath := path + ".queries." + q.field
		if q.expr == "" {
			if q.field != "request" && targetOK && !(several && q.field == "demand") {
				errs.addf(qpath, "required: no default query for target kind %q", p.Target.Kind)
			}
			continue
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.expr)
		if err != nil {
			errs.add(&FieldError{Path: qpath, Err: err})
			continue
		}
		if t := expr.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
			errs.addf(qpath, "must return an instant vector or a scalar, got a %s", t)
		}
	}
}

// queryDefaults fills the queries a policy leaves out from the recording rules shipped in
// rules/ and from kube-state-metrics, keyed by the labels of the target.
func (c *Config) queryDefaults(p *Policy) {
	kind := p.Target.WorkloadType()
	sel := fmt.Sprintf(`namespace=%q,%s=%q`, p.Target.Namespace, kind, p.Target.Name)
	wsel := fmt.Sprintf(`namespace=%q,workload_type=%q,workload=%q`, p.Target.Namespace, kind, p.Target.Name)
	several := len(p.Metrics.List) > 0 // the metrics carry their own demand and request
	if p.Queries.Demand == "" && !several {
		p.Queries.Demand = fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{%s})`, wsel)
	}
	if p.Queries.Request == "" && p.Request == 0 && !several {
		p.Queries.Request = fmt.Sprintf(`max(namespace_workload:debi_cpu_request_per_pod_cores:avg{%s})`, wsel)
	}
	if p.Target.PodsFromScale() {
		// Any other kind with a scale subresource: the exporter publishes its size and its pods
		// (the scale subresource's status.selector, as the HPA reads it) as debi_target_*, and the
		// recording rules relabel those pods as kube-state-metrics' owners relabel a
		// Deployment's: the demand and request above read the same rules.
		if p.Queries.Replicas == "" {
			p.Queries.Replicas = fmt.Sprintf(`max(debi_target_spec_replicas{%s})`, wsel)
		}
		if p.Queries.ReadyReplicas == "" {
			p.Queries.ReadyReplicas = fmt.Sprintf(`sum(kube_pod_status_ready{namespace=%q,condition="true"} * on (namespace, pod) group_left () namespace_workload_pod:debi_kube_pod_owner:relabel{%s})`,
				p.Target.Namespace, wsel)
		}
		return
	}
	if p.Queries.Replicas == "" {
		p.Queries.Replicas = fmt.Sprintf(`max(kube_%s_spec_replicas{%s})`, kind, sel)
	}
	if p.Queries.ReadyReplicas == "" {
		p.Queries.ReadyReplicas = fmt.Sprintf(`max(kube_%s_status_replicas_ready{%s})`, kind, sel)
	}
}

// HistoryFallback returns, for the demand and request queries a policy left to their defaults
// (the recording rules of rules/), the same figures computed from the raw series the rules
// read: cAdvisor's container_cpu_usage_seconds_total and kube-state-metrics' kube_pod_owner,
// kube_replicaset_owner and kube_pod_container_resource_requests, which kube-prometheus-stack
// keeps from the day it is installed, while the rules have no history before debi's. The
// history loaders (the exporter's warm start and the what-if) read the rule and fill the
// times it has no sample from the fallback. For a kind other than Deployment and StatefulSet
// the pods are those kube-state-metrics says the target owns, directly or through a ReplicaSet
// (pods that belong to another kind of object in between, as a LeaderWorkerSet's to its
// StatefulSets, are not found). A query the configuration sets has no fallback (empty).
func (p *Policy) HistoryFallback() Queries {
	owner, ok := p.owner(func(sel string) string { return sel })
	if !ok {
		return Queries{}
	}
	def := Policy{Target: p.Target, Request: p.Request}
	(*Config)(nil).queryDefaults(&def)
	var q Queries
	if p.Queries.Demand == def.Queries.Demand {
		q.Demand = fmt.Sprintf(`sum(sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{namespace=%q,container!="",container!="POD",image!=""}[1m])) * on (namespace, pod) group_left () %s)`,
			p.Target.Namespace, owner)
	}
	if p.Queries.Request != "" && p.Queries.Request == def.Queries.Request {
		q.Request = fmt.Sprintf(`avg(sum by (namespace, pod) (kube_pod_container_resource_requests{namespace=%q,resource="cpu"}) * on (namespace, pod) group_left () %s)`,
			p.Target.Namespace, owner)
	}
	return q
}

// owner is the target's pods as kube-state-metrics says it owns them (1 per namespace and pod),
// each raw selector read through sel (the selector itself for an instant, a _over_time over a
// range); ok is false for a kind whose pods it cannot tell (HistoryFallback).
func (p *Policy) owner(sel func(selector string) string) (string, bool) {
	ns, name := p.Target.Namespace, p.Target.Name
	rsOwned := func(kind string) string {
		return fmt.Sprintf(`label_replace(%s, "replicaset", "$1", "owner_name", "(.*)")`, sel(fmt.Sprintf(`kube_pod_owner{namespace=%q,owner_kind="ReplicaSet"}`, ns))) +
			fmt.Sprintf(` * on (replicaset, namespace) group_left () topk by (replicaset, namespace) (1, max by (replicaset, namespace, owner_name) (%s))`,
				sel(fmt.Sprintf(`kube_replicaset_owner{namespace=%q,owner_kind=%q,owner_name=%q}`, ns, kind, name)))
	}
	switch kind := p.Target.WorkloadType(); kind {
	case "deployment":
		return fmt.Sprintf(`max by (namespace, pod) (%s)`, rsOwned("Deployment")), true
	case "statefulset":
		return fmt.Sprintf(`max by (namespace, pod) (%s)`, sel(fmt.Sprintf(`kube_pod_owner{namespace=%q,owner_kind="StatefulSet",owner_name=%q}`, ns, name))), true
	default:
		if !p.Target.PodsFromScale() {
			return "", false
		}
		// Any other kind: before the exporter published its pods (debi_target_pod_info), its
		// pods are those kube-state-metrics says it owns, directly (a role adapter that creates
		// its pods) or through a ReplicaSet it owns (an Argo Rollout).
		return fmt.Sprintf(`max by (namespace, pod) (%s or %s)`, sel(fmt.Sprintf(`kube_pod_owner{namespace=%q,owner_kind=%q,owner_name=%q}`, ns, p.Target.Kind, name)), rsOwned(p.Target.Kind)), true
	}
}

// StartupFallback is each of the target's pods' start-up over the range rng before the time
// it is evaluated at (creation to its first readiness, in seconds), from kube-state-metrics'
// kube_pod_created and kube_pod_status_ready_time: the figure the recording rule
// namespace_workload_pod:debi_pod_startup_seconds records, for the times before it existed.
// Empty for a kind whose pods kube-state-metrics cannot tell (HistoryFallback).
func (p *Policy) StartupFallback(rng string) string {
	over := func(fn string) func(string) string {
		return func(sel string) string { return fmt.Sprintf("%s(%s[%s])", fn, sel, rng) }
	}
	owner, ok := p.owner(over("max_over_time"))
	if !ok {
		return ""
	}
	ns := p.Target.Namespace
	return fmt.Sprintf(`(max by (namespace, pod, uid) (%s) - max by (namespace, pod, uid) (%s)) * on (namespace, pod) group_left () %s`,
		over("min_over_time")(fmt.Sprintf(`kube_pod_status_ready_time{namespace=%q}`, ns)),
		over("max_over_time")(fmt.Sprintf(`kube_pod_created{namespace=%q}`, ns)), owner)
}
