package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/debi-scaler/debi/scaling"
)

// The fault test's workload: a steady demand that drops to a lower one while Prometheus is down.
const (
	faultHigh    = 4.0 // cores: 8 pods' worth of requests
	faultLow     = 1.5 // cores: 3 pods' worth
	faultInitial = 4   // below what faultHigh needs, so that the webhook acts before the fault
	faultSteps   = 240 // the simulator's longest run; the test stops it once recovered
	// faultMaxInputAge is webhook.max_input_age: a few exporter intervals (global.interval 1s).
	faultMaxInputAge = 5 * time.Second
	// faultOutage is how long Prometheus stays down: longer than webhook.max_input_age, the
	// exporter's interval and Prometheus's alert resend window (4 × --rules.alert.resend-delay),
	// so that every component sees the outage and Alertmanager's alert resolves.
	faultOutage = 20 * time.Second
	// faultRecovery bounds the time from the restart to the size the lower demand needs.
	faultRecovery = 60 * time.Second
)

// TestPrometheusKilledAndRestarted runs the closed loop of TestClosedLoop on the same real
// servers, lets the webhook act until the size is steady, then drops the demand and kills
// Prometheus (SIGKILL) two steps later, while a naive loop would scale down. It checks that:
//   - the exporter marks the policy stale and, while stale, never recommends below the current
//     size;
//   - the Deployment's spec.replicas (watched from the start) never decreases while Prometheus
//     is down, nor after its restart until fresh data is there: the exporter no longer stale and
//     Prometheus holding samples of the workload scraped after the restart;
//   - a notification sent to the webhook during the outage with an annotation load asking for a
//     scale-down is answered 200 with a held or annotation-fallback outcome, or a 5xx, and
//     writes nothing; one sent right after the restart, when Prometheus answers from the
//     samples of before the kill, is held (or 5xx);
//   - Prometheus restarted on the same port and TSDB (data kept): the exporter recovers without
//     a restart, but not before Prometheus has scraped its inputs again; the webhook decides
//     again from Prometheus, and the loop reaches the size of the lower demand within
//     faultRecovery and stays there.
func TestPrometheusKilledAndRestarted(t *testing.T) {
	promDir := requireEnv(t, "DEBI_PROMETHEUS_DIR")
	amDir := requireEnv(t, "DEBI_ALERTMANAGER_DIR")
	assets := requireEnv(t, "DEBI_K8S_ASSETS")
	began := time.Now()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	kubeconfig := startKubeAPIServer(t, assets)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	createDeployment(ctx, t, client, e2eName, faultInitial, true)
	hist := watchReplicas(ctx, t, client, e2eName)

	demand := make([]float64, faultSteps)
	for i := range demand {
		demand[i] = faultHigh
	}
	sim := &Sim{Client: client, Namespace: e2eNS, Deployment: e2eName, Request: e2eRequest, Demand: demand, StartupDelay: 1}
	simL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Every scrape of the workload, to tell Prometheus's samples from after its restart.
	scrapes := &scrapeLog{}
	simSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapes.add()
		sim.ServeHTTP(w, r)
	})}
	go simSrv.Serve(simL)
	t.Cleanup(func() { simSrv.Close() })

	debi := buildDebi(t, dir)
	promPort, amPort, expPort, whPort := freePort(t), freePort(t), freePort(t), freePort(t)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	expURL, whURL := fmt.Sprintf("http://127.0.0.1:%d", expPort), fmt.Sprintf("http://127.0.0.1:%d", whPort)
	token := filepath.Join(dir, "token")
	writeFile(t, token, "e2e-secret-token\n")
	// One acting policy, as TestClosedLoop's web policy; the webhook reads its default queries
	// (load, window, load_replicas, stale, age) from Prometheus.
	writeFile(t, filepath.Join(dir, "debi.yml"), fmt.Sprintf(`
global:
  prometheus_url: %s
  interval: 1s
  # About twice the 1 s scrape and evaluation intervals: after the restart, the samples from
  # before the kill are no data (a killed Prometheus writes no staleness markers).
  lookback_delta: 3s
policies:
  - name: %[3]s
    target: {namespace: %[2]s, name: %[3]s}
    algorithm: debi
    model: naive
    request: %[4]g
    history_step: 1s
    lead_time: %[5]s
    queries:
      # The simulator's demand gauge, not irate over the pods' counters as in TestClosedLoop:
      # this test is about faults, and a counter rate moves for a few seconds after a
      # scale-down (a removed pod counts for the range, or, joined on the pods that exist,
      # the others count at their old share), which made 12 → 5 go on to 7 or 4 in some runs.
      # A gauge is also what the production recording rule is to the exporter: after
      # Prometheus is killed and restarted, it answers with the last sample from before.
      demand: max(debi_e2e_demand_cores{namespace="%[2]s",deployment="%[3]s"})
      replicas: max(kube_deployment_spec_replicas{namespace="%[2]s",deployment="%[3]s"})
      ready_replicas: max(kube_deployment_status_replicas_ready{namespace="%[2]s",deployment="%[3]s"})
    scaling: {min_replicas: 1, max_replicas: %[6]d, window: 10s}
    metrics: {window: 2s}
webhook:
  mode: act
  bearer_token_file: %[7]s
  max_input_age: %[8]s
  tidal: {enabled: false}
  leader_election: {enabled: false}
`, promURL, e2eNS, e2eName, e2eRequest, e2eLead, e2eMax, token, faultMaxInputAge))
	writeServerConfigs(t, dir, whURL, token, amPort, simL.Addr().String(), expPort, whPort)

	promBin := filepath.Join(promDir, "prometheus")
	promArgs := []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "tsdb"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort),
		"--rules.alert.resend-delay=1s"}
	startProc(t, dir, "alertmanager", filepath.Join(amDir, "alertmanager"), "--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "am"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=")
	prom := startProc(t, dir, "prometheus", promBin, promArgs...)
	startProc(t, dir, "webhook", debi, "webhook", "--config.file="+filepath.Join(dir, "debi.yml"),
		"--web.listen-address="+strings.TrimPrefix(whURL, "http://"), "--kubeconfig="+kubeconfig)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/-/ready", amPort), 30*time.Second)
	waitHTTP(t, promURL+"/-/ready", 30*time.Second)
	waitHTTP(t, whURL+"/healthz", 30*time.Second)

	simCtx, simStop := context.WithCancel(ctx)
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(simCtx, time.Second) }()
	defer func() { simStop(); <-simDone }()
	// The exporter tries every query once at start-up: give Prometheus two scrapes first.
	waitFor(t, 20*time.Second, func() bool {
		out, err := promQuery(ctx, promURL, `sum(irate(container_cpu_usage_seconds_total{namespace="shop"}[5s]))`)
		return err == nil && len(parseVector(out)) == 1
	})
	startProc(t, dir, "exporter", debi, "exporter", "--config.file="+filepath.Join(dir, "debi.yml"),
		"--web.listen-address="+strings.TrimPrefix(expURL, "http://"))
	exp := watchExporter(ctx, t, expURL+"/metrics")

	// 1. Steady state: the webhook has scaled up from faultInitial and the size has not changed
	// for 8 s.
	high, low := steadySize(faultHigh, faultInitial), steadySize(faultLow, steadySize(faultHigh, faultInitial))
	waitUntil(t, 90*time.Second, "the webhook to scale up and the size to settle", func() bool {
		ch := hist.points()
		return len(ch) > 1 && ch[len(ch)-1].replicas > faultInitial && time.Since(ch[len(ch)-1].at) > 8*time.Second
	})
	steady := hist.current()
	t.Logf("steady state after %v: %d replicas (Algorithm 2 at %.1f cores: %d)", time.Since(began).Round(time.Second), steady, faultHigh, high)
	if d := steady - high; d < -1 || d > 1 {
		t.Errorf("steady size %d, want %d±1 for %.1f cores", steady, high, faultHigh)
	}
	if n := metricValue(t, whURL+"/metrics", "debi_webhook_patches_total", `policy="web"`, `result="success"`); n < 1 {
		t.Fatalf("the webhook has written %v times before the fault, want at least once", n)
	}
	changesBefore := metricValue(t, whURL+"/metrics", "debi_webhook_decisions_total", `policy="web"`, `source="prometheus"`, `result="change"`)

	// 2. The demand drops; two steps later Prometheus is killed. The exporter has seen at most
	// the start of the drop, not enough for its window term to allow a scale-down.
	dropStep := setDemandFrom(sim, faultLow)
	waitUntil(t, 10*time.Second, "two steps of the lower demand", func() bool { return simStep(sim) >= dropStep+2 })
	killProc(t, prom)
	killed := time.Now()
	defer func() {
		if t.Failed() {
			logSeries(t, promURL, "web", killed.Add(-10*time.Second), time.Now())
		}
	}()
	t.Logf("demand %.1f → %.1f cores at step %d; Prometheus killed at step %d, size %d (Algorithm 2 at %.1f cores: %d)",
		faultHigh, faultLow, dropStep, simStep(sim), hist.current(), faultLow, low)

	// 3. The outage. The exporter must say it is stale within a few intervals.
	waitUntil(t, 5*time.Second, "the exporter to mark the policy stale", func() bool {
		s, ok := exp.last()
		return ok && s.at.After(killed) && s.stale == 1
	})
	staleAfter := time.Since(killed)
	// A notification as Alertmanager would send it, whose annotation load asks for a
	// scale-down: the webhook cannot read Prometheus, so it may scale up or hold, never down.
	time.Sleep(time.Until(killed.Add(faultMaxInputAge + 2*time.Second)))
	before := hist.current()
	code, resp := notify(ctx, t, whURL, token, before)
	t.Logf("notification during the outage (load=0.05 at %d replicas): HTTP %d %s", before, code, resp.raw)
	switch {
	case code >= 500:
	case code == http.StatusOK:
		if len(resp.Outcomes) == 0 {
			t.Errorf("HTTP 200 without outcomes: %s", resp.raw)
		}
		for _, o := range resp.Outcomes {
			if o.After < o.Before || (o.Held == "" && o.Source != "annotation") || (o.Written && o.After <= o.Before) {
				t.Errorf("outage: outcome %+v, want held or an annotation fallback that keeps or raises %d", o, o.Before)
			}
		}
	default:
		t.Errorf("outage: HTTP %d, want 200 (held or fallback) or 5xx (retry): %s", code, resp.raw)
	}
	time.Sleep(time.Until(killed.Add(faultOutage)))
	outageFallbacks := metricValue(t, whURL+"/metrics", "debi_webhook_decisions_total", `policy="web"`, `source="annotation"`)

	// 4. Restart on the same port and TSDB, and recovery.
	startProc(t, dir, "prometheus-restarted", promBin, promArgs...)
	restarted := time.Now()
	waitHTTP(t, promURL+"/-/ready", 30*time.Second)
	// Prometheus answers again, from its old samples (no staleness markers: it was killed) until
	// it has scraped anew: a notification now must still be held, by the age of the exporter's
	// last complete step or by its staleness, not decided on the values from before the outage.
	before = hist.current()
	code, resp = notify(ctx, t, whURL, token, before)
	s, ok := exp.last()
	early := !ok || !s.at.After(restarted) || s.stale != 0
	t.Logf("notification %.1fs after the restart (exporter fresh again: %v): HTTP %d %s", time.Since(restarted).Seconds(), !early, code, resp.raw)
	if early {
		switch {
		case code >= 500:
		case code == http.StatusOK && len(resp.Outcomes) > 0:
			for _, o := range resp.Outcomes {
				if o.Held == "" || o.After != o.Before || o.Written {
					t.Errorf("after the restart, before fresh values: outcome %+v, want held at %d", o, o.Before)
				}
			}
		default:
			t.Errorf("after the restart, before fresh values: HTTP %d, want 200 (held) or 5xx: %s", code, resp.raw)
		}
	}
	waitUntil(t, 30*time.Second, "the exporter to publish fresh values again", func() bool {
		s, ok := exp.last()
		return ok && s.at.After(restarted) && s.stale == 0
	})
	var expFresh time.Time // the first sample that said so
	for _, s := range exp.samples() {
		if s.at.After(restarted) && s.stale == 0 {
			expFresh = s.at
			break
		}
	}
	// Fresh data: the exporter is no longer stale and Prometheus holds samples of the workload
	// scraped after the restart; until both, its answers may be the samples from before the kill.
	firstScrape, scraped := scrapes.firstAfter(restarted)
	if !scraped {
		waitUntil(t, 15*time.Second, "Prometheus to scrape the workload again", func() bool {
			_, ok := scrapes.firstAfter(restarted)
			return ok
		})
		firstScrape, _ = scrapes.firstAfter(restarted)
	}
	fresh := expFresh
	if firstScrape.After(fresh) {
		fresh = firstScrape
	}
	// Until Prometheus has scraped the workload again, its answers are the samples from before
	// the kill: a step on them is not fresh, and must not reset the age the webhook checks.
	if expFresh.Before(firstScrape) {
		t.Errorf("the exporter published fresh values (debi_policy_stale 0) %.1fs after the restart, %.1fs before Prometheus scraped the workload again: its step rested on the samples from before the kill, and the webhook's age check (debi_policy_last_success_timestamp_seconds) took them as new",
			expFresh.Sub(restarted).Seconds(), firstScrape.Sub(expFresh).Seconds())
	}
	waitUntil(t, faultRecovery, fmt.Sprintf("the loop to reach %d replicas for %.1f cores", low, faultLow), func() bool {
		return hist.current() == low
	})
	recovered := time.Now()
	time.Sleep(8 * time.Second) // and it stays there
	simStop()
	cancel() // stops the watches
	exp.wait()
	hist.wait()

	// The Deployment's history: no decrease from the kill until fresh data.
	pts := hist.points()
	var lines []string
	for i, p := range pts {
		lines = append(lines, fmt.Sprintf("%d@%+.1fs", p.replicas, p.at.Sub(killed).Seconds()))
		if i > 0 && p.replicas < pts[i-1].replicas && !p.at.Before(killed) && p.at.Before(fresh) {
			t.Errorf("spec.replicas decreased %d → %d at %+.1fs from the kill, before fresh data (%+.1fs)",
				pts[i-1].replicas, p.replicas, p.at.Sub(killed).Seconds(), fresh.Sub(killed).Seconds())
		}
	}
	t.Logf("spec.replicas history (time from the kill): %s", strings.Join(lines, " "))
	for _, p := range pts {
		if p.at.After(recovered) {
			t.Errorf("the size left %d after reaching it: %d at %+.1fs from the kill", low, p.replicas, p.at.Sub(killed).Seconds())
		}
	}

	// The exporter while stale: never a recommendation below its current size nor the
	// Deployment's; stale from staleAfter until the restart.
	staleSamples, bad := 0, 0
	for _, s := range exp.samples() {
		if s.stale == 1 {
			staleSamples++
			if s.recommended < s.current || s.recommended < float64(hist.at(s.at)) {
				bad++
				if bad <= 3 {
					t.Errorf("exporter at %+.1fs from the kill: stale with debi_recommended_replicas %v below the current size (%v, spec %d)",
						s.at.Sub(killed).Seconds(), s.recommended, s.current, hist.at(s.at))
				}
			}
		}
		if s.at.After(killed.Add(staleAfter)) && s.at.Before(restarted) && s.stale != 1 {
			t.Errorf("exporter at %+.1fs from the kill, Prometheus down: debi_policy_stale %v, want 1", s.at.Sub(killed).Seconds(), s.stale)
		}
	}

	// The webhook decided again from Prometheus after the restart.
	changesAfter := metricValue(t, whURL+"/metrics", "debi_webhook_decisions_total", `policy="web"`, `source="prometheus"`, `result="change"`)
	held := metricValue(t, whURL+"/metrics", "debi_webhook_decisions_total", `policy="web"`, `result="held"`)
	if changesAfter <= changesBefore {
		t.Errorf("webhook decisions from Prometheus with a change: %v before the kill, %v at the end; want more", changesBefore, changesAfter)
	}
	t.Logf("outage %.1fs (stale on the exporter %.1fs after the kill, %d stale samples); after the restart: workload scraped at %.1fs, exporter fresh at %.1fs, %d replicas at %.1fs (%.1fs after fresh data); webhook: %v annotation-fallback decisions, %v held decisions in all, %v→%v changes from Prometheus; run time %v",
		restarted.Sub(killed).Seconds(), staleAfter.Seconds(), staleSamples, firstScrape.Sub(restarted).Seconds(), expFresh.Sub(restarted).Seconds(), low,
		recovered.Sub(restarted).Seconds(), recovered.Sub(fresh).Seconds(), outageFallbacks, held, changesBefore, changesAfter,
		time.Since(began).Round(time.Second))
}

