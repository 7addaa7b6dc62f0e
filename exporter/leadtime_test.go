package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
)

// TestLeadTimeMeasured: the exporter measures each workload's pod start-ups from the recording
// rule, in one query for every workload at once (PromQL's own engine here), reading
// each pod's first readiness, and publishes the quantiles and their count per policy beside the
// lead_time of the policies that forecast.
func TestLeadTimeMeasured(t *testing.T) {
	// llm/m: four pods start in 300, 240, 360 and 200 s; the last turns unready and Ready again
	// later (its series reads 900 from then on), which is not a start-up. shop/web: 30 and 50 s.
	q := newEngineQuerier(t, `
load 1m
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-0",uid="u0",workload_type="statefulset",workload="m"} 300x20
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-1",uid="u1",workload_type="statefulset",workload="m"} _x10 240x50
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-2",uid="u2",workload_type="statefulset",workload="m"} _x30 360x30
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-3",uid="u3",workload_type="statefulset",workload="m"} 200x20 900x40
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-4",uid="u4",workload_type="statefulset",workload="m"} NaN NaN NaN
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="n-0",uid="n0",workload_type="statefulset",workload="nan"} NaN NaN NaN
  namespace_workload_pod:debi_pod_startup_seconds{namespace="shop",pod="web-a",uid="w0",workload_type="deployment",workload="web"} 30x60
  namespace_workload_pod:debi_pod_startup_seconds{namespace="shop",pod="web-b",uid="w1",workload_type="deployment",workload="web"} 50x60
`)
	e, reg := newTestExporter(t, `
policies:
  - name: m
    target: {kind: StatefulSet, namespace: llm, name: m}
    lead_time: 2m
  - name: web
    target: {kind: Deployment, namespace: shop, name: web}
    algorithm: hpa
  - name: idle
    target: {kind: Deployment, namespace: shop, name: idle}
`, q)
	e.Step(context.Background(), time.Unix(0, 0).Add(60*time.Minute))

	for _, tc := range []struct {
		policy   string
		want     [3]float64 // PromQL's quantile: linear between the sorted values
		startups float64
	}{
		{"m", [3]float64{270, 342, 358.2}, 4},
		{"web", [3]float64{40, 48, 49.8}, 2},
	} {
		for i, ql := range leadQuantiles {
			if got := gauge(t, reg, "debi_lead_time_seconds", tc.policy, "component", "startup", "quantile", ql); math.Abs(got-tc.want[i]) > 1e-9 {
				t.Errorf("debi_lead_time_seconds{policy=%q,quantile=%q} = %v, want %v", tc.policy, ql, got, tc.want[i])
			}
		}
		if got := gauge(t, reg, "debi_lead_time_samples", tc.policy, "component", "startup"); got != tc.startups {
			t.Errorf("debi_lead_time_samples{policy=%q,component=startup} = %v, want %v", tc.policy, got, tc.startups)
		}
	}
	// A summary: its count and sum over the same start-ups (m: 300 + 240 + 360 + 200 s).
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "debi_lead_time_seconds" {
			continue
		}
		if mf.GetType() != dto.MetricType_SUMMARY {
			t.Fatalf("debi_lead_time_seconds is a %v, want a summary", mf.GetType())
		}
		for _, m := range mf.Metric {
			lbl := map[string]string{}
			for _, lp := range m.Label {
				lbl[lp.GetName()] = lp.GetValue()
			}
			if lbl["policy"] == "m" && lbl["component"] == "startup" {
				found = true
				if c, sum := m.Summary.GetSampleCount(), m.Summary.GetSampleSum(); c != 4 || sum != 1100 {
					t.Errorf("debi_lead_time_seconds{policy=m,component=startup}: count %d, sum %v; want 4, 1100", c, sum)
				}
			}
		}
	}
	if !found {
		t.Error("no debi_lead_time_seconds{policy=m,component=startup}")
	}
	if _, ok := value(t, reg, "debi_lead_time_samples", "idle", "component", "startup"); ok {
		t.Error("a workload without a measured start-up has a count")
	}
	if got := gauge(t, reg, "debi_policy_lead_time_seconds", "m"); got != 120 {
		t.Errorf("debi_policy_lead_time_seconds{policy=m} = %v, want 120", got)
	}
	if _, ok := value(t, reg, "debi_policy_lead_time_seconds", "web"); ok {
		t.Error("debi_policy_lead_time_seconds published for hpa, which does not forecast")
	}

	// Measured again only after leadTimeRefreshSteps steps.
	before, _ := q.counts()
	e.Step(context.Background(), time.Unix(0, 0).Add(61*time.Minute))
	mid, _ := q.counts()
	e.Step(context.Background(), time.Unix(0, 0).Add(60*time.Minute+leadTimeRefreshSteps*e.interval))
	after, _ := q.counts()
	if after-mid != (mid-before)+1 {
		t.Errorf("instant queries: %d at the step before the refresh, %d at the refresh; want one more (the measurement)", mid-before, after-mid)
	}
}

