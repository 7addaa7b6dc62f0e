package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's series. NewMetrics registers them; Run uses unregistered ones
// when Options.Metrics is nil.
type Metrics struct {
	evaluations    *prometheus.CounterVec
	writes         *prometheus.CounterVec
	nextActivation *prometheus.GaugeVec
	leader         prometheus.Gauge
	lateness       prometheus.Histogram
}

// NewMetrics creates the controller's metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_tidal_rules_evaluations_total",
			Help: "Evaluations of a Tidal's rules, by result: ok (a rule is in force), invalid (the rules do not parse: Ready=False InvalidRules), no_rule (none fired within the lookback).",
		}, []string{"result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_tidal_status_writes_total",
			Help: "Writes of a Tidal's status through the status subresource, by result: success, conflict (retried), not_found (deleted meanwhile), error.",
		}, []string{"result"}),
		nextActivation: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_tidal_next_activation_timestamp_seconds",
			Help: "When the next rule of a Tidal fires (Unix seconds); the series is removed when the Tidal is deleted or its rules are invalid.",
		}, []string{"namespace", "name"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "debi_tidal_leader",
			Help: "1 while this replica evaluates Tidals (holds the Lease, or leader election is off), else 0.",
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "debi_tidal_activation_write_lateness_seconds",
			Help:    "Time from a rule's activation to the controller's successful status write for it (activations written within a minute of their second).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.evaluations, m.writes, m.nextActivation, m.leader, m.lateness)
	}
	for _, r := range []string{"ok", "invalid", "no_rule"} {
		m.evaluations.WithLabelValues(r)
	}
	for _, r := range []string{"success", "conflict", "not_found", "error"} {
		m.writes.WithLabelValues(r)
	}
	return m
}
