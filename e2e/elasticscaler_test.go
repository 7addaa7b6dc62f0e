package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/tidal/controller"
)

// Names of the ElasticScaler end-to-end test, in e2eNS.
const (
	esMetricsName = "vllm"          // the MetricsTrigger ElasticScaler and its Deployment (the simulator's)
	esStateName   = "state-scaler"  // the StateTrigger ElasticScaler
	esTidalName   = "tidal-e2e"     // its Tidal
	esStateDeploy = "batch-workers" // the Tidal's Deployment
	esPerPod      = 0.5             // cores one pod carries (the ExternalServer target)
)

// TestElasticScaler runs ElasticScaler objects as policies on real servers — a kube-apiserver
// with the CRDs, Prometheus with debi's rules, Alertmanager, `debi exporter` and `debi webhook`
// with global.elastic_scalers, and the Tidal controller (tidal/controller.Run, in process):
//
//   - StateTrigger: the guide's shape — an ElasticScaler naming a Tidal labelled with the
//     object's name, the Tidal naming a Deployment — with a cron rule a few seconds ahead: the
//     Deployment is at the rule in force at once and at the next rule's replicas at its second
//     (±2 s), through the webhook's Tidal watch and its safe actuator. The exporter never runs
//     the object (no recommendation, no alert).
//   - MetricsTrigger: an ExternalServer object created at run time, its PromQL reading the
//     simulator's demand series, is picked up by the running exporter and webhook and scales the
//     simulator's Deployment up under a demand burst (spec.debi.mode act), through Prometheus,
//     DebiScaleRecommended and Alertmanager.
func TestElasticScaler(t *testing.T) {
	promDir := requireEnv(t, "DEBI_PROMETHEUS_DIR")
	amDir := requireEnv(t, "DEBI_ALERTMANAGER_DIR")
	assets := requireEnv(t, "DEBI_K8S_ASSETS")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	begin := time.Now()

	kubeconfig := startKubeAPIServer(t, assets)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	installCRDs(ctx, t, dyn)

	// The simulator's Deployment at 2 pods for 1 core; the burst asks for 4 cores (8 pods).
	createDeployment(ctx, t, client, esMetricsName, 2, true)
	createDeployment(ctx, t, client, esStateDeploy, 1, false)
	demand := make([]float64, 600)
	for i := range demand {
		demand[i] = 1
	}
	sim := &Sim{Client: client, Namespace: e2eNS, Deployment: esMetricsName, Request: esPerPod, Demand: demand, StartupDelay: 1}
	simL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	simSrv := &http.Server{Handler: sim}
	go simSrv.Serve(simL)
	t.Cleanup(func() { simSrv.Close() })
	simCtx, simCancel := context.WithCancel(ctx)
	defer simCancel()
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(simCtx, time.Second) }()

	debi := buildDebi(t, dir)
	promPort, amPort, expPort, whPort := freePort(t), freePort(t), freePort(t), freePort(t)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	expURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", expPort)
	whURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", whPort)
	token := filepath.Join(dir, "token")
	writeFile(t, token, "e2e-secret-token\n")
	// No policy in the file: every policy comes from an ElasticScaler.
	writeFile(t, filepath.Join(dir, "debi.yml"), fmt.Sprintf(`
global:
  prometheus_url: %s
  interval: 1s
  elastic_scalers: {enabled: true, namespaces: [%s]}
webhook:
  mode: shadow   # the objects' spec.debi.mode (act by default) decides
  bearer_token_file: %s
  leader_election: {enabled: false}
  tidal: {resync_period: 1m}
`, promURL, e2eNS, token))
	writeServerConfigs(t, dir, fmt.Sprintf("http://127.0.0.1:%d", whPort), token, amPort, simL.Addr().String(), expPort, whPort)
	startLoopServers(t, dir, amDir, promDir, debi, kubeconfig, amPort, promPort, whPort)
	startProc(t, dir, "exporter", debi, "exporter", "--config.file="+filepath.Join(dir, "debi.yml"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", expPort), "--kubeconfig="+kubeconfig)
	waitHTTP(t, expURL, 30*time.Second)

	// The Tidal controller, in process (as `debi tidal-controller --no-leader-elect` runs it).
	cctx, ccancel := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- controller.Run(cctx, controller.Options{Client: dyn, Namespaces: []string{e2eNS},
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("component", "tidal-controller")})
	}()
	defer func() {
		ccancel()
		if err := <-cdone; err != nil {
			t.Errorf("tidal controller: %v", err)
		}
	}()
	t.Logf("set-up: %.1fs", time.Since(begin).Seconds())

	t.Run("StateTrigger", func(t *testing.T) {
		stateTrigger(ctx, t, client, dyn, expURL, whURL)
	})
	t.Run("MetricsTrigger", func(t *testing.T) {
		metricsTrigger(ctx, t, client, dyn, sim, promURL, expURL, whURL)
	})
	listObjects(ctx, t, dyn)
	simCancel()
	<-simDone
	t.Logf("wall time %.1fs", time.Since(begin).Seconds())
}

