package exporter

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/debi-scaler/debi/config"
)

// hpaLoad is kube-state-metrics over two hours at 5 minutes (25 points, promqltest's "a x n" is
// n+1 samples) around shop/web:
//   - web-hpa scales Deployment web on CPU at 50 % for the first hour, then 60 %, 2–20
//     replicas, exported by two kube-state-metrics replicas (instance a and b): one HPA;
//   - old-hpa also scaled Deployment web, until 40 minutes in: the one seen last wins;
//   - sts-hpa scales a StatefulSet web, legacy-hpa an extensions/v1beta1 Deployment web (another
//     group), other/web-hpa a Deployment web in another namespace: none of them is shop/web's;
//   - mem-hpa scales Deployment api on CPU and memory utilization, min 1, max 10;
//   - worker has no HPA.
const hpaLoad = `
load 5m
  kube_horizontalpodautoscaler_info{namespace="shop",horizontalpodautoscaler="web-hpa",scaletargetref_api_version="apps/v1",scaletargetref_kind="Deployment",scaletargetref_name="web",instance="a"} 1x24
  kube_horizontalpodautoscaler_info{namespace="shop",horizontalpodautoscaler="web-hpa",scaletargetref_api_version="apps/v1",scaletargetref_kind="Deployment",scaletargetref_name="web",instance="b"} 1x24
  kube_horizontalpodautoscaler_spec_target_metric{namespace="shop",horizontalpodautoscaler="web-hpa",metric_name="cpu",metric_target_type="utilization",instance="a"} 50x11 60x12
  kube_horizontalpodautoscaler_spec_target_metric{namespace="shop",horizontalpodautoscaler="web-hpa",metric_name="cpu",metric_target_type="utilization",instance="b"} 50x11 60x12
  kube_horizontalpodautoscaler_spec_min_replicas{namespace="shop",horizontalpodautoscaler="web-hpa",instance="a"} 2x24
  kube_horizontalpodautoscaler_spec_max_replicas{namespace="shop",horizontalpodautoscaler="web-hpa",instance="a"} 20x24
  kube_horizontalpodautoscaler_info{namespace="shop",horizontalpodautoscaler="old-hpa",scaletargetref_kind="Deployment",scaletargetref_name="web"} 1x8
  kube_horizontalpodautoscaler_spec_target_metric{namespace="shop",horizontalpodautoscaler="old-hpa",metric_name="cpu",metric_target_type="utilization"} 80x8
  kube_horizontalpodautoscaler_info{namespace="shop",horizontalpodautoscaler="sts-hpa",scaletargetref_kind="StatefulSet",scaletargetref_name="web"} 1x24
  kube_horizontalpodautoscaler_info{namespace="shop",horizontalpodautoscaler="legacy-hpa",scaletargetref_api_version="extensions/v1beta1",scaletargetref_kind="Deployment",scaletargetref_name="web"} 1x24
  kube_horizontalpodautoscaler_info{namespace="other",horizontalpodautoscaler="web-hpa",scaletargetref_kind="Deployment",scaletargetref_name="web"} 1x24
  kube_horizontalpodautoscaler_info{namespace="shop",horizontalpodautoscaler="mem-hpa",scaletargetref_kind="Deployment",scaletargetref_name="api"} 1x24
  kube_horizontalpodautoscaler_spec_target_metric{namespace="shop",horizontalpodautoscaler="mem-hpa",metric_name="cpu",metric_target_type="utilization"} 70x24
  kube_horizontalpodautoscaler_spec_target_metric{namespace="shop",horizontalpodautoscaler="mem-hpa",metric_name="memory",metric_target_type="utilization"} 80x24
  kube_horizontalpodautoscaler_spec_min_replicas{namespace="shop",horizontalpodautoscaler="mem-hpa"} 1x24
  kube_horizontalpodautoscaler_spec_max_replicas{namespace="shop",horizontalpodautoscaler="mem-hpa"} 10x24
`

// TestWhatIfFindHPA: the HPA of a workload is matched on its scale target's kind, name,
// namespace and group, read at its last values with what changed within the range, and a CPU
// utilization HPA told from one on other metrics (hand-built kube-state-metrics series).
func TestWhatIfFindHPA(t *testing.T) {
	q := newEngineQuerier(t, hpaLoad)
	start := time.Unix(0, 0)
	end := start.Add(2 * time.Hour)
	deploy := func(name string) config.Target {
		return config.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: name}
	}
	for _, tc := range []struct {
		name    string
		target  config.Target
		found   bool
		want    HPA
		replays bool
	}{
		// 60 % since an hour in: the last value, the change said; old-hpa, gone at 40 minutes,
		// is named but not read; sts-hpa, legacy-hpa and other/web-hpa are not web's.
		{"deployment", deploy("web"), true, HPA{Namespace: "shop", Name: "web-hpa", Metrics: []string{"cpu (utilization)"}, Target: 0.6,
			MinReplicas: 2, MaxReplicas: 20, Changes: []string{"target 50 % → 60 %"}, Others: []string{"shop/old-hpa"}}, true},
		// The kind as the configuration may spell it.
		{"kind in lower case", config.Target{APIVersion: "apps/v1", Kind: "deployment", Namespace: "shop", Name: "web"}, true,
			HPA{Namespace: "shop", Name: "web-hpa", Metrics: []string{"cpu (utilization)"}, Target: 0.6,
				MinReplicas: 2, MaxReplicas: 20, Changes: []string{"target 50 % → 60 %"}, Others: []string{"shop/old-hpa"}}, true},
		{"statefulset", config.Target{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "shop", Name: "web"}, true,
			HPA{Namespace: "shop", Name: "sts-hpa"}, false},
		// CPU and memory: read, but not an HPA the simulator replays.
		{"cpu and memory", deploy("api"), true, HPA{Namespace: "shop", Name: "mem-hpa", Metrics: []string{"cpu (utilization)", "memory (utilization)"},
			Target: 0.7, MinReplicas: 1, MaxReplicas: 10}, false},
		{"no HPA", deploy("worker"), false, HPA{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, found, err := FindHPA(context.Background(), q, tc.target, start, end, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.found || fmt.Sprint(h) != fmt.Sprint(tc.want) || h.CPUUtilization() != tc.replays {
				t.Errorf("found %v, %+v (replays %v); want %v, %+v (%v)", found, h, h.CPUUtilization(), tc.found, tc.want, tc.replays)
			}
		})
	}
	// A range that ends before web-hpa's target changed and after old-hpa was last seen (at
	// 40 minutes): web-hpa at 50 %, unchanged.
	h, _, err := FindHPA(context.Background(), q, deploy("web"), start, start.Add(50*time.Minute), 5*time.Minute)
	if err != nil || h.Name != "web-hpa" || h.Target != 0.5 || len(h.Changes) != 0 {
		t.Errorf("the first 50 minutes: %+v, %v; want web-hpa at 0.5, unchanged", h, err)
	}
	// A range past the end of the series: the HPA is read at its last sample, which is said.
	h, _, err = FindHPA(context.Background(), q, deploy("web"), start, start.Add(4*time.Hour), 5*time.Minute)
	if err != nil || h.Target != 0.6 || !slices.Contains(h.Changes, "last seen 1970-01-01 02:00, before the range's end") {
		t.Errorf("a range past the series: %+v, %v; want 0.6 and when it was last seen", h, err)
	}
}
