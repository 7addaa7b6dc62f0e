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
)

// RestConfig is a copy of rc, or of the configuration client-go's default loading rules find
// (kubeconfig, else $KUBECONFIG, else ~/.kube/config, else the in-cluster configuration), with
// userAgent, and qps and burst where the configuration sets no rate (client-go's default of
// 5/s, burst 10, would cap a controller that writes many objects at one second); qps 0 keeps
// client-go's default.
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
	return rc, nil
}
