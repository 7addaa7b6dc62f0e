package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
)

// TestAdmissionOnAPIServer registers the webhook (a webhookServer, over TLS) as a validating admission
// webhook of the real kube-apiserver for ElasticScaler and Tidal objects (the CRDs of
// deploy/crds), scoped to the test's namespace: the guide's examples are created, each invalid
// variant is refused by the API server with the webhook's field path, and kubectl's table shows
// the printer columns.
func TestAdmissionOnAPIServer(t *testing.T) {
	e := newKubeEnv(t)
	ctx := context.Background()
	dir := t.TempDir()
	certFile, keyFile := testenv.SelfSigned(t, dir)
	webCfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webCfg, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "debi.yml")
	if err := os.WriteFile(cfgFile, []byte("webhook: {allow_unauthenticated: true, tidal: {enabled: false}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := runWebhookTLS(t, webhookOptions{ConfigFile: cfgFile, WebConfigFile: webCfg, RestConfig: e.RC})
	ca, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}

	// The ElasticScaler CRD debi ships. For Tidal the webhook tests' own looser CRD, which every
	// test of this package shares (one API server): the one of deploy/crds would refuse the other
	// tests' Tidal objects (apis' integration test covers it); the webhook validates the guide's
	// Tidal either way.
	e.CRDs(t)
	e.ApplyFile(t, "../../deploy/crds/elasticscaler.io_elasticscalers.yaml", "")
	esGVR := schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}
	tidalGVR := schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}
	for _, gvr := range []schema.GroupVersionResource{esGVR, tidalGVR} {
		testenv.Poll(t, 20*time.Second, gvr.Resource+" served", func() bool {
			_, err := e.Dyn.Resource(gvr).Namespace(e.NS).List(ctx, metav1.ListOptions{})
			return err == nil
		})
	}

	name := "debi-admission-" + e.NS
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validate.debi.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + elasticscaler.AdmissionPath), CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"elasticscaler.io", "tidal.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"elasticscalers", "tidals"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.NS}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To(int32(5)),
		}},
	}
	if _, err := e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	guide := map[string]string{}
	files, _ := filepath.Glob("../../apis/testdata/guide-*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		guide[strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "guide-"), ".yaml")] = string(b)
	}
	create := func(obj string) error {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(obj), &m); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetNamespace(e.NS)
		gvr := esGVR
		if u.GetKind() == "Tidal" {
			gvr = tidalGVR
			// The guide's Tidal targets ai-inference; here the test's namespace.
			_ = unstructured.SetNestedField(u.Object, e.NS, "spec", "targetRef", "namespace")
		}
		_, err := e.Dyn.Resource(gvr).Namespace(e.NS).Create(ctx, u, metav1.CreateOptions{})
		return err
	}
	// The webhook is registered once the API server calls it: a Tidal whose cron no schema can
	// check is refused.
	bad := strings.Replace(guide["tidal"], `"CRON_TZ=Asia/Shanghai 0 0 8 * * *"`, `"CRON_TZ=Asia/Shanghai 0 0 25 * * *"`, 1)
	bad = strings.Replace(bad, "name: tidal-frequent-test", "name: probe", 1)
	var last error
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last answer to the probe: %v", last)
		}
	})
	testenv.Poll(t, 20*time.Second, "the API server calls the admission webhook", func() bool {
		last = create(bad)
		return last != nil && strings.Contains(last.Error(), "denied the request")
	})

	for k, obj := range guide {
		if err := create(obj); err != nil {
			t.Errorf("guide example %s refused: %v", k, err)
		}
	}
	for _, tc := range []struct{ name, base, from, to, want string }{
		{"max below min", "hpa", "maxReplicas: 10", "maxReplicas: 1", "spec.maxReplicas"},
		{"hpa with externalServer", "hpa", "      - type: Resource\n        resource:\n          metricsName: cpu\n          target:\n            type: Utilization\n            averageUtilization: 70",
			"      - type: ExternalServer\n        externalServer: {metricsName: qps, target: \"100\", endpoint: \"http://p:9090/api/v1/query\", query: \"sum(x)\", protocol: http}",
			"spec.trigger.metricsTrigger.metrics[0]"},
		{"state trigger with metricsTrigger", "state-trigger", "    stateTrigger: {}", "    stateTrigger: {}\n    metricsTrigger: {scalingAlgorithm: APA}", "only stateTrigger"},
		{"tidal bad cron", "tidal", `"CRON_TZ=Asia/Shanghai 0 0 8 * * *"`, `"CRON_TZ=Asia/Shanghai 0 0 25 * * *"`, "spec.triggers.times.rules[1].cron"},
		{"no targetRef name", "hpa", "    name: vllm-inference\n", "", "spec.targetRef.name"},
		{"metricsTrigger missing", "state-trigger", "    type: StateTrigger", "    type: MetricsTrigger", "spec.trigger.metricsTrigger"},
		{"invalid metric", "custom-algorithm", `          target: "100"` + "\n", "", "spec.trigger.metricsTrigger.metrics[0]"},
	} {
		obj := strings.Replace(guide[tc.base], tc.from, tc.to, 1)
		if obj == guide[tc.base] {
			t.Fatalf("%s: fixture %s lacks %q", tc.name, tc.base, tc.from)
		}
		// A fresh name, so that "already exists" cannot pass for a refusal.
		obj = strings.Replace(obj, "  name: ", "  name: bad-", 1)
		// Refused on admission with the field path: by the CRD's schema (its CEL rules) where it
		// can say it, else by the webhook.
		err := create(obj)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, tc.want)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
	}

	// kubectl get elasticscalers: the printer columns of the CRD, read as kubectl reads them.
	res := e.Kube.CoreV1().RESTClient().Get().AbsPath("/apis/elasticscaler.io/v1alpha1/namespaces", e.NS, "elasticscalers").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx)
	raw, err := res.Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := yaml.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	t.Logf("kubectl get elasticscalers -n %s: columns %v, %d rows", e.NS, cols, len(table.Rows))
	for _, want := range []string{"Name", "Target", "Algorithm", "Min", "Max", "Current", "Desired", "Validated", "Age"} {
		found := false
		for _, c := range cols {
			found = found || strings.EqualFold(c, want)
		}
		if !found {
			t.Errorf("column %s missing from %v", want, cols)
		}
	}
	if len(table.Rows) != 4 {
		t.Errorf("%d ElasticScalers listed, want the guide's 4", len(table.Rows))
	}
}

// runWebhookTLS starts a webhook (startWebhook) over TLS and returns its https URL.
func runWebhookTLS(t *testing.T, opts webhookOptions) string {
	t.Helper()
	_, addr := startWebhook(t, opts, prometheus.NewRegistry())
	return "https://" + addr
}
