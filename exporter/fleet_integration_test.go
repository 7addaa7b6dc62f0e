package exporter

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/internal/testenv"
)

// The fleet: N Deployments in fleetNamespaces namespaces, two pods each, whose CPU demand is
// a daily-shaped wave with its own phase and size, served as cAdvisor and kube-state-metrics
// series (what rules/ turn into the exporter's default inputs).
const (
	fleetNamespaces = 50
	fleetPods       = 2
	fleetRequest    = 0.5 // cores per pod
	fleetPeriod     = 30 * time.Minute
)

// fleetDemand is workload i's demand in cores at t, and fleetCPU its integral per pod (the
// cumulative CPU seconds a cAdvisor counter shows).
func fleetDemand(i int, t time.Time) float64 {
	base, amp, phase := fleetShape(i)
	return base + amp*math.Sin(2*math.Pi*float64(t.UnixMilli())/float64(fleetPeriod.Milliseconds())+phase)
}

func fleetCPU(i int, t time.Time) float64 {
	base, amp, phase := fleetShape(i)
	x := float64(t.UnixMilli()) / 1e3
	w := 2 * math.Pi / fleetPeriod.Seconds()
	return (base*x - amp/w*math.Cos(w*x+phase) + amp/w) / fleetPods
}

// fleetRPS is workload i's request rate at t: proportional to its CPU demand, at 0.5 to 1.5
// times the rate that would need as many pods as the CPU does (200 per core: a core is two
// pods' request, a pod carries 100), so that CPU decides for some workloads and requests per
// second for the others.
func fleetRPS(i int, t time.Time) float64 {
	return 200 * fleetDemand(i, t) * (0.5 + 0.125*float64(i%9))
}

func fleetShape(i int) (base, amp, phase float64) {
	return 0.4 + float64(i%17)/10, 0.3 + float64(i%5)/10, float64(i%97) / 97 * 2 * math.Pi
}

func fleetName(i int) (ns, name string) {
	return fmt.Sprintf("team-%02d", i%fleetNamespaces), fmt.Sprintf("svc-%05d", i)
}

// fleetTarget serves the fleet's series. Its replicas stay at fleetPods: the exporter only
// recommends (no webhook acts), which is what its cost is measured on.
type fleetTarget struct{ n int }

func (f fleetTarget) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	bw := bufio.NewWriterSize(w, 1<<16)
	defer bw.Flush()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fam := func(name, typ string, line func(i int, ns, dep string)) {
		fmt.Fprintf(bw, "# TYPE %s %s\n", name, typ)
		for i := range f.n {
			ns, dep := fleetName(i)
			line(i, ns, dep)
		}
	}
	fam("container_cpu_usage_seconds_total", "counter", func(i int, ns, dep string) {
		for p := range fleetPods {
			fmt.Fprintf(bw, "container_cpu_usage_seconds_total{namespace=%q,pod=\"%s-%d\",container=\"app\",image=\"fleet\"} %.4f\n", ns, dep, p, fleetCPU(i, now))
		}
	})
	fam("kube_pod_owner", "gauge", func(i int, ns, dep string) {
		for p := range fleetPods {
			fmt.Fprintf(bw, "kube_pod_owner{namespace=%q,pod=\"%s-%d\",owner_kind=\"ReplicaSet\",owner_name=\"%s-rs\"} 1\n", ns, dep, p, dep)
		}
	})
	fam("kube_replicaset_owner", "gauge", func(i int, ns, dep string) {
		fmt.Fprintf(bw, "kube_replicaset_owner{namespace=%q,replicaset=\"%s-rs\",owner_kind=\"Deployment\",owner_name=%q} 1\n", ns, dep, dep)
	})
	fam("kube_pod_container_resource_requests", "gauge", func(i int, ns, dep string) {
		for p := range fleetPods {
			fmt.Fprintf(bw, "kube_pod_container_resource_requests{namespace=%q,pod=\"%s-%d\",container=\"app\",resource=\"cpu\",unit=\"core\"} %g\n", ns, dep, p, fleetRequest)
		}
	})
	fam("kube_deployment_spec_replicas", "gauge", func(i int, ns, dep string) {
		fmt.Fprintf(bw, "kube_deployment_spec_replicas{namespace=%q,deployment=%q} %d\n", ns, dep, fleetPods)
	})
	// The second metric of DEBI_FLEET_METRICS=2: each workload's request rate, as a gauge an
	// application (or a recording rule) exports.
	fam("app_requests_per_second", "gauge", func(i int, ns, dep string) {
		fmt.Fprintf(bw, "app_requests_per_second{namespace=%q,deployment=%q} %.4f\n", ns, dep, fleetRPS(i, now))
	})
	fam("kube_deployment_status_replicas_ready", "gauge", func(i int, ns, dep string) {
		fmt.Fprintf(bw, "kube_deployment_status_replicas_ready{namespace=%q,deployment=%q} %d\n", ns, dep, fleetPods)
	})
}