// TestMeasuredLeadTime: the what-if's read of a policy's recorded lead time over a range: its
// workload's start-ups (first readiness per pod) and the decision path the exporter published;
// nothing recorded is no error.
func TestMeasuredLeadTime(t *testing.T) {
	q := newEngineQuerier(t, `
load 1m
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-0",uid="u0",workload_type="statefulset",workload="m"} 300x20
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-1",uid="u1",workload_type="statefulset",workload="m"} _x10 240x50
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-3",uid="u3",workload_type="statefulset",workload="m"} 200x20 900x40
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="m-4",uid="u4",workload_type="statefulset",workload="m"} NaN NaN NaN
  namespace_workload_pod:debi_pod_startup_seconds{namespace="llm",pod="n-0",uid="n0",workload_type="statefulset",workload="nan"} NaN NaN NaN
  debi_lead_time_seconds{policy="m",namespace="llm",workload_type="statefulset",workload="m",component="path",quantile="0.5"} 30x30 45x10
  debi_lead_time_seconds{policy="m",namespace="llm",workload_type="statefulset",workload="m",component="path",quantile="0.9"} 90x40
  debi_lead_time_samples{policy="m",namespace="llm",workload_type="statefulset",workload="m",component="path"} 2x30 7x10
  kube_pod_created{namespace="llm",pod="raw-0",uid="r0"} 100x60
  kube_pod_status_ready_time{namespace="llm",pod="raw-0",uid="r0"} 400x60
  kube_pod_owner{namespace="llm",pod="raw-0",owner_kind="StatefulSet",owner_name="raw",owner_is_controller="true"} 1x60
  kube_pod_created{namespace="llm",pod="raw-1",uid="r1"} 200x60
  kube_pod_status_ready_time{namespace="llm",pod="raw-1",uid="r1"} 320x60
  kube_pod_owner{namespace="llm",pod="raw-1",owner_kind="StatefulSet",owner_name="raw",owner_is_controller="true"} 1x60
  kube_pod_created{namespace="llm",pod="raw-2",uid="r2"} 1000x60
  kube_pod_status_ready_time{namespace="llm",pod="raw-2",uid="r2"} 1600x30 2000x29
  kube_pod_owner{namespace="llm",pod="raw-2",owner_kind="StatefulSet",owner_name="raw",owner_is_controller="true"} 1x60
  kube_pod_created{namespace="llm",pod="raw-3",uid="r3"} 1000x60
  kube_pod_owner{namespace="llm",pod="raw-3",owner_kind="StatefulSet",owner_name="raw",owner_is_controller="true"} 1x60
  kube_pod_created{namespace="llm",pod="o-0",uid="o0"} 0x60
  kube_pod_status_ready_time{namespace="llm",pod="o-0",uid="o0"} 5000x60
  kube_pod_owner{namespace="llm",pod="o-0",owner_kind="StatefulSet",owner_name="raw-other",owner_is_controller="true"} 1x60
  kube_pod_created{namespace="web",pod="web-abc-x1",uid="w1"} 0x60
  kube_pod_status_ready_time{namespace="web",pod="web-abc-x1",uid="w1"} 90x60
  kube_pod_owner{namespace="web",pod="web-abc-x1",owner_kind="ReplicaSet",owner_name="web-abc",owner_is_controller="true"} 1x60
  kube_replicaset_owner{namespace="web",replicaset="web-abc",owner_kind="Deployment",owner_name="web",owner_is_controller="true"} 1x60
`)
	c := loadConfig(t, `
policies:
  - name: m
    target: {kind: StatefulSet, namespace: llm, name: m}
  - name: other
    target: {kind: StatefulSet, namespace: llm, name: other}
  - name: raw
    target: {kind: StatefulSet, namespace: llm, name: raw}
  - name: web
    target: {namespace: web, name: web}
  - name: nan
    target: {kind: StatefulSet, namespace: llm, name: nan}
`)
	start, end := time.Unix(0, 0), time.Unix(0, 0).Add(60*time.Minute)
	m, err := MeasuredLeadTime(context.Background(), q, &c.Policies[0], start, end)
	if err != nil {
		t.Fatal(err)
	}
	want := LeadTimeMeasure{StartupMedian: 240 * time.Second, Startup90: 288 * time.Second, Startups: 3, Unreadable: 1, PathMedian: 45 * time.Second, Path90: 90 * time.Second, Paths: 7, PathOK: true}
	if m != want {
		t.Errorf("measured %+v\nwant     %+v", m, want)
	}
	m, err = MeasuredLeadTime(context.Background(), q, &c.Policies[1], start, end)
	if err != nil || m != (LeadTimeMeasure{}) {
		t.Errorf("nothing recorded: %+v, %v; want zero and no error", m, err)
	}
	// Before the recording rule: the start-ups from kube-state-metrics' raw series, each pod's
	// first readiness (raw-2 turned Ready again later), not a pod never Ready (raw-3) nor another
	// workload's (o-0): 300, 120 and 600 s.
	m, err = MeasuredLeadTime(context.Background(), q, &c.Policies[2], start, end)
	if want := (LeadTimeMeasure{StartupMedian: 300 * time.Second, Startup90: 540 * time.Second, Startups: 3, Raw: true}); err != nil || m != want {
		t.Errorf("from the raw series: %+v, %v\nwant %+v", m, err, want)
	}
	// A Deployment's pods through their ReplicaSet.
	m, err = MeasuredLeadTime(context.Background(), q, &c.Policies[3], start, end)
	if want := (LeadTimeMeasure{StartupMedian: 90 * time.Second, Startup90: 90 * time.Second, Startups: 1, Raw: true}); err != nil || m != want {
		t.Errorf("a Deployment from the raw series: %+v, %v\nwant %+v", m, err, want)
	}
	// Start-ups that are no number of seconds are counted, not dropped unsaid; with none left
	// (and no raw series of the workload) nothing is measured.
	m, err = MeasuredLeadTime(context.Background(), q, &c.Policies[4], start, end)
	if want := (LeadTimeMeasure{Unreadable: 1}); err != nil || m != want {
		t.Errorf("only NaN recorded: %+v, %v\nwant %+v", m, err, want)
	}
}