// stateTrigger: the Tidal (rule "earlier" in force, 3 replicas; "soon" a few seconds ahead, 6),
// its StateTrigger ElasticScaler; the Deployment at 3 before the rule's second and at 6 at it.
func stateTrigger(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, expURL, whURL string) {
	fire := time.Now().Add(16 * time.Second).Truncate(time.Second)
	cron := func(at time.Time) string {
		at = at.UTC()
		return fmt.Sprintf("%d %d %d * * *", at.Second(), at.Minute(), at.Hour())
	}
	apply(ctx, t, dyn, tidalGVR, fmt.Sprintf(`
apiVersion: tidal.io/v1alpha1
kind: Tidal
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    elasticscaler.io/name: %[3]s
    elasticscaler.io/namespace: %[2]s
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %[4]s, namespace: %[2]s}
  triggers:
    times:
      rules:
        - {name: earlier, cron: %[5]q, replicas: 3, description: in force at start}
        - {name: soon, cron: %[6]q, replicas: 6, description: a few seconds ahead}
`, esTidalName, e2eNS, esStateName, esStateDeploy, cron(fire.Add(-10*time.Minute)), cron(fire)))
	created := time.Now()
	apply(ctx, t, dyn, elasticscaler.Resource, fmt.Sprintf(`
apiVersion: elasticscaler.io/v1alpha1
kind: ElasticScaler
metadata:
  name: %s
  namespace: %s
spec:
  targetRef: {apiVersion: tidal.io/v1alpha1, kind: Tidal, name: %s}
  trigger:
    type: StateTrigger
    stateTrigger: {}
`, esStateName, e2eNS, esTidalName))
	policy := `policy="` + e2eNS + "." + esStateName + `"`
	h := watchReplicas(ctx, t, client, esStateDeploy)
	waitUntil(t, 10*time.Second, "the StateTrigger policy in the webhook", func() bool {
		return metricValue(t, whURL, "debi_webhook_policy_info", policy) == 1
	})
	t.Logf("StateTrigger policy %s in the webhook %.1fs after the object's creation", policy, time.Since(created).Seconds())
	waitUntil(t, time.Until(fire), "the Deployment at the rule in force (3)", func() bool { return h.current() == 3 })
	t.Logf("%s at 3 (rule earlier) %.1fs after the object's creation, %.1fs before the next rule", esStateDeploy,
		time.Since(created).Seconds(), time.Until(fire).Seconds())
	waitUntil(t, time.Until(fire)+5*time.Second, "the Deployment at the rule soon (6)", func() bool { return h.current() == 6 })
	var at time.Time
	for _, p := range h.points() {
		if p.replicas == 6 {
			at = p.at
			break
		}
	}
	late := at.Sub(fire)
	t.Logf("%s spec.replicas 6 seen by a watch %v after the rule's second (%s UTC)", esStateDeploy, late.Round(time.Millisecond), fire.UTC().Format("15:04:05"))
	if late < -2*time.Second || late > 2*time.Second {
		t.Errorf("at 6 %v after the rule's second, want within ±2 s", late)
	}
	// The exporter never runs a StateTrigger object: no series, so no recommendation to alert on.
	if body, err := fetchMetrics(ctx, expURL); err != nil || strings.Contains(body, policy) {
		t.Errorf("the exporter publishes the StateTrigger policy (err %v)", err)
	}
}

