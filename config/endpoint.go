package config

import (
	"net/url"
	"strings"

	commoncfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"
)

// Endpoint is a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir, VictoriaMetrics…)
// that a metric's queries go to instead of global.prometheus_url: a per-tenant Prometheus, a
// Thanos querier, the Prometheus that scrapes an inference router.
type Endpoint struct {
	// URL is the API's base URL, as global.prometheus_url (http://prometheus-b:9090); required.
	URL string `yaml:"url"`
	// HTTPConfig is the endpoint's own HTTP client, in the format of global.http_config
	// (authorization, basic_auth, oauth2, tls_config, proxy_url, http_headers…). Default
	// prometheus/common's default client: global.http_config is not sent to another endpoint.
	// Relative file paths are taken from the configuration file's directory.
	HTTPConfig *commoncfg.HTTPClientConfig `yaml:"http_config"`

	// httpErr is the error prometheus/common's decoder found in http_config (as Global's).
	httpErr error
}

// UnmarshalYAML decodes the endpoint strictly and keeps prometheus/common's own validation
// error of http_config for validation to report at its field path.
func (e *Endpoint) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Endpoint
	err := unmarshal((*plain)(e))
	if _, ok := err.(*yaml.TypeError); err == nil || ok {
		return err
	}
	e.httpErr = err
	return nil
}

// clone is a copy of e with its own HTTP client configuration (nil for nil).
func (e *Endpoint) clone() *Endpoint {
	if e == nil {
		return nil
	}
	c := *e
	if e.HTTPConfig != nil {
		h := *e.HTTPConfig
		c.HTTPConfig = &h
	}
	return &c
}

// String is the endpoint as logs and errors name it: its URL without a password.
func (e *Endpoint) String() string {
	if e == nil {
		return "global.prometheus_url"
	}
	if u, err := url.Parse(e.URL); err == nil {
		return u.Redacted()
	}
	return e.URL
}

// checkEndpoint fills the defaults of the endpoint at path (policies[0].metrics[1].endpoint) and
// checks it. An endpoint that is global.prometheus_url itself, without its own http_config,
// is the global one (nil): its queries use the global client and are batched with the rest.
func (c *Config) checkEndpoint(ep **Endpoint, path string, errs *errList) {
	e := *ep
	if e == nil {
		return
	}
	u, err := url.Parse(e.URL)
	switch {
	case e.URL == "":
		errs.addf(path+".url", "required: the base URL of a Prometheus-compatible HTTP API, e.g. http://prometheus-b:9090")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs.addf(path+".url", "want an http(s) URL such as http://prometheus-b:9090, got %q", e.URL)
	}
	if e.httpErr != nil {
		errs.add(&FieldError{Path: path + ".http_config", Err: e.httpErr})
		return
	}
	if e.HTTPConfig == nil {
		if g := c.Global.PrometheusURL; g != "" && strings.TrimRight(e.URL, "/") == strings.TrimRight(g, "/") {
			*ep = nil
			return
		}
		hc := commoncfg.DefaultHTTPClientConfig
		e.HTTPConfig = &hc
	}
	if err := e.HTTPConfig.Validate(); err != nil {
		errs.add(&FieldError{Path: path + ".http_config", Err: err})
	}
}

// setDirectory resolves the relative file paths of every policy's endpoints against dir, as
// LoadFile does for global.http_config.
func (c *Config) setDirectory(dir string) {
	for i := range c.Policies {
		p := &c.Policies[i]
		if e := p.Queries.Endpoint; e != nil && e.HTTPConfig != nil {
			e.HTTPConfig.SetDirectory(dir)
		}
		for j := range p.Metrics.List {
			if e := p.Metrics.List[j].Endpoint; e != nil && e.HTTPConfig != nil {
				e.HTTPConfig.SetDirectory(dir)
			}
		}
	}
}
