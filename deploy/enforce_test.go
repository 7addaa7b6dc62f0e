package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// enforceNamespaceLabel rewrites a PrometheusRule's groups as the Prometheus Operator does under
// spec.enforcedNamespaceLabel (pkg/namespacelabeler EnforceNamespaceLabel, with
// prom-label-proxy's injectproxy.PromQLEnforcer, errorOnReplace false): every rule gets the
// label with the rule object's namespace, and every vector selector of its expression — matrix
// selectors' and subqueries' included — drops its own matchers on that label and gains
// label="namespace". The expression is printed back by the PromQL parser, as the Operator does.
func enforceNamespaceLabel(t *testing.T, groups []any, label, namespace string) {
	t.Helper()
	enforced := &labels.Matcher{Name: label, Type: labels.MatchEqual, Value: namespace}
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			lbls, _ := rule["labels"].(map[string]any)
			if lbls == nil {
				lbls = map[string]any{}
				rule["labels"] = lbls
			}
			lbls[label] = namespace
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(toString(rule["expr"]))
			if err != nil {
				t.Fatalf("rule %v: %v", rule, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					var ms []*labels.Matcher
					for _, m := range vs.LabelMatchers {
						if m.Name != label {
							ms = append(ms, m)
						}
					}
					vs.LabelMatchers = append(ms, enforced)
				}
				return nil
			})
			rule["expr"] = expr.String()
		}
	}
}

// TestEnforceNamespaceLabel pins the rewrite to the Operator's on expressions of the kinds
// debi's rules use (the expected strings are injectproxy's output for them).
func TestEnforceNamespaceLabel(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`debi_recommended_replicas != debi_current_replicas`,
			`debi_recommended_replicas{namespace="ns"} != debi_current_replicas{namespace="ns"}`},
		{`rate(x{namespace="shop",a="b"}[5m]) / y`,
			`rate(x{a="b",namespace="ns"}[5m]) / y{namespace="ns"}`},
		{`absent(up{job="j"}) or max_over_time(z[1h:1m])`,
			`absent(up{job="j",namespace="ns"}) or max_over_time(z{namespace="ns"}[1h:1m])`},
		{`x{namespace!="kube-system"} * on (namespace) group_left () y`,
			`x{namespace="ns"} * on (namespace) group_left () y{namespace="ns"}`},
	} {
		groups := []any{map[string]any{"rules": []any{map[string]any{"record": "r", "expr": tc.expr}}}}
		enforceNamespaceLabel(t, groups, "namespace", "ns")
		rule := groups[0].(map[string]any)["rules"].([]any)[0].(map[string]any)
		if got := rule["expr"]; got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.expr, got, tc.want)
		}
		if got := rule["labels"].(map[string]any)["namespace"]; got != "ns" {
			t.Errorf("%s: labels.namespace = %v, want ns", tc.expr, got)
		}
	}
}

// excludedFromEnforcement reads the excludedFromEnforcement block of docs/getting-started.md, the
// Prometheus settings a user copies, and returns the PrometheusRule names it excludes in
// namespace ns.
func excludedFromEnforcement(t *testing.T, ns string) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs/getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(\\s*excludedFromEnforcement:.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/getting-started.md has no yaml block with excludedFromEnforcement")
	}
	var spec struct {
		Excluded []struct{ Group, Resource, Namespace, Name string } `yaml:"excludedFromEnforcement"`
	}
	if err := yaml.Unmarshal(m[1], &spec); err != nil {
		t.Fatalf("docs/getting-started.md excludedFromEnforcement: %v", err)
	}
	out := map[string]bool{}
	for _, e := range spec.Excluded {
		if e.Group == "monitoring.coreos.com" && e.Resource == "prometheusrules" && e.Namespace == ns {
			if e.Name == "" {
				t.Fatal("docs/getting-started.md excludes every PrometheusRule of the namespace: the alerts work under the enforcement and need not be")
			}
			out[e.Name] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/getting-started.md excludes no PrometheusRule of " + ns)
	}
	return out
}

// TestEnforcedNamespaceLabel runs debi's rules as a Prometheus with
// spec.enforcedNamespaceLabel: namespace loads them: the chart rendered in debi-system with
// serviceMonitor.exporterHonorLabels=false, each PrometheusRule rewritten as the Operator
// rewrites it unless docs/getting-started.md excludes it, then promtool test rules over
// testdata/enforced_test.yaml: the workload recording rules still see the workloads' series,
// the scale alert fires with the policy and the workload's namespace (exported_namespace) that
// webhook.TestAlertUnderEnforcedNamespaceLabel posts to the webhook, and the alerts' text names
// the workload. With nothing excluded, testdata/enforced_unexcluded_test.yaml shows the
// workload rules empty.
func TestEnforcedNamespaceLabel(t *testing.T) {
	bin := helmBin(t)
	promtool := filepath.Join(integrationEnv(t, "DEBI_PROMETHEUS_DIR", "the prometheus binary's directory (hack/servers.sh prometheus)"), "promtool")
	const ns = "debi-system"
	objs := helmTemplate(t, bin, ns, append(operatorAPIs, "--set", "serviceMonitor.exporterHonorLabels=false")...)
	for _, sm := range findAll(objs, "ServiceMonitor") {
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		want := !strings.HasSuffix(sm.GetName(), "-exporter")
		for i, ep := range eps {
			if h, _ := ep.(map[string]any)["honorLabels"].(bool); h != want {
				t.Errorf("ServiceMonitor %s endpoints[%d]: honorLabels %v with exporterHonorLabels=false, want %v", sm.GetName(), i, h, want)
			}
		}
	}
	excluded := excludedFromEnforcement(t, ns)
	prs := findAll(objs, "PrometheusRule")
	if len(prs) != 2 {
		t.Fatalf("%d PrometheusRules, want debi-rules and debi-alerts", len(prs))
	}
	run := func(testFile string, exclude map[string]bool) {
		t.Helper()
		dir := t.TempDir()
		for _, pr := range prs {
			if pr.GetNamespace() != "" && pr.GetNamespace() != ns {
				t.Fatalf("PrometheusRule %s in namespace %s, want the release's", pr.GetName(), pr.GetNamespace())
			}
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			if !exclude[pr.GetName()] {
				enforceNamespaceLabel(t, groups, "namespace", ns)
			}
			b, err := yaml.Marshal(map[string]any{"groups": groups})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, pr.GetName()+".yaml"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		data, err := os.ReadFile(filepath.Join("testdata", testFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, testFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(promtool, "test", "rules", testFile)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("promtool test rules %s (excluded: %v): %v\n%s", testFile, exclude, err, out.String())
		}
	}
	for name := range excluded {
		if find(objs, "PrometheusRule", name) == nil {
			t.Errorf("docs/getting-started.md excludes PrometheusRule %s, which the chart does not render", name)
		}
	}
	run("enforced_test.yaml", excluded)
	run("enforced_unexcluded_test.yaml", nil)
}
