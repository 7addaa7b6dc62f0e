package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestLLMServingGuide: the configuration of docs/llm-serving.md loads and passes the checks: two
// roles, one a LeaderWorkerSet (any kind with a scale subresource), each on vLLM's metrics.
func TestLLMServingGuide(t *testing.T) {
	b, err := os.ReadFile("../docs/llm-serving.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) != 2 {
		t.Fatalf("%d yaml blocks, want the guide's configuration and its scale-to-zero policy", len(blocks))
	}
	zero, err := Load([]byte(blocks[1][1]))
	if err != nil {
		t.Fatalf("the guide's scale-to-zero policy: %v", err)
	}
	cfgs, names, err := zero.Policies[0].RunnerConfigs()
	if err != nil || zero.Policies[0].Scaling.MinReplicas != 0 || len(cfgs) != 2 || cfgs[0].Wake || !cfgs[1].Wake {
		t.Errorf("the scale-to-zero policy: metrics %v, err %v; want min_replicas 0, woken by the router only", names, err)
	}
	c, err := Load([]byte(blocks[0][1]))
	if err != nil {
		t.Fatalf("the guide's configuration: %v", err)
	}
	if len(c.Policies) != 2 {
		t.Fatalf("%d policies, want prefill and decode", len(c.Policies))
	}
	decode := c.Policies[1]
	if !decode.Target.PodsFromScale() || !strings.Contains(decode.Queries.Replicas, "debi_target_spec_replicas") {
		t.Errorf("the decode role (a LeaderWorkerSet) does not read its size from its scale subresource: %+v", decode.Queries)
	}
	for _, p := range c.Policies {
		for _, m := range p.Metrics.List {
			if !strings.Contains(m.Query, "vllm:") || !strings.Contains(m.Query, "namespace_workload_pod:debi_kube_pod_owner:relabel") {
				t.Errorf("%s/%s does not sum vLLM's series through the pod → workload rule: %s", p.Name, m.Name, m.Query)
			}
		}
	}
}
