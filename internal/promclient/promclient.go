// Package promclient builds the client of the Prometheus HTTP API that debi's exporter and
// webhook share, from prometheus/common's HTTP client configuration (global.http_config, the
// format of Prometheus's and Alertmanager's http_config): authorization (bearer), basic auth,
// OAuth2, TLS, proxies and extra headers such as X-Scope-OrgID for a Mimir, Cortex or Thanos
// tenant; and the one reader of a single value from an instant query (Instant, Value), whose
// answers that hold no value (AnswerError) each package names its own way.
package promclient

import (
	"fmt"

	"github.com/prometheus/client_golang/api"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"
)

// New returns a client of the Prometheus HTTP API at url whose requests go through an HTTP
// client built from hc with prometheus/common, as Prometheus builds its own. Secret files
// (credentials_file, password_file, header files) are read at each request and TLS files
// reloaded when they change, so a rotated token or certificate needs no restart; relative
// paths must already be resolved (config.LoadFile resolves them against the configuration
// file's directory).
//
// Errors name the field they come from, http_config or prometheus_url, relative to the section
// that holds both: callers add the section ("global.").
func New(url string, hc commoncfg.HTTPClientConfig) (api.Client, error) {
	// Validate normalises as well (a legacy bearer_token becomes an authorization); hc is a copy.
	if err := hc.Validate(); err != nil {
		return nil, fmt.Errorf("http_config: %w", err)
	}
	c, err := commoncfg.NewClientFromConfig(hc, "debi", commoncfg.WithUserAgent(version.ComponentUserAgent("debi")))
	if err != nil {
		return nil, fmt.Errorf("http_config: %w", err)
	}
	client, err := api.NewClient(api.Config{Address: url, Client: c})
	if err != nil {
		return nil, fmt.Errorf("prometheus_url: %w", err)
	}
	return client, nil
}