// fleetHistory writes the start-up history the exporter loads (the recorded demand and
// request, and the replicas, one point per history step over [start, end]) as OpenMetrics for
// promtool's importer.
func fleetHistory(t *testing.T, file string, n int, start, end time.Time, step time.Duration) {
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	family := func(name string, line func(i int, ns, dep string, ts time.Time)) {
		fmt.Fprintf(bw, "# TYPE %s gauge\n", name)
		for i := range n {
			ns, dep := fleetName(i)
			for ts := start; !ts.After(end); ts = ts.Add(step) {
				line(i, ns, dep, ts)
			}
		}
	}
	family("namespace_workload:debi_cpu_usage_cores:rate1m", func(i int, ns, dep string, ts time.Time) {
		fmt.Fprintf(bw, "namespace_workload:debi_cpu_usage_cores:rate1m{namespace=%q,workload_type=\"deployment\",workload=%q} %.4f %d\n", ns, dep, fleetDemand(i, ts), ts.Unix())
	})
	family("namespace_workload:debi_cpu_request_per_pod_cores:avg", func(i int, ns, dep string, ts time.Time) {
		fmt.Fprintf(bw, "namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace=%q,workload_type=\"deployment\",workload=%q} %g %d\n", ns, dep, fleetRequest, ts.Unix())
	})
	family("app_requests_per_second", func(i int, ns, dep string, ts time.Time) {
		fmt.Fprintf(bw, "app_requests_per_second{namespace=%q,deployment=%q} %.4f %d\n", ns, dep, fleetRPS(i, ts), ts.Unix())
	})
	family("kube_deployment_spec_replicas", func(i int, ns, dep string, ts time.Time) {
		fmt.Fprintf(bw, "kube_deployment_spec_replicas{namespace=%q,deployment=%q} %d %d\n", ns, dep, fleetPods, ts.Unix())
	})
	fmt.Fprintln(bw, "# EOF")
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// envInt and envDuration read the fleet's settings from the environment (make bench-fleet).
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: want a duration", name, s)
	}
	return v
}

// exporterMetrics scrapes an exporter's own metrics.
func exporterMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape the exporter: %v", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exporter's metrics: %v", err)
	}
	return mf
}

// sumOf sums a family's values (counters, gauges, histogram sums or counts) over the series
// whose labels include match.
func sumOf(mf map[string]*dto.MetricFamily, name string, match map[string]string, count bool) float64 {
	f, ok := mf[name]
	if !ok {
		return 0
	}
	var s float64
metrics:
	for _, m := range f.Metric {
		for k, v := range match {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			if !found {
				continue metrics
			}
		}
		switch {
		case m.Counter != nil:
			s += m.Counter.GetValue()
		case m.Gauge != nil:
			s += m.Gauge.GetValue()
		case m.Histogram != nil && count:
			s += float64(m.Histogram.GetSampleCount())
		case m.Histogram != nil:
			s += m.Histogram.GetSampleSum()
		}
	}
	return s
}

// byPolicy is a gauge's value by policy.
func byPolicy(mf map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	if f, ok := mf[name]; ok {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "policy" && m.Gauge != nil {
					out[l.GetValue()] = m.Gauge.GetValue()
				}
			}
		}
	}
	return out
}

// countOf is the number of series of a family whose value is v.
func countOf(mf map[string]*dto.MetricFamily, name string, v float64) int {
	n := 0
	if f, ok := mf[name]; ok {
		for _, m := range f.Metric {
			if m.Gauge != nil && m.Gauge.GetValue() == v {
				n++
			}
		}
	}
	return n
}