// mPolicies are two forecasting policies of llm/m on a 15 s interval, one with lead_time unset
// (m), one that sets it (m-set).
const mPolicies = `
global: {interval: 15s}
policies:
  - name: m
    target: {kind: StatefulSet, namespace: llm, name: m}
    model: naive
    history_step: 1m
  - name: m-set
    target: {kind: StatefulSet, namespace: llm, name: m}
    model: naive
    history_step: 1m
    lead_time: 2m
`

// TestMeasuredLeadInForce: a forecasting policy that left lead_time unset sizes for the measured
// lead time — the 0.9 start-up plus the decision path (4 intervals until measured), rounded up
// to the interval — once MinStartups start-ups are measured: its horizon moves with it and it
// reloads its history. A policy that set lead_time keeps it, and so does one whose workload has
// too few start-ups measured.
func TestMeasuredLeadInForce(t *testing.T) {
	var b strings.Builder
	b.WriteString("load 1m\n")
	for i, s := range []int{290, 300, 310, 320, 600, 280} { // 0.9 quantile: 460
		fmt.Fprintf(&b, "  namespace_workload_pod:debi_pod_startup_seconds{namespace=\"llm\",pod=\"m-%d\",uid=\"u%d\",workload_type=\"statefulset\",workload=\"m\"} %dx60\n", i, i, s)
	}
	b.WriteString("  namespace_workload_pod:debi_pod_startup_seconds{namespace=\"llm\",pod=\"few-0\",uid=\"f0\",workload_type=\"statefulset\",workload=\"few\"} 900x60\n")
	for i := range 6 { // Ready before created: a node's clock skewed, not a start-up to size for
		fmt.Fprintf(&b, "  namespace_workload_pod:debi_pod_startup_seconds{namespace=\"llm\",pod=\"skew-%d\",uid=\"s%d\",workload_type=\"statefulset\",workload=\"skew\"} -30x60\n", i, i)
	}
	q := newEngineQuerier(t, b.String())
	e, reg := newTestExporter(t, mPolicies+`  - name: few
    target: {kind: StatefulSet, namespace: llm, name: few}
    model: naive
    history_step: 1m
  - name: skew
    target: {kind: StatefulSet, namespace: llm, name: skew}
    model: naive
    history_step: 1m
`, q)
	at := time.Unix(0, 0).Add(60 * time.Minute)
	e.Step(context.Background(), at)
	// 460 s of start-up + 60 s of path (4 × 15 s), rounded up to 15 s: 525 s.
	for pol, want := range map[string]float64{"m": 525, "m-set": 120, "few": 120, "skew": 120} {
		if got := gauge(t, reg, "debi_policy_lead_time_seconds", pol); got != want {
			t.Errorf("debi_policy_lead_time_seconds{policy=%q} = %v, want %v", pol, got, want)
		}
	}
	// h = ceil(lead / history_step) + 1 history steps of 1m.
	for pol, want := range map[string]float64{"m": 10 * 60, "m-set": 3 * 60} {
		if got := gauge(t, reg, "debi_forecast_horizon_seconds", pol); got != want {
			t.Errorf("debi_forecast_horizon_seconds{policy=%q} = %v, want %v", pol, got, want)
		}
	}
	// The configuration itself is untouched: a reload of the same file keeps the policy.
	for _, ps := range e.policies {
		if ps.cfg.Name == "m" && (ps.cfg.LeadTime != 2*time.Minute || ps.measuredLead != 525*time.Second) {
			t.Errorf("policy m: configured lead %v, measured in force %v", ps.cfg.LeadTime, ps.measuredLead)
		}
	}
	e.Step(context.Background(), at.Add(15*time.Second))
	if got := gauge(t, reg, "debi_policy_lead_time_seconds", "m"); got != 525 {
		t.Errorf("after a further step: %v, want 525", got)
	}
}

