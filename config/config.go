// Package config loads debi's configuration file, shared by the exporter and the webhook: the
// policies (which workload, which load queries, which algorithm and parameters) and each
// component's own section. Loading is strict: unknown fields are rejected, defaults are filled in
// one place, PromQL is parsed, and every error names the field path to fix, e.g.
// `policies[2].queries.demand`.
package config

import (
	"time"

	commoncfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Defaults of a policy's time settings.
const (
	// DefaultHistoryStep is the default history step (rounded up to a multiple of
	// global.interval).
	DefaultHistoryStep = 5 * time.Minute
	// DefaultLeadTime is the default actuation delay, METHOD §7's pod start-up default; set
	// lead_time to the decision delay plus the pods' start-up time.
	DefaultLeadTime = 2 * time.Minute
	// DefaultLookbackDelta is the default lookback_delta of instant queries.
	DefaultLookbackDelta = 2 * time.Minute
	// DefaultSeason is the default seasonal period of the seasonal models: one day.
	DefaultSeason = 24 * time.Hour
)

// Config is the whole file.
type Config struct {
	Global   Global         `yaml:"global"`
	Policies []Policy       `yaml:"policies"`
	Webhook  WebhookConfig  `yaml:"webhook"`
	Exporter ExporterConfig `yaml:"exporter"`

	// warnings collected while loading (settings replaced by defaults).
	warnings []string
	// intervalBad is set when global.interval is invalid or could not be decoded (Check): the
	// checks of other fields against it are skipped rather than reported as its echoes.
	intervalBad bool
	// src is the document Load read, so that WithPolicies validates the file's policies from
	// their source again (defaults are filled once, from what the file says) beside the extra ones.
	src []byte
	// dir is the directory of the file LoadFile read: the relative file paths of the policies'
	// endpoints are resolved against it.
	dir string
}

// Global holds settings shared by every component.
type Global struct {
	// PrometheusURL is the Prometheus HTTP API the exporter queries (and the webhook reads fresh
	// inputs from).
	PrometheusURL string `yaml:"prometheus_url"`
	// Interval is the decision period: the exporter's loop period, at which every policy reads its
	// inputs and decides (the controllers' sync period of the backtest). The model history of a
	// policy advances more slowly, once per its history_step.
	Interval time.Duration `yaml:"interval"`
	// QueryTimeout bounds each PromQL query.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// LookbackDelta is the lookback_delta of the instant queries of the exporter and the
	// webhook: how old the latest sample of a series may be and still count. Prometheus's own
	// 5m would let a Prometheus killed and restarted (no staleness markers) answer with the
	// samples from before its outage as if they were current; set it to about twice the longest
	// scrape or rule evaluation interval behind the queries. Default 2m.
	LookbackDelta time.Duration `yaml:"lookback_delta"`
	// HTTPConfig is the HTTP client of the Prometheus API, in the format of Prometheus's and
	// Alertmanager's http_config (prometheus/common): authorization (type, credentials or
	// credentials_file; bearer by default), basic_auth, oauth2, tls_config, proxy_url,
	// follow_redirects, enable_http2 and http_headers, e.g. `http_headers: {X-Scope-OrgID:
	// {values: [tenant]}}` for a Mimir or Cortex tenant (Thanos Query reads THANOS-TENANT by
	// default: docs/fleet.md). Relative file paths are taken
	// from the configuration file's directory; secret files are read at each request, so a
	// rotated token needs no restart.
	HTTPConfig *commoncfg.HTTPClientConfig `yaml:"http_config"`
	// ElasticScalers takes policies from ElasticScaler objects (elasticscaler.io/v1alpha1) as
	// well as from this file, in the exporter and the webhook: each MetricsTrigger object
	// becomes the policy <namespace>.<name>, validated as the file's policies are, added,
	// changed and removed with its object without a restart (docs/elastic-scaler.md). Off by
	// default.
	ElasticScalers ElasticScalersConfig `yaml:"elastic_scalers"`

	// httpErr is the error prometheus/common's decoder found in http_config, reported by
	// validation with its field path.
	httpErr error
}

// UnmarshalYAML decodes the section strictly, as the rest of the file, but keeps the error that
// prometheus/common's own validation returns while decoding http_config, so that it is reported
// at its field path (global.http_config) rather than as a bare decoder message.
func (g *Global) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Global
	err := unmarshal((*plain)(g))
	if _, ok := err.(*yaml.TypeError); err == nil || ok {
		return err // unknown fields and wrong types: the decoder's message gets its path
	}
	g.httpErr = err
	return nil
}

