package exporter

import (
	"context"
	"math"
	"testing"
	"time"
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
`)
	c := loadConfig(t, `
policies:
  - name: m
    target: {kind: StatefulSet, namespace: llm, name: m}
  - name: other
    target: {kind: StatefulSet, namespace: llm, name: other}
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
}
