package exporter

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/debi-scaler/debi/forecast"
)

// BenchmarkPolicyCost measures the heap the exporter holds per policy of each registered model
// at the defaults (a policy names only its algorithm, <model>-debi: history 760 steps of 5 min,
// retrain every 120, season 1 d), runner, model, published state and metric series included:
//
//   - bytes/policy@startup: after the first loop (the start-up history load, 760 points per
//     policy, and the training run it starts) and that run;
//   - bytes/policy: in steady state, after 120 more history steps (a retrain on the full
//     history) and ten minutes of loops at the interval, whose samples fill the runners'
//     windows.
//
// The CPU cost of training is policy.BenchmarkTrainingCost's. Run:
//
//	go test ./exporter -run '^$' -bench PolicyCost -benchtime 1x -cpu 1
func BenchmarkPolicyCost(b *testing.B) {
	const n = 50
	for _, model := range forecast.Names() {
		if model == testModel {
			continue
		}
		b.Run("model="+model, func(b *testing.B) {
			var yml strings.Builder
			// benchQuerier answers every query with one unlabelled series, which a batched query
			// (by namespace and workload) cannot be split by: each policy queries on its own.
			yml.WriteString("global: {prometheus_url: 'http://prometheus:9090'}\nexporter: {batch_queries: false}\npolicies:\n")
			for i := range n {
				fmt.Fprintf(&yml, "  - {name: p%d, target: {namespace: ns%d, name: w%d}, algorithm: %s-debi}\n", i, i, i, model)
			}
			cfg := loadConfig(b, yml.String())
			p := cfg.Policies[0]
			histStep, interval := p.HistoryStep, cfg.Global.Interval
			var before, ms runtime.MemStats
			heap := func(e *Exporter) float64 {
				e.Wait()
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				return float64(int64(ms.HeapAlloc)-int64(before.HeapAlloc)) / n
			}
			runtime.GC()
			runtime.ReadMemStats(&before)
			e, err := New(cfg, cfg.Policies, benchQuerier{}, nil, prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			t := time.Unix(1_700_000_000, 0).Truncate(histStep)
			e.Step(ctx, t) // loads the history and starts training
			startup := heap(e)
			for range p.Retrain + 1 {
				t = t.Add(histStep)
				e.Step(ctx, t)
			}
			e.Wait()
			for range int(10 * time.Minute / interval) {
				t = t.Add(interval)
				e.Step(ctx, t)
			}
			steady := heap(e)
			for _, ps := range e.policies {
				if ps.historyPoints < p.History-1 {
					b.Fatalf("policy %s: %d history points loaded, want %d", ps.cfg.Name, ps.historyPoints, p.History-1)
				}
				if ps.lastTrain.IsZero() || ps.trainFailures > 0 {
					b.Fatalf("policy %s: last training %v, %v failures", ps.cfg.Name, ps.lastTrain, ps.trainFailures)
				}
				if need, have := ps.runner.ModelHistory(); have < need {
					b.Fatalf("policy %s: model has %d of the %d history steps it needs", ps.cfg.Name, have, need)
				}
			}
			runtime.KeepAlive(e)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(startup, "bytes/policy@startup")
			b.ReportMetric(steady, "bytes/policy")
		})
	}
}