// DefaultAlgorithm is the algorithm of a policy that names none: budget, the one the backtest
// recommends (the cheapest at equal overload on every class of the embedded traces).
const DefaultAlgorithm = "budget"

// Policy is one scaled workload.
type Policy struct {
	Name   string `yaml:"name"`
	Target Target `yaml:"target"`
	// Algorithm is the policy name: budget (the default: the fewest pods within an overload
	// budget), <model>-budget, hpa, apa, debi, <model>-debi, <model>-hpa or evt-<model>-hpa.
	// budget's decision side is scaling.budget, its quantile and calibration the policy's
	// budget section.
	Algorithm string `yaml:"algorithm"`
	// Model is the forecaster of the debi and budget algorithms (default holtwinters for debi,
	// auto for budget: whichever of Holt-Winters, ARIMA and the last value has forecast the
	// recent history best); algorithm: budget with model: naive is naive-budget.
	Model string `yaml:"model"`
	// FallbackModel is a model that forecasts while model waits for the history it needs
	// (holtwinters: two seasons, two days of a daily cycle, when Prometheus has less of the
	// demand than that), e.g. arima, which forecasts after 24 history steps. Without one, debi and
	// budget size on the observed load until then. Empty (the default): none. auto forecasts
	// from the first step and takes none.
	FallbackModel string  `yaml:"fallback_model"`
	Queries       Queries `yaml:"queries"`
	// Request is a fixed CPU request per pod in cores, used when queries.request is empty.
	Request float64 `yaml:"request"`
	// HistoryStep is the sample period of the model history: the history, the forecast and the
	// EVT fit advance once per history step, while the policy decides every global.interval
	// (between history steps the latest forecast stands). A positive multiple of
	// global.interval; the start-up history is loaded with query_range at this step.
	// Default 5m, rounded up to a multiple of global.interval.
	HistoryStep time.Duration `yaml:"history_step"`
	// LeadTime is the actuation delay the forecast must cover: the decision delay (scrape, rule
	// evaluation, Alertmanager's group_wait, the webhook) plus the pod start-up time. The
	// forecast horizon is h = ceil(lead_time / history_step) + 1 history steps, and W2 is the
	// largest forecast over the next h history steps (METHOD §2). Left unset (or auto), it is measured:
	// the exporter sizes for the workload's measured pod start-up (0.9 quantile) plus the
	// policy's measured decision path once at least 5 start-ups are recorded, and for 2m until
	// then (docs/exporter.md, "Lead time measured").
	LeadTime time.Duration `yaml:"lead_time"`
	// LeadTimeMeasured is set when lead_time was left unset: the exporter replaces the default
	// with the measured lead time when the workload's history allows it.
	LeadTimeMeasured bool `yaml:"-"`
	// History is the number of history steps (of history_step each) the models and the EVT fit
	// see, and the number of points loaded at start-up.
	History int `yaml:"history"`
	// Retrain is the number of history steps between model training runs.
	Retrain int `yaml:"retrain"`
	// Season is the seasonal period of the seasonal models (holtwinters, seasonal-naive) as a
	// duration, converted to history steps; forecast.season, in history steps, overrides it.
	// Default 24h.
	Season time.Duration `yaml:"season"`
	// ObservationWindow is the window the demand query averages over (the rate window of
	// queries.demand: 1m for the shipped recording rule). The budget policy extrapolates the
	// observation by half of it to the demand now, as the backtest does. Default 1m.
	ObservationWindow time.Duration  `yaml:"observation_window"`
	Scaling           scaling.Params `yaml:"scaling"`
	// Metrics is the stabilisation policy of the one CPU demand (a mapping: window,
	// aggregation…), or a list of metrics, each with its own query, unit and target: the
	// decision is then the largest replica count over them, as the HPA's (PolicyMetrics).
	Metrics  PolicyMetrics      `yaml:"metrics"`
	Forecast forecast.Config    `yaml:"forecast"`
	EVT      forecast.POTConfig `yaml:"evt"`
	// Budget is the model side of a budget policy (METHOD §9): the overload budget b, and how
	// the forecast's own recent errors turn it into the calibrated upper quantile the policy
	// sizes for. The decision side (u_sla, hold, min_saving) is scaling.budget.
	// Read by budget and <model>-budget policies only; validated for every policy.
	Budget forecast.CalibratorConfig `yaml:"budget"`

	// given are the keys a translation (an ElasticScaler object) set, as the file's keys are
	// read from the document: set keys keep their value, zero included.
	given givenKeys
}

