package config

import (
	"strings"
	"testing"
)

// TestMetricSources: metrics read from the metrics APIs load with their defaults (namespace:
// the target's), their history is the series the exporter publishes, and their capacities are
// their AverageValue and Value targets over the reference utilization, as a PromQL metric's.
func TestMetricSources(t *testing.T) {
	c, err := LoadFile("testdata/good-metrics-sources.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Policies[0]
	ms := p.ScaleMetrics()
	if len(ms) != 4 {
		t.Fatalf("%d metrics, want 4", len(ms))
	}
	if ms[0].Source != nil {
		t.Errorf("cpu has a source: %+v", ms[0].Source)
	}
	q, ing, pods := ms[1], ms[2], ms[3]
	for _, tc := range []struct {
		m                    ScaleMetric
		typ, ns, path, descr string
	}{
		{q, SourceExternal, "shop", "metrics[1].external", `external metric "queue_messages_ready" in namespace "shop"`},
		{ing, SourceObject, "edge", "metrics[2].object", `object metric "requests_per_second" of Ingress "main" in namespace "edge"`},
		{pods, SourcePods, "shop", "metrics[3].pods", `pods metric "http_requests_per_second" in namespace "shop"`},
	} {
		s := tc.m.Source
		if s == nil {
			t.Fatalf("%s: no source", tc.m.Name)
		}
		if s.Type != tc.typ || s.Namespace != tc.ns || s.Path != tc.path || tc.m.QueryPath != tc.path || s.String() != tc.descr {
			t.Errorf("%s: source %+v (%s), query path %q", tc.m.Name, s, s, tc.m.QueryPath)
		}
		if want := SourceHistoryQuery("shop-worker", tc.m.Name); tc.m.Query != want || tc.m.CapacityQuery != "" {
			t.Errorf("%s: history query %q, capacity query %q; want %q and none", tc.m.Name, tc.m.Query, tc.m.CapacityQuery, want)
		}
	}
	sel, err := q.Source.Selector.Selector()
	if err != nil || sel.String() != "queue=orders,tier in (gold,silver)" {
		t.Errorf("selector %v %v", sel, err)
	}
	if ing.Source.Object != (ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"}) {
		t.Errorf("described object %+v", ing.Source.Object)
	}
	// hpa at target 0.5: 30 messages per pod → 60 at load 1; the Ingress's 2000 rps over the
	// workload → 4000/4 = 1000 per pod at 4 replicas; 100 rps per pod → 200.
	if got := q.CapacityPerPod(q.Capacity, 4); got != 60 {
		t.Errorf("queue capacity %v, want 60", got)
	}
	if got := ing.CapacityPerPod(ing.Capacity, 4); got != 1000 {
		t.Errorf("ingress capacity %v, want 1000", got)
	}
	if got := pods.CapacityPerPod(pods.Capacity, 4); got != 200 {
		t.Errorf("pods capacity %v, want 200", got)
	}
	// The history query is valid PromQL returning one series.
	var errs errList
	checkExpr("x", q.Query, &errs)
	if errs.first() != nil || !strings.HasPrefix(q.Query, "max(") {
		t.Errorf("history query %q: %v", q.Query, errs.first())
	}
}

// TestMetricSourceErrors: every error of a source names its field path.
func TestMetricSourceErrors(t *testing.T) {
	const head = "policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    algorithm: hpa\n    metrics:\n"
	for _, tc := range []struct{ name, metric, path string }{
		{"no metric", `{name: q, unit: items, external: {}, target: {type: Value, value: "1"}}`, "policies[0].metrics[0].external.metric"},
		{"bad namespace", `{name: q, unit: items, external: {metric: q, namespace: Shop_1}, target: {type: Value, value: "1"}}`, "policies[0].metrics[0].external.namespace"},
		{"two sources", `{name: q, unit: items, external: {metric: q}, pods: {metric: q}, target: {type: Value, value: "1"}}`, "policies[0].metrics[0]"},
		{"object without name", `{name: q, unit: items, object: {metric: q, described_object: {kind: Ingress}}, target: {type: Value, value: "1"}}`, "policies[0].metrics[0].object.described_object.name"},
		{"object bad api_version", `{name: q, unit: items, object: {metric: q, described_object: {api_version: a/b/c, kind: Ingress, name: x}}, target: {type: Value, value: "1"}}`, "policies[0].metrics[0].object.described_object.api_version"},
		{"pods metric with a slash", `{name: q, unit: items, pods: {metric: "a/b"}, target: {type: AverageValue, averageValue: "1"}}`, "policies[0].metrics[0].pods.metric"},
		{"pods without target value", `{name: q, unit: items, pods: {metric: q}, target: {type: AverageValue}}`, "policies[0].metrics[0].target.averageValue"},
		{"no query nor source", `{name: q, unit: items, target: {type: Value, value: "1"}}`, "policies[0].metrics[0].query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(head + "      - " + tc.metric + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.path+": ") {
				t.Fatalf("error %v; want one at %s", err, tc.path)
			}
		})
	}
}
