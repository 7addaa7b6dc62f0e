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

// The recording rules' series of Deployments shop/web and shop/db, as rules/debi.rules.yaml
// records them (rules/tests/debi_test.yaml tests the rules themselves: which containers count).
const resourceSeries = `
load 1m
  namespace_workload:debi_memory_working_set_bytes:sum{namespace="shop",workload="web",workload_type="deployment"} 200+0x5
  namespace_workload:debi_memory_working_set_bytes:sum{namespace="shop",workload="db",workload_type="deployment"} 1000+0x5
  namespace_workload:debi_memory_request_per_pod_bytes:avg{namespace="shop",workload="web",workload_type="deployment"} 144+0x5
  namespace_workload:debi_memory_request_per_pod_bytes:avg{namespace="shop",workload="db",workload_type="deployment"} 4096+0x5
  namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload="web",workload_type="deployment"} 1.5+0x5
  namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload="db",workload_type="deployment"} 3+0x5
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
		// web's series, not db's.
		{"memory", 200, 144},
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
