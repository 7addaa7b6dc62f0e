package promclient

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	commoncfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"
)

// fakePrometheus answers every instant query with an empty vector and keeps the last request's
// headers.
type fakePrometheus struct {
	mu     sync.Mutex
	header http.Header
	user   string
	pass   string
	basic  bool
}

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.header = r.Header.Clone()
	f.user, f.pass, f.basic = r.BasicAuth()
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
}

// parse reads an http_config as the configuration file does: defaults and validation of
// prometheus/common, then relative files against dir.
func parse(t *testing.T, yml, dir string) commoncfg.HTTPClientConfig {
	t.Helper()
	var hc commoncfg.HTTPClientConfig
	if err := yaml.Unmarshal([]byte(yml), &hc); err != nil {
		t.Fatalf("http_config: %v", err)
	}
	hc.SetDirectory(dir)
	return hc
}

func query(t *testing.T, url string, hc commoncfg.HTTPClientConfig) error {
	t.Helper()
	c, err := New(url, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, _, err = v1.NewAPI(c).Query(ctx, "up", time.Unix(1_700_000_000, 0))
	return err
}

// TestCredentialsAndHeaders: each authorization form and the tenant header reach Prometheus.
func TestCredentialsAndHeaders(t *testing.T) {
	f := &fakePrometheus{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	dir := t.TempDir()
	for name, content := range map[string]string{"token": "s3cret\n", "password": "hunter2", "tenant": "team-b"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, yml string
		check     func(t *testing.T, f *fakePrometheus)
	}{
		{"authorization credentials_file (relative)", "authorization: {credentials_file: token}", func(t *testing.T, f *fakePrometheus) {
			// The file's trailing newline is trimmed, as Prometheus does.
			if got := f.header.Get("Authorization"); got != "Bearer s3cret" {
				t.Errorf("Authorization = %q, want %q", got, "Bearer s3cret")
			}
		}},
		{"legacy bearer_token", "bearer_token: abc", func(t *testing.T, f *fakePrometheus) {
			if got := f.header.Get("Authorization"); got != "Bearer abc" {
				t.Errorf("Authorization = %q, want %q", got, "Bearer abc")
			}
		}},
		{"basic_auth with password_file", "basic_auth: {username: debi, password_file: password}", func(t *testing.T, f *fakePrometheus) {
			if !f.basic || f.user != "debi" || f.pass != "hunter2" {
				t.Errorf("basic auth = %v %q %q, want debi hunter2", f.basic, f.user, f.pass)
			}
		}},
		{"X-Scope-OrgID value", "http_headers: {X-Scope-OrgID: {values: [team-a]}}", func(t *testing.T, f *fakePrometheus) {
			if got := f.header.Get("X-Scope-OrgID"); got != "team-a" {
				t.Errorf("X-Scope-OrgID = %q, want team-a", got)
			}
		}},
		{"X-Scope-OrgID from a file, with a bearer token", "authorization: {credentials: abc}\nhttp_headers: {X-Scope-OrgID: {files: [tenant]}}", func(t *testing.T, f *fakePrometheus) {
			if got := f.header.Get("X-Scope-OrgID"); got != "team-b" {
				t.Errorf("X-Scope-OrgID = %q, want team-b", got)
			}
			if got := f.header.Get("Authorization"); got != "Bearer abc" {
				t.Errorf("Authorization = %q, want %q", got, "Bearer abc")
			}
		}},
		{"none", "{}", func(t *testing.T, f *fakePrometheus) {
			if got := f.header.Get("Authorization"); got != "" {
				t.Errorf("Authorization = %q without credentials", got)
			}
			if got := f.header.Get("User-Agent"); !strings.HasPrefix(got, "debi/") {
				t.Errorf("User-Agent = %q, want debi/<version>", got)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := query(t, srv.URL, parse(t, c.yml, dir)); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			c.check(t, f)
		})
	}
}

// TestTLS: a server certificate is verified against tls_config.ca_file; without it the query
// fails.
func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(&fakePrometheus{})
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := query(t, srv.URL, parse(t, "tls_config: {ca_file: ca.pem}", dir)); err != nil {
		t.Fatalf("with the server's CA: %v", err)
	}
	if err := query(t, srv.URL, parse(t, "{}", dir)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the server's CA: err = %v, want a certificate error", err)
	}
}

// TestBadFiles: a TLS file that does not exist is an error at construction naming the file, not
// a failure at the first query.
func TestBadFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "ca.pem")
	for _, yml := range []string{
		"tls_config: {ca_file: " + missing + "}",
		"tls_config: {cert_file: " + missing + ", key_file: " + missing + "}",
	} {
		_, err := New("http://127.0.0.1:9090", parse(t, yml, "/"))
		if err == nil || !strings.HasPrefix(err.Error(), "http_config: ") || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: err = %v, want an http_config error naming %s", yml, err, missing)
		}
	}
	hc := commoncfg.DefaultHTTPClientConfig
	hc.BearerToken, hc.BearerTokenFile = "a", "b"
	if _, err := New("http://127.0.0.1:9090", hc); err == nil || !strings.HasPrefix(err.Error(), "http_config: ") {
		t.Errorf("bearer_token and bearer_token_file: err = %v, want an http_config error", err)
	}
	if _, err := New("http://a b", commoncfg.DefaultHTTPClientConfig); err == nil || !strings.HasPrefix(err.Error(), "prometheus_url: ") {
		t.Errorf("bad URL: err = %v, want a prometheus_url error", err)
	}
}
