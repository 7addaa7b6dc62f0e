package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestServed(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "elasticscaler.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "elasticscalers"}}},
	}}}
	other := esGVR
	other.Resource = "others"
	for _, tc := range []struct {
		name    string
		gvr     schema.GroupVersionResource
		served  bool
		wantErr bool
	}{
		{"served", esGVR, true, false},
		{"another resource of the group", other, false, false},
		{"a group version not served", tidalGVR, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := Served(d, tc.gvr)
			if ok != tc.served || (err != nil) != tc.wantErr {
				t.Errorf("Served(%v) = %v, %v; want %v, error %v", tc.gvr, ok, err, tc.served, tc.wantErr)
			}
		})
	}
}
