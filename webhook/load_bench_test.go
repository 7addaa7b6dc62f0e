package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
)

// BenchmarkNotificationsLoad sends Alertmanager notifications open-loop (at a fixed rate,
// whatever the answers) over loopback HTTP to the real router, whose Controller scales real
// Deployments through a KubeActuator on the real API server, and audits every write:
//
//	DEBI_K8S_ASSETS=$(hack/k8s-env.sh build) go test ./webhook/ -run '^$' -bench NotificationsLoad -benchtime 1x
//
// Knobs: DEBI_LOAD_RATE (notifications/s, default 5000), DEBI_LOAD_DURATION (default 60s),
// DEBI_LOAD_POLICIES (default 10), DEBI_LOAD_QPS (the actuator's client-go QPS, burst 2×;
// default 50, what the webhook uses when the kubeconfig sets none).
//
// The load. Policy i (debi, min 2, max 20, U(n) = 0.7 − 0.8/n, tolerance 1e-6) carries a total
// load L_i(t) (utilization 1 = one replica) that a fake exporter steps every 100 ms: a ramp from
// 1.0 up to 8 + 0.5·i at half time, then back down to 1.0. Prometheus answers the load at the size
// the running decision read (load_replicas = that size, load = L/size), as an exporter in step
// would. Out of the negligible tolerance band, Algorithm 2 then depends on L alone:
//
//	right(L) = 2 if L ≤ 0.3·2, else clamp(round((L + 0.8)/0.7), 3, 20)
//
// from right(1.0) = 3 up to right(12.5) = 19 for the last policy.
//
// What must hold (checked, the benchmark fails otherwise):
//
//   - 0 lost: every notification gets an HTTP answer, and none is a 4xx;
//   - per policy, the replica history a watch saw is exactly compress(initial, right(L_1), …,
//     right(L_k)) where L_1…L_k are the loads the policy's decisions read, in decision order, and
//     compress drops a value equal to the one before it: each write is the right answer for the
//     freshest load its decision saw, none is missing, none out of order;
//   - writes made while the load rises are strictly increasing, while it falls strictly
//     decreasing (0 out-of-order);
//   - debi_webhook_patches_total{result="success"} of each policy equals the number of changes
//     the watch saw, and no write left the size unchanged (0 duplicated);
//   - after the run, one more notification per policy brings each to right(1.0) = 3.
func BenchmarkNotificationsLoad(b *testing.B) {
	if kubeconfigPath == "" {
		b.Skip("needs the real API server: DEBI_K8S_ASSETS=$(hack/k8s-env.sh build) go test ./webhook/ -run '^$' -bench NotificationsLoad -benchtime 1x")
	}
	o := loadOptions{
		rate:     loadEnvFloat(b, "DEBI_LOAD_RATE", 5000),
		duration: loadEnvDuration(b, "DEBI_LOAD_DURATION", 60*time.Second),
		policies: int(loadEnvFloat(b, "DEBI_LOAD_POLICIES", 10)),
		qps:      loadEnvFloat(b, "DEBI_LOAD_QPS", 50),
	}
	for range b.N {
		runLoad(b, o)
	}
}

type loadOptions struct {
	rate     float64
	duration time.Duration
	policies int
	qps      float64
}

func loadEnvFloat(b *testing.B, name string, def float64) float64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

func loadEnvDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return v
}

// Parameters of the load's policies (see BenchmarkNotificationsLoad).
const (
	loadLow  = 1.0
	loadStep = 100 * time.Millisecond
)

func loadAbs(x int) int { return max(x, -x) }

func loadHigh(i int) float64 { return 8 + 0.5*float64(i) }

// loadRight is the right count for a total load L, computed here independently of
// scaling.Algorithm2: B = (0.7−0.3)·2 = 0.8, U(n)·n = 0.7n − 0.8.
func loadRight(l float64) int32 {
	if l <= 0.3*2 {
		return 2
	}
	return min(max(int32(math.Floor((l+0.8)/0.7+0.5)), 3), 20)
}