// rawCounter counts the instant queries that read kube-state-metrics' raw start-up series, by
// the namespace they select.
type rawCounter struct {
	Querier
	mu sync.Mutex
	by map[string]int
}

func (q *rawCounter) Query(ctx context.Context, expr string, ts time.Time, o ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	if strings.Contains(expr, "kube_pod_created") {
		q.mu.Lock()
		if i := strings.Index(expr, `kube_pod_created{namespace="`); i >= 0 {
			ns := expr[i+len(`kube_pod_created{namespace="`):]
			q.by[ns[:strings.IndexByte(ns, '"')]]++
		}
		q.mu.Unlock()
	}
	return q.Querier.Query(ctx, expr, ts, o...)
}

func (q *rawCounter) reads() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return maps.Clone(q.by)
}

// TestRawLeadInForce: on the day debi is installed the start-up rule has no history, so a
// forecasting policy that left lead_time unset would size for the default 2 minutes until its
// workload had started MinStartups pods since; the exporter reads its start-ups of the last 7
// days from kube-state-metrics' raw series instead, sizes for them from the first step and
// publishes them. It reads them for no other policy (lead_time set, hpa, a workload the rule
// has measured), at most rawLeadPerRefresh policies a measurement, and again only after
// rawLeadRefresh.
func TestRawLeadInForce(t *testing.T) {
	var b strings.Builder
	b.WriteString("load 1m\n")
	raw := func(ns, owner string, i, startup int) {
		pod := fmt.Sprintf("%s-%d", owner, i)
		fmt.Fprintf(&b, "  kube_pod_created{namespace=%q,pod=%q,uid=\"%s\"} 1000x60\n", ns, pod, pod)
		fmt.Fprintf(&b, "  kube_pod_status_ready_time{namespace=%q,pod=%q,uid=\"%s\"} %dx60\n", ns, pod, pod, 1000+startup)
		fmt.Fprintf(&b, "  kube_pod_owner{namespace=%q,pod=%q,owner_kind=\"StatefulSet\",owner_name=%q,owner_is_controller=\"true\"} 1x60\n", ns, pod, owner)
	}
	// llm/m: six start-ups, 0.9 quantile 460 s, read from the raw series only.
	for i, s := range []int{290, 300, 310, 320, 600, 280} {
		raw("llm", "m", i, s)
	}
	// ruled/r: the rule has five start-ups of 100 s; the raw series say 700 s.
	for i := range 5 {
		raw("ruled", "r", i, 700)
		fmt.Fprintf(&b, "  namespace_workload_pod:debi_pod_startup_seconds{namespace=\"ruled\",pod=\"r-%d\",uid=\"r-%d\",workload_type=\"statefulset\",workload=\"r\"} 100x60\n", i, i)
	}
	// six more namespaces of one workload each, for the bound on reads per measurement.
	for k := range 6 {
		raw(fmt.Sprintf("f%d", k), "f", 0, 200)
	}
	q := &rawCounter{Querier: newEngineQuerier(t, b.String()), by: map[string]int{}}
	yml := mPolicies + `  - name: m-hpa
    target: {kind: StatefulSet, namespace: llm, name: m}
    algorithm: hpa
  - name: r
    target: {kind: StatefulSet, namespace: ruled, name: r}
    model: naive
    history_step: 1m
`
	for k := range 6 {
		yml += fmt.Sprintf("  - name: f%d\n    target: {kind: StatefulSet, namespace: f%d, name: f}\n    model: naive\n    history_step: 1m\n", k, k)
	}
	e, reg := newTestExporter(t, yml, q)
	at := time.Unix(0, 0).Add(60 * time.Minute)
	e.Step(context.Background(), at)

	// m sizes for 460 s of start-up + 60 s of path (4 × 15 s), rounded up to 15 s, from the
	// first step; m-set keeps its lead_time; r sizes for the rule's 100 s + 60 s.
	for pol, want := range map[string]float64{"m": 525, "m-set": 120, "r": 165} {
		if got := gauge(t, reg, "debi_policy_lead_time_seconds", pol); got != want {
			t.Errorf("debi_policy_lead_time_seconds{policy=%q} = %v, want %v", pol, got, want)
		}
	}
	for pol, want := range map[string][2]float64{"m": {460, 6}, "r": {100, 5}} {
		if got := gauge(t, reg, "debi_lead_time_seconds", pol, "component", "startup", "quantile", "0.9"); got != want[0] {
			t.Errorf("debi_lead_time_seconds{policy=%q,quantile=0.9} = %v, want %v", pol, got, want[0])
		}
		if got := gauge(t, reg, "debi_lead_time_samples", pol, "component", "startup"); got != want[1] {
			t.Errorf("debi_lead_time_samples{policy=%q} = %v, want %v", pol, got, want[1])
		}
	}
	// The rule's workload and m's other policies are not read raw; m once (one query: the
	// exporter takes the count, sum and quantiles from its answer), then three of the six
	// others: four a measurement.
	first := q.reads()
	if first["ruled"] != 0 || first["llm"] != 1 {
		t.Errorf("raw reads at the first measurement: %v; want none of ruled, one of llm", first)
	}
	others := func(r map[string]int) (n int) {
		for k := range 6 {
			n += r[fmt.Sprintf("f%d", k)]
		}
		return n
	}
	if got := others(first); got != rawLeadPerRefresh-1 {
		t.Errorf("%d other policies read at the first measurement, want %d", got, rawLeadPerRefresh-1)
	}
	// The next measurement reads the three left, and nothing read already.
	at = at.Add(leadTimeRefreshSteps * e.interval)
	e.Step(context.Background(), at)
	second := q.reads()
	if second["llm"] != first["llm"] || others(second) != 6 {
		t.Errorf("raw reads after the second measurement: %v; want llm as before and each other policy once", second)
	}
	for k := range 6 {
		if pol := fmt.Sprintf("f%d", k); gauge(t, reg, "debi_lead_time_samples", pol, "component", "startup") != 1 {
			t.Errorf("policy %s: no start-up published from the raw series", pol)
		}
	}
	// Read again only after rawLeadRefresh, while the rule still has too few.
	for at.Before(time.Unix(0, 0).Add(60*time.Minute + rawLeadRefresh - leadTimeRefreshSteps*e.interval)) {
		at = at.Add(leadTimeRefreshSteps * e.interval)
		e.Step(context.Background(), at)
	}
	if got := q.reads()["llm"]; got != first["llm"] {
		t.Errorf("llm read %d times before rawLeadRefresh, want 1", got)
	}
	e.Step(context.Background(), time.Unix(0, 0).Add(60*time.Minute+rawLeadRefresh))
	if got := q.reads()["llm"]; got != 2*first["llm"] {
		t.Errorf("llm read %d times at rawLeadRefresh, want 2", got)
	}
}

