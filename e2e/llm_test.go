package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/debi-scaler/debi/grafana"
)

const (
	llmNS      = "llm"
	llmPhase   = 50   // ticks (seconds) per phase
	llmPerPod  = 2000 // prompt tokens per second a prefill pod should carry
	llmPerReq  = 20   // requests in flight a decode pod should carry
	llmStartup = 5    // ticks from a pod's creation to Ready: "five minutes", one tick a minute
)

// llmPhases are the load: quiet, a rush, quiet again, idle (the decode role goes to zero),
// quiet again (it wakes); each role needs its own count.
var llmPhases = []struct{ tokens, concurrency float64 }{{4000, 40}, {16000, 200}, {4000, 40}, {0, 0}, {4000, 40}}

// llmIdle is the idle phase, llmZeroAfter the decode policy's scale_to_zero_after.
const (
	llmIdle      = 3
	llmZeroAfter = 15 * time.Second
)

// TestLLMServing runs the guide of docs/llm-serving.md on real servers: a disaggregated model
// deployment whose prefill role is a Deployment and whose decode role is a custom resource
// with a scale subresource (the simulator is its controller and creates its pods on the API
// server), both exporting vLLM's metric names with a slow start-up → Prometheus (debi's rules)
// → debi exporter (the decode pods found through the custom resource's status.selector and
// published as debi_target_pod_info, its size as debi_target_spec_replicas) →
// DebiScaleRecommended → Alertmanager → debi webhook → the two scale subresources. Each role
// follows its own metric up and down, the decode role's default queries (size and ready count)
// come from the scale subresource, and the measured start-up is the simulator's.
func TestLLMServing(t *testing.T) {
	promDir := requireEnv(t, "DEBI_PROMETHEUS_DIR")
	amDir := requireEnv(t, "DEBI_ALERTMANAGER_DIR")
	assets := requireEnv(t, "DEBI_K8S_ASSETS")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	kubeconfig := startKubeAPIServer(t, assets)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: llmNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := installModelRoleCRD(ctx, t, dyn)
	createLLMRoles(ctx, t, client, dyn, gvr)

	var tokens, conc []float64
	for _, ph := range llmPhases {
		for range llmPhase {
			tokens, conc = append(tokens, ph.tokens), append(conc, ph.concurrency)
		}
	}
	sim := &ModelServers{Kube: client, Dyn: dyn, Namespace: llmNS, Prefill: "prefill", Decode: "decode", DecodeGVR: gvr,
		Tokens: tokens, Concurrency: conc, Batch: 32, StartupDelay: llmStartup}
	simL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	simSrv := &http.Server{Handler: sim}
	go simSrv.Serve(simL)
	t.Cleanup(func() { simSrv.Close() })

	debi := buildDebi(t, dir)
	promPort, amPort, expPort, whPort := freePort(t), freePort(t), freePort(t), freePort(t)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	writeFile(t, filepath.Join(dir, "token"), "e2e-secret-token\n")
	// Seconds for minutes: one trace step per second, irate over 1 s scrapes.
	relabel := func(kind, name string) string {
		return fmt.Sprintf(`namespace_workload_pod:debi_kube_pod_owner:relabel{namespace=%q,workload_type=%q,workload=%q}`, llmNS, kind, name)
	}
	writeFile(t, filepath.Join(dir, "debi.yml"), fmt.Sprintf(`
global:
  prometheus_url: %[1]s
  interval: 1s
policies:
  - name: prefill
    target: {namespace: %[2]s, name: prefill}
    algorithm: hpa
    history_step: 1s
    lead_time: 8s
    scaling: {min_replicas: 1, max_replicas: 20, scale_down_stabilization: 10s}
    metrics:
      - name: prompt_tokens
        unit: items
        query: sum(irate(vllm:prompt_tokens_total[5s]) * on (namespace, pod) group_left () %[3]s)
        target: {type: AverageValue, averageValue: "%[5]d"}
        stabilization: {window: 2s}
  - name: decode
    target: {api_version: serving.example.com/v1, kind: ModelRole, namespace: %[2]s, name: decode}
    algorithm: hpa
    history_step: 1s
    lead_time: 8s
    scaling: {min_replicas: 0, max_replicas: 20, scale_down_stabilization: 10s, scale_to_zero_after: %[8]s}
    metrics:
      - name: concurrency
        unit: items
        query: sum((vllm:num_requests_running + vllm:num_requests_waiting) * on (namespace, pod) group_left () %[4]s)
        target: {type: AverageValue, averageValue: "%[6]d"}
        stabilization: {window: 2s}
      - name: router
        unit: items
        query: sum(llm_router_requests_in_flight{namespace="%[2]s",role="decode"})
        target: {type: AverageValue, averageValue: "%[6]d"}
        stabilization: {window: 2s}
        activation: 0
webhook:
  mode: act
  bearer_token_file: %[7]s
  tidal: {enabled: false}
  leader_election: {enabled: false}
`, promURL, llmNS, relabel("deployment", "prefill"), relabel("modelrole", "decode"), llmPerPod, llmPerReq, filepath.Join(dir, "token"), llmZeroAfter))
	writeServerConfigs(t, dir, fmt.Sprintf("http://127.0.0.1:%d", whPort), filepath.Join(dir, "token"), amPort, simL.Addr().String(), expPort, whPort)

	startLoopServers(t, dir, amDir, promDir, debi, kubeconfig, amPort, promPort, whPort, "--log.level=debug")

	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(ctx, time.Second) }()
	// The exporter publishes the decode pods; it must run before the decode queries have data.
	startProc(t, dir, "exporter", debi, "exporter", "--config.file="+filepath.Join(dir, "debi.yml"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", expPort), "--kubeconfig="+kubeconfig)

	if err := <-simDone; err != nil {
		t.Fatalf("simulator: %v", err)
	}
	recs := sim.Records()
	if len(recs) != len(tokens) {
		t.Fatalf("%d simulator ticks, want %d", len(recs), len(tokens))
	}
	pre, dec := make([]int32, len(recs)), make([]int32, len(recs))
	for i, r := range recs {
		pre[i], dec[i] = r.Prefill, r.Decode
	}
	t.Logf("prefill replicas: %v", pre)
	t.Logf("decode replicas:  %v", dec)
	defer func() {
		if t.Failed() {
			logSeries(t, promURL, "decode", recs[0].Time, recs[len(recs)-1].Time, `debi_target_pod_info`, `debi_target_spec_replicas`,
				`debi_load_ratio{policy="prefill"}`, `debi_recommended_replicas{policy="prefill"}`, `ALERTS`)
		}
	}()

	// At the end of each phase (its last 10 s): each role at the count its own metric asks for,
	// the HPA's ceil(value / averageValue).
	for p, ph := range llmPhases {
		want := [2]int32{int32(math.Ceil(ph.tokens / llmPerPod)), int32(math.Ceil(ph.concurrency / llmPerReq))}
		var off []string
		for _, r := range recs[(p+1)*llmPhase-10 : (p+1)*llmPhase] {
			for k, got := range [2]int32{r.Prefill, r.Decode} {
				if d := got - want[k]; d < -1 || d > 1 {
					off = append(off, fmt.Sprintf("%s at step %d: %d", [2]string{"prefill", "decode"}[k], r.Step, got))
				}
			}
		}
		if len(off) > 0 {
			t.Errorf("phase %d (%g tokens/s → %d prefill pods, %g requests → %d decode pods): not there at its end: %s",
				p, ph.tokens, want[0], ph.concurrency, want[1], strings.Join(off, ", "))
		}
	}
	// The decode role's pods were found through its scale subresource, and its default queries
	// read them.
	for _, q := range []string{
		`count(debi_target_pod_info{policy="decode",workload_type="modelrole"}) > 0`,
		`debi_target_spec_replicas{policy="decode"}`,
		`debi_ready_replicas{policy="decode"} > 0`,
		`sum(debi_webhook_patches_total{policy="decode",result="success"}) > 0`,
	} {
		if out, err := promQuery(ctx, promURL, q); err != nil || !nonEmpty(out) {
			t.Errorf("%s returned nothing (err %v)", q, err)
		}
	}
	checkStartup(ctx, t, promURL, "decode", llmStartup*time.Second)
	checkStartup(ctx, t, promURL, "prefill", llmStartup*time.Second)
	checkFromZero(t, recs)
	checkZeroRow(ctx, t, promURL)
}

// checkZeroRow runs the policy dashboard's scale-to-zero row (grafana.ZeroRow) against the
// loop's Prometheus for the decode policy, which scales to zero: each query returns data.
func checkZeroRow(ctx context.Context, t *testing.T, promURL string) {
	t.Helper()
	qs, err := grafana.Queries()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"policy": "decode", "__range": "2m", "__range_s": "120", "__rate_interval": "15s", "horizon": "5"}
	n := 0
	for _, q := range qs {
		if q.Row != grafana.ZeroRow {
			continue
		}
		n++
		expr := grafana.Expand(q.Expr, vars)
		if out, err := promQuery(ctx, promURL, expr); err != nil || !nonEmpty(out) {
			t.Errorf("dashboard %s, panel %q (%s): %s returned nothing (err %v)", q.Dashboard, q.Panel, q.RefID, expr, err)
		}
	}
	if n == 0 {
		t.Errorf("no query in the dashboards' %q row", grafana.ZeroRow)
	}
}

