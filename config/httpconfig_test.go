package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHTTPConfigDefaults: without http_config the client is prometheus/common's default one.
func TestHTTPConfigDefaults(t *testing.T) {
	c, err := LoadFile("testdata/good-minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	hc := c.Global.HTTPConfig
	if hc == nil || !hc.FollowRedirects || !hc.EnableHTTP2 || hc.Authorization != nil || hc.BasicAuth != nil || hc.HTTPHeaders != nil {
		t.Fatalf("default http_config = %+v, want prometheus/common's default", hc)
	}
	// http_config: {} (or null) is the default too.
	for _, yml := range []string{"global:\n  http_config: {}\n", "global:\n  http_config:\n"} {
		c, err := Load([]byte(yml))
		if err != nil {
			t.Fatalf("%q: %v", yml, err)
		}
		if hc := c.Global.HTTPConfig; hc == nil || !hc.FollowRedirects || !hc.EnableHTTP2 {
			t.Errorf("%q: http_config = %+v, want the default", yml, hc)
		}
	}
}

// TestHTTPConfigFiles: the fields arrive as prometheus/common reads them, and relative files are
// taken from the configuration file's directory (absolute ones stay).
func TestHTTPConfigFiles(t *testing.T) {
	c, err := LoadFile("testdata/good-http-config.yml")
	if err != nil {
		t.Fatal(err)
	}
	hc := c.Global.HTTPConfig
	if a := hc.Authorization; a == nil || a.Type != "Bearer" || a.CredentialsFile != filepath.Join("testdata", "secrets", "token") {
		t.Errorf("authorization = %+v, want Bearer from testdata/secrets/token", a)
	}
	if hc.TLSConfig.CAFile != filepath.Join("testdata", "secrets", "ca.pem") || hc.TLSConfig.ServerName != "mimir.example" {
		t.Errorf("tls_config = %+v", hc.TLSConfig)
	}
	if h := hc.HTTPHeaders; h == nil || len(h.Headers["X-Scope-OrgID"].Values) != 1 || h.Headers["X-Scope-OrgID"].Values[0] != "team-a" {
		t.Errorf("http_headers = %+v, want X-Scope-OrgID: team-a", h)
	}

	c, err = LoadFile("testdata/good-http-config-basic.yml")
	if err != nil {
		t.Fatal(err)
	}
	hc = c.Global.HTTPConfig
	if b := hc.BasicAuth; b == nil || b.Username != "debi" || b.PasswordFile != "/etc/debi/password" {
		t.Errorf("basic_auth = %+v, want debi with the absolute /etc/debi/password", b)
	}
	if hc.ProxyURL.URL == nil || hc.ProxyURL.String() != "http://proxy:3128" || hc.FollowRedirects {
		t.Errorf("proxy_url %v, follow_redirects %v", hc.ProxyURL, hc.FollowRedirects)
	}

	c, err = LoadFile("testdata/good-http-config-bearer-file.yml")
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Global.HTTPConfig.Authorization; a == nil || a.Type != "Bearer" || a.CredentialsFile != filepath.Join("testdata", "token") {
		t.Errorf("bearer_token_file: authorization = %+v, want Bearer from testdata/token", a)
	}
}

// TestHTTPConfigErrors: prometheus/common's own validation messages, at global.http_config (the
// paths themselves are checked by TestBadFixtures).
func TestHTTPConfigErrors(t *testing.T) {
	for file, want := range map[string]string{
		"bad-http-config-two-auth.yml":        "global.http_config: at most one of basic_auth, oauth2 & authorization must be configured",
		"bad-http-config-reserved-header.yml": `global.http_config: setting header "Authorization" is not allowed`,
		"bad-http-config-tls.yml":             "global.http_config: at most one of ca, ca_file & ca_ref must be configured",
		"bad-http-config-oauth2.yml":          "global.http_config: oauth2 token_url must be configured",
		"bad-http-config-proxy-url.yml":       "global.http_config: parse",
		"bad-http-config-unknown-field.yml":   "global.http_config.bearer (line 4): field bearer not found",
	} {
		_, err := LoadFile(filepath.Join("testdata", file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", file, err, want)
		}
	}
}
