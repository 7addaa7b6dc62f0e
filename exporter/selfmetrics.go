package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type selfMetrics struct {
	queryDuration *prometheus.HistogramVec
	loopDuration  prometheus.Histogram
	lastLoop      prometheus.Gauge
	skipped       prometheus.Counter
	policies      prometheus.Gauge
	panics        prometheus.Counter

	interval       prometheus.Gauge
	requests       *prometheus.CounterVec
	batches        prometheus.Gauge
	batchedQueries prometheus.Gauge
	batchFallbacks prometheus.Counter
}

// newSelfMetrics registers the exporter's own metrics.
func newSelfMetrics(reg prometheus.Registerer) selfMetrics {
	f := promauto.With(reg)
	return selfMetrics{
		queryDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "debi_exporter_query_duration_seconds",
			Help:    "Duration of the PromQL queries of the exporter, by input and query type (instant or range).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"query", "type"}),
		loopDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "debi_exporter_loop_duration_seconds",
			Help:    "Duration of one loop: every policy's queries and decisions.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60},
		}),
		lastLoop: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_last_loop_timestamp_seconds",
			Help: "Evaluation time of the last completed loop.",
		}),
		skipped: f.NewCounter(prometheus.CounterOpts{
			Name: "debi_exporter_skipped_steps_total",
			Help: "Steps skipped because the loop fell more than one interval behind.",
		}),
		policies: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_policies",
			Help: "Number of policies this exporter (shard) runs.",
		}),
		panics: f.NewCounter(prometheus.CounterOpts{
			Name: "debi_exporter_policy_panics_total",
			Help: "Policy steps that panicked; the policy is marked stale and the others go on.",
		}),
		interval: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_interval_seconds",
			Help: "The loop's interval (global.interval): DebiExporterLoopStalled fires when no loop completed for 3 of them.",
		}),
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_exporter_prometheus_queries_total",
			Help: "Queries the exporter sent to Prometheus, by type (instant or range): batched queries count once.",
		}, []string{"type"}),
		batches: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_query_batches",
			Help: "Batched instant queries per step: one per query template shared by several policies.",
		}),
		batchedQueries: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_exporter_batched_policy_queries",
			Help: "Policy queries answered by the batches at each step (the others are queried one by one).",
		}),
		batchFallbacks: f.NewCounter(prometheus.CounterOpts{
			Name: "debi_exporter_batch_fallbacks_total",
			Help: "Batched queries Prometheus rejected as bad data; their policies were queried one by one.",
		}),
	}
}