// scrapeLog records when Prometheus scraped the workload.
type scrapeLog struct {
	mu sync.Mutex
	at []time.Time
}

func (l *scrapeLog) add() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, time.Now())
}

// firstAfter is the first scrape after t.
func (l *scrapeLog) firstAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.at {
		if a.After(t) {
			return a, true
		}
	}
	return time.Time{}, false
}

// steadySize is the size the debi rule keeps for a constant demand, starting from n replicas.
// At a constant demand the observed load, the naive forecast and the window mean are all
// demand/(n·R), so the loop follows Algorithm 2 until it keeps its size. For 4 cores from 4
// replicas: W = 8/4, n = round((8 + 0.4)/0.7) = 12; for 1.5 cores from 12: round(3.4/0.7) = 5,
// where W = 0.6 is within 10% of U(5) = 0.62.
func steadySize(demand float64, n int32) int32 {
	p := scaling.DefaultParams()
	p.MaxReplicas, p.Window = e2eMax, 10*time.Second
	for range 50 {
		k, _, _ := scaling.Algorithm2(demand/(float64(n)*e2eRequest), n, p)
		if k == n {
			break
		}
		n = k
	}
	return n
}

// setDemandFrom sets the simulator's demand to v from its next step on and returns that step.
func setDemandFrom(s *Sim, v float64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := s.step + 1
	for i := from; i < len(s.Demand); i++ {
		s.Demand[i] = v
	}
	return from
}

