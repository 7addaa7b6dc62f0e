package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/debi-scaler/debi/config"
)

const chart = "helm/debi"

// exampleValues is the chart's example policy, the counterpart of the kustomize example overlay.
const exampleValues = chart + "/examples/values-example.yaml"

// operatorAPIs makes helm template see the Prometheus Operator's API versions, as helm install
// does on a cluster that serves them.
var operatorAPIs = []string{"--api-versions", "monitoring.coreos.com/v1", "--api-versions", "monitoring.coreos.com/v1alpha1"}

// operatorKinds are the kinds rendered only where their CRDs are served.
var operatorKinds = []string{"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}

// helmTemplate renders the chart as release "debi" in namespace ns with extra helm flags: the
// release's objects, without its hooks (helmHooks), which are not part of it (the pre-flight
// check's Job and ConfigMap run before it and are deleted after).
func helmTemplate(t *testing.T, bin, ns string, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, _ := helmObjectsAndHooks(t, bin, ns, flags...)
	return objs
}

// helmHooks renders the chart like helmTemplate and returns its hooks only.
func helmHooks(t *testing.T, bin, ns string, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	_, hooks := helmObjectsAndHooks(t, bin, ns, flags...)
	return hooks
}

func helmObjectsAndHooks(t *testing.T, bin, ns string, flags ...string) (objs, hooks []*unstructured.Unstructured) {
	t.Helper()
	args := append([]string{"template", "debi", chart, "--namespace", ns}, flags...)
	for _, o := range decodeObjects(t, helm(t, bin, args...)) {
		if _, ok := o.GetAnnotations()["helm.sh/hook"]; ok {
			hooks = append(hooks, o)
		} else {
			objs = append(objs, o)
		}
	}
	return objs, hooks
}

// TestHelmLint runs helm lint --strict on the chart with its defaults and with every optional
// branch switched on.
func TestHelmLint(t *testing.T) {
	bin := helmBin(t)
	helm(t, bin, "lint", "--strict", chart)
	helm(t, bin, "lint", "--strict", chart, "--values", variantValues(t))
	helm(t, bin, "lint", "--strict", chart, "--values", exampleValues)
	helm(t, bin, "lint", "--strict", chart, "--values", networkTLSValues(t))
}

// TestHelmSchema: values.schema.json rejects wrong types, unknown keys and values outside the
// enums, in helm lint and helm template alike.
func TestHelmSchema(t *testing.T) {
	bin := helmBin(t)
	for _, tc := range []struct{ name, set, want string }{
		{"mode", `config.webhook.mode="bogus"`, "/config/webhook/mode"},
		{"replicas", `webhook.replicas="two"`, "/webhook/replicas"},
		{"log level", `log.level="verbose"`, "/log/level"},
		{"unknown key", `webhook.replica=2`, "replica"},
		{"auto", `serviceMonitor.enabled="yes"`, "/serviceMonitor/enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"template", "lint"} {
				out, err := helmErr(bin, cmd, "debi", chart, "--set-json", tc.set)
				if cmd == "lint" {
					out, err = helmErr(bin, cmd, chart, "--set-json", tc.set)
				}
				if err == nil || !strings.Contains(out, tc.want) {
					t.Errorf("helm %s --set-json %s: err %v, want a schema error naming %s\n%s", cmd, tc.set, err, tc.want, out)
				}
			}
		})
	}
}

