package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/config"
)

var update = flag.Bool("update", false, "rewrite the generated files (as `make generate` does)")

// TestGeneratedFilesAreFresh fails when a generated file under deploy/ differs from what
// hack/gen-deploy writes from rules/, grafana/ and the example configuration, or when a copy
// of a deleted source is left behind.
func TestGeneratedFilesAreFresh(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if _, err := Write(root, files); err != nil {
			t.Fatal(err)
		}
	}
	rules, _ := filepath.Glob(filepath.Join(root, "rules", "*.yaml"))
	dashboards, _ := filepath.Glob(filepath.Join(root, "grafana", "*.json"))
	crds, _ := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	// Two aggregate files, the copy of the example configuration, three files of the webhook's
	// RBAC, one copy per rule file and dashboard, two per CRD (chart, kustomize component),
	// three of the ElasticScaler and Tidal controller RBAC and the elastic-scaler overlay's
	// RoleBindings.
	if want := 6 + len(rules) + len(dashboards) + 2*len(crds) + 4; len(files) != want {
		t.Errorf("generated %d files, want %d", len(files), want)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%s: %v (run `make generate`)", f.Path, err)
			continue
		}
		if !bytes.Equal(b, f.Data) {
			t.Errorf("%s is stale: run `make generate` (or go test ./deploy -run Fresh -update)", f.Path)
		}
	}
	stale, err := Stale(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Errorf("%s has no source any more: run `make generate` to remove it", s)
	}
}

