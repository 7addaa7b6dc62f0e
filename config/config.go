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
	"os"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Config is the whole file.
type Config struct {
	Global   Global         `yaml:"global"`
	Policies []Policy       `yaml:"policies"`
	Webhook  WebhookConfig  `yaml:"webhook"`
	Exporter ExporterConfig `yaml:"exporter"`

	// warnings collected while loading (settings replaced by defaults).
	warnings []string
}

// Global holds settings shared by every component.
type Global struct {
	// PrometheusURL is the Prometheus HTTP API the exporter queries (and the webhook reads fresh
	// inputs from).
	PrometheusURL string `yaml:"prometheus_url"`
	// Interval is the control step: the exporter's loop period and one history point per step.
	Interval time.Duration `yaml:"interval"`
	// QueryTimeout bounds each PromQL query.
	QueryTimeout time.Duration `yaml:"query_timeout"`
}

// Target names the scaled object; it must have a scale subresource.
type Target struct {
	APIVersion string `yaml:"api_version"`
	Kind       string `yaml:"kind"`
	Namespace  string `yaml:"namespace"`
	Name       string `yaml:"name"`
}

// String is namespace/kind/name.
func (t Target) String() string { return t.Namespace + "/" + t.Kind + "/" + t.Name }

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
	// Algorithm is the policy name: hpa, apa, debi, <model>-debi, <model>-hpa, evt-<model>-hpa.
	Algorithm string `yaml:"algorithm"`
	// Model is the forecaster of the debi algorithm (default holtwinters).
	Model   string  `yaml:"model"`
	Queries Queries `yaml:"queries"`
	// Request is a fixed CPU request per pod in cores, used when queries.request is empty.
	Request float64 `yaml:"request"`
	// LeadTime is how far ahead the forecast looks (pod start-up time); rounded up to steps.
	LeadTime time.Duration `yaml:"lead_time"`
	// History is the number of steps the models and the EVT fit see.
	History int `yaml:"history"`
	// Retrain is the number of steps between model training runs.
	Retrain  int                   `yaml:"retrain"`
	Scaling  scaling.Params        `yaml:"scaling"`
	Metrics  scaling.MetricsPolicy `yaml:"metrics"`
	Forecast forecast.Config       `yaml:"forecast"`
	EVT      forecast.POTConfig    `yaml:"evt"`
}

// ExporterConfig is the exporter's own section.
type ExporterConfig struct {
	// HistoryLookback is how far back the exporter loads history with query_range at start-up
	// (default: history × interval).
	HistoryLookback time.Duration `yaml:"history_lookback"`
	// MAEWindow is the number of steps of the rolling forecast-error figure.
	MAEWindow int `yaml:"mae_window"`
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
		return nil, err
	}
	if err := c.setDefaultsAndValidate(); err != nil {
		return nil, err
	}
	return c, nil
}

// setDefaultsAndValidate is the one place where defaults are filled and fields checked.
func (c *Config) setDefaultsAndValidate() error {
	if c.Global.Interval == 0 {
		c.Global.Interval = 15 * time.Second
	}
	if c.Global.Interval < 0 {
		return fmt.Errorf("global.interval must be positive, got %v", c.Global.Interval)
	}
	if c.Global.QueryTimeout == 0 {
		c.Global.QueryTimeout = 10 * time.Second
	}
	if c.Exporter.MAEWindow == 0 {
		c.Exporter.MAEWindow = 60
	}
	if c.Exporter.MAEWindow < 0 {
		return fmt.Errorf("exporter.mae_window must be positive, got %d", c.Exporter.MAEWindow)
	}
	seen := map[string]int{}
	targets := map[string]int{}
	for i := range c.Policies {
		p := &c.Policies[i]
		path := fmt.Sprintf("policies[%d]", i)
		if p.Name != "" {
			path = fmt.Sprintf("policies[%d] (%s)", i, p.Name)
		}
		if err := c.policyDefaults(p, path); err != nil {
			return err
		}
		if j, dup := seen[p.Name]; dup {
			return fmt.Errorf("policies[%d].name: %q is already used by policies[%d]", i, p.Name, j)
		}
		seen[p.Name] = i
		if j, dup := targets[p.Target.String()]; dup {
			return fmt.Errorf("policies[%d].target: %s is already scaled by policies[%d]; one policy per target", i, p.Target, j)
		}
		targets[p.Target.String()] = i
	}
	return c.Webhook.setDefaultsAndValidate(c)
}