func simStep(s *Sim) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// waitUntil polls ok until it holds, failing the test with what after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicaHistory is every spec.replicas a Deployment had, as a watch delivered it.
type replicaHistory struct {
	mu   sync.Mutex
	pts  []replicaPoint
	done chan struct{}
}

type replicaPoint struct {
	at       time.Time
	replicas int32
}

// watchReplicas records the Deployment's spec.replicas from now until ctx is done, every
// change of it, from the object's resource version on (no write can fall between two reads).
func watchReplicas(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) *replicaHistory {
	t.Helper()
	d, err := c.AppsV1().Deployments(e2eNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &replicaHistory{done: make(chan struct{})}
	h.add(*d.Spec.Replicas)
	rv := d.ResourceVersion
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			w, err := c.AppsV1().Deployments(e2eNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				switch d, ok := ev.Object.(*appsv1.Deployment); {
				case ok:
					rv = d.ResourceVersion
					h.add(*d.Spec.Replicas)
				case ev.Type == watch.Error:
					rv = "" // expired: start again from the latest version
				}
			}
			w.Stop()
		}
	}()
	return h
}

func (h *replicaHistory) add(n int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pts) == 0 || h.pts[len(h.pts)-1].replicas != n {
		h.pts = append(h.pts, replicaPoint{time.Now(), n})
	}
}

