package kube

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Clients are the clients of one API server, built once from its rest.Config (RestConfig), so
// that each process names its user agent and rate limit in one place. The clients share the
// configuration's RateLimiter (RestConfig sets one), so that together they keep to its QPS and
// Burst; none makes a request before it is used.
type Clients struct {
	Kubernetes kubernetes.Interface
	Dynamic    dynamic.Interface
	Discovery  discovery.DiscoveryInterface
	// Mapper maps kinds to resources through Discovery, cached in memory.
	Mapper Mapper
}

// NewClients builds the clients of rc. Its errors are client-go's, as they are.
func NewClients(rc *rest.Config) (*Clients, error) {
	k, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	d, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Clients{Kubernetes: k, Dynamic: dyn, Discovery: d, Mapper: NewMapper(d)}, nil
}

// Mapper is a RESTMapper over discovery cached in memory, discovered on first use. A kind it
// does not know empties the cache and is looked up once more (RESTMapping), so that a kind
// whose CRD was installed after the first discovery (a custom resource's scale target, a
// described object's kind) is found without a restart, while a known kind costs no request.
type Mapper struct {
	*restmapper.DeferredDiscoveryRESTMapper
}

// NewMapper returns the Mapper of d.
func NewMapper(d discovery.DiscoveryInterface) Mapper {
	return Mapper{restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))}
}

// RESTMapping is the mapping of gk at the first of versions served, after a rediscovery when
// the cached discovery does not know it.
func (m Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	rm, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.Reset()
		rm, err = m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	}
	return rm, err
}
