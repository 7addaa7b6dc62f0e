package exporter

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
)

// benchQuerier answers the default queries of any policy without I/O: 4 replicas, 0.5 core per
// pod and a demand wave whose phase depends on the query, so that every policy's EVT fit and
// forecast see their own data.
type benchQuerier struct{}

func (benchQuerier) value(expr string, ts time.Time) float64 {
	switch {
	case strings.Contains(expr, "request"):
		return 0.5
	case strings.Contains(expr, "replicas"):
		return 4
	}
	h := fnv.New32a()
	h.Write([]byte(expr))
	phase := float64(h.Sum32()%1000) / 1000 * 2 * math.Pi
	k := float64(ts.Unix() / 15)
	return 1 + 0.8*math.Sin(2*math.Pi*k/96+phase) + 0.3*math.Sin(k*1.7+phase)*math.Sin(k*0.31)
}

func (q benchQuerier) Query(_ context.Context, expr string, ts time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return model.Vector{{Value: model.SampleValue(q.value(expr, ts)), Timestamp: model.TimeFromUnixNano(ts.UnixNano())}}, nil, nil, nil
}

func (q benchQuerier) QueryRange(_ context.Context, expr string, r v1.Range, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	ss := &model.SampleStream{}
	for t := r.Start; !t.After(r.End); t = t.Add(r.Step) {
		ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: model.SampleValue(q.value(expr, t))})
	}
	return model.Matrix{ss}, nil, nil, nil
}

// benchModel is the forecaster of the benchmark: the default debi model when it is registered,
// else the test's parameter-free drift model.
func benchModel() string {
	if forecast.Known(policy.DefaultDebiModel) {
		return policy.DefaultDebiModel
	}
	return testModel
}

func benchConfig(n int, algorithm string) string {
	var b strings.Builder
	// Per-policy queries: benchQuerier answers each policy's own query without I/O, so this
	// measures the loop's CPU side; batching is measured against a real Prometheus (TestFleet,
	// make bench-fleet).
	b.WriteString("global: {interval: 15s}\nexporter: {batch_queries: false}\npolicies:\n")
	for i := range n {
		// history_step = interval: every loop is a new history step with a forecast and an EVT
		// fit, the worst case. A season of 288 steps (a Holt-Winters needs two) fits the 760
		// points of history.
		fmt.Fprintf(&b, "  - {name: p%d, target: {namespace: ns%d, name: w%d}, algorithm: %s, history_step: 15s, forecast: {season: 288}}\n", i, i%50, i, algorithm)
	}
	return b.String()
}

// BenchmarkLoop measures one loop (every policy's four instant queries, its runner step with
// forecast and EVT fit, and the snapshot) after the start-up history load of 760 steps, and
// reports the heap each policy holds. Run it on one core:
//
//	go test ./exporter -run '^$' -bench Loop -cpu 1 -benchtime 10x
func BenchmarkLoop(b *testing.B) {
	for _, c := range []struct {
		n   int
		alg string
	}{
		{100, "debi"}, {1000, "debi"}, {1000, "hpa"},
	} {
		alg := c.alg
		if alg == "debi" {
			alg = benchModel() + "-debi"
		}
		b.Run(fmt.Sprintf("policies=%d/algorithm=%s", c.n, alg), func(b *testing.B) {
			cfg := loadConfig(b, benchConfig(c.n, alg))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e, err := New(cfg, cfg.Policies, benchQuerier{}, nil, prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			t := time.Unix(1_700_000_100, 0)
			e.Step(ctx, t) // loads 759 points of history per policy and trains
			e.Wait()
			t = t.Add(15 * time.Second)
			e.Step(ctx, t)
			runtime.GC()
			runtime.ReadMemStats(&after)
			perPolicy := float64(after.HeapAlloc-before.HeapAlloc) / float64(c.n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t = t.Add(15 * time.Second)
				e.Step(ctx, t)
			}
			b.StopTimer()
			e.Wait()
			b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N), "s/loop")
			b.ReportMetric(perPolicy, "heap-bytes/policy")
			runtime.KeepAlive(e)
		})
	}
}
