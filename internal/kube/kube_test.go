package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestRestConfig(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:6443"}
	rc, err := RestConfig(in, "", "debi-test", 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	if rc == in || in.UserAgent != "" || in.QPS != 0 {
		t.Error("the given configuration was changed, not copied")
	}
	if rc.UserAgent != "debi-test" || rc.QPS != 50 || rc.Burst != 100 {
		t.Errorf("user agent %q qps %v burst %d", rc.UserAgent, rc.QPS, rc.Burst)
	}
	if in.RateLimiter != nil {
		t.Error("the given configuration was given a rate limiter")
	}
	in.QPS, in.Burst = 7, 9
	if rc, _ = RestConfig(in, "", "x", 50, 100); rc.QPS != 7 || rc.Burst != 9 {
		t.Errorf("a configured rate was replaced: qps %v burst %d", rc.QPS, rc.Burst)
	}
	if rc, _ = RestConfig(&rest.Config{}, "", "x", 0, 0); rc.QPS != 0 {
		t.Errorf("qps 0 must keep client-go's default, got %v", rc.QPS)
	}

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.2:7443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, err = RestConfig(nil, kc, "x", 0, 0); err != nil || rc.Host != "https://127.0.0.2:7443" {
		t.Errorf("kubeconfig %s: host %v, err %v", kc, rc, err)
	}
	_, err = RestConfig(nil, filepath.Join(t.TempDir(), "missing"), "x", 0, 0)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("a missing kubeconfig: err %v, want one naming --kubeconfig", err)
	}
}

// TestRestConfigRateLimiter: the configuration carries one rate limiter of its rate (given,
// configured, or client-go's default), none when the rate is negative, and a given one is kept.
func TestRestConfigRateLimiter(t *testing.T) {
	for _, c := range []struct {
		name       string
		in         rest.Config
		qps        float32
		burst      int
		want       float32 // the limiter's QPS; 0: no limiter
		wantConfig float32 // rc.QPS
	}{
		{"given rate", rest.Config{}, 50, 100, 50, 50},
		{"configured rate", rest.Config{QPS: 7, Burst: 9}, 50, 100, 7, 7},
		{"client-go's default", rest.Config{}, 0, 0, rest.DefaultQPS, 0},
		{"no client-side limit", rest.Config{QPS: -1}, 50, 100, 0, -1},
	} {
		rc, err := RestConfig(&c.in, "", "x", c.qps, c.burst)
		if err != nil {
			t.Fatal(err)
		}
		if rc.QPS != c.wantConfig {
			t.Errorf("%s: qps %v, want %v", c.name, rc.QPS, c.wantConfig)
		}
		switch {
		case c.want == 0 && rc.RateLimiter != nil:
			t.Errorf("%s: rate limiter of %v/s, want none", c.name, rc.RateLimiter.QPS())
		case c.want != 0 && rc.RateLimiter == nil:
			t.Errorf("%s: no rate limiter, want one of %v/s", c.name, c.want)
		case c.want != 0 && rc.RateLimiter.QPS() != c.want:
			t.Errorf("%s: rate limiter of %v/s, want %v/s", c.name, rc.RateLimiter.QPS(), c.want)
		}
	}
	given := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	if rc, _ := RestConfig(&rest.Config{RateLimiter: given}, "", "x", 50, 100); rc.RateLimiter != given {
		t.Error("a given rate limiter was replaced")
	}
}
