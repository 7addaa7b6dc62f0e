package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// PrometheusOperatorVersion is the Go module whose example/prometheus-operator-crd/ holds the
// CRDs the manifests are applied against.
const PrometheusOperatorVersion = "v0.85.0"

// crdDir finds the Prometheus Operator CRDs: DEBI_PROMETHEUS_OPERATOR_CRDS, or the module
// downloaded through the Go module proxy (cached in GOMODCACHE after the first run).
func crdDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("DEBI_PROMETHEUS_OPERATOR_CRDS"); d != "" {
		return d
	}
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/prometheus-operator/prometheus-operator@"+PrometheusOperatorVersion)
	cmd.Dir = t.TempDir() // outside debi's module: nothing is added to go.mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	if err != nil || m.Dir == "" {
		t.Fatalf("go mod download prometheus-operator@%s: %v %s\n%s", PrometheusOperatorVersion, err, m.Error, out)
	}
	return filepath.Join(m.Dir, "example", "prometheus-operator-crd")
}

// cluster is a real kube-apiserver + etcd started with hack/k8s-env.sh.
type cluster struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// rc is the admin's configuration (for impersonating ServiceAccounts).
	rc *rest.Config
	// kubeconfig is the admin's kubeconfig file (for helm and kubectl).
	kubeconfig string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	assets := integrationEnv(t, "DEBI_K8S_ASSETS", "kube-apiserver and etcd built by hack/k8s-env.sh build")
	state := t.TempDir()
	env := append(os.Environ(), "KUBEBUILDER_ASSETS="+assets, "K8S_STATE="+state)
	script, err := filepath.Abs(filepath.Join(root, "hack", "k8s-env.sh"))
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(script, "up")
	up.Env = env
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("k8s-env.sh up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		down := exec.Command(script, "down")
		down.Env = env
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("k8s-env.sh down: %v\n%s", err, out)
		}
	})
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), rc: rc,
		kubeconfig: filepath.Join(state, "kubeconfig")}
}

// apply server-side-applies obj (a dry run when dryRun) with strict field validation, so an
// unknown or misspelt field is an error rather than silently pruned.
func (c *cluster) apply(ctx context.Context, obj *unstructured.Unstructured, defaultNamespace string, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		ri = c.dyn.Resource(m.Resource).Namespace(ns)
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "debi-deploy-test", Force: new(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}

// installCRDs applies the CRDs the manifests use and waits until they are served.
func (c *cluster) installCRDs(ctx context.Context, t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"servicemonitors", "prometheusrules", "alertmanagerconfigs"} {
		b, err := os.ReadFile(filepath.Join(dir, "monitoring.coreos.com_"+f+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeObjects(t, b) {
			if err := c.apply(ctx, o, "", false); err != nil {
				t.Fatalf("CRD %s: %v", o.GetName(), err)
			}
		}
	}
	crds := c.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range []string{"servicemonitors", "prometheusrules", "alertmanagerconfigs"} {
		for {
			u, err := crds.Get(ctx, name+".monitoring.coreos.com", metav1.GetOptions{})
			if err == nil && established(u) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("CRD %s not established: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Established is not yet served: discovery of a new group version lags behind it, and a
	// mapper that cached discovery without it answers "no matches for kind". Wait until every
	// kind maps, resetting the cache between tries.
	kinds := []schema.GroupVersionKind{
		{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"},
		{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"},
		{Group: "monitoring.coreos.com", Version: "v1alpha1", Kind: "AlertmanagerConfig"},
	}
	for _, gvk := range kinds {
		for {
			c.mapper.Reset()
			_, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s not served by discovery: %v", gvk, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// TestServerSideDryRun applies the Helm chart's output — defaults, the example values, the
// NetworkPolicy and TLS variant — to a real kube-apiserver with a server-side dry run, first
// without the Prometheus Operator's CRDs (the chart then leaves its objects out), then with
// them, together with the kustomize base and its example overlay: every object must pass the
// API server's validation, the CRDs' OpenAPI schemas (strict: no unknown fields) and RBAC's
// escalation check. A deliberately misspelt ServiceMonitor shows the check has teeth.
func TestServerSideDryRun(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Namespaces exist for real: a dry-run Namespace does not make its objects applicable.
	for _, ns := range []string{"debi-system", "debi", "shop", "web", "monitoring"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := c.apply(ctx, obj, "", false); err != nil {
			t.Fatal(err)
		}
	}

	applyAll := func(t *testing.T, objs []*unstructured.Unstructured, ns string) {
		t.Helper()
		if len(objs) < 10 {
			t.Fatalf("only %d objects rendered", len(objs))
		}
		for _, o := range objs {
			if err := c.apply(ctx, o, ns, true); err != nil {
				t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	bin := helmBin(t)
	// Before the Operator's CRDs: helm install's defaults and the example are accepted as they
	// are, without the Operator's objects (helm template sees no monitoring.coreos.com, as
	// helm install sees none on such a cluster).
	t.Run("helm without the Operator", func(t *testing.T) {
		for _, vals := range [][]string{nil, {"--values", exampleValues}, {"--values", networkTLSValues(t)}} {
			objs := helmTemplate(t, bin, "debi", vals...)
			for _, k := range operatorKinds {
				if find(objs, k, "") != nil {
					t.Errorf("%v: a %s rendered without its CRD", vals, k)
				}
			}
			applyAll(t, objs, "debi")
		}
	})

	c.installCRDs(ctx, t, crdDir(t))
	t.Run("negative control", func(t *testing.T) {
		bad := decodeObjects(t, []byte(`{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"x"},"spec":{"selector":{},"endpoints":[{"prot":"metrics"}]}}`))[0]
		err := c.apply(ctx, bad, "debi", true)
		if err == nil || !strings.Contains(err.Error(), "prot") {
			t.Fatalf("a ServiceMonitor with an unknown field was accepted (err %v): the dry run proves nothing", err)
		}
	})
	t.Run("kustomize", func(t *testing.T) {
		applyAll(t, renderKustomize(t, "kustomize/base"), "debi-system")
		applyAll(t, renderKustomize(t, "kustomize/examples/shop-web"), "debi-system")
	})
	t.Run("helm", func(t *testing.T) {
		for _, vals := range [][]string{nil, {"--values", exampleValues}, {"--values", variantValues(t)}, {"--values", networkTLSValues(t)}} {
			objs := helmTemplate(t, bin, "debi", append(vals, operatorAPIs...)...)
			if find(objs, "ServiceMonitor", "") == nil || find(objs, "AlertmanagerConfig", "") == nil {
				t.Errorf("%v: Operator objects missing though their CRDs are served", vals)
			}
			applyAll(t, objs, "debi")
		}
	})
}