// helmErr runs helm expecting it may fail, with a private home; it returns stdout and stderr.
func helmErr(bin string, args ...string) (string, error) {
	home, err := os.MkdirTemp("", "helm")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// networkTLSValues switches on the NetworkPolicies and TLS from an existing Secret.
func networkTLSValues(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	err := os.WriteFile(f, []byte(`
networkPolicy:
  enabled: true
  alertmanager: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}
webhook:
  tls: {enabled: true, secretName: debi-webhook-cert}
log: {level: debug, format: json}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// variantValues turns on the chart's optional branches: namespaced RBAC, Tidal resources, an
// existing Secret, extra labels, and a configuration override.
func variantValues(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	err := os.WriteFile(f, []byte(`
image: {tag: v9.9.9}
config:
  global: {interval: 30s}
  policies:
    - name: shop-api
      target: {kind: StatefulSet, namespace: shop, name: api}
      algorithm: hpa
      request: 0.5
  webhook: {mode: act, tidal: {enabled: true}}
webhook:
  token: {create: false, existingSecret: my-token}
  rbac:
    namespaces: [shop, web]
    tidalResources: [{group: example.com, resource: schedules}]
serviceMonitor: {labels: {release: kube-prometheus-stack}}
prometheusRule: {labels: {release: kube-prometheus-stack}}
dashboards: {namespace: monitoring}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHelmTemplate renders the chart and holds it to the kustomize base: the same objects (the
// chart adds the token Secret, the base the Namespace), the same rules and dashboards, a
// configuration that loads, and the same route to the webhook.
func TestHelmTemplate(t *testing.T) {
	bin := helmBin(t)
	objs := helmTemplate(t, bin, "debi", operatorAPIs...)
	base := renderKustomize(t, "kustomize/base")
	if got, want := inventory(objs, "Secret"), inventory(base, "Namespace"); !reflect.DeepEqual(got, want) {
		t.Errorf("helm and kustomize differ:\nhelm:      %v\nkustomize: %v", got, want)
	}
	checkSameSpecs(t, objs, base)
	if find(objs, "Secret", "debi-webhook-token") == nil {
		t.Error("the chart creates no debi-webhook-token Secret by default")
	}
	checkPrometheusRules(t, objs, "debi-")
	checkDashboards(t, objs, "grafana_dashboard")
	cfg := checkConfig(t, objs, "debi", config.ModeShadow)
	if len(cfg.Policies) != 0 {
		t.Errorf("the chart's defaults configure %d policies, want none (examples/values-example.yaml has one)", len(cfg.Policies))
	}
	checkScalerBindings(t, objs, nil)
	checkProbes(t, objs)
	if dep := find(objs, "Deployment", "debi-webhook"); !strings.Contains(toString(dep.Object), "ghcr.io/debi-scaler/debi:"+chartAppVersion(t)) {
		t.Errorf("the image tag is not the chart's appVersion %s", chartAppVersion(t))
	}

	t.Run("without the Operator", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi")
		for _, k := range operatorKinds {
			if o := find(objs, k, ""); o != nil {
				t.Errorf("%s %s rendered, yet monitoring.coreos.com is not served", k, o.GetName())
			}
		}
		objs = helmTemplate(t, bin, "debi", "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=false")
		if find(objs, "ServiceMonitor", "") == nil || find(objs, "AlertmanagerConfig", "") != nil {
			t.Error("serviceMonitor.enabled=true does not force the ServiceMonitors")
		}
		objs = helmTemplate(t, bin, "debi", append([]string{"--set", "prometheusRule.enabled=false"}, operatorAPIs...)...)
		if find(objs, "PrometheusRule", "") != nil {
			t.Error("prometheusRule.enabled=false still renders PrometheusRules")
		}
	})

	t.Run("example", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", append([]string{"--values", exampleValues}, operatorAPIs...)...)
		overlay := renderKustomize(t, "kustomize/examples/shop-web")
		if got, want := inventory(objs, "Secret"), inventory(overlay, "Namespace"); !reflect.DeepEqual(got, want) {
			t.Errorf("helm with the example values and the example overlay differ:\nhelm:      %v\nkustomize: %v", got, want)
		}
		cfg := checkConfig(t, objs, "debi", config.ModeShadow)
		want := checkConfig(t, overlay, "debi-system", config.ModeShadow)
		if !reflect.DeepEqual(cfg.Policies, want.Policies) {
			t.Errorf("examples/values-example.yaml and the overlay's debi.yml configure different policies:\n%+v\n%+v", cfg.Policies, want.Policies)
		}
		checkScalerBindings(t, objs, TargetNamespaces(cfg))
	})

	t.Run("tidal push token", func(t *testing.T) {
		if find(objs, "Secret", "debi-tidal-push-token") != nil {
			t.Error("a Tidal push token Secret by default; the endpoint is off")
		}
		objs := helmTemplate(t, bin, "debi", append([]string{"--set", "webhook.tidalPush.enabled=true"}, operatorAPIs...)...)
		sec := find(objs, "Secret", "debi-tidal-push-token")
		if sec == nil {
			t.Fatal("webhook.tidalPush.enabled renders no debi-tidal-push-token Secret")
		}
		if tok, _, _ := unstructured.NestedString(sec.Object, "data", "token"); tok == "" {
			t.Error("the Tidal push token Secret has no token")
		}
		cfg := checkConfig(t, objs, "debi", config.ModeShadow)
		if p := cfg.Webhook.Tidal.Push; !p.Enabled || p.BearerTokenFile != "/etc/debi/tidal-push/token" || cfg.Webhook.BearerTokenFile == p.BearerTokenFile {
			t.Errorf("webhook.tidal.push = %+v (Alertmanager token %s), want enabled with its own token file", p, cfg.Webhook.BearerTokenFile)
		}
		dep := toString(find(objs, "Deployment", "debi-webhook").Object)
		if !strings.Contains(dep, "/etc/debi/tidal-push") || !strings.Contains(dep, "debi-tidal-push-token") {
			t.Error("the webhook Deployment does not mount the Tidal push token at /etc/debi/tidal-push")
		}
		objs = helmTemplate(t, bin, "debi", "--set", "webhook.tidalPush.enabled=true", "--set", "webhook.tidalPush.existingSecret=mine")
		if find(objs, "Secret", "debi-tidal-push-token") != nil || !strings.Contains(toString(find(objs, "Deployment", "debi-webhook").Object), "mine") {
			t.Error("existingSecret: the chart still creates its own Secret or does not mount mine")
		}
	})

	t.Run("network policy and TLS", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", append([]string{"--values", networkTLSValues(t)}, operatorAPIs...)...)
		checkNetworkPolicies(t, objs)
		checkTLS(t, objs, "debi-webhook-cert")
	})

	t.Run("cert-manager", func(t *testing.T) {
		flags := []string{"--set", "webhook.tls.enabled=true", "--set", "webhook.tls.certManager.enabled=true", "--set", "webhook.tls.certManager.issuerRef.name=ca"}
		if out, err := helmErr(bin, append([]string{"template", "debi", chart}, flags...)...); err == nil || !strings.Contains(out, "cert-manager.io/v1") {
			t.Errorf("certManager.enabled without cert-manager.io/v1 served: err %v\n%s", err, out)
		}
		objs := helmTemplate(t, bin, "debi", append(append(flags, "--api-versions", "cert-manager.io/v1"), operatorAPIs...)...)
		crt := find(objs, "Certificate", "debi-webhook")
		if crt == nil {
			t.Fatal("no Certificate")
		}
		if s := toString(crt.Object["spec"]); !strings.Contains(s, "secretName:debi-webhook-tls") || !strings.Contains(s, "debi-webhook.debi.svc") || !strings.Contains(s, "name:ca") {
			t.Errorf("Certificate spec %s", s)
		}
		checkTLS(t, objs, "debi-webhook-tls")
	})
	checkScalerRules(t, objs)
	checkAlertmanagerConfig(t, objs)
	checkLeastPrivilege(t, objs)
	checkExporterJob(t, objs)

	t.Run("cluster-wide", func(t *testing.T) {
		objs := helmTemplate(t, bin, "debi", "--set", "webhook.rbac.clusterWide=true")
		crb := find(objs, "ClusterRoleBinding", "debi-webhook-scaler")
		if crb == nil || len(findAll(objs, "RoleBinding")) != 1 {
			t.Error("clusterWide: want one ClusterRoleBinding and only the leader-election RoleBinding")
		}
	})

	t.Run("variant", func(t *testing.T) {
		objs := helmTemplate(t, bin, "ops", append([]string{"--values", variantValues(t)}, operatorAPIs...)...)
		cfg := checkConfig(t, objs, "ops", config.ModeAct)
		if len(cfg.Policies) != 1 || cfg.Policies[0].Name != "shop-api" || cfg.Webhook.Mode != "act" || cfg.Global.Interval.Seconds() != 30 {
			t.Errorf("config override not applied: policies %v, mode %s, interval %v", cfg.Policies, cfg.Webhook.Mode, cfg.Global.Interval)
		}
		if cfg.Global.PrometheusURL == "" {
			t.Error("config override dropped the example's prometheus_url: want a deep merge")
		}
		checkScalerBindings(t, objs, []string{"shop", "web"})
		cr := find(objs, "ClusterRole", "debi-webhook")
		if !strings.Contains(toString(cr.Object["rules"]), "schedules") {
			t.Error("tidalResources not granted in the ClusterRole")
		}
		if find(objs, "Secret", "") != nil {
			t.Error("token.existingSecret set, yet the chart renders a Secret")
		}
		dep := find(objs, "Deployment", "debi-webhook")
		if s := toString(dep.Object); !strings.Contains(s, "secretName:my-token") || !strings.Contains(s, "ghcr.io/debi-scaler/debi:v9.9.9") {
			t.Error("webhook Deployment does not use the existing Secret and the image tag")
		}
		for _, cm := range findAll(objs, "ConfigMap") {
			if strings.HasSuffix(cm.GetName(), "-dashboard") && cm.GetNamespace() != "monitoring" {
				t.Errorf("dashboard ConfigMap %s in %q, want monitoring", cm.GetName(), cm.GetNamespace())
			}
		}
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			if len(findAll(objs, kind)) == 0 {
				t.Errorf("no %s", kind)
			}
			for _, o := range findAll(objs, kind) {
				if o.GetLabels()["release"] != "kube-prometheus-stack" {
					t.Errorf("%s %s lacks the selector label", kind, o.GetName())
				}
			}
		}
	})
}

// checkSameSpecs compares what must not differ between the chart and the base: containers
// (image aside), Service ports, scrape endpoints and the Alertmanager route.
func checkSameSpecs(t *testing.T, helmObjs, baseObjs []*unstructured.Unstructured) {
	t.Helper()
	paths := map[string][][]string{
		"Deployment":          {{"spec", "replicas"}, {"spec", "strategy"}, {"spec", "template", "spec", "containers"}, {"spec", "template", "spec", "securityContext"}, {"spec", "template", "spec", "automountServiceAccountToken"}},
		"Service":             {{"spec", "ports"}},
		"ServiceMonitor":      {{"spec", "endpoints"}},
		"AlertmanagerConfig":  {{"spec", "route"}},
		"PodDisruptionBudget": {{"spec", "minAvailable"}},
	}
	compared := 0
	for kind, ps := range paths {
		for _, h := range findAll(helmObjs, kind) {
			b := find(baseObjs, kind, h.GetName())
			if b == nil {
				continue // the inventory check reports it
			}
			for _, p := range ps {
				hv, _, _ := unstructured.NestedFieldCopy(h.Object, p...)
				bv, _, _ := unstructured.NestedFieldCopy(b.Object, p...)
				if kind == "Deployment" && p[len(p)-1] == "containers" {
					for _, c := range append(hv.([]any), bv.([]any)...) {
						delete(c.(map[string]any), "image")
						delete(c.(map[string]any), "imagePullPolicy")
					}
				}
				if !reflect.DeepEqual(normalize(t, hv), normalize(t, bv)) {
					t.Errorf("%s %s: %s differs between helm and kustomize:\nhelm:      %v\nkustomize: %v", kind, h.GetName(), strings.Join(p, "."), hv, bv)
				}
				compared++
			}
		}
	}
	if compared < 12 {
		t.Errorf("compared only %d fields", compared)
	}
}

// chartAppVersion reads appVersion from Chart.yaml.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %v", err)
	}
	return c.AppVersion
}

