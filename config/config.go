// Package config loads debi's configuration file, shared by the exporter and the webhook: the
// policies (which workload, which load queries, which algorithm and parameters) and each
// component's own section. Loading is strict: unknown fields are rejected, defaults are filled in
// one place, PromQL is parsed, and every error names the field path to fix, e.g.
// `policies[2].queries.demand`.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

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

// Target names the scaled object; it must have a scale subresource. One policy acts on a
// target (webhook mode act or hpa-floor); others on the same target must be in shadow mode, as
// baselines: they decide and are published beside it (the policy dashboard draws every policy
// of the workload), and write nothing.
type Target struct {
	APIVersion string `yaml:"api_version"`
	Kind       string `yaml:"kind"`
	Namespace  string `yaml:"namespace"`
	Name       string `yaml:"name"`
}

// String is namespace/kind/name.
func (t Target) String() string { return t.Namespace + "/" + t.Kind + "/" + t.Name }

// DefaultAlgorithm is the algorithm of a policy that names none: budget, the one the backtest
// recommends (the cheapest at equal overload on every class of the embedded traces).
const DefaultAlgorithm = "budget"

// Queries are the PromQL expressions of one policy. Each must return one series.
type Queries struct {
	// Demand is the workload's CPU use in cores, D(t).
	Demand string `yaml:"demand"`
	// Replicas is the spec replica count N(t).
	Replicas string `yaml:"replicas"`
	// ReadyReplicas is the ready replica count Nr(t).
	ReadyReplicas string `yaml:"ready_replicas"`
	// Request is the CPU request of one pod in cores; leave empty and set policy.request for a
	// fixed value.
	Request string `yaml:"request"`
}

// Policy is one scaled workload.
type Policy struct {
	Name   string `yaml:"name"`
	Target Target `yaml:"target"`
	// Algorithm is the policy name: budget (the default: the fewest pods within an overload
	// budget), <model>-budget, hpa, apa, debi, <model>-debi, <model>-hpa or evt-<model>-hpa.
	// budget's decision side is scaling.budget, its quantile and calibration the policy's
	// budget section.
	Algorithm string `yaml:"algorithm"`
	// Model is the forecaster of the debi and budget algorithms (default holtwinters);
	// algorithm: budget with model: naive is naive-budget.
	Model string `yaml:"model"`
	// FallbackModel is a model that forecasts while model waits for the history it needs
	// (holtwinters: two seasons, two days of a daily cycle, when Prometheus has less of the
	// demand than that), e.g. arima, which forecasts after 24 history steps. Without one, debi and
	// budget size on the observed load until then. Empty (the default): none.
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
	// largest forecast over the next h history steps (METHOD §2). Default 2m.
	LeadTime time.Duration `yaml:"lead_time"`
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

// FieldError is a configuration error at a field path such as policies[2].queries.demand.
type FieldError struct {
	// Path is the YAML path of the offending field.
	Path string
	// Err says what is wrong with it.
	Err error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

// errorf returns a FieldError at path.
func errorf(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// subfieldError turns a validation error whose message starts with the field's YAML name
// ("min_replicas must be at least 1") into a FieldError at path.field.
func subfieldError(path string, err error) error {
	field, _, _ := strings.Cut(err.Error(), " ")
	return &FieldError{Path: path + "." + field, Err: err}
}

// addSubfields appends the FieldErrors of another package's validation error under path: one per
// error errors.Join joined (each naming its field, as subfieldError reads it), in their order, so
// that the first is the one Load has always reported.
func (l *errList) addSubfields(path string, err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			l.addSubfields(path, e)
		}
		return
	}
	l.add(subfieldError(path, err))
}

// Warnings are the settings that were invalid and replaced by their defaults while loading.
func (c *Config) Warnings() []string { return c.warnings }

// LoadFile reads and validates a configuration file.
func LoadFile(name string) (*Config, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	c, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// As Prometheus does: files named in the file are relative to its directory.
	c.Global.HTTPConfig.SetDirectory(filepath.Dir(name))
	return c, nil
}

// Load parses, fills defaults and validates a configuration.
func Load(b []byte) (*Config, error) {
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty configuration")
		}
		return nil, withYAMLPaths(b, err)
	}
	// The same document again, for the keys only (anchors and merge keys resolved by the
	// decoder): the strict decode above has already rejected anything malformed.
	var keys struct {
		Policies []givenKeys `yaml:"policies"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&keys); err != nil {
		return nil, withYAMLPaths(b, err)
	}
	if err := c.setDefaultsAndValidate(keys.Policies); err != nil {
		return nil, err
	}
	c.src = b
	return c, nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+): `)

