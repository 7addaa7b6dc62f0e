package exporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

// reloadPolicy is one HPA policy of the reload test on the fake's queries.
func reloadPolicy(name string, request float64, demand string) string {
	return fmt.Sprintf(`
  - name: %s
    target: {namespace: shop, name: %s}
    algorithm: hpa
    request: %v
    history: 20
    queries: {demand: '%s', replicas: 'replicas', ready_replicas: 'ready'}`, name, name, request, demand)
}

// TestReload runs the exporter, rewrites its configuration file and reloads it with POST
// /-/reload and Reload (SIGHUP): a file that does not load, or changes the interval, keeps the previous
// configuration and says so in debi_exporter_config_last_reload_successful; a good one keeps the
// unchanged policies' state, rebuilds the changed ones, starts the new ones and drops the
// removed ones' series; a new policy whose query is ambiguous is marked failed while the others
// run.
func TestReload(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfgFile := filepath.Join(t.TempDir(), "debi.yml")
	write := func(body string) {
		t.Helper()
		tmp := cfgFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgFile); err != nil {
			t.Fatal(err)
		}
	}
	const head = "global: {interval: 1s}\npolicies:"
	write(head + reloadPolicy("web", 1, "demand") + reloadPolicy("api", 1, "demand") + reloadPolicy("gone", 1, "demand"))

	f := &fakeQuerier{byExpr: map[string]series{"demand": constant(3), "demand_multi": constant(3), "replicas": constant(2), "ready": constant(2)},
		multi: map[string]bool{"demand_multi": true}}
	l := listen(t)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	srv := newServer(t, Options{ConfigFile: cfgFile, Querier: f, EnableLifecycle: true}, nil, reg)
	go func() { done <- serveAndRun(ctx, srv, l) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	do := func(method string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+l.Addr().String()+"/-/reload", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(name, pol string, extra ...string) (float64, bool) { return value(t, reg, name, pol, extra...) }
	global := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.Metric) == 1 {
				return metricValue(mf.Metric[0])
			}
		}
		t.Fatalf("%s absent", name)
		return 0
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	recommends := func(pol string, n float64) func() bool {
		return func() bool { v, _ := get("debi_recommended_replicas", pol); return v == n }
	}

	// HPA: ceil(2 × (3 cores / 2 pods / 1 core) / 0.5) = 6 for every policy.
	for _, p := range []string{"web", "api", "gone"} {
		waitFor(p+" recommending 6", recommends(p, 6))
	}
	if global("debi_exporter_config_last_reload_successful") != 1 || global("debi_exporter_config_last_reload_success_timestamp_seconds") <= 0 {
		t.Fatal("start-up load not reported as a successful one")
	}
	steps := func(pol string) float64 { v, _ := get("debi_policy_steps_total", pol); return v }
	history, _ := get("debi_policy_history_points", "web")
	waitFor("3 live steps", func() bool { return steps("web") >= history+3 && steps("api") >= history+3 })

	if code, _ := do(http.MethodGet); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /-/reload = %d, want 405", code)
	}

	// A file that does not load: 500, the previous configuration stays.
	write(head + "\n  - name: web\n    target: {name: web}\n")
	if code, body := do(http.MethodPost); code != http.StatusInternalServerError || !strings.Contains(body, "policies[0].target.namespace") {
		t.Fatalf("bad file: %d %q, want 500 naming policies[0].target.namespace", code, body)
	}
	if global("debi_exporter_config_last_reload_successful") != 0 {
		t.Fatal("failed reload not reported")
	}
	if _, ok := get("debi_recommended_replicas", "gone"); !ok {
		t.Fatal("a failed reload dropped a policy")
	}

	// web unchanged, api with a new request, gone removed, fresh new.
	webBefore, apiBefore := steps("web"), steps("api")
	write(head + reloadPolicy("web", 1, "demand") + reloadPolicy("api", 2, "demand") + reloadPolicy("fresh", 1, "demand"))
	before := time.Now()
	if code, body := do(http.MethodPut); code != http.StatusOK {
		t.Fatalf("good file: %d %q, want 200", code, body)
	}
	if global("debi_exporter_config_last_reload_successful") != 1 || global("debi_exporter_config_last_reload_success_timestamp_seconds") < float64(before.Unix()) {
		t.Fatal("successful reload not reported")
	}
	for _, name := range []string{"debi_recommended_replicas", "debi_policy_failed", "debi_policy_steps_total"} {
		if _, ok := get(name, "gone"); ok {
			t.Errorf("%s of the removed policy still published", name)
		}
	}
	// Read right after the swap (at most a step later): web kept its runner and counters, api
	// starts again (no step yet, or its history and a live step).
	if w, a := steps("web"), steps("api"); w < webBefore || a >= apiBefore {
		t.Errorf("steps after the reload: web %v (was %v, want kept), api %v (was %v, want rebuilt)", w, webBefore, a, apiBefore)
	}
	// api: ceil(2 × (3 / 2 / 2) / 0.5) = 3.
	waitFor("api recommending 3", recommends("api", 3))
	waitFor("fresh recommending 6", recommends("fresh", 6))

	// The step grid cannot change while running.
	write(strings.Replace(head, "1s", "2s", 1) + reloadPolicy("web", 1, "demand"))
	if code, body := do(http.MethodPost); code != http.StatusInternalServerError || !strings.Contains(body, "global.interval") || !strings.Contains(body, "restart") {
		t.Fatalf("new interval: %d %q, want 500 naming global.interval and asking for a restart", code, body)
	}
	if global("debi_exporter_config_last_reload_successful") != 0 {
		t.Fatal("refused interval change not reported")
	}
	if _, ok := get("debi_recommended_replicas", "fresh"); !ok {
		t.Fatal("a refused reload changed the policies")
	}

	// Nor can the ElasticScaler watch: turning it on needs a restart.
	write("global: {interval: 1s, elastic_scalers: {enabled: true}}\npolicies:" + reloadPolicy("web", 1, "demand"))
	if code, body := do(http.MethodPost); code != http.StatusInternalServerError || !strings.Contains(body, "global.elastic_scalers.enabled") || !strings.Contains(body, "restart") {
		t.Fatalf("watch turned on: %d %q, want 500 naming global.elastic_scalers.enabled and asking for a restart", code, body)
	}
	if _, ok := get("debi_recommended_replicas", "fresh"); !ok {
		t.Fatal("a refused reload changed the policies")
	}

	// Reload (what `debi exporter` calls on SIGHUP), with a new policy whose demand query
	// returns two series: it is marked failed, the others run; fresh is dropped.
	write(head + reloadPolicy("web", 1, "demand") + reloadPolicy("api", 2, "demand") + reloadPolicy("ambiguous", 1, "demand_multi"))
	if err := srv.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	waitFor("fresh dropped after Reload", func() bool { _, ok := get("debi_policy_failed", "fresh"); return !ok })
	waitFor("ambiguous marked failed", func() bool { v, _ := get("debi_policy_failed", "ambiguous"); return v == 1 })
	if global("debi_exporter_config_last_reload_successful") != 1 {
		t.Fatal("Reload not reported as successful")
	}
	webNow := steps("web")
	waitFor("web still stepping", func() bool { return steps("web") > webNow })
	if v, _ := get("debi_policy_failed", "web"); v != 0 {
		t.Error("web marked failed")
	}
	if v, _ := get("debi_policy_stale", "ambiguous"); v != 1 {
		t.Error("the failed policy is not stale")
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
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

// TestLifecycleFlag: without --web.enable-lifecycle /-/reload answers 403, as Prometheus's does.
func TestLifecycleFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		r := &reloader{opts: Options{EnableLifecycle: on}, reqs: make(chan chan error)}
		go func() {
			if errc, ok := <-r.reqs; ok {
				errc <- nil
			}
		}()
		w := httptest.NewRecorder()
		r.handler(make(chan struct{}))(w, httptest.NewRequest(http.MethodPost, "/-/reload", nil))
		want := http.StatusForbidden
		if on {
			want = http.StatusOK
		}
		if w.Code != want {
			t.Errorf("lifecycle %v: POST /-/reload = %d, want %d (%s)", on, w.Code, want, w.Body)
		}
		close(r.reqs)
	}
}