// TestFleet runs one `debi exporter` process (GOMAXPROCS=1: one core) with N policies on a
// fleet of N Deployments whose cAdvisor and kube-state-metrics series a real Prometheus scrapes
// and turns into the exporter's default inputs with rules/, and whose start-up history
// promtool imported. Every policy is a debi policy with the holtwinters model, retraining in
// the background. Between two snapshots of the exporter's own metrics, after its history is
// loaded and every model trained, it measures the loop time, the queries sent per interval,
// the process's CPU and memory per policy and Prometheus's time per query, and prints them as
// one line. It asserts that every policy is published fresh, that the queries per interval are
// at most 10 per template, and that the models were trained. With DEBI_FLEET_METRICS=2 every
// policy scales on CPU and on requests per second (a runner each, five query templates), and
// it asserts that both metrics decide, each for some of the policies.
//
// make bench-fleet N=1000 (or N=10000; METRICS=2) runs it at scale (hack/bench-fleet.sh); the
// test suite runs it with DEBI_FLEET_N unset (300 policies, a 5 s interval, two metrics each).
// DEBI_FLEET_SOAK=1h runs the fleet that long and writes heap profiles from before and after
// into DEBI_FLEET_OUT.
func TestFleet(t *testing.T) {
	dir := testenv.Env(t, "DEBI_PROMETHEUS_DIR", "a directory with prometheus and promtool 3.x")
	n := envInt(t, "DEBI_FLEET_N", 300)
	interval := envDuration(t, "DEBI_FLEET_INTERVAL", 5*time.Second)
	steps := envInt(t, "DEBI_FLEET_STEPS", 6)
	soak := envDuration(t, "DEBI_FLEET_SOAK", 0)
	retrain := envInt(t, "DEBI_FLEET_RETRAIN", 10)    // history steps (of 1 m) between trainings
	batch := os.Getenv("DEBI_FLEET_BATCH") != "false" // false: per-policy queries, for the A/B
	metrics := envInt(t, "DEBI_FLEET_METRICS", 1)     // 2: every policy scales on CPU and requests per second
	if metrics > 2 {
		t.Fatalf("DEBI_FLEET_METRICS=%d: 1 or 2", metrics)
	}
	out := os.Getenv("DEBI_FLEET_OUT")
	if soak > 0 && out == "" {
		t.Fatal("DEBI_FLEET_SOAK needs DEBI_FLEET_OUT, a directory for the heap profiles")
	}
	const historyStep = time.Minute
	const history = 70 // 2 seasons of 30 m and some: holtwinters trains at start-up
	tmp := t.TempDir()
	began := time.Now()

	// The history: 70 one-minute points ending a step before now, imported by promtool.
	end := time.Now().Add(-historyStep).Truncate(historyStep)
	start := end.Add(-(history - 1) * historyStep)
	om := filepath.Join(tmp, "history.om")
	fleetHistory(t, om, n, start, end, historyStep)
	data := filepath.Join(tmp, "data")
	t0 := time.Now()
	if out, err := exec.Command(filepath.Join(dir, "promtool"), "tsdb", "create-blocks-from", "openmetrics", "-q", om, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	os.Remove(om)
	t.Logf("history: %d points of 4 series for %d workloads imported in %v", history, n, time.Since(t0).Round(time.Millisecond))

	target := listen(t)
	srv := &http.Server{Handler: fleetTarget{n}, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(target)
	t.Cleanup(func() { srv.Close() })
	expL := listen(t)
	expAddr := expL.Addr().String()
	expL.Close()
	rules, err := filepath.Abs("../rules")
	if err != nil {
		t.Fatal(err)
	}
	scrape := min(interval, 15*time.Second)
	promCfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files:
  - %[2]s/debi.rules.yaml
scrape_configs:
  - job_name: fleet
    honor_labels: true
    static_configs: [{targets: [%[3]q]}]
  - job_name: debi-exporter
    honor_labels: true
    static_configs: [{targets: [%[4]q]}]
`, model.Duration(scrape), rules, target.Addr().String(), expAddr)
	promFile := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(promFile, []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	promAddr := l.Addr().String()
	l.Close()
	testenv.Start(t, tmp, "prometheus", filepath.Join(dir, "prometheus"), "--config.file="+promFile,
		"--storage.tsdb.path="+data, "--storage.tsdb.retention.time=30d", "--web.listen-address="+promAddr, "--log.level=warn")
	c, err := api.NewClient(api.Config{Address: "http://" + promAddr})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(c)
	fleetEventually(t, 60*time.Second, "prometheus ready", func() (bool, string) {
		resp, err := http.Get("http://" + promAddr + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	// The rules have recorded the demand of every workload (two scrapes for rate): samples of
	// the last two evaluations, not the imported history's.
	fleetEventually(t, 3*time.Minute, "recorded demand of every workload", func() (bool, string) {
		v, err := fleetScalar(prom, fmt.Sprintf(`count(time() - timestamp(namespace_workload:debi_cpu_usage_cores:rate1m) < %g)`, 2*scrape.Seconds()))
		return err == nil && v == float64(n), fmt.Sprintf("%v workloads (%v)", v, err)
	})

	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  prometheus_url: http://%s\n  interval: %s\n", promAddr, model.Duration(interval))
	fmt.Fprintf(&cfg, "exporter: {history_lookback: %s, batch_queries: %v}\npolicies:\n", model.Duration(history*historyStep), batch)
	for i := range n {
		ns, dep := fleetName(i)
		ms := ""
		if metrics == 2 {
			// cpu on the rules' default queries, rps on its own; each its own runner.
			ms = fmt.Sprintf(`, metrics: [{name: cpu, target: {type: Utilization}}, {name: rps, unit: requests_per_second, query: 'sum(app_requests_per_second{namespace="%s",deployment="%s"})', target: {type: AverageValue, averageValue: "100"}}]`, ns, dep)
		}
		fmt.Fprintf(&cfg, "  - {name: %s.%s, target: {namespace: %s, name: %s}, model: holtwinters, history_step: %s, history: %d, season: %s, retrain: %d, scaling: {max_replicas: 50}%s}\n",
			ns, dep, ns, dep, model.Duration(historyStep), history, model.Duration(fleetPeriod), retrain, ms)
	}
	cfgFile := filepath.Join(tmp, "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildDebiBinary(t, tmp)
	t.Setenv("GOMAXPROCS", "1") // the exporter on one core
	proc := testenv.Start(t, tmp, "exporter", bin, "exporter", "--config.file="+cfgFile, "--web.listen-address="+expAddr, "--log.level=warn")
	expStart := time.Now()

	// Warm: every policy fresh (its history loaded, its inputs answered) and trained once.
	fleetEventually(t, 5*time.Minute+time.Duration(n)*100*time.Millisecond, "every policy fresh and trained", func() (bool, string) {
		resp, err := http.Get("http://" + expAddr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		mf, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			return false, err.Error()
		}
		fresh := countOf(mf, "debi_policy_stale", 0)
		trained := 0
		if f, ok := mf["debi_model_last_train_timestamp_seconds"]; ok {
			trained = len(f.Metric)
		}
		return fresh == n && trained == n, fmt.Sprintf("%d of %d fresh, %d trained", fresh, n, trained)
	})
	warm := time.Since(expStart)

	type snap struct {
		loops, loopSum, instant, ranged, cpu, batchN, batchSum, heap, rss, trainSum float64
		lastTrain                                                                   map[string]float64
	}
	take := func() snap {
		mf := exporterMetrics(t, expAddr)
		return snap{
			loops:   sumOf(mf, "debi_exporter_loop_duration_seconds", nil, true),
			loopSum: sumOf(mf, "debi_exporter_loop_duration_seconds", nil, false),
			instant: sumOf(mf, "debi_exporter_prometheus_queries_total", map[string]string{"type": "instant"}, false),
			ranged:  sumOf(mf, "debi_exporter_prometheus_queries_total", map[string]string{"type": "range"}, false),
			cpu:     sumOf(mf, "process_cpu_seconds_total", nil, false),
			// Every instant query sent: a policy query answered by a batch is not timed.
			batchN:    sumOf(mf, "debi_exporter_query_duration_seconds", map[string]string{"type": "instant"}, true),
			batchSum:  sumOf(mf, "debi_exporter_query_duration_seconds", map[string]string{"type": "instant"}, false),
			heap:      sumOf(mf, "go_memstats_heap_inuse_bytes", nil, false),
			rss:       sumOf(mf, "process_resident_memory_bytes", nil, false),
			trainSum:  sumOf(mf, "debi_model_train_duration_seconds", nil, false),
			lastTrain: byPolicy(mf, "debi_model_last_train_timestamp_seconds"),
		}
	}
	heapProfile := func(name string) {
		if out == "" {
			return
		}
		resp, err := http.Get("http://" + expAddr + "/debug/pprof/heap?gc=1")
		if err != nil {
			t.Fatalf("heap profile: %v", err)
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	a := take()
	heapProfile("heap-before.pb.gz")
	wait := time.Duration(steps) * interval
	if soak > wait {
		wait = soak
	}
	time.Sleep(wait)
	heapProfile("heap-after.pb.gz")
	b := take()
	if proc.ProcessState != nil {
		t.Fatalf("the exporter exited: %v", proc.ProcessState)
	}
	loops := b.loops - a.loops
	if loops < 1 {
		t.Fatalf("no loop in %v", wait)
	}
	templates := 4.0 // replicas, ready replicas, request, demand: the default queries
	if metrics == 2 {
		templates = 5 // and the second metric's demand (its AverageValue target has no request)
	}
	perInterval := (b.instant - a.instant + b.ranged - a.ranged) / loops
	line := fmt.Sprintf("policies=%d metrics_per_policy=%d loop_seconds=%.3f queries_per_interval=%.1f bytes_per_policy=%.0f prometheus_query_seconds=%.4f cpu_seconds_per_interval=%.3f rss_bytes_per_policy=%.0f interval=%s loops=%.0f warm_seconds=%.0f",
		n, metrics, (b.loopSum-a.loopSum)/loops, perInterval, b.heap/float64(n), (b.batchSum-a.batchSum)/math.Max(b.batchN-a.batchN, 1),
		(b.cpu-a.cpu)/loops, b.rss/float64(n), interval, loops, warm.Seconds())
	line += fmt.Sprintf(" prometheus_seconds_per_interval=%.3f batch_queries=%v", (b.batchSum-a.batchSum)/loops, batch)
	retrained := 0
	for p, v := range b.lastTrain {
		if v > a.lastTrain[p] {
			retrained++
		}
	}
	line += fmt.Sprintf(" retrained_policies=%d", retrained)
	if soak > 0 {
		line += fmt.Sprintf(" soak=%s heap_before=%.0f heap_after=%.0f", soak, a.heap, b.heap)
	}
	t.Log(line)
	fmt.Println("FLEET " + line)

	mf := exporterMetrics(t, expAddr)
	if fresh := countOf(mf, "debi_policy_stale", 0); fresh != n {
		t.Errorf("%d of %d policies fresh at the end", fresh, n)
	}
	if metrics == 2 {
		// Both metrics decide, each for some of the workloads: every policy runs both.
		byMetric := map[string]int{}
		if f, ok := mf["debi_decision_info"]; ok {
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetName() == "metric" {
						byMetric[l.GetValue()]++
					}
				}
			}
		}
		t.Logf("deciding metric by policy: %v", byMetric)
		if byMetric["cpu"] == 0 || byMetric["rps"] == 0 || byMetric["cpu"]+byMetric["rps"] != n {
			t.Errorf("deciding metrics %v over %d policies: want cpu and rps, one per policy", byMetric, n)
		}
	}
	if !batch {
		// The two snapshots fall inside loops: a loop's queries and its count straddle them,
		// so the mean per loop is 4 per policy only up to one loop's share.
		if want := templates * float64(n); perInterval < 0.9*want {
			t.Errorf("%.1f queries per interval without batching, want about %v (%v per policy)", perInterval, want, templates)
		}
		return
	}
	if perInterval > 10*templates {
		t.Errorf("%.1f queries per interval for %v templates: batching does not hold (at most 10 per template)", perInterval, templates)
	}
	if got := sumOf(mf, "debi_exporter_query_batches", nil, false); got != templates {
		t.Errorf("debi_exporter_query_batches = %v, want %v (one per default query)", got, templates)
	}
	if got := sumOf(mf, "debi_exporter_batched_policy_queries", nil, false); got != templates*float64(n) {
		t.Errorf("debi_exporter_batched_policy_queries = %v, want %v", got, templates*float64(n))
	}
	t.Logf("fleet test took %v", time.Since(began).Round(time.Second))
}