// TestStartupsAsPromQL: the exporter takes each workload's count, sum and quantiles of its
// pods' start-ups from one query's answer; they are those PromQL's count, sum and quantile give
// over the same per-pod minima, asked one by one as the exporter did before (Prometheus's own
// engine here), for workloads of 1 to 40 pods with ties and re-readiness.
func TestStartupsAsPromQL(t *testing.T) {
	var b strings.Builder
	b.WriteString("load 1m\n")
	for w := range 12 {
		pods := []int{1, 2, 3, 7, 40}[w%5] + w/5
		for p := range pods {
			first := 20 + (w*37+p*53)%400
			if p%4 == 3 {
				first = 20 + (w*37)%400 // a tie with the workload's first pod
			}
			series := fmt.Sprintf("namespace_workload_pod:debi_pod_startup_seconds{namespace=\"n%d\",pod=\"p%d\",uid=\"u%d\",workload_type=\"deployment\",workload=\"w\"}", w, p, p)
			if p%5 == 2 {
				fmt.Fprintf(&b, "  %s %dx20 %dx20\n", series, first, first+900) // Ready again later
			} else {
				fmt.Fprintf(&b, "  %s _x%d %dx30\n", series, p%7, first)
			}
		}
	}
	q := newEngineQuerier(t, b.String())
	at := time.Unix(0, 0).Add(45 * time.Minute)
	vec, err := vectorAt(context.Background(), q, leadTimeQuery(leadTimeWindow), at)
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string][]float64{}
	for _, s := range vec {
		pods[string(s.Metric["namespace"])] = append(pods[string(s.Metric["namespace"])], float64(s.Value))
	}
	if len(pods) != 12 {
		t.Fatalf("%d workloads in the answer, want 12", len(pods))
	}
	for ns, vs := range pods {
		lt := startups(vs)
		one := fmt.Sprintf("min_over_time(%s{namespace=%q}[%s])", startupSeconds, ns, model.Duration(leadTimeWindow))
		ask := func(expr string) float64 {
			v, err := instantValue(context.Background(), q, expr, at)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			return v
		}
		if want := ask("count(" + one + ")"); lt.n != want {
			t.Errorf("%s: count %v, PromQL %v", ns, lt.n, want)
		}
		if want := ask("sum(" + one + ")"); math.Abs(lt.sum-want) > 1e-9 {
			t.Errorf("%s: sum %v, PromQL %v", ns, lt.sum, want)
		}
		for i, ql := range leadQuantiles {
			if want := ask(fmt.Sprintf("quantile(%s, %s)", ql, one)); math.Abs(lt.q[i]-want) > 1e-9 {
				t.Errorf("%s: quantile %s %v, PromQL %v", ns, ql, lt.q[i], want)
			}
		}
	}
	// Not a number of seconds is no start-up: it is counted apart (the exporter logs it), and
	// none is none.
	if lt := startups([]float64{math.NaN(), 30, math.Inf(1), 10}); lt.n != 2 || lt.sum != 40 || lt.q[0] != 20 || lt.bad != 2 {
		t.Errorf("startups with NaN and +Inf: %+v, want 2 start-ups summing to 40, median 20, and 2 left out", lt)
	}
	if lt := startups([]float64{math.NaN()}); lt.n != 0 || !math.IsNaN(lt.q[1]) || lt.bad != 1 {
		t.Errorf("startups of NaN alone: %+v, want none, and 1 left out", lt)
	}
}

