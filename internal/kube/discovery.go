package kube

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Served reports whether the API server's discovery lists gvr: a consumer of a custom resource
// waits while its CRD is not installed instead of failing its list forever. err is discovery's
// when it could not tell (the group version not served, the API server unreachable).
func Served(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}
