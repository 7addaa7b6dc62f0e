package config

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Target names the scaled object; it must have a scale subresource. One policy acts on a
// target (webhook mode act or hpa-floor); others on the same target must be in shadow mode, as
// baselines: they decide and are published beside it (the policy dashboard draws every policy
// of the workload), and write nothing.
type Target struct {
	APIVersion string `yaml:"api_version"`
	// Kind is any kind with a scale subresource (Deployment, StatefulSet, an Argo Rollout, a
	// LeaderWorkerSet, a serving framework's role adapter…). The default queries of a Deployment
	// or a StatefulSet read kube-state-metrics; those of any other kind read the pods of its
	// scale subresource's status.selector and its spec.replicas, which the exporter publishes
	// (docs/exporter.md, "Targets of any kind").
	Kind      string `yaml:"kind"`
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
}

// String is namespace/kind/name.
func (t Target) String() string { return t.Namespace + "/" + t.Kind + "/" + t.Name }

// kindRe is a Kind as the API spells it.
var kindRe = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// canonicalKinds are the built-in kinds with a scale subresource, by lower-case name, so that
// "deployment" and "Deployment" are one target.
var canonicalKinds = map[string]string{
	"deployment": "Deployment", "statefulset": "StatefulSet", "replicaset": "ReplicaSet",
	"replicationcontroller": "ReplicationController",
}

// normalize spells the kind as the API does and checks every part of the target's identity:
// api_version group/version, kind UpperCamelCase, namespace a DNS-1123 label, name a DNS-1123
// subdomain (namespace and name when set: that they are required is checked before). It
// reports whether every part is valid.
func (t *Target) normalize(path string, errs *errList) bool {
	ok := true
	if k, known := canonicalKinds[strings.ToLower(t.Kind)]; known {
		t.Kind = k
	}
	if !kindRe.MatchString(t.Kind) {
		errs.addf(path+".kind", "%q is not a Kind as the API spells it (UpperCamelCase, e.g. Deployment)", t.Kind)
		ok = false
	}
	gv := strings.Split(t.APIVersion, "/")
	if len(gv) > 2 || gv[len(gv)-1] == "" || (len(gv) == 2 && len(validation.IsDNS1123Subdomain(gv[0])) > 0) {
		errs.addf(path+".api_version", "%q is not group/version or version (e.g. apps/v1)", t.APIVersion)
		ok = false
	}
	if t.Namespace != "" {
		if msgs := validation.IsDNS1123Label(t.Namespace); len(msgs) > 0 {
			errs.addf(path+".namespace", "%q is not a valid namespace: %s", t.Namespace, strings.Join(msgs, "; "))
			ok = false
		}
	}
	if t.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(t.Name); len(msgs) > 0 {
			errs.addf(path+".name", "%q is not a valid object name: %s", t.Name, strings.Join(msgs, "; "))
			ok = false
		}
	}
	return ok
}

// Group is the API group of the target ("apps"; "" for the core group).
func (t Target) Group() string {
	if g, _, ok := strings.Cut(t.APIVersion, "/"); ok {
		return g
	}
	return ""
}

// Identity is what makes two targets the same object whatever the spelling: group, kind in
// lower case, namespace and name (the version does not matter).
func (t Target) Identity() string {
	return t.Group() + "/" + strings.ToLower(t.Kind) + "/" + t.Namespace + "/" + t.Name
}

// WorkloadType is the target kind in lower case, as kube-state-metrics and the recording rules
// of rules/ name it in the workload_type label (deployment, statefulset…).
func (t Target) WorkloadType() string { return strings.ToLower(t.Kind) }

// PodsFromScale reports whether the target's pods and size come from its scale subresource
// (status.selector and spec.replicas, which the exporter publishes as debi_target_pod_info and
// debi_target_spec_replicas) rather than from kube-state-metrics: every kind but Deployment and
// StatefulSet, whose owners kube-state-metrics and the recording rules relabel themselves.
func (t Target) PodsFromScale() bool {
	k := t.WorkloadType()
	return k != "deployment" && k != "statefulset"
}
