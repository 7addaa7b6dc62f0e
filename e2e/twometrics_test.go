package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The two-metric closed loop: Deployment api scaled on CPU and requests per second together.
const (
	tmName    = "api"
	tmRequest = 0.5 // cores per pod (the cpu metric's request)
	tmTarget  = 0.5 // the hpa rule's target utilization
	tmPerPod  = 10  // requests per second one pod should carry (the rps metric's averageValue)
	tmPhase   = 50  // trace steps (seconds) per phase of the load mix
)

// tmPhases is the load mix, one phase after another: CPU-bound, then request-bound, then
// CPU-bound again, each asking for more pods than the one before, so that every switch of the
// deciding metric is a scale-up the other metric alone would not make.
var tmPhases = []struct {
	cpu, rps float64
	metric   string // the metric that must decide
}{
	{cpu: 2.0, rps: 20, metric: "cpu"},   // cpu: 2/(0.5·0.5) = 8 pods; rps: 20/10 = 2
	{cpu: 0.75, rps: 110, metric: "rps"}, // cpu: 3; rps: 11
	{cpu: 3.5, rps: 30, metric: "cpu"},   // cpu: 14; rps: 3
}

// tmNeed is what metric asks for in phase p: the HPA's count, ceil(value / per-pod target).
func tmNeed(p int) (cpu, rps int32) {
	ph := tmPhases[p]
	return int32(math.Ceil(ph.cpu/(tmRequest*tmTarget) - 1e-9)), int32(math.Ceil(ph.rps/tmPerPod - 1e-9))
}