func (c *Config) policyDefaults(p *Policy, path string) error {
	if p.Name == "" {
		return fmt.Errorf("%s.name: required", path)
	}
	if p.Target.APIVersion == "" {
		p.Target.APIVersion = "apps/v1"
	}
	if p.Target.Kind == "" {
		p.Target.Kind = "Deployment"
	}
	if p.Target.Namespace == "" {
		return fmt.Errorf("%s.target.namespace: required", path)
	}
	if p.Target.Name == "" {
		return fmt.Errorf("%s.target.name: required", path)
	}
	if p.Algorithm == "" {
		p.Algorithm = "debi"
	}
	spec, err := policy.Parse(p.Algorithm, p.Model)
	if err != nil {
		return fmt.Errorf("%s.algorithm: %w", path, err)
	}
	p.Algorithm = spec.Name
	if spec.Algorithm == "debi" && p.Model == "" {
		p.Model = spec.Model
	}

	// Defaults: zero values are filled from the paper's and Kubernetes' defaults field by field,
	// so a policy names only what it changes.
	fillParams(&p.Scaling, scaling.DefaultParams())
	if err := p.Scaling.Validate(); err != nil {
		return fmt.Errorf("%s.scaling.%w", path, err)
	}
	var warns []string
	p.Metrics, warns = p.Metrics.Normalize()
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
	if err := p.EVT.Validate(); err != nil {
		return fmt.Errorf("%s.evt.%w", path, err)
	}
	if p.History == 0 {
		p.History = 760
	}
	if p.History < 2 {
		return fmt.Errorf("%s.history: must be at least 2, got %d", path, p.History)
	}
	if p.Retrain == 0 {
		p.Retrain = 120
	}
	if p.Retrain < 0 {
		return fmt.Errorf("%s.retrain: must not be negative, got %d", path, p.Retrain)
	}
	if p.LeadTime < 0 {
		return fmt.Errorf("%s.lead_time: must not be negative, got %v", path, p.LeadTime)
	}
	if p.Request < 0 {
		return fmt.Errorf("%s.request: must be positive, got %v", path, p.Request)
	}
	if p.Queries.Request == "" && p.Request == 0 {
		return fmt.Errorf("%s.request: set a fixed CPU request per pod (cores) or queries.request", path)
	}
	c.queryDefaults(p)
	for _, q := range []struct{ field, expr string }{
		{"demand", p.Queries.Demand}, {"replicas", p.Queries.Replicas},
		{"ready_replicas", p.Queries.ReadyReplicas}, {"request", p.Queries.Request},
	} {
		if q.expr == "" {
			if q.field == "request" {
				continue
			}
			return fmt.Errorf("%s.queries.%s: required", path, q.field)
		}
		if _, err := parser.NewParser(parser.Options{}).ParseExpr(q.expr); err != nil {
			return fmt.Errorf("%s.queries.%s: %w", path, q.field, err)
		}
	}
	return nil
}

// queryDefaults fills the queries a policy leaves out from the recording rules shipped in
// rules/, keyed by the kube-state-metrics labels of the target.
func (c *Config) queryDefaults(p *Policy) {
	kind := strings.ToLower(p.Target.Kind)
	sel := fmt.Sprintf(`namespace=%q,%s=%q`, p.Target.Namespace, kind, p.Target.Name)
	wsel := fmt.Sprintf(`namespace=%q,workload_type=%q,workload=%q`, p.Target.Namespace, kind, p.Target.Name)
	if p.Queries.Demand == "" {
		p.Queries.Demand = fmt.Sprintf(`sum(namespace_workload:debi_cpu_usage_cores:rate1m{%s})`, wsel)
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

// fillParams copies every zero field of p from def.
func fillParams(p *scaling.Params, def scaling.Params) {
	if p.MinReplicas == 0 {
		p.MinReplicas = def.MinReplicas
	}
	if p.MaxReplicas == 0 {
		p.MaxReplicas = def.MaxReplicas
	}
	if p.Target == 0 {
		p.Target = def.Target
	}
	if p.Tolerance == 0 {
		p.Tolerance = def.Tolerance
	}
	if p.Lower == 0 {
		p.Lower = def.Lower
	}
	if p.Upper == 0 {
		p.Upper = def.Upper
	}
	if p.Rounding == "" {
		p.Rounding = def.Rounding
	}
	if p.Window == 0 {
		p.Window = def.Window
	}
	if p.ScaleDownStabilization == 0 {
		p.ScaleDownStabilization = def.ScaleDownStabilization
	}
	if p.ScaleUpPods == 0 {
		p.ScaleUpPods = def.ScaleUpPods
	}
	if p.ScaleUpPercent == 0 {
		p.ScaleUpPercent = def.ScaleUpPercent
	}
	if p.ScaleUpPeriod == 0 {
		p.ScaleUpPeriod = def.ScaleUpPeriod
	}
	if p.ScaleDownPercent == 0 {
		p.ScaleDownPercent = def.ScaleDownPercent
	}
	if p.ScaleDownPeriod == 0 {
		p.ScaleDownPeriod = def.ScaleDownPeriod
	}
	if p.UpTolerance == 0 {
		p.UpTolerance = def.UpTolerance
	}
	if p.DownTolerance == 0 {
		p.DownTolerance = def.DownTolerance
	}
	if p.MaxScaleUpRate == 0 {
		p.MaxScaleUpRate = def.MaxScaleUpRate
	}
	if p.MaxScaleDownRate == 0 {
		p.MaxScaleDownRate = def.MaxScaleDownRate
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

// RunnerConfig turns a policy into the policy.Runner configuration at the given step.
func (p *Policy) RunnerConfig(step time.Duration) (policy.Config, error) {
	spec, err := policy.Parse(p.Algorithm, p.Model)
	if err != nil {
		return policy.Config{}, err
	}
	lead := 1
	if p.LeadTime > 0 {
		lead = int((p.LeadTime + step - 1) / step)
	}
	rc := policy.DefaultConfig(spec)
	rc.Params, rc.Metrics, rc.Request, rc.Step = p.Scaling, p.Metrics, p.Request, step
	rc.LeadSteps, rc.History, rc.Retrain, rc.Model, rc.POT = lead, p.History, p.Retrain, p.Forecast, p.EVT
	if rc.Request == 0 {
		rc.Request = 1 // replaced by queries.request at every step
	}
	return rc, rc.Validate()
}
