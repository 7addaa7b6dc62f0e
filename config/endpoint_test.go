package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEndpoints: a metric's endpoint is read with its own client settings (relative files from
// the file's directory, prometheus/common's default client when it names none, never
// global.http_config), an endpoint that is global.prometheus_url without http_config is the
// global one, and ScaleMetrics carries each metric's endpoint with its field path.
func TestEndpoints(t *testing.T) {
	c, err := LoadFile("testdata/good-endpoint.yml")
	if err != nil {
		t.Fatal(err)
	}
	web := c.Policies[0].ScaleMetrics()
	if len(web) != 4 {
		t.Fatalf("%d metrics, want 4", len(web))
	}
	if web[0].Endpoint != nil || web[3].Endpoint != nil {
		t.Errorf("cpu endpoint %v, inflight endpoint %v: want the global one (nil)", web[0].Endpoint, web[3].Endpoint)
	}
	qps := web[1]
	if qps.Endpoint == nil || qps.Endpoint.URL != "https://tenant-a.example:9090" || qps.EndpointPath != "metrics[1].endpoint" {
		t.Fatalf("qps endpoint %+v at %q", qps.Endpoint, qps.EndpointPath)
	}
	hc := qps.Endpoint.HTTPConfig
	if a := hc.Authorization; a == nil || a.Type != "Bearer" || a.CredentialsFile != filepath.Join("testdata", "secrets", "token") {
		t.Errorf("authorization = %+v, want Bearer from testdata/secrets/token", a)
	}
	if hc.TLSConfig.CAFile != filepath.Join("testdata", "secrets", "ca.pem") {
		t.Errorf("tls_config.ca_file = %q", hc.TLSConfig.CAFile)
	}
	if q := web[2].Endpoint; q == nil || q.HTTPConfig == nil || q.HTTPConfig.Authorization != nil || !q.HTTPConfig.FollowRedirects {
		t.Errorf("queue endpoint %+v: want prometheus/common's default client, not global.http_config", q)
	}
	api := c.Policies[1].ScaleMetrics()
	if e := api[0].Endpoint; e == nil || e.URL != "http://prometheus-b:9090" || api[0].EndpointPath != "queries.endpoint" ||
		e.HTTPConfig.BasicAuth == nil || e.HTTPConfig.BasicAuth.PasswordFile != "/etc/debi/password" {
		t.Errorf("single-metric endpoint %+v at %q", e, api[0].EndpointPath)
	}
	if got := (&Endpoint{URL: "http://debi:s3cret@prom:9090"}).String(); strings.Contains(got, "s3cret") {
		t.Errorf("String() = %q shows the password", got)
	}

	// WithPolicies decodes the file's policies again: the paths are resolved once, as LoadFile's.
	n, errs := c.WithPolicies(nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := n.Policies[0].ScaleMetrics()[1].Endpoint.HTTPConfig.Authorization.CredentialsFile; got != filepath.Join("testdata", "secrets", "token") {
		t.Errorf("after WithPolicies credentials_file = %q", got)
	}
}

// TestEndpointErrors: the messages of a bad endpoint (the paths are checked by TestBadFixtures).
func TestEndpointErrors(t *testing.T) {
	for file, want := range map[string]string{
		"bad-endpoint-url.yml":              `policies[0].metrics[0].endpoint.url: want an http(s) URL such as http://prometheus-b:9090, got "prometheus-b:9090"`,
		"bad-endpoint-url-missing.yml":      "policies[0].metrics[1].endpoint.url: required",
		"bad-endpoint-http-config.yml":      "policies[0].metrics[0].endpoint.http_config: at most one of basic_auth, oauth2 & authorization must be configured",
		"bad-endpoint-source.yml":           "policies[0].metrics[0].endpoint: a metric read from a metrics API",
		"bad-endpoint-queries-and-list.yml": "policies[0].queries.endpoint: set the endpoint of each metric",
	} {
		_, err := LoadFile(filepath.Join("testdata", file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
}
