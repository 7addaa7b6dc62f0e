package deploy

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/config"
)

// The ElasticScaler support in deploy/ (issue 12): the CRDs (generated copies of deploy/crds),
// the ValidatingWebhookConfiguration of the webhook's /v1/admission/validate, the RBAC of
// ElasticScaler policies and the Tidal controller — opt-in in the chart (elasticScaler.enabled,
// tidalController.enabled) and in kustomize (components/elastic-scaler, examples/elastic-scaler).

// esNamespaces are the namespaces of ElasticScalers in the chart's test values.
var esNamespaces = []string{"ai", "shop"}

// testCA stands for a CA certificate in PEM: the chart passes it through and the API server
// stores caBundle without parsing it.
const testCA = `-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIUY2cQ0x1ZJ4bD8Jc0QmQ8m6oAqUYwCgYIKoZIzj0EAwIw
EjEQMA4GA1UEAwwHdGVzdC1jYTAeFw0yNjAxMDEwMDAwMDBaFw0zNjAxMDEwMDAw
MDBaMBIxEDAOBgNVBAMMB3Rlc3QtY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAQ1v8sQwz6yXl2y3ZQj7qv0a6b8m2Qx9m0GJ3n9Yp0t5Z6q3rX2c9yq2mZk3n0b
pX6d1v9hQ8Zy2tW3m2p6k3n0o1MwUTAdBgNVHQ4EFgQU5Q2l0b2l0b2l0b2l0b2l
0b2l0b0wHwYDVR0jBBgwFoAU5Q2l0b2l0b2l0b2l0b2l0b2l0b0wDwYDVR0TAQH/
BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEA0b2l0b2l0b2l0b2l0b2l0b2l0b2l
0b2l0b2l0b0CIFl0b2l0b2l0b2l0b2l0b2l0b2l0b2l0b2l0b2l0b2l0
-----END CERTIFICATE-----`