// checkNetworkPolicies: the webhook admits Alertmanager and Prometheus on its port, the exporter
// Prometheus alone on its metrics port.
func checkNetworkPolicies(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for name, want := range map[string][]string{
		"debi-webhook":  {"app.kubernetes.io/name:alertmanager", "app.kubernetes.io/name:prometheus", "port:http", "kubernetes.io/metadata.name:monitoring"},
		"debi-exporter": {"app.kubernetes.io/name:prometheus", "port:metrics"},
	} {
		np := find(objs, "NetworkPolicy", name)
		if np == nil {
			t.Errorf("no NetworkPolicy %s", name)
			continue
		}
		s := toString(np.Object["spec"])
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("NetworkPolicy %s lacks %s: %s", name, w, s)
			}
		}
		if name == "debi-exporter" && strings.Contains(s, "alertmanager") {
			t.Errorf("NetworkPolicy %s admits Alertmanager: %s", name, s)
		}
	}
}

// checkTLS: the webhook serves HTTPS from the Secret through --web.config.file, its probes and
// its ServiceMonitor use https, and Alertmanager's receiver is https with the Secret's CA.
func checkTLS(t *testing.T, objs []*unstructured.Unstructured, secret string) {
	t.Helper()
	dep := find(objs, "Deployment", "debi-webhook")
	s := toString(dep.Object)
	for _, w := range []string{"--web.config.file=/etc/debi/webhook-web.yml", "secretName:" + secret, "mountPath:/etc/debi/tls", "scheme:HTTPS"} {
		if !strings.Contains(s, w) {
			t.Errorf("webhook Deployment lacks %s", w)
		}
	}
	var web string
	for _, cm := range findAll(objs, "ConfigMap") {
		if v, ok, _ := unstructured.NestedString(cm.Object, "data", "webhook-web.yml"); ok {
			web = v
		}
	}
	var wc struct {
		TLS struct {
			CertFile string `yaml:"cert_file"`
			KeyFile  string `yaml:"key_file"`
		} `yaml:"tls_server_config"`
	}
	if err := yaml.Unmarshal([]byte(web), &wc); err != nil || wc.TLS.CertFile != "/etc/debi/tls/tls.crt" || wc.TLS.KeyFile != "/etc/debi/tls/tls.key" {
		t.Errorf("webhook-web.yml %q (%v): want tls_server_config with the mounted tls.crt and tls.key", web, err)
	}
	amc := find(objs, "AlertmanagerConfig", "")
	if s := toString(amc.Object["spec"]); !strings.Contains(s, "url:https://debi-webhook.") || !strings.Contains(s, "name:"+secret) || !strings.Contains(s, "key:ca.crt") {
		t.Errorf("AlertmanagerConfig does not reach the webhook over https with the Secret's CA: %s", s)
	}
	sm := find(objs, "ServiceMonitor", "debi-webhook")
	if s := toString(sm.Object["spec"]); !strings.Contains(s, "scheme:https") || !strings.Contains(s, "key:ca.crt") {
		t.Errorf("webhook ServiceMonitor does not scrape over https: %s", s)
	}
}