func TestObjectName(t *testing.T) {
	for in, want := range map[string]string{
		"debi.alerts.yaml": "debi-alerts", "debi-policy.json": "debi-policy", "Extra_Rules.yml": "debi-extra-rules",
	} {
		if got := objectName(in); got != want {
			t.Errorf("objectName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrometheusRuleRejectsOtherKeys(t *testing.T) {
	for _, bad := range []string{"groups: []\nextra: 1\n", "rules: []\n", "groups: []\n---\ngroups: []\n"} {
		if _, err := prometheusRule("x.yaml", []byte(bad)); err == nil {
			t.Errorf("prometheusRule accepted %q", bad)
		}
	}
}

// normalize turns decoded YAML or JSON into comparable JSON values.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// ruleSources reads rules/*.yaml as generic values, by PrometheusRule name.
func ruleSources(t *testing.T) map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "rules", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no rules/*.yaml yet")
	}
	out := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out[objectName(filepath.Base(f))] = normalize(t, v["groups"])
	}
	return out
}

// checkPrometheusRules asserts that the PrometheusRules in objs carry exactly the groups of
// rules/*.yaml, one object per file, and that each spec is a valid Prometheus rule file.
func checkPrometheusRules(t *testing.T, objs []*unstructured.Unstructured, namePrefix string) {
	t.Helper()
	want := ruleSources(t)
	got := findAll(objs, "PrometheusRule")
	if len(got) != len(want) {
		t.Errorf("%d PrometheusRules, want one per rule file (%d)", len(got), len(want))
	}
	for _, pr := range got {
		name := strings.TrimPrefix(pr.GetName(), namePrefix)
		if !strings.HasPrefix(name, "debi-") {
			name = "debi-" + name
		}
		groups, _, _ := unstructured.NestedFieldNoCopy(pr.Object, "spec", "groups")
		w, ok := want[name]
		if !ok {
			t.Errorf("PrometheusRule %s has no rule file", pr.GetName())
			continue
		}
		if g := normalize(t, groups); !reflect.DeepEqual(g, w) {
			t.Errorf("PrometheusRule %s: groups differ from rules/ (run `make generate`)", pr.GetName())
		}
		spec, err := sigsyaml.Marshal(pr.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		if _, errs := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler)); len(errs) > 0 {
			t.Errorf("PrometheusRule %s: not a valid rule file: %v", pr.GetName(), errs)
		}
	}
}

// checkDashboards asserts one ConfigMap per grafana/*.json, byte for byte, with the sidecar label.
func checkDashboards(t *testing.T, objs []*unstructured.Unstructured, label string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "grafana", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		key := filepath.Base(f)
		var cm *unstructured.Unstructured
		for _, o := range findAll(objs, "ConfigMap") {
			if _, ok, _ := unstructured.NestedString(o.Object, "data", key); ok {
				cm = o
			}
		}
		if cm == nil {
			t.Errorf("no ConfigMap holds %s", key)
			continue
		}
		found++
		got, _, _ := unstructured.NestedString(cm.Object, "data", key)
		if got != string(want) {
			t.Errorf("ConfigMap %s: %s differs from grafana/%s", cm.GetName(), key, key)
		}
		if cm.GetLabels()[label] != "1" {
			t.Errorf("ConfigMap %s lacks the sidecar label %s=1", cm.GetName(), label)
		}
	}
	if found < 2 {
		t.Errorf("found %d dashboard ConfigMaps, want at least 2", found)
	}
}

// checkConfig loads the configuration of the ConfigMap the Deployments mount with config.Load
// and checks it against the Deployments: the token file is where the Secret is mounted and the
// Lease is in the namespace the leader-election Role is.
func checkConfig(t *testing.T, objs []*unstructured.Unstructured, namespace, mode string) *config.Config {
	t.Helper()
	var cm *unstructured.Unstructured
	for _, o := range findAll(objs, "ConfigMap") {
		if _, ok, _ := unstructured.NestedString(o.Object, "data", "debi.yml"); ok {
			cm = o
		}
	}
	if cm == nil {
		t.Fatal("no ConfigMap with debi.yml")
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "debi.yml")
	cfg, err := config.Load([]byte(raw))
	if err != nil {
		t.Fatalf("ConfigMap %s: debi.yml does not load: %v\n%s", cm.GetName(), err, raw)
	}
	if cfg.Webhook.Mode != mode {
		t.Errorf("the webhook runs in mode %q, want %q (the example: shadow first)", cfg.Webhook.Mode, mode)
	}
	if cfg.Webhook.LeaderElection.Namespace != namespace {
		t.Errorf("leader_election.namespace %q, but the Lease Role is in %q", cfg.Webhook.LeaderElection.Namespace, namespace)
	}
	for _, d := range findAll(objs, "Deployment") {
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		mountedCM := false
		for _, v := range vols {
			if n, _, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); n == cm.GetName() {
				mountedCM = true
			}
		}
		if !mountedCM {
			t.Errorf("Deployment %s does not mount ConfigMap %s", d.GetName(), cm.GetName())
		}
		if !strings.HasSuffix(d.GetName(), "webhook") {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		mounts, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "volumeMounts")
		ok := false
		for _, m := range mounts {
			mm := m.(map[string]any)
			if mm["name"] == "token" && path.Join(mm["mountPath"].(string), "token") == cfg.Webhook.BearerTokenFile {
				ok = true
			}
		}
		if !ok {
			t.Errorf("Deployment %s: no token volume mounted at %s (webhook.bearer_token_file)", d.GetName(), cfg.Webhook.BearerTokenFile)
		}
	}
	return cfg
}

// checkAlertmanagerConfig asserts the route the webhook depends on: the alert's routing label,
// grouping by policy, short intervals (METHOD §8) and the webhook's path and port.
func checkAlertmanagerConfig(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	amc := find(objs, "AlertmanagerConfig", "")
	if amc == nil {
		t.Fatal("no AlertmanagerConfig")
	}
	route, _, _ := unstructured.NestedMap(amc.Object, "spec", "route")
	durations := map[string]time.Duration{"groupWait": 10 * time.Second, "groupInterval": 30 * time.Second, "repeatInterval": 2 * time.Minute}
	for k, max := range durations {
		d, err := model.ParseDuration(fmt.Sprint(route[k]))
		if err != nil || time.Duration(d) > max || d == 0 {
			t.Errorf("route.%s = %v, want a duration in (0, %v] (METHOD §8)", k, route[k], max)
		}
	}
	if fmt.Sprint(route["groupBy"]) != "[policy]" {
		t.Errorf("route.groupBy = %v, want [policy]", route["groupBy"])
	}
	if fmt.Sprint(route["matchers"]) != "[map[matchType:= name:debi_route value:webhook]]" {
		t.Errorf("route.matchers = %v, want debi_route=webhook (rules/debi.alerts.yaml)", route["matchers"])
	}
	recv, _, _ := unstructured.NestedSlice(amc.Object, "spec", "receivers")
	hooks, _, _ := unstructured.NestedSlice(recv[0].(map[string]any), "webhookConfigs")
	url, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "url")
	svc := find(objs, "Service", "")
	for _, s := range findAll(objs, "Service") {
		if strings.HasSuffix(s.GetName(), "webhook") {
			svc = s
		}
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	want := fmt.Sprintf("http://%s.%s.svc:%v/v1/alertmanager", svc.GetName(), "NAMESPACE", ports[0].(map[string]any)["port"])
	if got := anyNamespace(url); got != want {
		t.Errorf("webhook url %s, want %s", url, want)
	}
}

// anyNamespace replaces the namespace of an in-cluster URL by NAMESPACE.
func anyNamespace(url string) string {
	host, rest, _ := strings.Cut(strings.TrimPrefix(url, "http://"), ":")
	parts := strings.Split(host, ".")
	if len(parts) == 3 {
		parts[1] = "NAMESPACE"
	}
	return "http://" + strings.Join(parts, ".") + ":" + rest
}

// TestKustomizeBase renders the base in process with kustomize's krusty and checks its
// contents: the objects, the generated rules and dashboards, the configuration and the route.
func TestKustomizeBase(t *testing.T) {
	objs := renderKustomize(t, "kustomize/base")
	want := []string{
		"AlertmanagerConfig/debi-webhook", "ClusterRole/debi-webhook-scaler",
		"ConfigMap/debi-config", "Deployment/debi-exporter", "Deployment/debi-webhook", "Namespace/debi-system",
		"PodDisruptionBudget/debi-webhook", "Role/debi-webhook-leader-election", "RoleBinding/debi-webhook-leader-election",
		"Service/debi-exporter", "Service/debi-webhook", "ServiceAccount/debi-exporter", "ServiceAccount/debi-webhook",
		"ServiceMonitor/debi-exporter", "ServiceMonitor/debi-webhook",
	}
	got := map[string]bool{}
	for _, n := range inventory(objs) {
		got[n] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("kustomize base lacks %s", w)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" || strings.HasPrefix(o.GetKind(), "Cluster") || o.GetName() == "debi-webhook-scaler" {
			continue
		}
		if o.GetNamespace() != "debi-system" {
			t.Errorf("%s/%s is in namespace %q, want debi-system", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	checkPrometheusRules(t, objs, "")
	checkDashboards(t, objs, "grafana_dashboard")
	cfg := checkConfig(t, objs, "debi-system", config.ModeShadow)
	if len(cfg.Policies) != 0 {
		t.Errorf("the base configures %d policies, want none (the example is an overlay)", len(cfg.Policies))
	}
	checkScalerBindings(t, objs, nil)
	checkScalerRules(t, objs)
	checkAlertmanagerConfig(t, objs)
	checkLeastPrivilege(t, objs)
	checkExporterJob(t, objs)
	checkProbes(t, objs)

	t.Run("example overlay", func(t *testing.T) {
		ex := renderKustomize(t, "kustomize/examples/shop-web")
		if got, want := inventory(ex), append(inventory(objs), "RoleBinding/debi-webhook-scaler"); !reflect.DeepEqual(got, sorted(want)) {
			t.Errorf("the overlay adds more than the scaler RoleBinding:\n got %v\nwant %v", got, sorted(want))
		}
		cfg := checkConfig(t, ex, "debi-system", config.ModeShadow)
		if len(cfg.Policies) != 1 || cfg.Policies[0].Name != "shop-web" {
			t.Errorf("the overlay's policies %v, want shop-web", cfg.Policies)
		}
		checkScalerBindings(t, ex, TargetNamespaces(cfg))
	})
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// checkProbes: both binaries answer the Prometheus family's /-/healthy and /-/ready.
func checkProbes(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, d := range findAll(objs, "Deployment") {
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for probe, want := range map[string]string{"livenessProbe": "/-/healthy", "readinessProbe": "/-/ready"} {
			p, _, _ := unstructured.NestedString(cs[0].(map[string]any), probe, "httpGet", "path")
			if p != want {
				t.Errorf("Deployment %s: %s on %q, want %s", d.GetName(), probe, p, want)
			}
		}
	}
}

// checkScalerBindings: the scaler ClusterRole is bound exactly in the target namespaces, never
// cluster-wide.
func checkScalerBindings(t *testing.T, objs []*unstructured.Unstructured, namespaces []string) {
	t.Helper()
	if find(objs, "ClusterRoleBinding", "") != nil {
		t.Error("a ClusterRoleBinding: the webhook's rights must stay in the target namespaces")
	}
	var got []string
	for _, rb := range findAll(objs, "RoleBinding") {
		if ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "kind"); ref == "ClusterRole" {
			got = append(got, rb.GetNamespace())
		}
	}
	if strings.Join(got, ",") != strings.Join(namespaces, ",") {
		t.Errorf("scaler RoleBindings in %v, want the target namespaces %v", got, namespaces)
	}
}

// checkScalerRules: the scaler ClusterRole grants exactly the rules of deploy/base/webhook-rbac.yaml,
// the webhook's own RBAC (tested there by impersonation).
func checkScalerRules(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "base", "webhook-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := find(decodeObjects(t, b), "ClusterRole", "")
	got := find(objs, "ClusterRole", "")
	if want == nil || got == nil {
		t.Fatalf("ClusterRole missing: deploy/base %v, rendered %v", want != nil, got != nil)
	}
	if w, g := normalize(t, want.Object["rules"]), normalize(t, got.Object["rules"]); !reflect.DeepEqual(w, g) {
		t.Errorf("ClusterRole %s rules differ from deploy/base/webhook-rbac.yaml:\n got %v\nwant %v", got.GetName(), g, w)
	}
}

// checkLeastPrivilege fails on wildcards, on access to Secrets or Pods, and on an exporter that
// can talk to the API server at all.
func checkLeastPrivilege(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, r := range findAll(objs, kind) {
			rules, _, _ := unstructured.NestedSlice(r.Object, "rules")
			for _, rule := range rules {
				s := fmt.Sprint(rule)
				if strings.Contains(s, "*") || strings.Contains(s, "secrets") || strings.Contains(s, "pods") || strings.Contains(s, "delete") {
					t.Errorf("%s %s grants too much: %s", kind, r.GetName(), s)
				}
			}
		}
	}
	for _, sa := range findAll(objs, "ServiceAccount") {
		if strings.HasSuffix(sa.GetName(), "exporter") {
			if v, ok, _ := unstructured.NestedBool(sa.Object, "automountServiceAccountToken"); !ok || v {
				t.Errorf("ServiceAccount %s mounts a token; the exporter needs no API access", sa.GetName())
			}
		}
	}
}

// checkExporterJob: DebiExporterDown watches up{job="debi-exporter"}, so the ServiceMonitor
// must produce that job label whatever the Service's name.
func checkExporterJob(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	alerts, err := os.ReadFile(filepath.Join(root, "rules", "debi.alerts.yaml"))
	if err != nil || !bytes.Contains(alerts, []byte(`job="debi-exporter"`)) {
		return // nothing to agree with
	}
	for _, sm := range findAll(objs, "ServiceMonitor") {
		// Both keep their own labels by default: the exporter's namespace/workload name the
		// scaled workload (as kube-state-metrics' do), the webhook's endpoint is its own.
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for i, ep := range eps {
			if h, _ := ep.(map[string]any)["honorLabels"].(bool); !h {
				t.Errorf("ServiceMonitor %s endpoints[%d]: honorLabels not true", sm.GetName(), i)
			}
		}
	}
	for _, sm := range findAll(objs, "ServiceMonitor") {
		if !strings.HasSuffix(sm.GetName(), "exporter") {
			continue
		}
		if !strings.Contains(fmt.Sprint(sm.Object["spec"]), "replacement:debi-exporter targetLabel:job") {
			t.Errorf("ServiceMonitor %s does not set job=debi-exporter", sm.GetName())
		}
		return
	}
	t.Error("no exporter ServiceMonitor")
}

// TestAlertmanagerExample checks the plain Alertmanager configuration example: the route that
// reaches the webhook repeats about every minute (METHOD §8), and amtool accepts the file when
// DEBI_ALERTMANAGER_DIR points at a built Alertmanager.
func TestAlertmanagerExample(t *testing.T) {
	file := filepath.Join(root, "deploy", "alertmanager", "alertmanager.yml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Route struct {
			Routes []struct {
				Receiver       string   `yaml:"receiver"`
				Matchers       []string `yaml:"matchers"`
				GroupBy        []string `yaml:"group_by"`
				GroupWait      string   `yaml:"group_wait"`
				GroupInterval  string   `yaml:"group_interval"`
				RepeatInterval string   `yaml:"repeat_interval"`
			} `yaml:"routes"`
		} `yaml:"route"`
		Receivers []struct {
			Name           string `yaml:"name"`
			WebhookConfigs []struct {
				URL string `yaml:"url"`
			} `yaml:"webhook_configs"`
		} `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Route.Routes) == 0 {
		t.Fatal("no route")
	}
	r := cfg.Route.Routes[0]
	if fmt.Sprint(r.Matchers) != `[debi_route="webhook"]` || fmt.Sprint(r.GroupBy) != "[policy]" {
		t.Errorf("route matchers %v group_by %v, want debi_route=\"webhook\" and [policy]", r.Matchers, r.GroupBy)
	}
	for name, c := range map[string]struct {
		v   string
		max time.Duration
	}{"group_wait": {r.GroupWait, 10 * time.Second}, "group_interval": {r.GroupInterval, 30 * time.Second}, "repeat_interval": {r.RepeatInterval, 2 * time.Minute}} {
		d, err := model.ParseDuration(c.v)
		if err != nil || time.Duration(d) > c.max {
			t.Errorf("%s = %q, want at most %v (METHOD §8)", name, c.v, c.max)
		}
	}
	found := false
	for _, rc := range cfg.Receivers {
		if rc.Name == r.Receiver && len(rc.WebhookConfigs) == 1 && strings.HasSuffix(rc.WebhookConfigs[0].URL, ":9108/v1/alertmanager") {
			found = true
		}
	}
	if !found {
		t.Errorf("receiver %q has no webhook config for .../v1/alertmanager on port 9108", r.Receiver)
	}
	dir := os.Getenv("DEBI_ALERTMANAGER_DIR")
	if dir == "" {
		t.Log("DEBI_ALERTMANAGER_DIR unset: amtool check-config skipped")
		return
	}
	// amtool resolves credentials_file relative to nothing: point it at a real file.
	tmp := filepath.Join(t.TempDir(), "alertmanager.yml")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, bytes.ReplaceAll(b, []byte("/etc/alertmanager/secrets/debi-webhook-token/token"), []byte(tok)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, "amtool"), "check-config", tmp).CombinedOutput()
	if err != nil {
		t.Errorf("amtool check-config: %v\n%s", err, out)
	}
}