// givenKeys are the keys a policy's scaling (with scaling.budget) and budget sections set, so
// that a zero that means something (tolerance: 0, scale_down_stabilization: 0s, window: 0s,
// hold: 0s, calibration_gain: 0) is kept, a zero that is invalid (min_replicas: 0, target: 0) is
// reported at its path, and only what is left out takes its default.
type givenKeys struct {
	Scaling map[string]any `yaml:"scaling"`
	Budget  map[string]any `yaml:"budget"`
}

// merge adds the keys of o (an ElasticScaler's translation) to g.
func (g givenKeys) merge(o givenKeys) givenKeys {
	var cp func(dst, src map[string]any) map[string]any
	cp = func(dst, src map[string]any) map[string]any {
		if len(src) == 0 {
			return dst
		}
		out := map[string]any{}
		for k, v := range dst {
			out[k] = v
		}
		for k, v := range src {
			if a, ok := out[k].(map[string]any); ok {
				if b, ok := v.(map[string]any); ok {
					v = cp(a, b)
				}
			}
			out[k] = v
		}
		return out
	}
	return givenKeys{Scaling: cp(g.Scaling, o.Scaling), Budget: cp(g.Budget, o.Budget)}
}

// ExporterConfig is the exporter's own section.
type ExporterConfig struct {
	// HistoryLookback is how far back the exporter loads history with query_range at start-up
	// (default: history × history_step of each policy, capped by this value when set).
	HistoryLookback time.Duration `yaml:"history_lookback"`
	// MAEWindow is the number of history steps of the rolling forecast-error figure: one
	// absolute error per history step, the forecast of the demand h history steps ahead
	// against the demand observed then.
	MAEWindow int `yaml:"mae_window"`
	// QueryOffset delays each step's queries behind its evaluation time, as Prometheus's
	// rule_query_offset does: the step for time t runs at t+offset and queries at t, so samples
	// scraped or recorded just before t have been ingested. It makes every step replayable from
	// Prometheus's data. Default 0; must be below global.interval.
	QueryOffset time.Duration `yaml:"query_offset"`
	// Concurrency is the number of policies stepped at once (their queries are I/O-bound).
	// Default 8.
	Concurrency int `yaml:"concurrency"`
	// BatchQueries answers the queries that several policies share as a template (they differ
	// only in equality matchers' values, as the default queries of every workload do) with one
	// query per template and step, grouped by the labels that differ and fanned out to the
	// policies; history likewise, one range query per template in pages (docs/fleet.md). Each
	// policy gets the answer its own query would have had. Default true; false queries every
	// policy on its own.
	BatchQueries *bool `yaml:"batch_queries"`
}

// PolicyByName returns the policy of that name.
func (c *Config) PolicyByName(name string) (*Policy, bool) {
	for i := range c.Policies {
		if c.Policies[i].Name == name {
			return &c.Policies[i], true
		}
	}
	return nil, false
}

// RunnerConfig turns a loaded policy into the policy.Runner configuration: the runner's step is
// the history step, its horizon policy.Horizon(lead_time, history_step), and the runner may be
// stepped at every global.interval.
func (p *Policy) RunnerConfig() (policy.Config, error) {
	spec, err := policy.Parse(p.Algorithm, p.Model)
	if err != nil {
		return policy.Config{}, err
	}
	rc := policy.DefaultConfig(spec)
	rc.Params, rc.Metrics, rc.Request, rc.Step = p.Scaling, p.Metrics.MetricsPolicy, p.Request, p.HistoryStep
	rc.LeadSteps, rc.History, rc.Retrain = policy.Horizon(p.LeadTime, p.HistoryStep), p.History, p.Retrain
	rc.Season, rc.Model, rc.POT, rc.Calibration, rc.Fallback = p.Season, p.Forecast, p.EVT, p.Budget, p.FallbackModel
	// The budget policy sizes for the actuation delay itself, not for whole history steps.
	rc.LeadTime, rc.ObservationWindow = p.LeadTime, p.ObservationWindow
	if rc.Request == 0 {
		rc.Request = 1 // replaced by queries.request at every step
	}
	return rc, rc.Validate()
}

// Batching reports whether the exporter batches shared query templates (batch_queries, default
// true).
func (e ExporterConfig) Batching() bool { return e.BatchQueries == nil || *e.BatchQueries }
