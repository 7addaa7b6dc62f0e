package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/internal/testenv"
)

var esGVR = schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}

// startKubeAPIServer starts a real etcd + kube-apiserver with hack/k8s-env.sh (the recipe of
// apis' and deploy's tests) and installs the ElasticScaler CRD of deploy/crds.
func startKubeAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", testenv.APIServer(t))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	return rc
}

func installElasticScalerCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "crds", "elasticscaler.io_elasticscalers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(m)
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crd).Patch(ctx, "elasticscalers.elasticscaler.io", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "debi-test", Force: new(true)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := dyn.Resource(esGVR).Namespace("default").List(ctx, metav1.ListOptions{}); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("elasticscalers not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// elasticScaler is an ExternalServer MetricsTrigger object as the guide writes it.
func elasticScaler(ns, name, target string, maxReplicas int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
			"minReplicas": int64(1), "maxReplicas": int64(maxReplicas),
			"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
				"scalingAlgorithm": "APA",
				"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
					"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
					"query": `sum(rate(http_requests_total{job="vllm"}[1m]))`, "protocol": "http"}}},
			}},
		},
	}}
}

// TestExporterElasticScalers: with global.elastic_scalers on, a running exporter picks up an
// ElasticScaler created at run time, rebuilds its policy when maxReplicas changes, keeps it
// across a reload, and drops its series when the object is deleted; an invalid object is
// rejected without touching the others.
func TestExporterElasticScalers(t *testing.T) {
	began := time.Now()
	rc := startKubeAPIServer(t)
	dyn := dynamic.NewForConfigOrDie(rc)
	kube := kubernetes.NewForConfigOrDie(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installElasticScalerCRD(t, dyn)
	const ns = "ai-inference"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server and CRD ready after %v", time.Since(began).Round(time.Millisecond))

	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(`
global: {interval: 1s, prometheus_url: 'http://prometheus:9090', elastic_scalers: {enabled: true}}
exporter: {batch_queries: false}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: apa
    request: 1
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fakeQuerier{byExpr: map[string]series{"demand": constant(3), "replicas": constant(2), "ready": constant(2),
		`sum(rate(http_requests_total{job="vllm"}[1m]))`:                                         constant(450),
		`max(kube_deployment_spec_replicas{namespace="ai-inference",deployment="vllm"})`:         constant(2),
		`max(kube_deployment_status_replicas_ready{namespace="ai-inference",deployment="vllm"})`: constant(2),
	}}
	l := listen(t)
	reg := prometheus.NewRegistry()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	logs := &testenv.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: f, RestConfig: rc}, logger, reg)
	go func() { done <- serveAndRun(rctx, srv, l) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not stop")
		}
	}()
	metrics := func() string { return scrapeText(l.Addr().String()) }
	waitFor := func(what string, cond func(string) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			body := metrics()
			if cond(body) {
				return time.Since(start)
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("timed out waiting for %s:\n%s", what, grepPolicy(body))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the file's policy", func(b string) bool {
		return strings.Contains(b, `debi_policy_info{algorithm="apa",model="",namespace="shop",policy="web"`)
	})

	const policy = `policy="ai-inference.vllm-scaler"`
	es := dyn.Resource(esGVR).Namespace(ns)
	if _, err := es.Create(ctx, elasticScaler(ns, "vllm-scaler", "vllm", 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitFor("the object's policy", func(b string) bool {
		return strings.Contains(b, `debi_policy_info{algorithm="apa",model="",namespace="ai-inference",`+policy) &&
			strings.Contains(b, `debi_policy_max_replicas{namespace="ai-inference",`+policy+`,workload="vllm",workload_type="deployment"} 10`)
	})
	t.Logf("created → debi_policy_info{%s} on /metrics in %v", policy, d.Round(time.Millisecond))
	// 450 QPS at 100 per pod on 2 pods: utilization 2.25; APA at target 1 → ceil(2 × 2.25) = 5,
	// within ×2 of the current 2 → 4 (maxScaleUpRate 2).
	d = waitFor("the object's recommendation", func(b string) bool {
		return strings.Contains(b, `debi_request_cores{metric="cpu",namespace="ai-inference",`+policy+`,workload="vllm",workload_type="deployment"} 100`) &&
			strings.Contains(b, `debi_recommended_replicas{namespace="ai-inference",`+policy+`,workload="vllm",workload_type="deployment"} 4`)
	})
	t.Logf("its first recommendation (4: 450 QPS / 100 per pod, APA's ×2 rate limit from 2) %v later", d.Round(time.Millisecond))

	// An update: maxReplicas 10 → 3; the policy is rebuilt with it.
	u, err := es.Get(ctx, "vllm-scaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "maxReplicas")
	if _, err := es.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor("max_replicas 3", func(b string) bool {
		return strings.Contains(b, `debi_policy_max_replicas{namespace="ai-inference",`+policy+`,workload="vllm",workload_type="deployment"} 3`) &&
			strings.Contains(b, `debi_recommended_replicas{namespace="ai-inference",`+policy+`,workload="vllm",workload_type="deployment"} 3`)
	})
	t.Logf("maxReplicas 10 → 3: rebuilt, recommendation 3, in %v", d.Round(time.Millisecond))

	// An invalid object (upTolerance not a number) is rejected; the valid one stays.
	bad := elasticScaler(ns, "broken", "other", 5)
	_ = unstructured.SetNestedStringMap(bad.Object, map[string]string{"upTolerance": "lots"}, "spec", "trigger", "metricsTrigger", "algorithmConfig")
	if _, err := es.Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // debounce (1 s) and an apply
	if b := metrics(); strings.Contains(b, `policy="ai-inference.broken"`) || !strings.Contains(b, policy) {
		t.Fatalf("invalid object run, or the valid one dropped:\n%s", grepPolicy(b))
	}
	if want := "elasticscaler ai-inference/broken: spec.trigger.metricsTrigger.algorithmConfig.upTolerance: \\\"lots\\\" is not a number"; !strings.Contains(logs.String(), want) {
		t.Fatalf("log lacks %s:\n%s", want, logs.String())
	}

	// Reload (SIGHUP): the file is loaded again and the object's policy stays.
	if err := srv.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	time.Sleep(time.Second)
	waitFor("the object's policy after Reload", func(b string) bool {
		return strings.Contains(b, `debi_exporter_config_last_reload_successful 1`) &&
			strings.Contains(b, `debi_policy_max_replicas{namespace="ai-inference",`+policy+`,workload="vllm",workload_type="deployment"} 3`) &&
			strings.Contains(b, `policy="web"`)
	})

	// Deletion: the policy's series vanish; the file's policy stays.
	if err := es.Delete(ctx, "vllm-scaler", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor("the object's series gone", func(b string) bool {
		return !strings.Contains(b, policy) && strings.Contains(b, `policy="web"`) && strings.Contains(b, "debi_exporter_policies 1")
	})
	t.Logf("deleted → every series with %s gone in %v; whole test %v", policy, d.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// grepPolicy keeps the lines of /metrics with a policy label, for failure messages.
// scrapeText is the exporter's own metrics page at addr ("" while it does not answer).
func scrapeText(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepPolicy(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, "policy=") && (strings.HasPrefix(l, "debi_policy_info") || strings.HasPrefix(l, "debi_policy_max") ||
			strings.HasPrefix(l, "debi_recommended") || strings.HasPrefix(l, "debi_request")) || strings.HasPrefix(l, "debi_exporter_policies") {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}