func (h *replicaHistory) points() []replicaPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]replicaPoint(nil), h.pts...)
}

func (h *replicaHistory) current() int32 {
	pts := h.points()
	return pts[len(pts)-1].replicas
}

// at is the size at time t.
func (h *replicaHistory) at(t time.Time) int32 {
	pts := h.points()
	n := pts[0].replicas
	for _, p := range pts {
		if p.at.After(t) {
			break
		}
		n = p.replicas
	}
	return n
}

func (h *replicaHistory) wait() { <-h.done }

// exporterWatch samples the exporter's /metrics for the web policy every 250 ms.
type exporterWatch struct {
	mu   sync.Mutex
	ss   []exporterSample
	done chan struct{}
}

type exporterSample struct {
	at                          time.Time
	stale, recommended, current float64
}

func watchExporter(ctx context.Context, t *testing.T, url string) *exporterWatch {
	t.Helper()
	w := &exporterWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tk := time.NewTicker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			if body, err := fetchMetrics(ctx, url); err == nil {
				s := exporterSample{at: time.Now()}
				var ok1, ok2, ok3 bool
				s.stale, ok1 = sampleSum(body, "debi_policy_stale", `policy="web"`)
				s.recommended, ok2 = sampleSum(body, "debi_recommended_replicas", `policy="web"`)
				s.current, ok3 = sampleSum(body, "debi_current_replicas", `policy="web"`)
				if ok1 && ok2 && ok3 {
					w.mu.Lock()
					w.ss = append(w.ss, s)
					w.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return w
}

func (w *exporterWatch) samples() []exporterSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]exporterSample(nil), w.ss...)
}