// loadModel is the fake exporter's state and what the decisions read from it.
type loadModel struct {
	mu   sync.Mutex
	load []float64 // L_i now
	up   bool      // the load is rising
	// cur is the size the running decision of each policy read (decisions of one policy are
	// serialised, and query after they read).
	cur       []int32
	decisions [][]loadDecision
}

type loadDecision struct {
	load float64
	cur  int32
	up   bool
}

type loadWrite struct {
	n        int32
	decision int // index in decisions
}

// loadActuator is the real KubeActuator, observed: the size each decision read, and each write.
type loadActuator struct {
	*KubeActuator
	m   *loadModel
	idx map[string]int

	mu        sync.Mutex
	writes    [][]loadWrite
	unchanged int // writes that changed nothing
	errs      []error
}

func (a *loadActuator) GetScale(ctx context.Context, t config.Target) (ScaleInfo, error) {
	s, err := a.KubeActuator.GetScale(ctx, t)
	if err == nil {
		a.m.mu.Lock()
		a.m.cur[a.idx[t.Name]] = s.Replicas
		a.m.mu.Unlock()
	}
	return s, err
}

func (a *loadActuator) SetReplicas(ctx context.Context, t config.Target, n int32, cur ScaleInfo) (WriteResult, error) {
	res, err := a.KubeActuator.SetReplicas(ctx, t, n, cur)
	i := a.idx[t.Name]
	a.m.mu.Lock()
	d := len(a.m.decisions[i]) - 1
	a.m.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil:
		a.errs = append(a.errs, fmt.Errorf("%s: %w", t.Name, err))
	case res.Before == res.After:
		a.unchanged++
	default:
		a.writes[i] = append(a.writes[i], loadWrite{n: n, decision: d})
	}
	return res, err
}