// writeValues writes a values file into a temporary directory.
func writeValues(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// esCertManagerValues: ElasticScaler support with cert-manager's certificate and CA injection.
func esCertManagerValues(t *testing.T) string {
	return writeValues(t, `
elasticScaler: {enabled: true, namespaces: [shop, ai]}
webhook:
  tls: {enabled: true, certManager: {enabled: true, issuerRef: {name: ca}}}
`)
}

// esCABundleValues: ElasticScaler support with a TLS Secret of one's own and its CA, and the
// Tidal controller.
func esCABundleValues(t *testing.T) string {
	return writeValues(t, fmt.Sprintf(`
elasticScaler:
  enabled: true
  namespaces: [ai, shop]
  admission:
    caBundle: |
%s
webhook:
  tls: {enabled: true, secretName: debi-webhook-cert}
tidalController: {enabled: true}
`, indent(testCA, "      ")))
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

var certManagerAPI = []string{"--api-versions", "cert-manager.io/v1"}

// TestElasticScalerHelm renders the chart's ElasticScaler variants: nothing of it by default;
// with elasticScaler.enabled the CRDs (identical to deploy/crds), the RBAC (the rules of
// deploy/base), the configuration watching the same namespaces the RBAC is bound in, and the
// ValidatingWebhookConfiguration with its CA from cert-manager or from a value — or a clear
// failure without TLS; with tidalController.enabled its Deployment and RBAC.
func TestElasticScalerHelm(t *testing.T) {
	bin := helmBin(t)

	t.Run("default", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", operatorAPIs...)
		for _, kind := range []string{"CustomResourceDefinition", "ValidatingWebhookConfiguration", "ClusterRoleBinding"} {
			if o := find(objs, kind, ""); o != nil {
				t.Errorf("the default render has %s %s", kind, o.GetName())
			}
		}
		for _, name := range []string{"debi-tidal-controller", "debi-exporter-elasticscaler", "debi-webhook-elasticscaler"} {
			for _, o := range objs {
				if o.GetName() == name {
					t.Errorf("the default render has %s %s", o.GetKind(), name)
				}
			}
		}
		checkExporterToken(t, objs, false)
		if cfg := checkConfig(t, objs, "debi", config.ModeShadow); cfg.Global.ElasticScalers.Enabled {
			t.Error("the default configuration watches ElasticScalers")
		}
	})

	t.Run("cert-manager", func(t *testing.T) {
		// (no helm lint: it cannot be told that cert-manager.io/v1 is served)
		objs := helmTemplate(t, bin, "debi", append(append([]string{"--values", esCertManagerValues(t)}, certManagerAPI...), operatorAPIs...)...)
		checkCRDs(t, objs)
		vwc := checkAdmission(t, objs, "debi")
		if got := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "debi/debi-webhook" {
			t.Errorf("inject-ca-from = %q, want debi/debi-webhook", got)
		}
		if find(objs, "Certificate", "debi-webhook") == nil {
			t.Error("no Certificate debi-webhook for the CA injector to read")
		}
		for _, h := range nestedSlice(vwc.Object, "webhooks") {
			if _, ok, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle"); ok {
				t.Error("caBundle set although cert-manager injects it")
			}
		}
		checkESRBAC(t, objs, esNamespaces)
		checkExporterToken(t, objs, true)
		cfg := checkConfig(t, objs, "debi", config.ModeShadow)
		if !cfg.Global.ElasticScalers.Enabled || !reflect.DeepEqual(cfg.Global.ElasticScalers.Namespaces, esNamespaces) {
			t.Errorf("global.elastic_scalers = %+v, want enabled in %v (where the RBAC is bound)", cfg.Global.ElasticScalers, esNamespaces)
		}
		if find(objs, "Deployment", "debi-tidal-controller") != nil {
			t.Error("the Tidal controller rendered without tidalController.enabled")
		}
	})

	t.Run("caBundle", func(t *testing.T) {
		helm(t, bin, "lint", "--strict", chart, "--values", esCABundleValues(t))
		for _, vals := range [][]string{
			{"--values", esCABundleValues(t)}, // PEM
			{"--values", esCABundleValues(t), "--set", "elasticScaler.admission.caBundle=" + base64.StdEncoding.EncodeToString([]byte(testCA+"\n"))}, // base64
		} {
			objs := helmTemplate(t, bin, "debi", vals...)
			vwc := checkAdmission(t, objs, "debi")
			if len(vwc.GetAnnotations()) != 0 {
				t.Errorf("annotations %v without cert-manager", vwc.GetAnnotations())
			}
			for _, h := range nestedSlice(vwc.Object, "webhooks") {
				ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
				if b, err := base64.StdEncoding.DecodeString(ca); err != nil || strings.TrimSpace(string(b)) != testCA {
					t.Errorf("caBundle %q (%v) is not the base64 of the CA", ca, err)
				}
			}
			checkCRDs(t, objs)
			checkESRBAC(t, objs, esNamespaces)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			flags []string
			want  string
		}{
			{"without TLS", []string{"--set", "elasticScaler.enabled=true", "--set", "elasticScaler.namespaces={ai}"}, "calls admission webhooks over HTTPS only"},
			{"own Secret without caBundle", []string{"--set", "elasticScaler.enabled=true", "--set", "elasticScaler.namespaces={ai}", "--set", "webhook.tls.enabled=true"}, "elasticScaler.admission.caBundle is required"},
			{"cert-manager and caBundle", append([]string{"--values", esCertManagerValues(t), "--set", "elasticScaler.admission.caBundle=eA=="}, certManagerAPI...), "leave it empty with webhook.tls.certManager"},
			{"no namespaces", []string{"--set", "elasticScaler.enabled=true", "--set", "elasticScaler.admission.enabled=false"}, "set elasticScaler.namespaces"},
			{"tidal controller without namespaces", []string{"--set", "tidalController.enabled=true"}, "set tidalController.namespaces"},
			{"network policy without the API server's peers", append([]string{"--values", esCertManagerValues(t), "--set", "networkPolicy.enabled=true"}, certManagerAPI...), "networkPolicy.apiServer.from"},
			{"schema: failurePolicy", []string{"--set", "elasticScaler.admission.failurePolicy=Sometimes"}, "/elasticScaler/admission/failurePolicy"},
			{"schema: timeout", []string{"--set", "elasticScaler.admission.timeoutSeconds=60"}, "/elasticScaler/admission/timeoutSeconds"},
			{"schema: unknown key", []string{"--set", "tidalController.replica=2"}, "replica"},
			{"schema: namespace", []string{"--set", "elasticScaler.namespaces={Not_A_Namespace}"}, "/elasticScaler/namespaces/0"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, err := helmErr(bin, append([]string{"template", "debi", chart}, tc.flags...)...)
				if err == nil || !strings.Contains(out, tc.want) {
					t.Errorf("helm template %v: err %v, want a failure saying %q\n%s", tc.flags, err, tc.want, out)
				}
			})
		}
	})

	t.Run("without admission", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", "--set", "elasticScaler.enabled=true", "--set", "elasticScaler.namespaces={ai}", "--set", "elasticScaler.admission.enabled=false")
		if find(objs, "ValidatingWebhookConfiguration", "") != nil {
			t.Error("admission.enabled=false still renders the ValidatingWebhookConfiguration")
		}
		checkCRDs(t, objs)
		checkESRBAC(t, objs, []string{"ai"})
	})

	t.Run("cluster-wide", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", "--set", "elasticScaler.enabled=true", "--set", "elasticScaler.clusterWide=true", "--set", "elasticScaler.admission.enabled=false")
		var got []string
		for _, crb := range findAll(objs, "ClusterRoleBinding") {
			got = append(got, crb.GetName())
		}
		sort.Strings(got)
		if want := []string{"debi-exporter-elasticscaler", "debi-webhook-elasticscaler", "debi-webhook-scaler"}; !reflect.DeepEqual(got, want) {
			t.Errorf("ClusterRoleBindings %v, want %v", got, want)
		}
		if cfg := checkConfig(t, objs, "debi", config.ModeShadow); !cfg.Global.ElasticScalers.Enabled || len(cfg.Global.ElasticScalers.Namespaces) != 0 {
			t.Errorf("global.elastic_scalers = %+v, want enabled in every namespace", cfg.Global.ElasticScalers)
		}
	})

	t.Run("network policy", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", append([]string{"--values", esCertManagerValues(t), "--set", "networkPolicy.enabled=true", "--set-json", `networkPolicy.apiServer.from=[{"ipBlock":{"cidr":"10.0.0.0/24"}}]`}, certManagerAPI...)...)
		np := find(objs, "NetworkPolicy", "debi-webhook")
		if s := toString(np.Object["spec"]); !strings.Contains(s, "cidr:10.0.0.0/24") {
			t.Errorf("the webhook's NetworkPolicy does not admit the API server: %s", s)
		}
	})

	t.Run("tidal controller", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", "--values", esCABundleValues(t))
		checkTidalController(t, objs, "debi", esNamespaces)
		objs = helmTemplate(t, bin, "ops", "--set", "tidalController.enabled=true", "--set", "tidalController.namespaces={batch}", "--set", "tidalController.leaderElect=false", "--set", "tidalController.replicas=1")
		checkTidalController(t, objs, "ops", []string{"batch"})
		if find(objs, "CustomResourceDefinition", "") != nil || find(objs, "ValidatingWebhookConfiguration", "") != nil {
			t.Error("tidalController.enabled alone renders the ElasticScaler objects")
		}
		objs = helmTemplate(t, bin, "debi", "--set", "tidalController.enabled=true", "--set", "tidalController.clusterWide=true")
		if crb := find(objs, "ClusterRoleBinding", "debi-tidal-controller"); crb == nil {
			t.Error("tidalController.clusterWide: no ClusterRoleBinding")
		}
		dep := find(objs, "Deployment", "debi-tidal-controller")
		if s := toString(dep.Object); strings.Contains(s, "--namespace=") {
			t.Errorf("cluster-wide Tidal controller limited to namespaces: %s", s)
		}
	})
}

