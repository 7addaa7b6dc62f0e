package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/debi-scaler/debi/config"
)

const chart = "helm/debi"

// helmTemplate renders the chart as release "debi" in namespace ns with extra helm flags.
func helmTemplate(t *testing.T, bin, ns string, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", "debi", chart, "--namespace", ns}, flags...)
	return decodeObjects(t, helm(t, bin, args...))
}

// TestHelmLint runs helm lint --strict on the chart with its defaults and with every optional
// branch switched on.
func TestHelmLint(t *testing.T) {
	bin := helmBin(t)
	helm(t, bin, "lint", "--strict", chart)
	helm(t, bin, "lint", "--strict", chart, "--values", variantValues(t))
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
	objs := helmTemplate(t, bin, "debi")
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
	checkScalerBindings(t, objs, TargetNamespaces(cfg))
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
		objs := helmTemplate(t, bin, "ops", "--values", variantValues(t))
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
