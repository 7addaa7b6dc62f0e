package config

import (
	"strings"
	"testing"
)

// zeroPolicy is a policy that scales a model server to zero on its router's request rate.
const zeroPolicy = `
global: {prometheus_url: http://prometheus:9090}
policies:
  - name: llm
    target: {namespace: ai, name: vllm}
    scaling: {min_replicas: 0%s}
    metrics:
      - {name: cpu, target: {type: Utilization, averageUtilization: 60}}
      - name: requests
        unit: requests_per_second
        query: sum(rate(router_requests_total{model="llama"}[1m]))
        target: {type: AverageValue, averageValue: "4"}%s
`

// TestScaleToZeroConfig: min_replicas 0 loads with a metric read from outside the pods, whose
// activation and the policy's scale_to_zero_after reach the runner; without such a metric, or
// with an activation where none is read, the error names the field and says why.
func TestScaleToZeroConfig(t *testing.T) {
	c, err := Load([]byte(strings.Replace(strings.Replace(zeroPolicy, "%s", ", scale_to_zero_after: 10m", 1), "%s", "\n        activation: 0.5", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Policies[0]
	cfgs, names, err := p.RunnerConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if names[0] != "cpu" || cfgs[0].Wake || names[1] != "requests" || !cfgs[1].Wake || cfgs[1].Activation != 0.5 {
		t.Errorf("wake metrics: %v, cpu wake %v, requests wake %v at %v; want requests only, at 0.5", names, cfgs[0].Wake, cfgs[1].Wake, cfgs[1].Activation)
	}
	if got := cfgs[1].Params.ScaleToZeroAfter.String(); got != "10m0s" || cfgs[1].Params.MinReplicas != 0 {
		t.Errorf("min %d, scale_to_zero_after %s, want 0 and 10m", cfgs[1].Params.MinReplicas, got)
	}

	for _, tc := range []struct{ name, yaml, path, says string }{
		{"cpu only", `
policies:
  - name: web
    target: {namespace: shop, name: web}
    scaling: {min_replicas: 0}
`, "policies[0].scaling.min_replicas", "needs a metric that wakes the workload from zero"},
		{"pods metric only", `
policies:
  - name: web
    target: {namespace: shop, name: web}
    scaling: {min_replicas: 0}
    metrics:
      - {name: rps, unit: requests_per_second, pods: {metric: http_requests_per_second}, target: {type: AverageValue, averageValue: "10"}}
`, "policies[0].scaling.min_replicas", "the policy's rps read nothing when no pod runs"},
		{"no activation: the query is not taken for a wake metric", zeroPolicy, "policies[0].scaling.min_replicas", "sets its activation"},
		{"activation 0: loads", strings.Replace(zeroPolicy, "%s", "", 1) + "        activation: 0\n", "", ""},
		{"activation without min 0", strings.Replace(strings.Replace(zeroPolicy, "{min_replicas: 0%s}", "{min_replicas: 1}", 1), "%s", "\n        activation: 2", 1),
			"policies[0].metrics[1].activation", "only by a policy that scales to zero"},
		{"negative activation", strings.Replace(strings.Replace(zeroPolicy, "%s", "", 1), "%s", "\n        activation: -1", 1),
			"policies[0].metrics[1].activation", "not negative"},
		{"cpu activation", strings.Replace(strings.Replace(zeroPolicy, "%s", "", 1), "target: {type: Utilization, averageUtilization: 60}}", "target: {type: Utilization, averageUtilization: 60}, activation: 1}", 1),
			"policies[0].metrics[0].activation", "read from the pods"},
	} {
		_, err := Load([]byte(strings.ReplaceAll(tc.yaml, "%s", "")))
		if tc.path == "" { // the policy as it should be: loads
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.path+": ") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error at %s saying %q", tc.name, err, tc.path, tc.says)
		}
	}
}