func nestedSlice(obj map[string]any, path ...string) []any {
	s, _, _ := unstructured.NestedSlice(obj, path...)
	return s
}

// checkCRDs: the chart's CRDs are deploy/crds/*.yaml (the chart adds labels and the keep policy
// only).
func checkCRDs(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("deploy/crds: %v %v", files, err)
	}
	got := findAll(objs, "CustomResourceDefinition")
	if len(got) != len(files) {
		t.Errorf("%d CRDs rendered, want %d", len(got), len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeObjects(t, b)[0]
		g := find(got, "CustomResourceDefinition", want.GetName())
		if g == nil {
			t.Errorf("CRD %s not rendered", want.GetName())
			continue
		}
		g = g.DeepCopy()
		if g.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
			ann := g.GetAnnotations()
			delete(ann, "helm.sh/resource-policy")
			g.SetAnnotations(ann)
		} else if g.GetLabels()["app.kubernetes.io/managed-by"] == "Helm" {
			t.Errorf("CRD %s lacks helm.sh/resource-policy: keep (uninstall would delete every object)", g.GetName())
		}
		g.SetLabels(nil)
		want.SetLabels(nil)
		if !reflect.DeepEqual(normalize(t, g.Object), normalize(t, want.Object)) {
			t.Errorf("CRD %s differs from %s (run make generate)", g.GetName(), filepath.Base(f))
		}
	}
}

// checkAdmission: one ValidatingWebhookConfiguration, two webhooks (ElasticScaler, Tidal) calling
// the webhook Service's port at /v1/admission/validate, CREATE and UPDATE, Fail, 5 s, no side
// effects.
func checkAdmission(t *testing.T, objs []*unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	vwcs := findAll(objs, "ValidatingWebhookConfiguration")
	if len(vwcs) != 1 {
		t.Fatalf("%d ValidatingWebhookConfigurations, want 1", len(vwcs))
	}
	svc := find(objs, "Service", "debi-webhook")
	port := nestedSlice(svc.Object, "spec", "ports")[0].(map[string]any)["port"]
	hooks := nestedSlice(vwcs[0].Object, "webhooks")
	want := map[string][2]string{"elasticscalers.elasticscaler.io": {"elasticscaler.io", "elasticscalers"}, "tidals.tidal.io": {"tidal.io", "tidals"}}
	if len(hooks) != len(want) {
		t.Errorf("%d webhooks, want %d", len(hooks), len(want))
	}
	for _, h := range hooks {
		hm := h.(map[string]any)
		gr, ok := want[fmt.Sprint(hm["name"])]
		if !ok {
			t.Errorf("unexpected webhook %v", hm["name"])
			continue
		}
		for k, v := range map[string]string{"sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": "5", "admissionReviewVersions": "[v1]", "matchPolicy": "Equivalent"} {
			if fmt.Sprint(hm[k]) != v {
				t.Errorf("webhook %v: %s = %v, want %s", hm["name"], k, hm[k], v)
			}
		}
		rules := hm["rules"].([]any)
		if r := fmt.Sprint(rules); len(rules) != 1 || r != fmt.Sprintf("[map[apiGroups:[%s] apiVersions:[v1alpha1] operations:[CREATE UPDATE] resources:[%s] scope:Namespaced]]", gr[0], gr[1]) {
			t.Errorf("webhook %v rules %s", hm["name"], r)
		}
		s, _, _ := unstructured.NestedMap(hm, "clientConfig", "service")
		if fmt.Sprint(s) != fmt.Sprintf("map[name:%s namespace:%s path:/v1/admission/validate port:%v]", svc.GetName(), ns, port) {
			t.Errorf("webhook %v calls %v, want Service %s/%s port %v path /v1/admission/validate", hm["name"], s, ns, svc.GetName(), port)
		}
		if _, ok, _ := unstructured.NestedString(hm, "clientConfig", "url"); ok {
			t.Errorf("webhook %v has a url", hm["name"])
		}
	}
	// The Service's port is the one the webhook serves TLS on.
	checkTLSPort(t, objs)
	return vwcs[0]
}

