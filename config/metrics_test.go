package config

import (
	"math"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/scaling"
)

// TestMetricsList: the several-metrics form loads with its defaults, and each metric's capacity
// per pod is its autoscaling/v2 target over the policy's reference utilization (hpa: its
// target), so that the rule holds every metric at its own target.
func TestMetricsList(t *testing.T) {
	c, err := LoadFile("testdata/good-metrics-list.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Policies[0]
	ms := p.ScaleMetrics()
	if len(ms) != 4 {
		t.Fatalf("%d metrics, want 4", len(ms))
	}
	cpu, rps, queue, mem := ms[0], ms[1], ms[2], ms[3]
	if cpu.Unit != "cores" || !strings.Contains(cpu.Query, "namespace_workload:debi_cpu_usage_cores:rate1m") ||
		!strings.Contains(cpu.CapacityQuery, "debi_cpu_request_per_pod_cores") {
		t.Errorf("cpu defaults: %+v", cpu)
	}
	// cpu: 60 % of the request at the rule's target 0.5 → capacity = request × 0.6 / 0.5.
	if got := cpu.CapacityPerPod(0.25, 4); math.Abs(got-0.25*0.6/0.5) > 1e-12 {
		t.Errorf("cpu capacity %v, want %v", got, 0.25*0.6/0.5)
	}
	// rps: 100 per pod at target 0.5 → 200 per pod at load 1.
	if got := rps.CapacityPerPod(rps.Capacity, 4); got != 200 {
		t.Errorf("rps capacity %v, want 200", got)
	}
	if rps.Stabilization.Window.Minutes() != 2 || rps.Stabilization.Aggregation != scaling.AggMax {
		t.Errorf("rps stabilization %+v", rps.Stabilization)
	}
	// queue: 1000 in total at target 0.5 → 2000/4 per pod at 4 replicas.
	if got := queue.CapacityPerPod(queue.Capacity, 4); got != 500 {
		t.Errorf("queue capacity %v, want 500", got)
	}
	// memory: 512 MiB per pod at 0.5.
	if mem.Unit != "bytes" || mem.CapacityPerPod(mem.Capacity, 1) != 2*512*1024*1024 || !strings.Contains(mem.Query, "memory") {
		t.Errorf("memory %+v", mem)
	}
	if p.Queries.Demand != "" || p.Queries.Request != "" {
		t.Errorf("the metrics list leaves queries.demand and queries.request empty, got %q %q", p.Queries.Demand, p.Queries.Request)
	}
	rcs, names, err := p.RunnerConfigs()
	if err != nil || len(rcs) != 4 || names[1] != "rps" || rcs[1].Request != 200 || rcs[1].Metrics.Aggregation != scaling.AggMax {
		t.Fatalf("runner configs %v %v %v", names, err, rcs)
	}
}

// TestSingleMetricForm: the single-metric form is one metric named cpu in cores, on the
// policy's queries and request, with the policy's stabilisation policy.
func TestSingleMetricForm(t *testing.T) {
	c, err := LoadFile("testdata/good-metrics-fallback.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Policies[0]
	ms := p.ScaleMetrics()
	if len(ms) != 1 || ms[0].Name != "cpu" || ms[0].Unit != "cores" || ms[0].Query != p.Queries.Demand ||
		ms[0].CapacityQuery != p.Queries.Request || ms[0].Factor != 1 || ms[0].Stabilization != p.Metrics.MetricsPolicy {
		t.Fatalf("single metric %+v (policy %+v)", ms, p.Queries)
	}
	if ms[0].QueryPath != "queries.demand" {
		t.Errorf("query path %q", ms[0].QueryPath)
	}
}

// TestMemoryDefaults: a metric named memory needs no query: the recording rules' working set,
// and with a Utilization target their memory request of one pod, as cpu has its rules'.
func TestMemoryDefaults(t *testing.T) {
	c, err := Load([]byte(`
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    metrics:
      - name: cpu
        target: {type: Utilization}
      - name: memory
        target: {type: Utilization, averageUtilization: 80}
`))
	if err != nil {
		t.Fatal(err)
	}
	mem := c.Policies[0].ScaleMetrics()[1]
	sel := `{namespace="shop",workload_type="deployment",workload="web"}`
	if mem.Unit != "bytes" || mem.Query != "sum(namespace_workload:debi_memory_working_set_bytes:sum"+sel+")" ||
		mem.CapacityQuery != "max(namespace_workload:debi_memory_request_per_pod_bytes:avg"+sel+")" {
		t.Errorf("memory defaults: %+v", mem)
	}
	// In another unit, memory is a name like any other: its query, and its request with a
	// Utilization target, are required.
	for _, tc := range []struct{ metric, want string }{
		{"{name: memory, unit: items, target: {type: Utilization}}", "policies[0].metrics[0].query"},
		{"{name: memory, unit: items, query: sum(q), target: {type: Utilization}}", "policies[0].metrics[0].request_query"},
	} {
		_, err := Load([]byte(`
policies:
  - name: web
    target: {namespace: shop, name: web}
    metrics:
      - ` + tc.metric + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one naming %s", tc.metric, err, tc.want)
		}
	}
}