func (w *exporterWatch) last() (exporterSample, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ss) == 0 {
		return exporterSample{}, false
	}
	return w.ss[len(w.ss)-1], true
}

func (w *exporterWatch) wait() { <-w.done }

func fetchMetrics(ctx context.Context, url string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// sampleSum sums the samples of metric name in a text exposition whose labels contain every
// one of match (`key="value"`); ok says whether any matched.
func sampleSum(body, name string, match ...string) (sum float64, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		all := true
		for _, m := range match {
			all = all && strings.Contains(line, m)
		}
		if !all {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum, ok = sum+v, true
		}
	}
	return sum, ok
}

// metricValue is sampleSum on a server's /metrics now (0 when nothing matches).
func metricValue(t *testing.T, url, name string, match ...string) float64 {
	t.Helper()
	body, err := fetchMetrics(context.Background(), url)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	v, _ := sampleSum(body, name, match...)
	return v
}

// notifyAnswer is the webhook's JSON answer to a notification.
type notifyAnswer struct {
	Status   string `json:"status"`
	Error    string `json:"error"`
	Outcomes []struct {
		Source  string `json:"source"`
		Reason  string `json:"reason"`
		Held    string `json:"held"`
		Before  int32  `json:"before"`
		After   int32  `json:"after"`
		Written bool   `json:"written"`
	} `json:"outcomes"`
	raw string
}