// BenchmarkLeadTimeMeasure: one measurement of every workload's start-ups, as the exporter
// reads it (one query, the quantiles taken from its answer) and as the five queries of PromQL's
// count, sum and three quantiles read it, over an in-memory TSDB of 400 pods of 40 workloads
// with a day of samples a minute apart (Prometheus's own engine). The ratio of the two is the
// Prometheus work a measurement saves.
func BenchmarkLeadTimeMeasure(b *testing.B) {
	q := fleetStartups(b, "1m", 1440)
	at := time.Unix(0, 0).Add(24 * time.Hour)
	ctx := context.Background()
	b.Run("one-query", func(b *testing.B) {
		for b.Loop() {
			vec, err := vectorAt(ctx, q, leadTimeQuery(leadTimeWindow), at)
			if err != nil {
				b.Fatal(err)
			}
			pods := map[string][]float64{}
			for _, s := range vec {
				k := string(s.Metric["workload"])
				pods[k] = append(pods[k], float64(s.Value))
			}
			for _, vs := range pods {
				startups(vs)
			}
		}
	})
	b.Run("promql-aggregates", func(b *testing.B) {
		in := fmt.Sprintf("min_over_time(%s[%s])", startupSeconds, model.Duration(leadTimeWindow))
		var qs []string
		for _, ql := range leadQuantiles {
			qs = append(qs, fmt.Sprintf("quantile by (namespace, workload_type, workload) (%s, %s)", ql, in))
		}
		qs = append(qs, "count by (namespace, workload_type, workload) ("+in+")", "sum by (namespace, workload_type, workload) ("+in+")")
		for b.Loop() {
			for _, expr := range qs {
				if _, err := vectorAt(ctx, q, expr, at); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// exprQuerier keeps the instant queries asked of it.
type exprQuerier struct {
	Querier
	exprs []string
}

func (q *exprQuerier) Query(ctx context.Context, expr string, ts time.Time, o ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	q.exprs = append(q.exprs, expr)
	return q.Querier.Query(ctx, expr, ts, o...)
}

// TestLeadTimeIncremental: between full reads of the window (every leadTimeRebase) a
// measurement reads only the rule's samples since the last one (and leadTimeOverlap before),
// and measures what a full read would: every pod with a sample in the window at its minimum,
// short-lived pods and a start-up that comes down included. A sample that has left the window
// (a pod's last, or its first readiness where a later one is still in it) counts until the next
// full read, and no longer.
func TestLeadTimeIncremental(t *testing.T) {
	// Ten-minute samples over eight and a half days; every series starts at 0 (a staleness
	// marker where it has no value yet: the test storage takes no sample older than the first
	// appended). a: Ready again later (900), its last sample at 30 h. b: from day 2 to day 8. c: three samples on day 3. d: no number. e: 70, then 60.
	// f: from day 7.6.
	q := &exprQuerier{Querier: newEngineQuerier(t, `
load 10m
  namespace_workload_pod:debi_pod_startup_seconds{namespace="n",pod="a",uid="a",workload_type="deployment",workload="w1"} 100x143 900x36
  namespace_workload_pod:debi_pod_startup_seconds{namespace="n",pod="b",uid="b",workload_type="deployment",workload="w1"} stale _x286 200x863
  namespace_workload_pod:debi_pod_startup_seconds{namespace="n",pod="c",uid="c",workload_type="deployment",workload="w1"} stale _x439 50 50 50
  namespace_workload_pod:debi_pod_startup_seconds{namespace="n",pod="d",uid="d",workload_type="deployment",workload="w2"} stale _x599 NaN NaN NaN
  namespace_workload_pod:debi_pod_startup_seconds{namespace="n",pod="e",uid="e",workload_type="deployment",workload="w2"} 70x500 60x700
  namespace_workload_pod:debi_pod_startup_seconds{namespace="n",pod="f",uid="f",workload_type="deployment",workload="w2"} stale _x1099 40x100
`)}
	e, _ := newTestExporter(t, `
policies:
  - name: w1
    target: {namespace: n, name: w1}
    algorithm: hpa
`, q)
	ctx := context.Background()
	t0 := time.Unix(0, 0)
	fullReads, stale := 0, 0
	for at := t0.Add(24 * time.Hour); !at.After(t0.Add(204 * time.Hour)); at = at.Add(10 * time.Minute) {
		q.exprs = q.exprs[:0]
		staleBefore := stale
		e.lead.at = time.Time{} // measure at every at
		e.measureLeadTimes(ctx, at)
		if len(q.exprs) != 1 {
			t.Fatalf("%v: %d queries, want 1", at.Sub(t0), len(q.exprs))
		}
		wantRange := leadTimeQuery(leadTimeWindow)
		if e.lead.full.Equal(at) {
			fullReads++
		} else {
			wantRange = leadTimeQuery(10*time.Minute + leadTimeOverlap)
		}
		if q.exprs[0] != wantRange {
			t.Fatalf("%v: asked %s, want %s", at.Sub(t0), q.exprs[0], wantRange)
		}
		// What a full read at the same time measures, pod by pod.
		vec, err := vectorAt(ctx, q.Querier, leadTimeQuery(leadTimeWindow), at)
		if err != nil {
			t.Fatal(err)
		}
		inWindow := map[model.Fingerprint]bool{}
		groups := map[string][]float64{}
		for _, s := range vec {
			fp := s.Metric.Fingerprint()
			inWindow[fp] = true
			p, ok := e.lead.pods[fp]
			switch {
			case ok && (p.v == float64(s.Value) || math.IsNaN(p.v) && math.IsNaN(float64(s.Value))):
			case ok && p.v < float64(s.Value) && at.Sub(e.lead.full) < leadTimeRebase:
				// a's first readiness (100) has left the window, its second (900) has not: the
				// first counts until the next full read.
				stale++
			default:
				t.Fatalf("%v: pod %s measured %+v (kept %v), a full read %v", at.Sub(t0), s.Metric["pod"], p, ok, s.Value)
			}
			k := workloadKey("n", "deployment", string(s.Metric["workload"]))
			groups[k] = append(groups[k], float64(s.Value))
		}
		extra := stale > staleBefore
		for fp, p := range e.lead.pods {
			if !inWindow[fp] {
				extra = true
				if at.Sub(e.lead.full) >= leadTimeRebase {
					t.Fatalf("%v: a pod out of the window (%+v) still counts %v after the last full read", at.Sub(t0), p, at.Sub(e.lead.full))
				}
			}
		}
		if extra {
			stale = staleBefore + 1
			continue
		}
		for k, vs := range groups {
			if got, want := e.lead.by[k], startups(vs); got.n != want.n || got.sum != want.sum || got.q != want.q || got.bad != want.bad {
				if want.n > 0 || got.n > 0 {
					t.Fatalf("%v: %s measured %+v, a full read %+v", at.Sub(t0), k, got, want)
				}
			}
		}
	}
	// 180 hours from the first read: a full read every 6 hours.
	if want := 180/int(leadTimeRebase/time.Hour) + 1; fullReads != want {
		t.Errorf("%d full reads, want %d", fullReads, want)
	}
	// c's samples (day 3 plus 20 min) leave the window between two full reads, as a's first
	// readiness does (day 8): each counts for less than a rebase.
	if stale == 0 || stale > 2*int(leadTimeRebase/(10*time.Minute)) {
		t.Errorf("%d measurements counted a sample out of the window, want some, fewer than two rebases'", stale)
	}
}

// BenchmarkLeadTimeMeasureWeek: a measurement as the exporter makes it on a week of the rule's
// samples 30 s apart (400 pods of 40 workloads): a full read of the window, and a refresh between
// full reads (the last 10 minutes and leadTimeOverlap). The test storage keeps the whole week in
// its head, so the refresh costs more here than against Prometheus, whose older samples are in
// blocks it does not open for the last 15 minutes.
func BenchmarkLeadTimeMeasureWeek(b *testing.B) {
	q := fleetStartups(b, "30s", 20160)
	at := time.Unix(0, 0).Add(leadTimeWindow)
	ctx := context.Background()
	newE := func() *Exporter {
		return &Exporter{base: q, log: slog.New(slog.DiscardHandler), interval: 15 * time.Second}
	}
	b.Run("full", func(b *testing.B) {
		e := newE()
		for b.Loop() {
			e.lead = leadTimes{}
			e.measureLeadTimes(ctx, at)
		}
	})
	b.Run("incremental", func(b *testing.B) {
		e := newE()
		e.measureLeadTimes(ctx, at.Add(-10*time.Minute))
		for b.Loop() {
			e.lead.at, e.lead.through = time.Time{}, at.Add(-10*time.Minute)
			e.measureLeadTimes(ctx, at)
			if !e.lead.full.Equal(at.Add(-10*time.Minute)) || len(e.lead.by) != 40 {
				b.Fatalf("not an incremental read of 40 workloads: full read at %v, %d workloads", e.lead.full, len(e.lead.by))
			}
		}
	})
}

// fleetStartups is Prometheus's engine on the rule's samples of 400 pods of 40 workloads, each
// pod's start-up constant, n+1 samples step apart from time 0.
func fleetStartups(b *testing.B, step string, n int) *engineQuerier {
	var sb strings.Builder
	sb.WriteString("load " + step + "\n")
	for p := range 400 {
		fmt.Fprintf(&sb, "  %s{namespace=\"n\",pod=\"p%d\",uid=\"u%d\",workload_type=\"deployment\",workload=\"w%d\"} %dx%d\n",
			startupSeconds, p, p, p%40, 20+(p*53)%400, n)
	}
	return newEngineQuerier(b, sb.String())
}