// checkTLSPort: the webhook Deployment serves HTTPS (--web.config.file) on the Service's target.
func checkTLSPort(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	dep := find(objs, "Deployment", "debi-webhook")
	s := toString(dep.Object)
	if !strings.Contains(s, "--web.config.file=") || !strings.Contains(s, "scheme:HTTPS") {
		t.Error("the admission webhook's Deployment does not serve HTTPS")
	}
}

// checkExporterToken: the exporter has an API token exactly when it reads ElasticScalers.
func checkExporterToken(t *testing.T, objs []*unstructured.Unstructured, want bool) {
	t.Helper()
	sa := find(objs, "ServiceAccount", "debi-exporter")
	dep := find(objs, "Deployment", "debi-exporter")
	a, _, _ := unstructured.NestedBool(sa.Object, "automountServiceAccountToken")
	b, _, _ := unstructured.NestedBool(dep.Object, "spec", "template", "spec", "automountServiceAccountToken")
	if a != want || b != want {
		t.Errorf("exporter automountServiceAccountToken: ServiceAccount %v, pod %v, want %v", a, b, want)
	}
}

// baseRules reads the rules of the roles of a deploy/base RBAC file, by name.
func baseRules(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "base", file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, o := range decodeObjects(t, b) {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
			out[o.GetName()] = normalize(t, o.Object["rules"])
		}
	}
	return out
}

// checkESRBAC: the ElasticScaler ClusterRoles have the rules of deploy/base/elastic-scaler-rbac.yaml
// and are bound, with the webhook's scaler, exactly in namespaces; no wildcard, Secret or Pod,
// and delete only on HPAs.
func checkESRBAC(t *testing.T, objs []*unstructured.Unstructured, namespaces []string) {
	t.Helper()
	want := baseRules(t, "elastic-scaler-rbac.yaml")
	for _, name := range []string{"debi-exporter-elasticscaler", "debi-webhook-elasticscaler"} {
		cr := find(objs, "ClusterRole", name)
		if cr == nil {
			t.Errorf("no ClusterRole %s", name)
			continue
		}
		if g := normalize(t, cr.Object["rules"]); !reflect.DeepEqual(g, want[name]) {
			t.Errorf("ClusterRole %s rules differ from deploy/base/elastic-scaler-rbac.yaml:\n got %v\nwant %v", name, g, want[name])
		}
		var got []string
		for _, rb := range findAll(objs, "RoleBinding") {
			if ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name"); ref == name {
				got = append(got, rb.GetNamespace())
			}
		}
		if !reflect.DeepEqual(got, namespaces) {
			t.Errorf("%s bound in %v, want %v", name, got, namespaces)
		}
	}
	var scaler []string
	for _, rb := range findAll(objs, "RoleBinding") {
		if ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name"); strings.HasSuffix(ref, "webhook-scaler") {
			scaler = append(scaler, rb.GetNamespace())
		}
	}
	if !reflect.DeepEqual(scaler, namespaces) {
		t.Errorf("the webhook's scaler bound in %v, want the ElasticScalers' namespaces %v", scaler, namespaces)
	}
	if crb := find(objs, "ClusterRoleBinding", ""); crb != nil {
		t.Errorf("ClusterRoleBinding %s: the rights must stay in the ElasticScalers' namespaces", crb.GetName())
	}
	checkLeastPrivilegeES(t, objs)
}

// checkLeastPrivilegeES is checkLeastPrivilege for the enabled variants: the HPA the HPA
// algorithm owns is the one thing anyone may delete. The one wildcard allowed is the metrics
// APIs' resources, read only: their resources are metric names (and, for Custom metrics, the
// described kinds), which no role can list in advance — the HPA controller's own role grants
// them the same way.
func checkLeastPrivilegeES(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, r := range findAll(objs, kind) {
			for _, rule := range nestedSlice(r.Object, "rules") {
				s := fmt.Sprint(rule)
				m, _ := rule.(map[string]any)
				if fmt.Sprint(m["apiGroups"]) == "[external.metrics.k8s.io custom.metrics.k8s.io]" && fmt.Sprint(m["resources"]) == "[*]" &&
					fmt.Sprint(m["verbs"]) == "[get list]" {
					continue
				}
				if strings.Contains(s, "*") || strings.Contains(s, "secrets") || strings.Contains(s, "pods") {
					t.Errorf("%s %s grants too much: %s", kind, r.GetName(), s)
				}
				if strings.Contains(s, "delete") && fmt.Sprint(rule.(map[string]any)["resources"]) != "[horizontalpodautoscalers]" {
					t.Errorf("%s %s deletes more than HPAs: %s", kind, r.GetName(), s)
				}
			}
		}
	}
}