// TestHelmTokenStable: the webhook's bearer token under helm template, where lookup sees no
// cluster. By default each render draws a new random token, and nothing else differs between
// two renders; with webhook.token.existingSecret (create left at its default, as
// deploy/README.md tells GitOps users to do) the chart renders no Secret at all, the webhook
// and the AlertmanagerConfig read the named one, and two renders are identical byte for byte.
// The same holds for the Tidal push token and webhook.tidalPush.existingSecret.
func TestHelmTokenStable(t *testing.T) {
	bin := helmBin(t)
	render := func(flags ...string) []byte {
		t.Helper()
		return helm(t, bin, append(append([]string{"template", "debi", chart, "--namespace", "debi-system"}, flags...), operatorAPIs...)...)
	}

	t.Run("created", func(t *testing.T) {
		var objs [2][]*unstructured.Unstructured
		var toks [2]string
		for i := range objs {
			objs[i] = decodeObjects(t, render())
			sec := find(objs[i], "Secret", "debi-webhook-token")
			if sec == nil {
				t.Fatal("no debi-webhook-token Secret by default")
			}
			toks[i], _, _ = unstructured.NestedString(sec.Object, "data", "token")
			if toks[i] == "" {
				t.Fatal("the created Secret has no token")
			}
			unstructured.RemoveNestedField(sec.Object, "data", "token")
		}
		if !reflect.DeepEqual(objs[0], objs[1]) {
			t.Error("two renders differ in more than the random token: only the token may change without a cluster to look it up in")
		}
		t.Logf("tokens of two renders equal: %v (lookup finds no Secret under helm template)", toks[0] == toks[1])
	})

	t.Run("existingSecret", func(t *testing.T) {
		flags := []string{"--set", "webhook.token.existingSecret=my-token",
			"--set", "webhook.tidalPush.enabled=true", "--set", "webhook.tidalPush.existingSecret=my-push-token"}
		first := render(flags...)
		if second := render(flags...); !bytes.Equal(first, second) {
			t.Errorf("two renders with existingSecret differ:\n%s", lineDiff(string(first), string(second)))
		}
		objs := decodeObjects(t, first)
		if s := find(objs, "Secret", ""); s != nil {
			t.Errorf("existingSecret set, yet the chart renders Secret %s (a random token on every render)", s.GetName())
		}
		secrets := map[string]string{} // volume name → Secret name
		vols, _, _ := unstructured.NestedSlice(find(objs, "Deployment", "debi-webhook").Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			v := v.(map[string]any)
			name, _, _ := unstructured.NestedString(v, "secret", "secretName")
			secrets[v["name"].(string)] = name
		}
		if secrets["token"] != "my-token" || secrets["tidal-push-token"] != "my-push-token" {
			t.Errorf("the webhook mounts the Secrets %v, want token from my-token and tidal-push-token from my-push-token", secrets)
		}
		amc := find(objs, "AlertmanagerConfig", "")
		if amc == nil {
			t.Fatal("no AlertmanagerConfig")
		}
		recv, _, _ := unstructured.NestedSlice(amc.Object, "spec", "receivers")
		hooks, _, _ := unstructured.NestedSlice(recv[0].(map[string]any), "webhookConfigs")
		if name, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "httpConfig", "authorization", "credentials", "name"); name != "my-token" {
			t.Errorf("the AlertmanagerConfig sends the token of Secret %q, want my-token", name)
		}
	})
}

