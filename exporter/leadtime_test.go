package exporter

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestLeadTimeMeasured: the exporter measures each workload's pod start-ups from the recording
// rule, one query per quantile for every workload at once (PromQL's own engine here), reading
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
	if lead := len(leadTimeQueries()); after-mid != (mid-before)+lead {
		t.Errorf("instant queries: %d at the step before the refresh, %d at the refresh; want %d more", mid-before, after-mid, lead)
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
  debi_lead_time_seconds{policy="m",namespace="llm",workload_type="statefulset",workload="m",component="path",quantile="0.5"} 30x30 45x10
  debi_lead_time_seconds{policy="m",namespace="llm",workload_type="statefulset",workload="m",component="path",quantile="0.9"} 90x40
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
`)
	start, end := time.Unix(0, 0), time.Unix(0, 0).Add(60*time.Minute)
	m, err := MeasuredLeadTime(context.Background(), q, &c.Policies[0], start, end)
	if err != nil {
		t.Fatal(err)
	}
	want := LeadTimeMeasure{StartupMedian: 240 * time.Second, Startup90: 288 * time.Second, Startups: 3, PathMedian: 45 * time.Second, PathOK: true}
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
}

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
	q := newEngineQuerier(t, b.String())
	e, reg := newTestExporter(t, `
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
  - name: few
    target: {kind: StatefulSet, namespace: llm, name: few}
    model: naive
    history_step: 1m
`, q)
	at := time.Unix(0, 0).Add(60 * time.Minute)
	e.Step(context.Background(), at)
	// 460 s of start-up + 60 s of path (4 × 15 s), rounded up to 15 s: 525 s.
	for pol, want := range map[string]float64{"m": 525, "m-set": 120, "few": 120} {
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