// checkFromZero: idle, the decode role (min_replicas 0, woken by the router's requests in
// flight) goes to zero after scale_to_zero_after, and stays there while idle; when the requests
// return it wakes, with its five-tick start-up, and reaches its count.
func checkFromZero(t *testing.T, recs []LLMRecord) {
	t.Helper()
	idle, back := recs[llmIdle*llmPhase:(llmIdle+1)*llmPhase], recs[(llmIdle+1)*llmPhase:]
	zeroAt := -1
	for i, r := range idle {
		if r.Decode == 0 {
			zeroAt = i
			break
		}
	}
	switch {
	case zeroAt < 0:
		t.Fatalf("idle for %d s, the decode role never went to zero (scale_to_zero_after %v)", llmPhase, llmZeroAfter)
	case time.Duration(zeroAt)*time.Second < llmZeroAfter:
		t.Errorf("decode at zero %d s into the idle phase, before scale_to_zero_after %v", zeroAt, llmZeroAfter)
	}
	for _, r := range idle[zeroAt:] {
		if r.Decode != 0 {
			t.Errorf("decode woke to %d at step %d with no request in flight", r.Decode, r.Step)
			break
		}
	}
	wokeAt := -1
	for i, r := range back {
		if r.Decode > 0 {
			wokeAt = i
			break
		}
	}
	if wokeAt < 0 {
		t.Fatalf("the requests came back and the decode role stayed at zero")
	}
	want := int32(math.Ceil(llmPhases[llmIdle+1].concurrency / llmPerReq))
	if last := back[len(back)-1]; last.Decode < want || last.DecodeReady < want {
		t.Errorf("decode at %d (%d ready) at the end of the return, want %d", last.Decode, last.DecodeReady, want)
	}
	t.Logf("decode to zero %d s into the idle phase (scale_to_zero_after %v); woken %d s after the requests returned, ready %d ticks later",
		zeroAt, llmZeroAfter, wokeAt, llmStartup)
}