// TestClosedLoopTwoMetrics scales a Deployment on requests per second and CPU together through
// the whole loop on 127.0.0.1 — simulator (cAdvisor CPU counters and an http_requests_total
// counter per pod) → Prometheus (debi's rules) → debi exporter (one runner per metric) →
// DebiScaleRecommended → Alertmanager → debi webhook (the largest count over the metrics) →
// scale subresource → simulator. The load mix changes twice, and the deciding metric must switch
// with it: at the end of each phase the Deployment is at the count the deciding metric asks for
// (the other asking for less), the exporter's debi_decision_info names that metric, and the
// webhook's Events on the Deployment name it as the one that decided.
func TestClosedLoopTwoMetrics(t *testing.T) {
	promDir := requireEnv(t, "DEBI_PROMETHEUS_DIR")
	amDir := requireEnv(t, "DEBI_ALERTMANAGER_DIR")
	assets := requireEnv(t, "DEBI_K8S_ASSETS")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	kubeconfig := startKubeAPIServer(t, assets)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	createDeployment(ctx, t, client, tmName, 4, true)

	var cpu, rps []float64
	for _, ph := range tmPhases {
		for range tmPhase {
			cpu, rps = append(cpu, ph.cpu), append(rps, ph.rps)
		}
	}
	sim := &Sim{Client: client, Namespace: e2eNS, Deployment: tmName, Request: tmRequest, Demand: cpu, RPS: rps, StartupDelay: 1}
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
	writeFile(t, filepath.Join(dir, "debi.yml"), fmt.Sprintf(`
global:
  prometheus_url: %[1]s
  interval: 1s
policies:
  - name: %[3]s
    target: {namespace: %[2]s, name: %[3]s}
    algorithm: hpa
    history_step: 1s
    lead_time: 4s
    queries:
      replicas: max(kube_deployment_spec_replicas{namespace="%[2]s",deployment="%[3]s"})
      ready_replicas: max(kube_deployment_status_replicas_ready{namespace="%[2]s",deployment="%[3]s"})
    # Seconds for minutes: one trace step per second.
    scaling: {min_replicas: 1, max_replicas: 20, target: %[5]g, scale_down_stabilization: 10s}
    metrics:
      # irate over 1 s scrapes: the loop runs one trace step per second, far faster than the
      # rate1m recording rules a cluster uses.
      - name: cpu
        query: sum(irate(container_cpu_usage_seconds_total{namespace="%[2]s",container="app"}[5s]))
        target: {type: Utilization}
        request: %[4]g
        stabilization: {window: 2s}
      - name: rps
        unit: requests_per_second
        query: sum(irate(http_requests_total{namespace="%[2]s",deployment="%[3]s"}[5s]))
        target: {type: AverageValue, averageValue: "%[6]d"}
        stabilization: {window: 2s}
webhook:
  mode: act
  bearer_token_file: %[7]s
  tidal: {enabled: false}
  leader_election: {enabled: false}
`, promURL, e2eNS, tmName, tmRequest, tmTarget, tmPerPod, filepath.Join(dir, "token")))
	writeServerConfigs(t, dir, fmt.Sprintf("http://127.0.0.1:%d", whPort), filepath.Join(dir, "token"), amPort, simL.Addr().String(), expPort, whPort)

	startLoopServers(t, dir, amDir, promDir, debi, kubeconfig, amPort, promPort, whPort, "--log.level=debug")

	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(ctx, time.Second) }()
	// The exporter tries every query once at start-up: give Prometheus two scrapes of both.
	waitFor(t, 20*time.Second, func() bool {
		out, err := promQuery(ctx, promURL, fmt.Sprintf(`sum(irate(http_requests_total{namespace=%q}[5s])) and sum(irate(container_cpu_usage_seconds_total{namespace=%q}[5s]))`, e2eNS, e2eNS))
		return err == nil && len(parseVector(out)) == 1
	})
	startProc(t, dir, "exporter", debi, "exporter", "--config.file="+filepath.Join(dir, "debi.yml"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", expPort))

	if err := <-simDone; err != nil {
		t.Fatalf("simulator: %v", err)
	}
	recs := sim.Records()
	if len(recs) != len(cpu) {
		t.Fatalf("%d simulator ticks, want %d", len(recs), len(cpu))
	}
	t.Logf("replicas: %v", replicaSeries(recs))
	defer func() {
		if t.Failed() {
			logSeries(t, promURL, tmName, recs[0].Time, recs[len(recs)-1].Time, `ALERTS{policy="api"}`, `debi_decision_info{policy="api"}`,
				`debi_webhook_decisions_total`)
		}
	}()

	// At the end of each phase (its last 10 s, after the loop has had 40 s to settle): the size
	// the deciding metric asks for, and the exporter's deciding metric is that metric.
	for p, ph := range tmPhases {
		needCPU, needRPS := tmNeed(p)
		want := max(needCPU, needRPS)
		end := recs[(p+1)*tmPhase-1]
		var off []string
		for _, r := range recs[(p+1)*tmPhase-10 : (p+1)*tmPhase] {
			if d := r.Replicas - want; d < -1 || d > 1 {
				off = append(off, fmt.Sprintf("step %d: %d", r.Step, r.Replicas))
			}
		}
		if len(off) > 0 {
			t.Errorf("phase %d (cpu %g cores → %d pods, rps %g → %d pods): replicas not at %d±1 at its end: %s",
				p, ph.cpu, needCPU, ph.rps, needRPS, want, strings.Join(off, ", "))
		}
		got, err := decidingMetric(ctx, promURL, end.Time)
		if err != nil {
			t.Fatalf("phase %d: %v", p, err)
		}
		t.Logf("phase %d: cpu %g cores (%d pods), rps %g (%d pods): replicas %d, deciding metric %s", p, ph.cpu, needCPU, ph.rps, needRPS, end.Replicas, got)
		if got != ph.metric {
			t.Errorf("phase %d: the exporter's deciding metric is %q, want %q", p, got, ph.metric)
		}
	}

	// The webhook's Events: the writes name the metric that decided them, and both did.
	evs, err := client.CoreV1().Events(e2eNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + tmName})
	if err != nil {
		t.Fatal(err)
	}
	decided := map[string]int{}
	for _, e := range evs.Items {
		if e.Reason != "DebiScaled" {
			continue
		}
		for _, m := range []string{"cpu", "rps"} {
			if strings.Contains(e.Message, "metric "+m+" decided") {
				decided[m]++
			}
		}
	}
	t.Logf("DebiScaled Events by deciding metric: %v (of %d Events)", decided, len(evs.Items))
	// Each phase's scale-up is a write decided by its metric: cpu twice, rps once (at least).
	if decided["cpu"] < 2 || decided["rps"] < 1 {
		for _, e := range evs.Items {
			t.Logf("event %s: %s", e.Reason, e.Message)
		}
		t.Errorf("the webhook's writes were decided by %v; want cpu at least twice and rps at least once", decided)
	}
}

// decidingMetric is the metric label of the exporter's debi_decision_info for policy api at t.
func decidingMetric(ctx context.Context, promURL string, at time.Time) (string, error) {
	q := url.Values{"query": {fmt.Sprintf(`debi_decision_info{policy=%q}`, tmName)}, "time": {ts(at)}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, promURL+"/api/v1/query?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("debi_decision_info at %v: %w", at, err)
	}
	if len(body.Data.Result) != 1 {
		return "", fmt.Errorf("debi_decision_info at %v: %d series, want 1", at, len(body.Data.Result))
	}
	return body.Data.Result[0].Metric["metric"], nil
}