// withYAMLPaths rewrites the decoder's "line N: …" messages (unknown fields, wrong types) to
// name the field path at that line as well, e.g. "policies[1].scaling.min_replica (line 12): …".
func withYAMLPaths(b []byte, err error) error {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil {
		if line, msg, ok := syntaxErrorLine(b, err); ok {
			return fmt.Errorf("yaml: line %d: %s", line, msg)
		}
		return err
	}
	paths := map[int]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if _, ok := paths[k.Line]; !ok {
					paths[k.Line] = p
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(&root, "")
	msg := yamlLineRe.ReplaceAllStringFunc(err.Error(), func(m string) string {
		line, _ := strconv.Atoi(yamlLineRe.FindStringSubmatch(m)[1])
		if p, ok := paths[line]; ok {
			return fmt.Sprintf("%s (line %d): ", p, line)
		}
		return m
	})
	return errors.New(msg)
}

// yamlSyntaxRe splits the message of a YAML syntax error: "yaml: line N: problem", or
// "yaml: problem" where the library names no line.
var yamlSyntaxRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxErrorLine returns the line of a YAML syntax error err in b, and its message without the
// line. go.yaml.in/yaml/v3 names the line where the enclosing construct starts (its context
// mark), not the line of the problem, and counts it from 0 for parser errors (from 1 for
// scanner errors): an indentation error on line 6 inside a list that starts on line 4 is
// reported at "line 3", a mapping value not allowed on line 10 at "line 9". The parser stops at
// the first problem, so its line is the first line whose end makes the file's prefix fail with
// the same message; the problem is never before its context, so the search starts at the line
// the library names. ok is false when err is not a syntax error or no prefix reproduces it
// (the message is then left as it is).
func syntaxErrorLine(b []byte, err error) (line int, msg string, ok bool) {
	var te *yaml.TypeError
	if err == nil || errors.As(err, &te) {
		return 0, "", false
	}
	m := yamlSyntaxRe.FindStringSubmatch(err.Error())
	if m == nil || strings.Contains(m[2], "\n") {
		return 0, "", false
	}
	msg = m[2]
	from := 1
	if m[1] != "" {
		from, _ = strconv.Atoi(m[1])
		from = max(from, 1)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	end := make([]int, len(lines)+1) // end[n]: the bytes of the first n lines
	for k, l := range lines {
		end[k+1] = end[k] + len(l)
	}
	fails := func(n int) bool { // the first n lines fail with the same message
		var node yaml.Node
		perr := yaml.Unmarshal(b[:end[n]], &node)
		if perr == nil {
			return false
		}
		pm := yamlSyntaxRe.FindStringSubmatch(perr.Error())
		return pm != nil && pm[2] == msg
	}
	// Past the problem every prefix fails with it: gallop from the context's line, then bisect
	// the last step, so a problem far inside a long list costs a few dozen parses, not one a line.
	lo, hi := from-1, from
	for step := 1; hi < len(lines) && !fails(hi); step *= 2 {
		lo, hi = hi, min(hi+step, len(lines))
	}
	if hi > len(lines) || !fails(hi) {
		return 0, "", false
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, msg, true
}

// setDefaultsAndValidate is the one place where defaults are filled and fields checked; given
// holds the budget keys each policy sets. It returns the first error of validate's.
func (c *Config) setDefaultsAndValidate(given []givenKeys) error {
	var errs errList
	c.validate(given, &errs)
	return errs.first()
}

// errList collects the independent errors of one validation pass in the order of the checks:
// Load reports the first, Check every one. A check that depends on a field already found
// invalid is skipped rather than reported again.
type errList []error

// add appends err when it is not nil and reports whether it was.
func (l *errList) add(err error) bool {
	if err == nil {
		return false
	}
	*l = append(*l, err)
	return true
}

// addf appends a FieldError at path.
func (l *errList) addf(path, format string, args ...any) { l.add(errorf(path, format, args...)) }

// first is the first error, or nil.
func (l errList) first() error {
	if len(l) == 0 {
		return nil
	}
	return l[0]
}

// validate fills the defaults and checks every field, appending each independent error to errs
// in the order Load has always checked them, so that the first is the one it reports.
func (c *Config) validate(given []givenKeys, errs *errList) {
	c.globalDefaults(errs)
	c.exporterDefaults(errs)
	seen := map[string]int{}
	targetOK := make([]bool, len(c.Policies))
	for i := range c.Policies {
		p := &c.Policies[i]
		path := fmt.Sprintf("policies[%d]", i)
		var keys givenKeys
		if i < len(given) {
			keys = given[i]
		}
		var nameOK bool
		nameOK, targetOK[i] = c.policyDefaults(p, path, keys, errs)
		if !nameOK {
			continue
		}
		if j, dup := seen[p.Name]; dup {
			errs.addf(path+".name", "%q is already used by policies[%d]", p.Name, j)
			continue
		}
		seen[p.Name] = i
	}
	c.Webhook.validate(c, errs)
	// One policy acts on a target; any others on it must be shadow (a baseline that decides
	// and is published, drawn beside the acting one, but writes nothing). Policies whose target
	// or mode is invalid are left out: that error is reported where it is.
	acting := map[string]int{}
	for i := range c.Policies {
		p := &c.Policies[i]
		mode := c.Webhook.ModeFor(p.Name)
		if !targetOK[i] || mode == ModeShadow || !validMode(mode) {
			continue
		}
		if j, dup := acting[p.Target.Identity()]; dup {
			errs.addf(fmt.Sprintf("policies[%d].target", i), "%s is already scaled by policies[%d] (mode %s); a second policy on a target must be shadow (webhook.policies[].mode: shadow), one policy acts per target", p.Target, j, c.Webhook.ModeFor(c.Policies[j].Name))
			continue
		}
		acting[p.Target.Identity()] = i
	}
}

// globalDefaults fills and checks the global section. An invalid global.interval marks the
// configuration so that the checks against it (history_step, query_offset, max_input_age) are
// skipped instead of echoing it.
func (c *Config) globalDefaults(errs *errList) {
	g := &c.Global
	if g.Interval == 0 {
		g.Interval = 15 * time.Second
	}
	if g.Interval < time.Second {
		// Steps fall on a millisecond grid and feed rate()-based recording rules: below a
		// second neither makes sense.
		errs.addf("global.interval", "must be at least 1s, got %v", g.Interval)
		c.intervalBad = true
	}
	if g.QueryTimeout == 0 {
		g.QueryTimeout = 10 * time.Second
	}
	if g.QueryTimeout < 0 {
		errs.addf("global.query_timeout", "must be positive, got %v", g.QueryTimeout)
	}
	if g.LookbackDelta == 0 {
		g.LookbackDelta = DefaultLookbackDelta
	}
	if g.LookbackDelta < time.Second {
		errs.addf("global.lookback_delta", "must be at least 1s, got %v", g.LookbackDelta)
	}
	if g.PrometheusURL != "" {
		u, err := url.Parse(g.PrometheusURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.addf("global.prometheus_url", "want an http(s) URL such as http://prometheus:9090, got %q", g.PrometheusURL)
		}
	}
	for i, ns := range g.ElasticScalers.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs.addf(fmt.Sprintf("global.elastic_scalers.namespaces[%d]", i), "%q is not a valid namespace: %s", ns, strings.Join(msgs, "; "))
		}
	}
	if g.httpErr != nil {
		errs.add(&FieldError{Path: "global.http_config", Err: g.httpErr})
	}
	if g.HTTPConfig == nil {
		hc := commoncfg.DefaultHTTPClientConfig
		g.HTTPConfig = &hc
	}
	if g.httpErr == nil {
		if err := g.HTTPConfig.Validate(); err != nil {
			errs.add(&FieldError{Path: "global.http_config", Err: err})
		}
	}
}

// exporterDefaults fills and checks the exporter section.
func (c *Config) exporterDefaults(errs *errList) {
	e := &c.Exporter
	if e.MAEWindow == 0 {
		e.MAEWindow = 60
	}
	if e.MAEWindow < 0 {
		errs.addf("exporter.mae_window", "must be positive, got %d", e.MAEWindow)
	}
	if e.HistoryLookback < 0 {
		errs.addf("exporter.history_lookback", "must not be negative, got %v", e.HistoryLookback)
	}
	if e.QueryOffset < 0 || (!c.intervalBad && e.QueryOffset >= c.Global.Interval) {
		errs.addf("exporter.query_offset", "must be in [0, global.interval (%v)), got %v", c.Global.Interval, e.QueryOffset)
	}
	if e.Concurrency == 0 {
		e.Concurrency = 8
	}
	if e.Concurrency < 0 {
		errs.addf("exporter.concurrency", "must be positive, got %d", e.Concurrency)
	}
}

// policyDefaults fills and checks one policy, appending each independent error to errs. It
// reports whether the name and the target are valid, for the checks across policies.
func (c *Config) policyDefaults(p *Policy, path string, given givenKeys, errs *errList) (nameOK, targetOK bool) {
	nameOK, targetOK = policyIdentity(p, path, errs)
	policyAlgorithm(p, path, errs)
	c.policyParams(p, path, given, errs)
	c.policyTiming(p, path, errs)
	if p.FallbackModel != "" {
		c.checkFallback(p, path, errs)
	}
	c.policyQueries(p, path, targetOK, errs)
	return nameOK, targetOK
}

// policyIdentity fills and checks the policy's name and target, reporting whether each is
// valid.
func policyIdentity(p *Policy, path string, errs *errList) (nameOK, targetOK bool) {
	nameOK, targetOK = true, true
	if strings.TrimSpace(p.Name) == "" {
		errs.addf(path+".name", "required")
		nameOK = false
	}
	if p.Target.APIVersion == "" {
		p.Target.APIVersion = "apps/v1"
	}
	if p.Target.Kind == "" {
		p.Target.Kind = "Deployment"
	}
	if p.Target.Namespace == "" {
		errs.addf(path+".target.namespace", "required")
		targetOK = false
	}
	if p.Target.Name == "" {
		errs.addf(path+".target.name", "required")
		targetOK = false
	}
	if !p.Target.normalize(path+".target", errs) {
		targetOK = false
	}
	if nameOK && (!policyNameRe.MatchString(p.Name) || len(p.Name) > 253) {
		errs.addf(path+".name", "%q must be letters, digits, '.', '_' or '-', starting with a letter or digit, at most 253 characters (it is a label value and part of queries)", p.Name)
		nameOK = false
	}
	return nameOK, targetOK
}

// policyAlgorithm fills and checks the policy's algorithm and model, the algorithm in its
// canonical name.
func policyAlgorithm(p *Policy, path string, errs *errList) {
	if p.Algorithm == "" {
		p.Algorithm = DefaultAlgorithm
	}
	if strings.EqualFold(strings.TrimSpace(p.Algorithm), "budget") && strings.TrimSpace(p.Model) != "" {
		// As debi takes its model from model:, so does budget (policy.Parse names budget's
		// model only in the algorithm's name).
		p.Algorithm = strings.TrimSpace(p.Model) + "-budget"
	}
	if spec, err := policy.Parse(p.Algorithm, p.Model); err != nil {
		errs.add(&FieldError{Path: path + ".algorithm", Err: err})
	} else if p.Model != "" && spec.Model != "" && !strings.EqualFold(p.Model, spec.Model) {
		errs.addf(path+".model", "%q contradicts algorithm %q, which names model %q", p.Model, p.Algorithm, spec.Model)
	} else {
		p.Algorithm = spec.Name
		if spec.Model != "" {
			p.Model = spec.Model
		}
	}
}

// policyParams fills and checks the policy's parameters: scaling, budget, the metrics policy
// and EVT.
//
// Defaults: every field the policy leaves out takes the paper's or Kubernetes' default, so a
// policy names only what it changes; a field it sets keeps its value, zero included, and is
// validated as it is.
func (c *Config) policyParams(p *Policy, path string, given givenKeys, errs *errList) {
	given = given.merge(p.given)
	fillUnset(&p.Scaling, scaling.DefaultParams(), given.Scaling)
	budgetKeys, _ := given.Scaling["budget"].(map[string]any)
	fillUnset(&p.Scaling.Budget, scaling.DefaultBudgetParams(), budgetKeys)
	// One error per bad field (scaling.budget.* among them: BudgetParams name their fields
	// budget.u_sla …, so the path is scaling.budget.u_sla).
	errs.addSubfields(path+".scaling", p.Scaling.Validate())
	fillUnset(&p.Budget, forecast.DefaultCalibratorConfig(), given.Budget)
	_, neighboursSet := given.Budget["quantile_neighbours"]
	p.Budget = p.Budget.WithMethodDefaults(neighboursSet)
	errs.addSubfields(path+".budget", p.Budget.Validate())
	// An invalid metrics policy falls back to its defaults with a warning (the Elastic Scaler's
	// rule: a bad setting never stops the scaler).
	if p.Metrics.Window == 0 { // unset, not invalid
		p.Metrics.Window = scaling.DefaultMetricsPolicy().Window
	}
	var warns []string
	p.Metrics.MetricsPolicy, warns = p.Metrics.MetricsPolicy.Normalize()
	for _, w := range warns {
		c.warnings = append(c.warnings, fmt.Sprintf("%s.metrics.%s", path, w))
	}
	def := forecast.DefaultPOTConfig()
	if p.EVT.Tau == 0 {
		p.EVT.Tau = def.Tau
	}
	if p.EVT.Q == 0 {
		p.EVT.Q = def.Q
	}
	if p.EVT.MinExcesses == 0 {
		p.EVT.MinExcesses = def.MinExcesses
	}
	if p.EVT.Method == "" {
		p.EVT.Method = def.Method
	}
	errs.addSubfields(path+".evt", p.EVT.Validate())
}

// policyTiming fills and checks the policy's history and its step, the retraining, the lead
// time, the season and the observation window.
func (c *Config) policyTiming(p *Policy, path string, errs *errList) {
	if p.History == 0 {
		p.History = 760
	}
	if p.History < 2 || p.History > 11000 {
		// Prometheus answers a range query with at most 11,000 points per series.
		errs.addf(path+".history", "must be in [2, 11000] steps, got %d", p.History)
	}
	if p.Retrain == 0 {
		p.Retrain = 120
	}
	if p.Retrain < 0 {
		errs.addf(path+".retrain", "must not be negative, got %d", p.Retrain)
	}
	iv := c.Global.Interval
	if p.HistoryStep == 0 {
		// 5m, rounded up to whole intervals.
		p.HistoryStep = (DefaultHistoryStep + iv - 1) / iv * iv
	}
	switch {
	case c.intervalBad: // reported at global.interval: only what is wrong whatever it is
		if p.HistoryStep < 0 {
			errs.addf(path+".history_step", "must be a positive multiple of global.interval, got %v", p.HistoryStep)
		}
	case p.HistoryStep < iv || p.HistoryStep%iv != 0:
		errs.addf(path+".history_step", "must be a positive multiple of global.interval (%v), got %v", iv, p.HistoryStep)
	}
	if p.LeadTime == 0 {
		p.LeadTime = DefaultLeadTime
	}
	if p.LeadTime < 0 {
		errs.addf(path+".lead_time", "must not be negative, got %v", p.LeadTime)
	}
	if p.Season == 0 {
		p.Season = DefaultSeason
	}
	if p.ObservationWindow == 0 {
		p.ObservationWindow = time.Minute
	}
	if p.ObservationWindow < 0 {
		errs.addf(path+".observation_window", "must not be negative, got %v", p.ObservationWindow)
	}
	if p.Season < 0 {
		errs.addf(path+".season", "must not be negative, got %v", p.Season)
	}
	if p.Forecast.Season < 0 {
		errs.addf(path+".forecast.season", "must not be negative, got %d", p.Forecast.Season)
	}
}

// policyQueries checks the policy's request, fills its metrics and queries from their defaults
// and checks the queries.
func (c *Config) policyQueries(p *Policy, path string, targetOK bool, errs *errList) {
	if p.Request < 0 || math.IsNaN(p.Request) || math.IsInf(p.Request, 0) {
		errs.addf(path+".request", "must be a positive number of cores, got %v", p.Request)
	} else if p.Request > 0 && p.Queries.Request != "" {
		errs.addf(path+".request", "set either a fixed request or queries.request, not both")
	}
	// The default queries are built from the target: with an invalid one, only the queries the
	// file sets are checked.
	c.metricDefaults(p, path, targetOK, errs)
	if targetOK {
		c.queryDefaults(p)
	}
	several := len(p.Metrics.List) > 0
	for _, q := range []struct{ field, expr string }{
		{"demand", p.Queries.Demand}, {"replicas", p.Queries.Replicas},
		{"ready_replicas", p.Queries.ReadyReplicas}, {"request", p.Queries.Request},
	} {
		qpath := path + ".queries." + q.field
		if q.expr == "" {
			if q.field != "request" && targetOK && !(several && q.field == "demand") {
				errs.addf(qpath, "required: no default query for target kind %q", p.Target.Kind)
			}
			continue
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.expr)
		if err != nil {
			errs.add(&FieldError{Path: qpath, Err: err})
			continue
		}
		if t := expr.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
			errs.addf(qpath, "must return an instant vector or a scalar, got a %s", t)
		}
	}
}

