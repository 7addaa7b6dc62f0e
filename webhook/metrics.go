package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics of the webhook, built on an injected registerer (nothing registers globally).
type metrics struct {
	notifications        *prometheus.CounterVec
	notificationDuration *prometheus.HistogramVec
	decisions            *prometheus.CounterVec
	decisionDuration     *prometheus.HistogramVec
	patches              *prometheus.CounterVec
	patchDuration        *prometheus.HistogramVec
	conflicts            *prometheus.CounterVec
	lastReplicas         *prometheus.GaugeVec
	lastLoad             *prometheus.GaugeVec
	lastTarget           *prometheus.GaugeVec
	lastTimestamp        *prometheus.GaugeVec
	leader               prometheus.Gauge
}

// latency buckets from 0.5 ms to ~8 s: a decision without the API server takes well under a
// millisecond, a patch a few milliseconds, a retried conflict hundreds.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 15)

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // metrics go nowhere, but code paths stay the same
	}
	f := promauto.With(reg)
	reg.MustRegister(version.NewCollector("debi_webhook"))
	return &metrics{
		notifications: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_webhook_notifications_total",
			Help: "Notifications received, by endpoint (alertmanager, tidal, watch) and HTTP status code of the answer.",
		}, []string{"endpoint", "code"}),
		notificationDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "debi_webhook_notification_duration_seconds",
			Help:    "Time to handle one notification, decisions and patches included.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
		decisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_webhook_decisions_total",
			Help: "Decisions by policy, load source (prometheus, annotation, tidal, none) and result (change, no_change, error).",
		}, []string{"policy", "source", "result"}),
		decisionDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "debi_webhook_decision_duration_seconds",
			Help:    "Time to decide for one policy: reading the scale subresource and Prometheus, running the algorithm, patching.",
			Buckets: latencyBuckets,
		}, []string{"policy"}),
		patches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_webhook_patches_total",
			Help: "Writes by policy, mode (act, hpa-floor) and result (success, unchanged, error).",
		}, []string{"policy", "mode", "result"}),
		patchDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "debi_webhook_patch_duration_seconds",
			Help:    "Time of one write to the API server, conflict retries included.",
			Buckets: latencyBuckets,
		}, []string{"mode"}),
		conflicts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_webhook_patch_conflicts_total",
			Help: "Optimistic-concurrency conflicts met (and retried) while writing, by policy.",
		}, []string{"policy"}),
		lastReplicas: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_last_decision_replicas",
			Help: "Replica count of the last decision per policy, also in shadow mode.",
		}, []string{"policy", "mode"}),
		lastLoad: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_last_decision_load_ratio",
			Help: "Load W (utilization at the current size) the last decision used, per policy.",
		}, []string{"policy"}),
		lastTarget: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_last_decision_target_ratio",
			Help: "Target utilization of the last decision per policy (dynamic for debi).",
		}, []string{"policy"}),
		lastTimestamp: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_last_decision_timestamp_seconds",
			Help: "Unix time of the last decision per policy.",
		}, []string{"policy"}),
		leader: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_webhook_leader",
			Help: "1 while this replica holds the Lease and acts on watches.",
		}),
	}
}