// notify posts a firing DebiScaleRecommended for the web policy, as Alertmanager would, whose
// annotations say the load is 0.05 at current replicas: on them alone the rule asks for 2.
func notify(ctx context.Context, t *testing.T, whURL, tokenFile string, current int32) (int, notifyAnswer) {
	t.Helper()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	labels := map[string]string{"alertname": "DebiScaleRecommended", "policy": e2eName, "namespace": e2eNS,
		"workload": e2eName, "severity": "none", "debi_route": "webhook"}
	msg := map[string]any{
		"version": "4", "groupKey": `{}/{debi_route="webhook"}:{policy="web"}`, "status": "firing", "receiver": "debi",
		"groupLabels": map[string]string{"policy": e2eName}, "commonLabels": labels, "commonAnnotations": map[string]string{},
		"externalURL": "http://alertmanager.invalid",
		"alerts": []map[string]any{{
			"status": "firing", "labels": labels,
			"annotations": map[string]string{"load": "0.05", "current_replicas": strconv.Itoa(int(current)), "recommended_replicas": "2"},
			"startsAt":    now.Add(-time.Minute).Format(time.RFC3339Nano), "endsAt": now.Add(time.Minute).Format(time.RFC3339Nano),
			"fingerprint": "0123456789abcdef",
		}},
	}
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, whURL+"/v1/alertmanager", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("notify the webhook: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var a notifyAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Errorf("webhook answer is not JSON (HTTP %d): %q", resp.StatusCode, body)
	}
	a.raw = string(body)
	return resp.StatusCode, a
}

// logSeries logs, one line per series at 1 s resolution, what the loop's decisions rested on
// between from and to: the demand as measured, the exporter's loads, sizes and staleness.
func logSeries(t *testing.T, promURL, policy string, from, to time.Time, extra ...string) {
	t.Helper()
	for _, q := range append([]string{
		`debi_e2e_demand_cores`, fmt.Sprintf(`debi_load_ratio{policy=%q}`, policy), fmt.Sprintf(`debi_current_replicas{policy=%q}`, policy),
		fmt.Sprintf(`debi_recommended_replicas{policy=%q}`, policy), fmt.Sprintf(`debi_policy_stale{policy=%q}`, policy),
		`kube_deployment_spec_replicas`, `kube_deployment_status_replicas_ready`,
	}, extra...) {
		v := url.Values{"query": {q}, "start": {ts(from)}, "end": {ts(to)}, "step": {"1"}}
		body, err := fetchMetrics(context.Background(), promURL+"/api/v1/query_range?"+v.Encode())
		var r struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Values [][2]any          `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		if err != nil || json.Unmarshal([]byte(body), &r) != nil {
			t.Logf("%s: %v", q, err)
			continue
		}
		for _, s := range r.Data.Result {
			var b strings.Builder
			for _, p := range s.Values {
				sec, _ := p[0].(float64)
				val, _ := p[1].(string)
				f, _ := strconv.ParseFloat(val, 64)
				fmt.Fprintf(&b, " %+.0f:%.3g", sec-float64(from.Unix()), f)
			}
			t.Logf("%s %s%s:%s", q, s.Metric["metric"], s.Metric["load"], b.String())
		}
	}
}