// metricsTrigger: an ExternalServer ElasticScaler created now, on the simulator's demand series;
// a burst from 1 to 4 cores (2 → 8 pods of 0.5 cores) scales the Deployment up.
func metricsTrigger(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, sim *Sim, promURL, expURL, whURL string) {
	h := watchReplicas(ctx, t, client, esMetricsName)
	created := time.Now()
	apply(ctx, t, dyn, elasticscaler.Resource, fmt.Sprintf(`
apiVersion: elasticscaler.io/v1alpha1
kind: ElasticScaler
metadata:
  name: %[1]s
  namespace: %[2]s
  annotations:
    elasticscaler.io/metrics.windowSeconds: "2"
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s}
  minReplicas: 1
  maxReplicas: 10
  trigger:
    type: MetricsTrigger
    metricsTrigger:
      scalingAlgorithm: APA
      metrics:
        - type: ExternalServer
          externalServer:
            metricsName: demand
            target: "%[3]g"
            endpoint: %[4]s/api/v1/query
            query: max(debi_e2e_demand_cores{namespace="%[2]s",deployment="%[1]s"})
  debi:
    mode: act
    historyStep: 1s
    leadTime: 4s
`, esMetricsName, e2eNS, esPerPod, promURL))
	policy := `policy="` + e2eNS + "." + esMetricsName + `"`
	waitUntil(t, 15*time.Second, "the MetricsTrigger policy in the exporter and the webhook", func() bool {
		return metricValue(t, expURL, "debi_policy_info", policy) == 1 && metricValue(t, whURL, "debi_webhook_policy_info", policy) == 1
	})
	t.Logf("MetricsTrigger policy %s in the exporter and the webhook %.1fs after the object's creation", policy, time.Since(created).Seconds())
	// At 1 core the policy keeps 2 pods (the exporter recommends the current size: no alert).
	waitUntil(t, 20*time.Second, "the exporter's recommendation at 2", func() bool {
		return metricValue(t, expURL, "debi_recommended_replicas", policy) == 2
	})
	if n := h.current(); n != 2 {
		t.Fatalf("%s at %d before the burst, want 2", esMetricsName, n)
	}
	// Its status before the burst: validated, no decision yet.
	waitUntil(t, 20*time.Second, "Validated=True on the ElasticScaler", func() bool {
		return esCondition(ctx, t, dyn, esMetricsName, "Validated") == "True"
	})
	if c := esCondition(ctx, t, dyn, esMetricsName, "ScalingCalculated"); c != "" {
		t.Errorf("ScalingCalculated=%s before any decision, want none", c)
	}
	burst := time.Now()
	step := setDemandFrom(sim, 4)
	t.Logf("demand 1 → 4 cores from simulator step %d", step)
	waitUntil(t, 60*time.Second, "the scale-up to 8", func() bool { return h.current() >= 8 })
	var first, eight time.Time
	for _, p := range h.points() {
		if p.replicas > 2 && first.IsZero() {
			first = p.at
		}
		if p.replicas >= 8 && eight.IsZero() {
			eight = p.at
		}
	}
	var steps []string
	for _, p := range h.points() {
		steps = append(steps, fmt.Sprintf("%d at %+.1fs", p.replicas, p.at.Sub(burst).Seconds()))
	}
	t.Logf("%s: first scale-up %.1fs after the burst, at 8 after %.1fs (%s)", esMetricsName,
		first.Sub(burst).Seconds(), eight.Sub(burst).Seconds(), strings.Join(steps, ", "))
	// The status moved with the decisions: the conditions True, desired and current at 8 or more,
	// a last scale time after the burst.
	waitUntil(t, 20*time.Second, "the ElasticScaler's status after the scale-up", func() bool {
		o, err := dyn.Resource(elasticscaler.Resource).Namespace(e2eNS).Get(ctx, esMetricsName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		desired, _, _ := unstructured.NestedInt64(o.Object, "status", "desiredReplicas")
		current, _, _ := unstructured.NestedInt64(o.Object, "status", "currentReplicas")
		last, _, _ := unstructured.NestedString(o.Object, "status", "lastScaleTime")
		at, _ := time.Parse(time.RFC3339, last)
		return desired >= 8 && current >= 8 && !at.Before(burst.Truncate(time.Second)) &&
			esCondition(ctx, t, dyn, esMetricsName, "ScalingCalculated") == "True" &&
			esCondition(ctx, t, dyn, esMetricsName, "MetricsPipeline") == "True" &&
			esCondition(ctx, t, dyn, esMetricsName, "Validated") == "True"
	})
	listObjects(ctx, t, dyn)
	out, err := promQuery(ctx, promURL, fmt.Sprintf(`debi_webhook_decisions_total{%s,source="prometheus"}`, policy))
	if err != nil || !nonEmpty(out) {
		t.Errorf("no webhook decision from Prometheus for %s (err %v)", policy, err)
	}
}

var tidalGVR = schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}

// installCRDs creates deploy/crds/ and waits until both resources are served.
func installCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, f := range []string{"elasticscaler.io_elasticscalers.yaml", "tidal.io_tidals.yaml"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{elasticscaler.Resource, tidalGVR} {
		waitUntil(t, 30*time.Second, gvr.String()+" served", func() bool {
			_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
			return err == nil
		})
	}
}

// apply creates the object of a YAML manifest.
func apply(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, manifest string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// esCondition is the status of a condition of an ElasticScaler ("" when it has none).
func esCondition(ctx context.Context, t *testing.T, dyn dynamic.Interface, name, typ string) string {
	t.Helper()
	o, err := dyn.Resource(elasticscaler.Resource).Namespace(e2eNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// listObjects logs the ElasticScalers and Tidals as kubectl get would list them.
func listObjects(ctx context.Context, t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	for _, gvr := range []schema.GroupVersionResource{elasticscaler.Resource, tidalGVR} {
		l, err := dyn.Resource(gvr).Namespace(e2eNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("list %s: %v", gvr.Resource, err)
			continue
		}
		for _, o := range l.Items {
			st, _, _ := unstructured.NestedMap(o.Object, "status")
			t.Logf("%s %s/%s status %v", gvr.Resource, o.GetNamespace(), o.GetName(), st)
		}
	}
}

// testWriter sends a logger's lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