// checkTidalController: the Deployment runs `debi tidal-controller` with the components' image
// and security context, leader-elected on a Lease in the release namespace, probes on
// /-/healthy and /-/ready; its ClusterRole has deploy/base's rules and is bound in namespaces,
// the ones it watches.
func checkTidalController(t *testing.T, objs []*unstructured.Unstructured, releaseNS string, namespaces []string) {
	t.Helper()
	const name = "debi-tidal-controller"
	dep := find(objs, "Deployment", name)
	if dep == nil {
		t.Fatalf("no Deployment %s", name)
	}
	wh := find(objs, "Deployment", "debi-webhook")
	c := nestedSlice(dep.Object, "spec", "template", "spec", "containers")[0].(map[string]any)
	wc := nestedSlice(wh.Object, "spec", "template", "spec", "containers")[0].(map[string]any)
	if c["image"] != wc["image"] || !reflect.DeepEqual(c["securityContext"], wc["securityContext"]) {
		t.Errorf("tidal controller image %v / securityContext %v differ from the webhook's", c["image"], c["securityContext"])
	}
	psc, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec", "securityContext")
	if psc["runAsNonRoot"] != true {
		t.Errorf("tidal controller pod securityContext %v: not runAsNonRoot", psc)
	}
	args := fmt.Sprint(c["args"])
	if !strings.HasPrefix(args, "[tidal-controller ") {
		t.Errorf("args %s", args)
	}
	for _, ns := range namespaces {
		if !strings.Contains(args, "--namespace="+ns) {
			t.Errorf("args %s lack --namespace=%s", args, ns)
		}
	}
	if strings.Contains(args, "--leader-elect ") && !strings.Contains(args, "--leader-elect.namespace="+releaseNS) {
		t.Errorf("args %s: the Lease is not in the release namespace %s", args, releaseNS)
	}
	checkProbes(t, []*unstructured.Unstructured{dep})
	if sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName"); find(objs, "ServiceAccount", name) == nil || sa != name {
		t.Errorf("tidal controller ServiceAccount %q missing", sa)
	}
	want := baseRules(t, "tidal-controller-rbac.yaml")
	cr := find(objs, "ClusterRole", name)
	if cr == nil || !reflect.DeepEqual(normalize(t, cr.Object["rules"]), want["debi-tidal-controller"]) {
		t.Errorf("ClusterRole %s rules differ from deploy/base/tidal-controller-rbac.yaml", name)
	}
	role := find(objs, "Role", name+"-leader-election")
	if role == nil || !reflect.DeepEqual(normalize(t, role.Object["rules"]), want["debi-tidal-controller-leader-election"]) {
		t.Errorf("Role %s-leader-election rules differ from deploy/base/tidal-controller-rbac.yaml", name)
	}
	var got []string
	for _, rb := range findAll(objs, "RoleBinding") {
		if ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name"); ref == name {
			got = append(got, rb.GetNamespace())
		}
	}
	if !reflect.DeepEqual(got, namespaces) {
		t.Errorf("%s bound in %v, want %v", name, got, namespaces)
	}
	checkLeastPrivilegeES(t, objs)
}

