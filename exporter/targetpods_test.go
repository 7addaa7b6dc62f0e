package exporter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/debi-scaler/debi/config"
)

// TestTargetPodsPublished: the pods and size read for a target of any kind are published once
// per policy, lint-clean; a failed read publishes neither (no stale size), counts and logs the
// failure once with the policy's field, and a read that works again publishes again. A Rollout's
// two policies read it once per step. (TestTargetPodsAnyKind reads them from a real
// kube-apiserver.)
func TestTargetPodsPublished(t *testing.T) {
	var calls int
	var fail error
	pods := func(_ context.Context, tg config.Target) (TargetPods, error) {
		calls++
		if tg.Kind != "Rollout" || tg.Name != "web" {
			t.Errorf("read %s", tg)
		}
		if fail != nil {
			return TargetPods{}, fail
		}
		return TargetPods{Replicas: 4, Pods: []string{"web-1", "web-2"}}, nil
	}
	e, reg, logs := newLoggedExporter(t, `
policies:
  - name: web
    target: {api_version: argoproj.io/v1alpha1, kind: Rollout, namespace: shop, name: web}
    algorithm: hpa
  - name: web-apa
    target: {api_version: argoproj.io/v1alpha1, kind: Rollout, namespace: shop, name: web}
    algorithm: apa
`, &fakeQuerier{byExpr: map[string]series{}})
	e.SetMetricsAPI(nil, nil, pods)
	ctx := context.Background()
	e.Step(ctx, t0)
	if calls != 1 {
		t.Errorf("%d reads for one target of two policies in one step, want 1", calls)
	}
	for _, pol := range []string{"web", "web-apa"} {
		if v := gauge(t, reg, "debi_target_spec_replicas", pol); v != 4 {
			t.Errorf("debi_target_spec_replicas{policy=%q} = %v, want 4", pol, v)
		}
		for _, pod := range []string{"web-1", "web-2"} {
			if v := gauge(t, reg, "debi_target_pod_info", pol, "pod", pod); v != 1 {
				t.Errorf("debi_target_pod_info{policy=%q,pod=%q} = %v", pol, pod, v)
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg, "debi_target_pod_info", "debi_target_spec_replicas", "debi_target_pods_errors_total"); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}

	fail = errors.New("scale subresource: forbidden")
	e.Step(ctx, t0.Add(e.interval))
	e.Step(ctx, t0.Add(2*e.interval))
	if _, ok := value(t, reg, "debi_target_spec_replicas", "web"); ok {
		t.Error("a failed read left the last size published")
	}
	if _, ok := value(t, reg, "debi_target_pod_info", "web", "pod", "web-1"); ok {
		t.Error("a failed read left the last pods published")
	}
	if v := gauge(t, reg, "debi_target_pods_errors_total", "web"); v != 2 {
		t.Errorf("debi_target_pods_errors_total = %v after two failed steps, want 2", v)
	}
	out := logs.String()
	if n := strings.Count(out, "target's pods not read"); n != 2 { // once per policy
		t.Errorf("the failure is logged %d times, want once per policy (2):\n%s", n, out)
	}
	if !strings.Contains(out, "field=policies[1].target") || !strings.Contains(out, "forbidden") {
		t.Errorf("the log does not name the field and the cause:\n%s", out)
	}

	fail = nil
	e.Step(ctx, t0.Add(3*e.interval))
	if v := gauge(t, reg, "debi_target_spec_replicas", "web"); v != 4 {
		t.Errorf("after the read works again: size %v, want 4", v)
	}
	if !strings.Contains(logs.String(), "read from its scale subresource again") {
		t.Error("the recovery is not logged")
	}
}
