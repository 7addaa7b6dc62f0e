package webhook

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/policy"
)

// Metrics are the webhook's series (debi_webhook_*), built on an injected registerer (nothing
// registers globally): one set per process, shared by the Controllers of its reloads
// (ControllerOptions.Metrics).
type Metrics struct {
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
	// tidalWatchEnabled is 1 while the Tidal watch is configured and its resources are served.
	tidalWatchEnabled prometheus.Gauge
	// paused is 1 per policy that a pause (per policy or on the target) holds.
	paused *prometheus.GaugeVec
	// pausedReplicas is the count per policy paused at one (webhook.policies[].paused_replicas).
	pausedReplicas *prometheus.GaugeVec
	// policyInfo is 1 per configured policy, with its mode and algorithm.
	policyInfo *prometheus.GaugeVec
	// tokenReloadFailures counts token files that changed into something unusable (unreadable,
	// empty, or the other endpoint's token).
	tokenReloadFailures *prometheus.CounterVec
	// admissions counts the validating admission reviews by kind and result.
	admissions *prometheus.CounterVec
}

// latency buckets from 0.5 ms to ~33 s: a decision without the API server takes well under a
// millisecond, a patch a few milliseconds, a retried conflict hundreds; the top buckets lie past
// webhook.decision_timeout (10 s by default) so that a timed-out notification still lands in a
// finite bucket.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)

// NewMetrics registers the webhook's series and debi_webhook_build_info with reg (nil: a private
// registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // metrics go nowhere, but code paths stay the same
	}
	f := promauto.With(reg)
	reg.MustRegister(version.NewCollector("debi_webhook"))
	return &Metrics{
		admissions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_webhook_admission_reviews_total",
			Help: "Validating admission reviews of ElasticScaler and Tidal objects, by kind and result (allowed, denied, unknown-kind).",
		}, []string{"kind", "result"}),
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
			Help: "Decisions by policy, load source (prometheus, annotation, tidal, none) and result (change, no_change, held: an input stale, missing or ambiguous or the target paused, resolved, error).",
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
		tidalWatchEnabled: f.NewGauge(prometheus.GaugeOpts{
			Name: "debi_webhook_tidal_watch_enabled",
			Help: "1 when the Tidal watch is enabled and the API server serves its resources.",
		}),
		pausedReplicas: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_policy_paused_replicas",
			Help: "The replica count a policy is paused at (webhook.policies[].paused_replicas, spec.debi.pausedReplicas); absent for policies not paused at a count.",
		}, []string{"policy"}),
		paused: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_policy_paused",
			Help: "1 while a policy is paused (per policy, or by the debi.io/paused annotation on its target).",
		}, []string{"policy"}),
		policyInfo: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "debi_webhook_policy_info",
			Help: "1 per policy of the loaded configuration, with its mode and algorithm.",
		}, []string{"policy", "mode", "algorithm"}),
		tokenReloadFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "debi_webhook_token_reload_failures_total",
			Help: "Bearer token files that changed but could not be used (unreadable, empty, or the token of the other endpoint); the last good token stays in force. By endpoint (alertmanager, tidal).",
		}, []string{"endpoint"}),
	}
}

// SetLeader sets debi_webhook_leader: whether this replica holds the Lease and watches Tidals.
func (m *Metrics) SetLeader(leading bool) { m.leader.Set(map[bool]float64{true: 1}[leading]) }

// Configured puts cfg's policies in debi_webhook_policy_info; of old, the configuration cfg
// replaces (nil at start), the series cfg lacks are deleted (not Reset: a scrape never sees the
// policies vanish), with the last-decision gauges of its policies no longer configured.
func (m *Metrics) Configured(cfg, old *config.Config) {
	info := policyInfo(cfg)
	for _, l := range info {
		m.policyInfo.WithLabelValues(l[:]...).Set(1)
	}
	if old == nil {
		return
	}
	for _, l := range policyInfo(old) {
		if !slices.Contains(info, l) {
			m.policyInfo.DeleteLabelValues(l[:]...)
		}
		if _, ok := cfg.PolicyByName(l[0]); !ok {
			for _, v := range []*prometheus.GaugeVec{m.lastReplicas, m.lastLoad, m.lastTarget, m.lastTimestamp, m.paused, m.pausedReplicas} {
				v.DeletePartialMatch(prometheus.Labels{"policy": l[0]})
			}
		}
	}
}

// policyInfo are the label values of debi_webhook_policy_info: policy, mode and algorithm (the
// policy name normalised, as "naive-hpa").
func policyInfo(cfg *config.Config) [][3]string {
	var out [][3]string
	for _, p := range cfg.Policies {
		alg := p.Algorithm
		if spec, err := policy.Parse(p.Algorithm, p.Model); err == nil {
			alg = spec.Name
		}
		out = append(out, [3]string{p.Name, cfg.Webhook.ModeFor(p.Name), alg})
	}
	return out
}