// checkFallback validates fallback_model: a known model, on a policy with a model, that needs
// fewer history steps than the policy's model (else it would never forecast first).
func (c *Config) checkFallback(p *Policy, path string, errs *errList) {
	fpath := path + ".fallback_model"
	spec, err := policy.Parse(p.Algorithm, p.Model)
	if err != nil {
		return // reported at algorithm
	}
	if spec.Model == "" {
		errs.addf(fpath, "algorithm %q has no model to fall back from", p.Algorithm)
		return
	}
	if !forecast.Known(p.FallbackModel) {
		errs.addf(fpath, "unknown model %q (known: %s)", p.FallbackModel, strings.Join(forecast.Names(), ", "))
		return
	}
	if p.HistoryStep <= 0 || p.Season < 0 || p.Forecast.Season < 0 {
		return // reported at their own fields
	}
	mc := p.Forecast
	if mc.Season == 0 {
		mc.Season = policy.SeasonSteps(p.Season, p.HistoryStep)
	}
	primary, err := forecast.New(spec.Model, mc)
	if err != nil {
		return // reported at forecast
	}
	fb, err := forecast.New(p.FallbackModel, mc)
	if err != nil {
		errs.add(&FieldError{Path: fpath, Err: err})
		return
	}
	if _, err := forecast.NewFallback(primary, fb); err != nil {
		errs.add(&FieldError{Path: fpath, Err: err})
	}
}

