package elasticscaler

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// decode is the typed form of an object of the dynamic client or an informer's cache: an
// ElasticScaler (esv1.ElasticScaler), a Tidal (tidalv1.Tidal), or a part of one (a status).
func decode[T any](u *unstructured.Unstructured) (*T, error) {
	var t T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// cached is the object key (namespace/name) from the first of stores that holds it; nil when
// none does.
func cached(stores []cache.Store, key string) *unstructured.Unstructured {
	for _, s := range stores {
		obj, ok, err := s.GetByKey(key)
		if err != nil || !ok {
			continue
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return u
		}
	}
	return nil
}