// TestElasticScalerKustomize renders the example overlay examples/elastic-scaler: the base, the
// component's CRDs and RBAC (the same as deploy/crds and deploy/base), an exporter with a token,
// and RoleBindings exactly where the configuration watches ElasticScalers.
func TestElasticScalerKustomize(t *testing.T) {
	base := renderKustomize(t, "kustomize/base")
	objs := renderKustomize(t, "kustomize/examples/elastic-scaler")
	want := inventory(base)
	want = append(want, "ClusterRole/debi-exporter-elasticscaler", "ClusterRole/debi-webhook-elasticscaler",
		"CustomResourceDefinition/elasticscalers.elasticscaler.io", "CustomResourceDefinition/tidals.tidal.io",
		"RoleBinding/debi-exporter-elasticscaler", "RoleBinding/debi-webhook-elasticscaler", "RoleBinding/debi-webhook-scaler")
	if got := inventory(objs); !reflect.DeepEqual(got, sorted(want)) {
		t.Errorf("the overlay adds other objects:\n got %v\nwant %v", got, sorted(want))
	}
	checkCRDs(t, objs)
	cfg := checkConfig(t, objs, "debi-system", config.ModeShadow)
	if !cfg.Global.ElasticScalers.Enabled {
		t.Error("the overlay's configuration does not watch ElasticScalers")
	}
	checkESRBAC(t, objs, cfg.Global.ElasticScalers.Namespaces)
	checkExporterToken(t, objs, true)
	checkExporterToken(t, base, false)
	// The component lists every generated CRD.
	b, err := os.ReadFile(filepath.Join(root, ElasticScalerComponent, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := filepath.Glob(filepath.Join(root, ElasticScalerComponent, "crds", "*.yaml"))
	for _, f := range crds {
		if !strings.Contains(string(b), "crds/"+filepath.Base(f)) {
			t.Errorf("%s/kustomization.yaml does not list crds/%s", ElasticScalerComponent, filepath.Base(f))
		}
	}
}

// The RBAC test: who may do what, where.
const (
	esNS    = "ai"    // a namespace of ElasticScalers and Tidals (bound)
	otherNS = "other" // a namespace nobody's roles are bound in
	relNS   = "debi"  // the release namespace (the Leases)
)

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// res is a resource (with its subresource) probed in a namespace ("" for cluster scope).
type res struct {
	group, version, resource, sub string
	ns                            string
}

func (r res) String() string {
	s := r.resource
	if r.group != "" {
		s += "." + r.group
	}
	if r.sub != "" {
		s += "/" + r.sub
	}
	if r.ns != "" {
		s += " in " + r.ns
	}
	return s
}

// rbacGrants is the expected RBAC of the chart with elasticScaler.enabled (namespaces ai, shop)
// and tidalController.enabled: subject → resource → verbs; everything not listed is denied.
// The README's and the report's table.
func rbacGrants() map[string]map[res][]string {
	es := func(sub string) res { return res{"elasticscaler.io", "v1alpha1", "elasticscalers", sub, esNS} }
	td := func(sub string) res { return res{"tidal.io", "v1alpha1", "tidals", sub, esNS} }
	r := func(g, v, name, sub, ns string) res { return res{g, v, name, sub, ns} }
	return map[string]map[res][]string{
		"debi-exporter": {
			es(""): {"get", "list", "watch"},
			// External and Custom metrics (a metric name; a Custom pods metric is a subresource of
			// pods), and the scale subresource's selector for a Pods metric.
			r("external.metrics.k8s.io", "v1beta1", "queue_depth", "", esNS):     {"get", "list"},
			r("custom.metrics.k8s.io", "v1beta2", "pods", "http_requests", esNS): {"get", "list"},
			r("apps", "v1", "deployments", "scale", esNS):                        {"get"},
			r("apps", "v1", "statefulsets", "scale", esNS):                       {"get"},
		},
		"debi-webhook": {
			es(""):                          {"get", "list", "watch"},
			es("status"):                    {"update", "patch"},
			es("finalizers"):                {"update"},
			r("", "v1", "events", "", esNS): {"create", "update", "patch"}, // create, patch; update from the scaler role
			r("events.k8s.io", "v1", "events", "", esNS):                 {"create", "update", "patch"},
			r("autoscaling", "v2", "horizontalpodautoscalers", "", esNS): {"get", "list", "watch", "create", "update", "patch", "delete"},
			r("apps", "v1", "deployments", "", esNS):                     {"get"},
			r("apps", "v1", "statefulsets", "", esNS):                    {"get"},
			r("apps", "v1", "deployments", "scale", esNS):                {"get", "update", "patch"},
			r("apps", "v1", "statefulsets", "scale", esNS):               {"get", "update", "patch"},
			td(""): {"get", "list", "watch", "patch"}, // patch: the debi.io/applied annotation
			r("coordination.k8s.io", "v1", "leases", "", relNS): {"get", "create", "update"},
		},
		"debi-tidal-controller": {
			td(""):       {"get", "list", "watch"},
			td("status"): {"update"},
			r("coordination.k8s.io", "v1", "leases", "", relNS): {"get", "create", "update"},
		},
	}
}

// probedResources: every resource of the grants in every namespace probed, and resources nobody
// may touch.
func probedResources() []res {
	seen := map[res]bool{}
	var out []res
	add := func(r res) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, g := range rbacGrants() {
		for r := range g {
			for _, ns := range []string{esNS, otherNS, relNS} {
				r.ns = ns
				add(r)
			}
		}
	}
	for _, ns := range []string{esNS, relNS} {
		add(res{"", "v1", "secrets", "", ns})
		add(res{"", "v1", "pods", "", ns})
		add(res{"", "v1", "configmaps", "", ns})
		add(res{"apps", "v1", "statefulsets", "", ns})
	}
	for _, r := range []res{
		{"apiextensions.k8s.io", "v1", "customresourcedefinitions", "", ""},
		{"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "", ""},
		{"rbac.authorization.k8s.io", "v1", "clusterroles", "", ""},
		{"", "v1", "namespaces", "", ""},
	} {
		add(r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// TestElasticScalerRBAC installs the CRDs and the RBAC of the chart's enabled variant (caBundle
// values, Tidal controller on) for real on a kube-apiserver, creates one object of each kind in
// the ElasticScalers' namespace and in an unbound one, then impersonates each ServiceAccount:
// for every resource and every verb, its SelfSubjectAccessReview must match rbacGrants, and a
// real request (where one can be made) must succeed when granted and be forbidden otherwise.
// Then the whole enabled variant — ValidatingWebhookConfiguration included — and the kustomize
// overlay are applied with a server-side dry run.
func TestElasticScalerRBAC(t *testing.T) {
	bin := helmBin(t)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	for _, ns := range []string{relNS, esNS, "shop", otherNS, "debi-system", "ai-inference", "monitoring"} {
		if err := c.apply(ctx, nsObject(ns), "", false); err != nil {
			t.Fatal(err)
		}
	}
	objs := helmTemplate(t, bin, "debi", append([]string{"--values", esCABundleValues(t)}, operatorAPIs...)...)
	// The chart's CRDs, for real (so that the objects below exist).
	for _, o := range findAll(objs, "CustomResourceDefinition") {
		if err := c.apply(ctx, o, "", false); err != nil {
			t.Fatalf("CRD %s: %v", o.GetName(), err)
		}
	}
	c.waitServed(ctx, t, schema.GroupVersionKind{Group: "elasticscaler.io", Version: "v1alpha1", Kind: "ElasticScaler"}, schema.GroupVersionKind{Group: "tidal.io", Version: "v1alpha1", Kind: "Tidal"})
	// The RBAC, for real.
	rbacKinds := []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	for _, o := range objs {
		if slices.Contains(rbacKinds, o.GetKind()) {
			if err := c.apply(ctx, o, relNS, false); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	for _, ns := range []string{esNS, otherNS, relNS} {
		c.fixtures(ctx, t, ns)
	}
	t.Logf("cluster, CRDs, RBAC and fixtures in %v", time.Since(start).Round(time.Millisecond))

	grants := rbacGrants()
	subjects := make([]string, 0, len(grants))
	for s := range grants {
		subjects = append(subjects, s)
	}
	sort.Strings(subjects)
	for _, sub := range subjects {
		t.Run(sub, func(t *testing.T) {
			rc := rest.CopyConfig(c.rc)
			rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + relNS + ":" + sub}
			kube := kubernetes.NewForConfigOrDie(rc)
			as := dynamic.NewForConfigOrDie(rc)
			checked, real := 0, 0
			for _, r := range probedResources() {
				for _, verb := range allVerbs {
					want := slices.Contains(grants[sub][res{r.group, r.version, r.resource, r.sub, r.ns}], verb)
					ssar, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: r.ns, Verb: verb, Group: r.group, Resource: r.resource, Subresource: r.sub},
					}}, metav1.CreateOptions{})
					if err != nil {
						t.Fatalf("SelfSubjectAccessReview: %v", err)
					}
					checked++
					if ssar.Status.Allowed != want {
						t.Errorf("%s may %s %s: %v, want %v", sub, verb, r, ssar.Status.Allowed, want)
					}
					done, err := c.try(ctx, as, r, verb)
					if !done {
						continue
					}
					real++
					switch {
					case want && err != nil:
						t.Errorf("%s %s %s: %v, want it allowed", sub, verb, r, err)
					case !want && !apierrors.IsForbidden(err):
						t.Errorf("%s %s %s: %v, want forbidden", sub, verb, r, err)
					}
				}
			}
			t.Logf("%s: %d access reviews, %d real requests as the ServiceAccount", sub, checked, real)
		})
	}

	t.Run("dry run", func(t *testing.T) {
		c.installCRDs(ctx, t, crdDir(t))
		for _, vals := range [][]string{
			{"--values", esCABundleValues(t)},
			{"--values", esCABundleValues(t), "--set", "elasticScaler.clusterWide=true", "--set", "tidalController.clusterWide=true"},
			{"--values", esCertManagerValues(t)}, // its Certificate needs cert-manager's CRD: skipped
		} {
			objs := helmTemplate(t, bin, "debi", append(append(vals, certManagerAPI...), operatorAPIs...)...)
			n := 0
			for _, o := range objs {
				if o.GetKind() == "Certificate" {
					continue
				}
				if err := c.apply(ctx, o, relNS, true); err != nil {
					t.Errorf("%v: %s %s: %v", vals, o.GetKind(), o.GetName(), err)
				}
				n++
			}
			if find(objs, "ValidatingWebhookConfiguration", "") == nil || n < 20 {
				t.Errorf("%v: %d objects, no ValidatingWebhookConfiguration", vals, n)
			}
		}
		for _, o := range renderKustomize(t, "kustomize/examples/elastic-scaler") {
			if err := c.apply(ctx, o, "debi-system", true); err != nil {
				t.Errorf("kustomize elastic-scaler: %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
		// Teeth: a webhook without TLS settings (no caBundle, a url over http) is refused.
		bad := decodeObjects(t, []byte(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"bad"},"webhooks":[{"name":"x.elasticscaler.io","admissionReviewVersions":["v1"],"sideEffects":"None","clientConfig":{"url":"http://debi-webhook.debi.svc:9108/v1/admission/validate"}}]}`))[0]
		if err := c.apply(ctx, bad, "", true); err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("an http admission webhook was accepted (err %v): the dry run proves nothing", err)
		}
	})
}

// waitServed waits until discovery maps each kind.
func (c *cluster) waitServed(ctx context.Context, t *testing.T, kinds ...schema.GroupVersionKind) {
	t.Helper()
	for _, gvk := range kinds {
		for {
			c.mapper.Reset()
			if _, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("%s not served: %v", gvk, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (r res) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.group, Version: r.version, Resource: r.resource}
}

// fixture is the object of each probed resource (name fx) that the admin creates, or nil.
func fixture(r res, name string) *unstructured.Unstructured {
	var o map[string]any
	switch r.resource {
	case "elasticscalers":
		o = map[string]any{"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler", "spec": map[string]any{
			"targetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fx"}, "minReplicas": 1, "maxReplicas": 5,
			"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{"scalingAlgorithm": "HPA", "metrics": []any{
				map[string]any{"type": "Resource", "resource": map[string]any{"metricsName": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": 70}}}}}}}}
	case "tidals":
		o = map[string]any{"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal", "spec": map[string]any{
			"targetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fx", "namespace": r.ns},
			"triggers":  map[string]any{"times": map[string]any{"rules": []any{map[string]any{"name": "t1", "cron": "0 0 8 * * *", "replicas": 3}}}}}}
	case "horizontalpodautoscalers":
		o = map[string]any{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fx"}, "minReplicas": 1, "maxReplicas": 3,
			"metrics": []any{map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": 70}}}}}}
	case "deployments":
		labels := map[string]any{"app": "fx"}
		o = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": 1,
			"selector": map[string]any{"matchLabels": labels}, "template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}}}}}
	case "events":
		if r.group != "" {
			return nil
		}
		o = map[string]any{"apiVersion": "v1", "kind": "Event", "reason": "Probe", "message": "rbac probe", "type": "Normal",
			"involvedObject": map[string]any{"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler", "namespace": r.ns, "name": "fx"}}
	case "leases":
		o = map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": map[string]any{"holderIdentity": "probe"}}
	default:
		return nil
	}
	u := &unstructured.Unstructured{Object: o}
	u.SetName(name)
	u.SetNamespace(r.ns)
	return u
}

// fixtures creates, as the admin, the object fx of each probed resource in ns.
func (c *cluster) fixtures(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	for _, r := range probedResources() {
		if r.sub != "" {
			continue
		}
		r.ns = ns
		if f := fixture(r, "fx"); f != nil {
			if _, err := c.dyn.Resource(r.gvr()).Namespace(ns).Create(ctx, f, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("fixture %s: %v", r, err)
			}
		}
	}
}

// try makes the request verb on r as the impersonated client, where a real request can be made
// (the resource has a fixture; subresources: status and scale, get, update and patch). It
// returns whether it made one, and its error.
func (c *cluster) try(ctx context.Context, as dynamic.Interface, r res, verb string) (bool, error) {
	base := r
	base.sub = ""
	if r.ns == "" || fixture(base, "fx") == nil {
		return false, nil
	}
	var subs []string
	if r.sub != "" {
		if r.sub != "status" && r.sub != "scale" || !slices.Contains([]string{"get", "update", "patch"}, verb) {
			return false, nil
		}
		subs = []string{r.sub}
	}
	ri := as.Resource(r.gvr()).Namespace(r.ns)
	admin := c.dyn.Resource(r.gvr()).Namespace(r.ns)
	switch verb {
	case "get":
		_, err := ri.Get(ctx, "fx", metav1.GetOptions{}, subs...)
		return true, err
	case "list":
		_, err := ri.List(ctx, metav1.ListOptions{})
		return true, err
	case "watch":
		w, err := ri.Watch(ctx, metav1.ListOptions{TimeoutSeconds: new(int64(1))})
		if err == nil {
			w.Stop()
		}
		return true, err
	case "create":
		o := fixture(base, "")
		o.SetGenerateName("probe-")
		_, err := ri.Create(ctx, o, metav1.CreateOptions{})
		return true, err
	case "update":
		o, err := admin.Get(ctx, "fx", metav1.GetOptions{}, subs...)
		if err != nil {
			return true, fmt.Errorf("admin get: %w", err)
		}
		_, err = ri.Update(ctx, o, metav1.UpdateOptions{}, subs...)
		return true, err
	case "patch":
		patch := `{"metadata":{"annotations":{"debi.io/probe":"x"}}}`
		if r.sub == "scale" {
			patch = `{"spec":{"replicas":1}}`
		}
		_, err := ri.Patch(ctx, "fx", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, subs...)
		return true, err
	case "delete":
		o := fixture(base, "")
		o.SetGenerateName("del-")
		o, err := admin.Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			return true, fmt.Errorf("admin create: %w", err)
		}
		err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		if err != nil {
			_ = admin.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		return true, err
	case "deletecollection":
		// Only where it must be refused: granted, it would remove the fixtures.
		err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "debi.io/probe=none"})
		return true, err
	}
	return false, nil
}