// policyNameRe is what a policy name may be: a label value that needs no escaping anywhere.
var policyNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// kindRe is a Kind as the API spells it.
var kindRe = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// canonicalKinds are the built-in kinds with a scale subresource, by lower-case name, so that
// "deployment" and "Deployment" are one target.
var canonicalKinds = map[string]string{
	"deployment": "Deployment", "statefulset": "StatefulSet", "replicaset": "ReplicaSet",
	"replicationcontroller": "ReplicationController",
}

// normalize spells the kind as the API does and checks every part of the target's identity:
// api_version group/version, kind UpperCamelCase, namespace a DNS-1123 label, name a DNS-1123
// subdomain (namespace and name when set: that they are required is checked before). It
// reports whether every part is valid.
func (t *Target) normalize(path string, errs *errList) bool {
	ok := true
	if k, known := canonicalKinds[strings.ToLower(t.Kind)]; known {
		t.Kind = k
	}
	if !kindRe.MatchString(t.Kind) {
		errs.addf(path+".kind", "%q is not a Kind as the API spells it (UpperCamelCase, e.g. Deployment)", t.Kind)
		ok = false
	}
	gv := strings.Split(t.APIVersion, "/")
	if len(gv) > 2 || gv[len(gv)-1] == "" || (len(gv) == 2 && len(validation.IsDNS1123Subdomain(gv[0])) > 0) {
		errs.addf(path+".api_version", "%q is not group/version or version (e.g. apps/v1)", t.APIVersion)
		ok = false
	}
	if t.Namespace != "" {
		if msgs := validation.IsDNS1123Label(t.Namespace); len(msgs) > 0 {
			errs.addf(path+".namespace", "%q is not a valid namespace: %s", t.Namespace, strings.Join(msgs, "; "))
			ok = false
		}
	}
	if t.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(t.Name); len(msgs) > 0 {
			errs.addf(path+".name", "%q is not a valid object name: %s", t.Name, strings.Join(msgs, "; "))
			ok = false
		}
	}
	return ok
}

