package exporter

import (
	"sync"

	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/internal/kube"
)

// kubeConn is the exporter process's one connection to the API server: one rest.Config (user
// agent debi-exporter, 50/s with a burst of 100 where the configuration sets no rate, room for
// the metrics APIs' concurrent reads) and the clients built from it. Everything the exporter
// reads from the Kubernetes API takes it from here: the metrics APIs' reader (from the
// configuration), the targets' scale subresources and pods, and the ElasticScaler source (from
// the clients); so they all keep to one rate limit, the configuration's one rate limiter
// (kube.RestConfig). It is built on first use, so that an exporter that reads none of them
// needs no kube credentials, and kept once built; a failed build is returned and tried again
// on the next use (the steps' reads keep their readers' failure for a minute: sourceClients).
type kubeConn struct {
	mu    sync.Mutex
	build func() (*rest.Config, *kube.Clients, error)
	rc    *rest.Config
	c     *kube.Clients
}

// newKubeConn is the connection of the exporter's kube credentials: rc when set, else
// kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster configuration.
func newKubeConn(rc *rest.Config, kubeconfig string) *kubeConn {
	return &kubeConn{build: func() (*rest.Config, *kube.Clients, error) {
		c, err := kube.RestConfig(rc, kubeconfig, "debi-exporter", 50, 100)
		if err != nil {
			return nil, nil, err
		}
		k, err := kube.NewClients(c)
		if err != nil {
			return nil, nil, err
		}
		return c, k, nil
	}}
}

// get returns the configuration and its clients, building them on the first call and on the
// first after a failed one.
func (k *kubeConn) get() (*rest.Config, *kube.Clients, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		return k.rc, k.c, nil
	}
	rc, c, err := k.build()
	if err != nil {
		return nil, nil, err
	}
	k.rc, k.c = rc, c
	return rc, c, nil
}
