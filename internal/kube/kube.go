// Package kube is the Kubernetes plumbing the debi processes share: where a client's
// configuration comes from, as kubectl and controller-runtime find it (RestConfig), and the
// clients built once from it, with a RESTMapper that finds CRDs installed later (Clients,
// Mapper); leader election on a Lease (RunLeaderElected); the one informer cache of a process
// (Informers); and whether the API server serves a resource (Served).
package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// RestConfig is a copy of rc, or of the configuration client-go's default loading rules find
// (kubeconfig, else $KUBECONFIG, else ~/.kube/config, else the in-cluster configuration), with
// userAgent, and qps and burst where the configuration sets no rate (client-go's default of
// 5/s, burst 10, would cap a controller that writes many objects at one second); qps 0 keeps
// client-go's default. It sets the configuration's RateLimiter, a token bucket of its QPS and
// Burst (client-go's defaults where they are 0; none when QPS is negative), unless rc has one:
// client-go builds a token bucket per client when a configuration has none, so the clients of
// a process (typed, dynamic, discovery, the metrics APIs', each built from this configuration
// or a rest.CopyConfig of it, which keeps the field) would each have the whole rate to
// themselves; with one limiter they share it, and the process keeps to one rate limit. A copy
// that changes QPS or Burst must clear RateLimiter to have them apply.
func RestConfig(rc *rest.Config, kubeconfig, userAgent string, qps float32, burst int) (*rest.Config, error) {
	if rc == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		var err error
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes client configuration (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = userAgent
	if rc.QPS == 0 && qps > 0 {
		rc.QPS, rc.Burst = qps, burst
	}
	if rc.RateLimiter == nil {
		rc.RateLimiter = rateLimiter(rc.QPS, rc.Burst)
	}
	return rc, nil
}

// rateLimiter is the token bucket client-go would give one client of a configuration of qps
// and burst (rest.RESTClientFor), or nil when qps is negative: no client-side limit.
func rateLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	if qps == 0 {
		qps = rest.DefaultQPS
	}
	if burst == 0 {
		burst = rest.DefaultBurst
	}
	if qps < 0 {
		return nil
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, burst)
}
