package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"k8s.io/apimachinery/pkg/util/validation"
)

// setDefaultsAndValidate is the one place where defaults are filled and fields checked; given
// holds the budget keys each policy sets. It returns the first error of validate's.
func (c *Config) setDefaultsAndValidate(given []givenKeys) error {
	var errs errList
	c.validate(given, &errs)
	return errs.first()
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