// Group is the API group of the target ("apps"; "" for the core group).
func (t Target) Group() string {
	if g, _, ok := strings.Cut(t.APIVersion, "/"); ok {
		return g
	}
	return ""
}

// Identity is what makes two targets the same object whatever the spelling: group, kind in
// lower case, namespace and name (the version does not matter).
func (t Target) Identity() string {
	return t.Group() + "/" + strings.ToLower(t.Kind) + "/" + t.Namespace + "/" + t.Name
}

// WorkloadType is the target kind in lower case, as kube-state-metrics and the recording rules
// of rules/ name it in the workload_type label (deployment, statefulset…).
func (t Target) WorkloadType() string { return strings.ToLower(t.Kind) }

// queryDefaults fills the queries a policy leaves out from the recording rules shipped in
// rules/ and from kube-state-metrics, keyed by the labels of the target.
func (c *Config) queryDefaults(p *Policy) {
	kind := p.Target.WorkloadType()
	sel := fmt.Sprintf(`namespace=%q,%s=%q`, p.Target.Namespace, kind, p.Target.Name)
	wsel := fmt.Sprintf(`namespace=%q,workload_type=%q,workload=%q`, p.Target.Namespace, kind, p.Target.Name)
	several := len(p.Metrics.List) > 0 // the metrics carry their own demand and request
	if p.Queries.Demand == "" && !several {
		p.Queries.Demand = fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{%s})`, wsel)
	}
	if p.Queries.Request == "" && p.Request == 0 && !several {
		p.Queries.Request = fmt.Sprintf(`max(namespace_workload:debi_cpu_request_per_pod_cores:avg{%s})`, wsel)
	}
	switch kind {
	case "deployment", "statefulset":
		if p.Queries.Replicas == "" {
			p.Queries.Replicas = fmt.Sprintf(`max(kube_%s_spec_replicas{%s})`, kind, sel)
		}
		if p.Queries.ReadyReplicas == "" {
			if kind == "deployment" {
				p.Queries.ReadyReplicas = fmt.Sprintf(`max(kube_deployment_status_replicas_ready{%s})`, sel)
			} else {
				p.Queries.ReadyReplicas = fmt.Sprintf(`max(kube_statefulset_status_replicas_ready{%s})`, sel)
			}
		}
	}
}

// HistoryFallback returns, for the demand and request queries a policy left to their defaults
// (the recording rules of rules/), the same figures computed from the raw series the rules
// read: cAdvisor's container_cpu_usage_seconds_total and kube-state-metrics' kube_pod_owner,
// kube_replicaset_owner and kube_pod_container_resource_requests, which kube-prometheus-stack
// keeps from the day it is installed, while the rules have no history before debi's. The
// history loaders (the exporter's warm start and the what-if) read the rule and fill the
// times it has no sample from the fallback. A query the configuration sets, or a target kind
// the rules do not relabel, has no fallback (empty).
func (p *Policy) HistoryFallback() Queries {
	kind := p.Target.WorkloadType()
	var owner string
	switch kind {
	case "deployment":
		owner = fmt.Sprintf(`max by (namespace, pod) (label_replace(kube_pod_owner{namespace=%q,owner_kind="ReplicaSet"}, "replicaset", "$1", "owner_name", "(.*)")`+
			` * on (replicaset, namespace) group_left () topk by (replicaset, namespace) (1, max by (replicaset, namespace, owner_name) (kube_replicaset_owner{namespace=%q,owner_kind="Deployment",owner_name=%q})))`,
			p.Target.Namespace, p.Target.Namespace, p.Target.Name)
	case "statefulset":
		owner = fmt.Sprintf(`max by (namespace, pod) (kube_pod_owner{namespace=%q,owner_kind="StatefulSet",owner_name=%q})`, p.Target.Namespace, p.Target.Name)
	default:
		return Queries{}
	}
	def := Policy{Target: p.Target, Request: p.Request}
	(*Config)(nil).queryDefaults(&def)
	var q Queries
	if p.Queries.Demand == def.Queries.Demand {
		q.Demand = fmt.Sprintf(`sum(sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{namespace=%q,container!="",container!="POD",image!=""}[1m])) * on (namespace, pod) group_left () %s)`,
			p.Target.Namespace, owner)
	}
	if p.Queries.Request != "" && p.Queries.Request == def.Queries.Request {
		q.Request = fmt.Sprintf(`avg(sum by (namespace, pod) (kube_pod_container_resource_requests{namespace=%q,resource="cpu"}) * on (namespace, pod) group_left () %s)`,
			p.Target.Namespace, owner)
	}
	return q
}

// fillUnset copies from def every field of *p that the file leaves out: a field whose YAML key
// is not among the keys set and whose value is zero. It goes by the keys, not by zero values
// alone, so that tolerance: 0, hold: 0s or calibration_gain: 0 stay settings and an explicit
// invalid zero (min_replicas: 0, u_sla: 0) is reported rather than hidden. It walks the fields
// by reflection, so a field added to the struct takes its default without a change here.
func fillUnset[T any](p *T, def T, set map[string]any) {
	v, d := reflect.ValueOf(p).Elem(), reflect.ValueOf(def)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		if _, given := set[key]; !given && v.Field(i).IsZero() {
			v.Field(i).Set(d.Field(i))
		}
	}
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
