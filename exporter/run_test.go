package exporter

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

// TestRun starts the exporter with a fake Prometheus on a loopback listener, waits for its first
// recommendation on /metrics and stops it; no goroutine may be left behind.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte(`
global: {interval: 1s}
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    request: 1
    # Without behavior: the size never follows the recommendation here, and the default
    # behavior's rate limit counts every unapplied recommendation as a scale event, so its
    # answer would be 6 for one step and then the current size.
    scaling: {hpa_behavior: none}
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
  - name: other-shard
    target: {namespace: shop, name: api}
    algorithm: hpa
    request: 1
    queries: {demand: 'demand', replicas: 'replicas', ready_replicas: 'ready'}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fakeQuerier{byExpr: map[string]series{"demand": constant(3), "replicas": constant(2), "ready": constant(2)}}
	l := listen(t)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	shard := Shard{Index: 1, Count: 2}
	if !shard.Owns("web") || shard.Owns("other-shard") {
		t.Fatal("test assumes web in shard 1/2 and other-shard not")
	}
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: f, Shard: shard}, nil, reg)
	go func() { done <- serveAndRun(ctx, srv, l) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + l.Addr().String() + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		var code int
		code, body = get("/metrics")
		// HPA: ceil(2 × (3 / 2 pods / 1 core) / 0.5) = 6, at most max(2 × 2, 4) = 4 per sync
		// without behavior.
		if code == 200 && strings.Contains(body, `debi_recommended_replicas{namespace="shop",policy="web",workload="web",workload_type="deployment"} 4`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recommendation on /metrics:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"debi_build_info{", "debi_exporter_policies 1", `debi_exporter_query_duration_seconds_bucket{query="demand",type="instant"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `policy="other-shard"`) {
		t.Error("a policy of another shard is exported")
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if code, _ := get("/-/ready"); code != 200 {
		t.Errorf("/-/ready = %d after the first loop", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
}

func TestRunConfigError(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	if err := os.WriteFile(cfgFile, []byte("policies:\n  - name: web\n    target: {name: web}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewServer(Options{ConfigFile: cfgFile, Querier: &fakeQuerier{}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "policies[0].target.namespace") {
		t.Fatalf("err = %v, want one naming policies[0].target.namespace", err)
	}
}