// checkStartup: the exporter's measured start-up of policy's workload is the simulator's within
// one scrape interval (1 s).
func checkStartup(ctx context.Context, t *testing.T, promURL, policy string, want time.Duration) {
	t.Helper()
	out, err := promQuery(ctx, promURL, fmt.Sprintf(`debi_lead_time_seconds{policy=%q,component="startup",quantile="0.5"}`, policy))
	v := parseVector(out)
	switch {
	case err != nil || len(v) == 0:
		t.Errorf("%s: no measured start-up (err %v)", policy, err)
	case math.Abs(v[0]-want.Seconds()) > 1:
		t.Errorf("%s: measured start-up median %vs, the simulator's pods start in %v", policy, v[0], want)
	default:
		t.Logf("%s: measured start-up median %vs (simulator: %v)", policy, v[0], want)
	}
}

// installModelRoleCRD installs ModelRole (serving.example.com/v1), a role adapter whose scale
// subresource reads spec.replicas, status.replicas and status.selector, and waits until it is
// served.
func installModelRoleCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface) schema.GroupVersionResource {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "modelroles.serving.example.com"},
		"spec": map[string]any{
			"group": "serving.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "modelroles", "singular": "modelrole", "kind": "ModelRole"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}, "scale": map[string]any{
					"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "serving.example.com", Version: "v1", Resource: "modelroles"}
	waitFor(t, 30*time.Second, func() bool {
		_, err := dyn.Resource(gvr).Namespace(llmNS).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	return gvr
}

// createLLMRoles creates the prefill Deployment and the decode ModelRole, two replicas each.
func createLLMRoles(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, gvr schema.GroupVersionResource) {
	t.Helper()
	two := int32(2)
	labels := map[string]string{"app": "vllm", "role": "prefill"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "prefill", Namespace: llmNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "registry.invalid/vllm:sim"}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(llmNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.example.com/v1", "kind": "ModelRole",
		"metadata": map[string]any{"name": "decode", "namespace": llmNS},
		"spec":     map[string]any{"replicas": int64(2)},
	}}
	if _, err := dyn.Resource(gvr).Namespace(llmNS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
