package metricsapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/debi-scaler/debi/internal/testenv"
)

// The series of two pods of Deployment shop/web, one of Deployment shop/db, as cAdvisor,
// kube-state-metrics and the pod-owner recording rule of rules/ give them. The pod-level cgroup
// (container="") and the pause container must not count.
const resourceSeries = `
load 1m
  container_memory_working_set_bytes{namespace="shop",pod="web-1",container="app",image="a"} 100+0x5
  container_memory_working_set_bytes{namespace="shop",pod="web-1",container="side",image="s"} 20+0x5
  container_memory_working_set_bytes{namespace="shop",pod="web-1",container="",image=""} 120+0x5
  container_memory_working_set_bytes{namespace="shop",pod="web-1",container="POD",image="p"} 1+0x5
  container_memory_working_set_bytes{namespace="shop",pod="web-2",container="app",image="a"} 80+0x5
  container_memory_working_set_bytes{namespace="shop",pod="db-0",container="db",image="d"} 1000+0x5
  kube_pod_container_resource_requests{namespace="shop",pod="web-1",container="app",resource="memory"} 128+0x5
  kube_pod_container_resource_requests{namespace="shop",pod="web-1",container="side",resource="memory"} 32+0x5
  kube_pod_container_resource_requests{namespace="shop",pod="web-2",container="app",resource="memory"} 128+0x5
  kube_pod_container_resource_requests{namespace="shop",pod="web-2",container="app",resource="cpu"} 2+0x5
  kube_pod_container_resource_requests{namespace="shop",pod="db-0",container="db",resource="memory"} 4096+0x5
  namespace_workload_pod:debi_kube_pod_owner:relabel{namespace="shop",pod="web-1",workload="web",workload_type="deployment"} 1+0x5
  namespace_workload_pod:debi_kube_pod_owner:relabel{namespace="shop",pod="web-2",workload="web",workload_type="deployment"} 1+0x5
  namespace_workload_pod:debi_kube_pod_owner:relabel{namespace="shop",pod="db-0",workload="db",workload_type="deployment"} 1+0x5
  namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload="web",workload_type="deployment"} 1.5+0x5
  namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace="shop",workload="web",workload_type="deployment"} 0.5+0x5
`

func TestResourceQueriesFor(t *testing.T) {
	q := testenv.EngineQuerier{
		Engine:  promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}),
		Storage: promqltest.LoadedStorage(t, resourceSeries),
	}
	at := time.Unix(240, 0)
	for _, tc := range []struct {
		resource       string
		usage, request float64
	}{
		// web-1: app 100 + side 20 (not the pod cgroup's 120 nor the pause's 1); web-2: 80.
		// Requests per pod: web-1 128 + 32 = 160, web-2 128; mean 144.
		{"memory", 200, 144},
		// The recording rules' values.
		{"cpu", 1.5, 0.5},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			rq, err := ResourceQueriesFor(tc.resource, "shop", "Deployment", "web")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range []struct {
				expr string
				want float64
			}{{rq.Usage, tc.usage}, {rq.RequestPerPod, tc.request}} {
				v, _, _, err := q.Query(context.Background(), e.expr, at)
				if err != nil {
					t.Fatalf("%s: %v", e.expr, err)
				}
				vec := v.(model.Vector)
				if len(vec) != 1 || float64(vec[0].Value) != e.want {
					t.Errorf("%s = %v; want %v", e.expr, vec, e.want)
				}
			}
		})
	}
	for _, bad := range [][4]string{{"gpu", "shop", "deployment", "web"}, {"cpu", "", "deployment", "web"}} {
		if _, err := ResourceQueriesFor(bad[0], bad[1], bad[2], bad[3]); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("ResourceQueriesFor%v: error %v; want one naming %q", bad, err, bad[0])
		}
	}
}