// TestHelmTokenLookup: on a real kube-apiserver (helm template --dry-run=server, where lookup
// reads the cluster as helm install and helm upgrade do), the chart keeps the token of the
// Secret already there instead of drawing a new one; in a namespace without it, it draws one.
func TestHelmTokenLookup(t *testing.T) {
	bin := helmBin(t)
	c := startCluster(t)
	ctx := context.Background()
	for _, ns := range []string{"debi-system", "fresh"} {
		if err := c.apply(ctx, nsObject(ns), "", false); err != nil {
			t.Fatal(err)
		}
	}
	const token = "the-token-already-in-the-cluster"
	sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": "debi-webhook-token", "namespace": "debi-system"},
		"data":     map[string]any{"token": base64.StdEncoding.EncodeToString([]byte(token))}}}
	if err := c.apply(ctx, sec, "", false); err != nil {
		t.Fatal(err)
	}
	rendered := func(ns string) string {
		t.Helper()
		objs := decodeObjects(t, helm(t, bin, "template", "debi", chart, "--namespace", ns, "--dry-run=server", "--kubeconfig", c.kubeconfig))
		s := find(objs, "Secret", "debi-webhook-token")
		if s == nil {
			t.Fatalf("namespace %s: no debi-webhook-token Secret rendered", ns)
		}
		v, _, _ := unstructured.NestedString(s.Object, "data", "token")
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("namespace %s: token %q: %v", ns, v, err)
		}
		return string(b)
	}
	if got := rendered("debi-system"); got != token {
		t.Errorf("the chart rendered token %q over the Secret's %q: lookup did not keep it", got, token)
	}
	if got := rendered("fresh"); got == "" || got == token {
		t.Errorf("a namespace without the Secret got token %q, want a new random one", got)
	}
}

// lineDiff lists the lines of a that b lacks and the reverse, for a readable failure.
func lineDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out []string
	for l, n := range ca {
		if n > cb[l] {
			out = append(out, "- "+l)
		}
	}
	for l, n := range cb {
		if n > ca[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