func runLoad(b *testing.B, o loadOptions) {
	e := newKubeEnv(b)
	names := make([]string, o.policies)
	var cfgText strings.Builder
	cfgText.WriteString("policies:\n")
	for i := range names {
		names[i] = fmt.Sprintf("p%02d", i)
		e.Deployment(b, e.NS, names[i], loadRight(loadLow))
		fmt.Fprintf(&cfgText, `  - name: %s
    target: {namespace: %s, name: %s}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, lower: 0.3, upper: 0.7, tolerance: 0.000001, window: 0s}
`, names[i], e.NS, names[i])
	}
	cfgText.WriteString(`webhook:
  mode: act
  allow_unauthenticated: true
  queries:
    load_replicas: 'debi_load_replicas{policy="{{.Policy}}"}'
`)
	cfg := testConfig(b, cfgText.String())
	h := testenv.WatchReplicas(b, e.Kube, e.NS)

	m := &loadModel{load: make([]float64, o.policies), up: true, cur: make([]int32, o.policies), decisions: make([][]loadDecision, o.policies)}
	for i := range m.load {
		m.load[i] = loadLow
	}
	loadExpr, basisExpr := map[string]int{}, map[string]int{}
	for i, n := range names {
		loadExpr[fmt.Sprintf(`debi_load_ratio{policy=%q,load="w"}`, n)] = i
		basisExpr[fmt.Sprintf(`debi_load_replicas{policy=%q}`, n)] = i
	}
	health := staticQuery(nil)
	query := func(ctx context.Context, expr string) (float64, error) {
		if i, ok := loadExpr[expr]; ok {
			m.mu.Lock()
			defer m.mu.Unlock()
			cur := m.cur[i]
			m.decisions[i] = append(m.decisions[i], loadDecision{load: m.load[i], cur: cur, up: m.up})
			return m.load[i] / float64(max(cur, 1)), nil
		}
		if i, ok := basisExpr[expr]; ok {
			m.mu.Lock()
			defer m.mu.Unlock()
			return float64(m.cur[i]), nil
		}
		return health(ctx, expr)
	}

	rc := rest.CopyConfig(e.RC)
	rc.QPS, rc.Burst = float32(o.qps), int(2*o.qps)
	ka, err := NewKubeActuator(rc)
	if err != nil {
		b.Fatal(err)
	}
	act := &loadActuator{KubeActuator: ka, m: m, idx: map[string]int{}, writes: make([][]loadWrite, o.policies)}
	for i, n := range names {
		act.idx[n] = i
		if _, err := ka.GetScale(context.Background(), cfg.Policies[i].Target); err != nil { // warm discovery
			b.Fatal(err)
		}
	}
	c, err := NewController(cfg, ControllerOptions{Actuator: act, Query: query})
	if err != nil {
		b.Fatal(err)
	}
	const token = "load-token"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	router := testRouter(c, token)
	var arrived atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		router.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/v1/alertmanager"
	bodies := make([][]byte, o.policies)
	for i, n := range names {
		bodies[i] = testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", n, "namespace", e.NS)})
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 0, MaxIdleConnsPerHost: 20000, IdleConnTimeout: time.Minute, DisableCompression: true}}
	defer client.CloseIdleConnections()
	post := func(i int) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(bodies[i]))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// The fake exporter: a ramp up to half time, then down.
	total := int(o.rate * o.duration.Seconds())
	stopExporter := make(chan struct{})
	exporterDone := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exporterDone)
		tick := time.NewTicker(loadStep)
		defer tick.Stop()
		for {
			select {
			case <-stopExporter:
				return
			case <-tick.C:
			}
			x := min(time.Since(start).Seconds()/o.duration.Seconds(), 1)
			tri := 2 * x
			if x > 0.5 {
				tri = 2 - 2*x
			}
			m.mu.Lock()
			m.up = x <= 0.5
			for i := range m.load {
				m.load[i] = loadLow + (loadHigh(i)-loadLow)*tri
			}
			m.mu.Unlock()
		}
	}()

	// The open-loop sender: request k is due at k/rate, sent on its own goroutine.
	type result struct {
		lag, latency time.Duration
		code         int
		err          error
	}
	results := make([]result, total)
	var wg sync.WaitGroup
	var inflight, maxInflight atomic.Int64
	b.ResetTimer()
	sent := 0
	tick := time.NewTicker(time.Millisecond)
	for sent < total {
		<-tick.C
		due := min(total, int(time.Since(start).Seconds()*o.rate))
		for ; sent < due; sent++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				t0 := time.Now()
				if n := inflight.Add(1); n > maxInflight.Load() {
					maxInflight.Store(n) // racy max, good enough for a report
				}
				code, err := post(k % o.policies)
				inflight.Add(-1)
				results[k] = result{lag: t0.Sub(start) - time.Duration(float64(k)/o.rate*float64(time.Second)), latency: time.Since(t0), code: code, err: err}
			}(sent)
		}
	}
	tick.Stop()
	sendWindow := time.Since(start)
	arrivedInWindow := arrived.Load()
	wg.Wait()
	close(stopExporter)
	<-exporterDone
	b.StopTimer()

	// Settle: the load back at its start, one notification per policy.
	m.mu.Lock()
	for i := range m.load {
		m.load[i] = loadLow
	}
	m.up = false
	m.mu.Unlock()
	for i := range names {
		if code, err := post(i); err != nil || code != http.StatusOK {
			b.Errorf("settling %s: %d %v", names[i], code, err)
		}
	}

	// Figures.
	codes := map[int]int{}
	var lost int
	var firstErr error
	lat := make([]time.Duration, 0, total)
	lags := make([]time.Duration, 0, total)
	for _, r := range results {
		lags = append(lags, r.lag)
		if r.err != nil || r.code == 0 {
			lost++
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		codes[r.code]++
		lat = append(lat, r.latency)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	pct := func(d []time.Duration, p float64) float64 {
		if len(d) == 0 {
			return math.NaN()
		}
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	var decisions int
	m.mu.Lock()
	for _, d := range m.decisions {
		decisions += len(d)
	}
	m.mu.Unlock()
	act.mu.Lock()
	var writes int
	for _, w := range act.writes {
		writes += len(w)
	}
	unchanged, writeErrs := act.unchanged, slices.Clone(act.errs)
	act.mu.Unlock()
	b.ReportMetric(float64(total)/sendWindow.Seconds(), "sent/s")
	b.ReportMetric(float64(arrivedInWindow)/sendWindow.Seconds(), "received/s")
	b.ReportMetric(float64(total-lost), "answered")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(lags, 0.99), "send-lag-p99-ms")
	b.ReportMetric(float64(maxInflight.Load()), "max-in-flight")
	b.ReportMetric(float64(decisions), "decisions")
	b.ReportMetric(float64(writes), "api-writes")
	b.Logf("%d notifications in %v (target %.0f/s for %v, %d policies, client QPS %.0f): codes %v, lost %d (first: %v); %d decisions, %d writes, %d unchanged writes, %d write errors",
		total, sendWindow.Round(time.Millisecond), o.rate, o.duration, o.policies, o.qps, codes, lost, firstErr, decisions, writes, unchanged, len(writeErrs))

	// Correctness.
	if lost > 0 {
		b.Errorf("%d notifications lost (no HTTP answer); first: %v", lost, firstErr)
	}
	for code, n := range codes {
		if code >= 400 && code < 500 {
			b.Errorf("%d notifications answered %d: a permanent refusal of a valid notification", n, code)
		}
	}
	if unchanged > 0 {
		b.Errorf("%d writes left the size unchanged (duplicates)", unchanged)
	}
	for _, err := range writeErrs[:min(len(writeErrs), 5)] {
		b.Errorf("write error: %v", err)
	}
	var dups, outOfOrder int
	for i, n := range names {
		got := h.Sync(b, n)
		m.mu.Lock()
		ds := slices.Clone(m.decisions[i])
		m.mu.Unlock()
		want := []int32{loadRight(loadLow)}
		for _, d := range ds {
			if r := loadRight(d.load); r != want[len(want)-1] {
				want = append(want, r)
			}
		}
		if !slices.Equal(got, want) {
			outOfOrder++
			b.Errorf("%s: replica history %v, want the distinct decisions in order %v", n, got, want)
		}
		act.mu.Lock()
		ws := slices.Clone(act.writes[i])
		act.mu.Unlock()
		// Within a phase the loads read only rise (fall), so must the writes; the first write
		// after the peak may go either way (its decision may read a load above the last rising
		// decision's).
		prev, prevUp := loadRight(loadLow), true
		for _, w := range ws {
			up := ds[w.decision].up
			if up == prevUp && ((up && w.n <= prev) || (!up && w.n >= prev)) {
				outOfOrder++
				b.Errorf("%s: write %d after %d while the load %s", n, w.n, prev, map[bool]string{true: "rises", false: "falls"}[up])
			}
			prev, prevUp = w.n, up
		}
		patched := int(testutilCounter(c.m.patches.WithLabelValues(n, config.ModeAct, "success")))
		if d := loadAbs(patched-(len(got)-1)) + loadAbs(len(ws)-(len(got)-1)); d > 0 {
			dups += d
			b.Errorf("%s: patches_total{result=success} = %d, writes seen %d, changes watched %d", n, patched, len(ws), len(got)-1)
		}
		if last := got[len(got)-1]; last != loadRight(loadLow) {
			b.Errorf("%s: %d replicas after settling, want %d", n, last, loadRight(loadLow))
		}
	}
	b.ReportMetric(float64(dups+unchanged), "dup-writes")
	b.ReportMetric(float64(outOfOrder), "out-of-order")
}
