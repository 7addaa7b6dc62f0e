package main

import (
	"context"
	"crypto/tls"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"

	"github.com/debi-scaler/debi/internal/testenv"
)

// TestRunTLSAndToken runs a webhookServer with an exporter-toolkit web config (TLS) and a token file,
// with an unreachable API server: it serves /healthz over TLS only, is not ready, and stops on
// ctx. Without a token file newWebhookServer refuses it.
func TestRunTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testenv.SelfSigned(t, dir)
	webCfg := filepath.Join(dir, "web.yml")
	_ = os.WriteFile(webCfg, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), 0o600)
	base := "policies:\n  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\nwebhook:\n  tidal: {enabled: false}\n"
	cfgFile := filepath.Join(dir, "debi.yml")
	_ = os.WriteFile(cfgFile, []byte(base), 0o600)
	rc := &rest.Config{Host: "https://127.0.0.1:1", Timeout: 200 * time.Millisecond}

	_, err := newWebhookServer(webhookOptions{ConfigFile: cfgFile, RestConfig: rc}, testenv.Logger(t), nil)
	if err == nil || !strings.Contains(err.Error(), "webhook.bearer_token_file: required") {
		t.Fatalf("New without token = %v", err)
	}

	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte("tok\n"), 0o600)
	_ = os.WriteFile(cfgFile, []byte(base+"  bearer_token_file: "+tokenFile+"\n"), 0o600)
	_, addr := startWebhook(t, webhookOptions{ConfigFile: cfgFile, WebConfigFile: webCfg, RestConfig: rc}, prometheus.NewRegistry())
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://" + addr
	testenv.Poll(t, 10*time.Second, "healthz over TLS", func() bool {
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// /-/healthy and /-/ready, as the exporter; /healthz and /readyz are deprecated aliases.
	for path, want := range map[string]int{"/-/healthy": 200, "/-/ready": http.StatusServiceUnavailable, "/readyz": http.StatusServiceUnavailable} {
		if resp, err := client.Get(url + path); err != nil || resp.StatusCode != want {
			t.Errorf("%s with the API server down: %v %v, want %d", path, resp, err, want)
		} else {
			resp.Body.Close()
		}
	}
	if resp, err := client.Post(url+"/v1/alertmanager", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("alertmanager without token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := client.Post(url+"/v1/tidal", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("tidal push (off by default): %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP served although TLS is configured")
	}
}

// startWebhook builds a webhookServer listening on 127.0.0.1:0 (newWebhookServer, as `debi
// webhook` does) and runs it until the test ends, when Run must return nil; addr is its address.
func startWebhook(t *testing.T, opts webhookOptions, reg *prometheus.Registry) (s *webhookServer, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Listener = l
	if s, err = newWebhookServer(opts, testenv.Logger(t), reg); err != nil {
		l.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not stop")
		}
	})
	return s, l.Addr().String()
}

// runWebhook starts a webhook (startWebhook) and returns its base URL once /healthz answers.
func runWebhook(t *testing.T, opts webhookOptions, reg *prometheus.Registry) string {
	t.Helper()
	_, url := runWebhookServer(t, opts, reg)
	return url
}

// runWebhookServer is runWebhook, with the webhookServer.
func runWebhookServer(t *testing.T, opts webhookOptions, reg *prometheus.Registry) (*webhookServer, string) {
	t.Helper()
	s, addr := startWebhook(t, opts, reg)
	url := "http://" + addr
	testenv.Poll(t, 10*time.Second, "healthz", func() bool {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return s, url
}

// TestRunReload drives the reload of a running webhook: POST /-/reload and PUT /-/reload and
// Reload (what `debi webhook` calls on SIGHUP) put a rewritten configuration in force (a new policy, a new mode, the push endpoint
// with its own token); a configuration that does not load, or whose token file is missing,
// leaves the previous one in force and sets debi_webhook_config_last_reload_successful to 0;
// the Alertmanager token file is rotated underneath.
func TestRunReload(t *testing.T) {
	dir := t.TempDir()
	amToken, pushToken, cfgFile := filepath.Join(dir, "am-token"), filepath.Join(dir, "push-token"), filepath.Join(dir, "debi.yml")
	testenv.WriteFile(t, amToken, "am-1\n")
	testenv.WriteFile(t, pushToken, "push-1\n")
	policies := "policies:\n  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\n"
	api := "  - {name: api, target: {namespace: shop, name: api}, algorithm: apa, request: 1}\n"
	webhook := "webhook:\n  bearer_token_file: " + amToken + "\n  leader_election: {enabled: false}\n"
	v1 := policies + webhook + "  tidal: {enabled: false}\n"
	v2 := policies + api + webhook + "  mode: act\n  tidal: {enabled: false, push: {enabled: true, bearer_token_file: " + pushToken + "}}\n"
	testenv.WriteFile(t, cfgFile, v1)
	reg := prometheus.NewRegistry()
	rc := &rest.Config{Host: "https://127.0.0.1:1", Timeout: 200 * time.Millisecond}
	srv, url := runWebhookServer(t, webhookOptions{ConfigFile: cfgFile, RestConfig: rc, EnableLifecycle: true}, reg)

	info := func(policy, mode, alg string) float64 {
		return testenv.MetricValue(t, reg, "debi_webhook_policy_info", map[string]string{"policy": policy, "mode": mode, "algorithm": alg})
	}
	reloadOK := func() float64 { return testenv.MetricValue(t, reg, "debi_webhook_config_last_reload_successful", nil) }
	if info("web", "shadow", "hpa") != 1 || reloadOK() != 1 || !(testenv.MetricValue(t, reg, "debi_webhook_config_last_reload_success_timestamp_seconds", nil) > 0) {
		t.Fatalf("at start: policy_info %v, reload_successful %v", info("web", "shadow", "hpa"), reloadOK())
	}
	alert := func(policy string) string {
		return string(testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", policy)}))
	}
	tidal := `{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"api"},"status":{"desiredReplicas":3}}`
	if code, msg := testenv.Request(t, "POST", url+"/v1/alertmanager", "am-1", alert("api")); code != 422 || !strings.Contains(msg, `unknown policy "api"`) {
		t.Errorf("v1, alert for api: %d %s, want 422 unknown policy", code, msg)
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/tidal", "push-1", tidal); code != 404 || !strings.Contains(msg, "webhook.tidal.push.enabled") {
		t.Errorf("v1, push: %d %s, want 404 saying how to enable it", code, msg)
	}

	// A new configuration: a new Controller serves at once.
	testenv.WriteFile(t, cfgFile, v2)
	if code, msg := testenv.Request(t, "POST", url+"/-/reload", "", ""); code != 200 {
		t.Fatalf("reload v2: %d %s", code, msg)
	}
	if info("api", "act", "apa") != 1 || info("web", "act", "hpa") != 1 || !math.IsNaN(info("web", "shadow", "hpa")) || reloadOK() != 1 {
		t.Errorf("after v2: policy_info api %v, web act %v, web shadow %v (want gone)", info("api", "act", "apa"), info("web", "act", "hpa"), info("web", "shadow", "hpa"))
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/alertmanager", "am-1", alert("api")); code == 422 || code == 401 {
		t.Errorf("v2, alert for api: %d %s; want it decided (a 5xx here: the API server is down)", code, msg)
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/tidal", "am-1", tidal); code != 401 {
		t.Errorf("v2, push with Alertmanager's token: %d %s, want 401", code, msg)
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/alertmanager", "push-1", alert("api")); code != 401 {
		t.Errorf("v2, alert with the push token: %d %s, want 401", code, msg)
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/tidal", "push-1", tidal); code == 404 || code == 401 {
		t.Errorf("v2, push: %d %s; want it served", code, msg)
	}

	// The Alertmanager token rotated: the new one in, the old one out, without a reload.
	testenv.WriteFile(t, amToken, "am-2-rotated\n") // another size: coarse mtimes cannot hide the change
	if code, msg := testenv.Request(t, "POST", url+"/v1/alertmanager", "am-1", alert("api")); code != 401 {
		t.Errorf("old token after rotation: %d %s, want 401", code, msg)
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/alertmanager", "am-2-rotated", alert("api")); code == 401 {
		t.Errorf("new token after rotation: %d %s", code, msg)
	}

	// Bad configurations: the previous one stays in force.
	for _, bad := range []struct{ name, config, msg string }{
		{"invalid mode", v2 + "  policies: [{name: web, mode: fight}]\n", "webhook.policies[0].mode"},
		{"not YAML", "policies: [", "yaml:"},
		{"missing push token file", strings.ReplaceAll(v2, pushToken, filepath.Join(dir, "nope")), "webhook.tidal.push.bearer_token_file"},
		{"ElasticScaler watch turned on", "global: {elastic_scalers: {enabled: true, namespaces: [shop]}}\n" + v2, "global.elastic_scalers.enabled"},
	} {
		testenv.WriteFile(t, cfgFile, bad.config)
		if code, msg := testenv.Request(t, "PUT", url+"/-/reload", "", ""); code != 500 || !strings.Contains(msg, bad.msg) {
			t.Errorf("%s: reload %d %s, want 500 naming %s", bad.name, code, msg, bad.msg)
		}
		if reloadOK() != 0 || info("api", "act", "apa") != 1 {
			t.Errorf("%s: reload_successful %v, api still configured %v", bad.name, reloadOK(), info("api", "act", "apa"))
		}
		if code, msg := testenv.Request(t, "POST", url+"/v1/alertmanager", "am-2-rotated", alert("api")); code == 422 || code == 401 {
			t.Errorf("%s: the previous configuration is not in force: %d %s", bad.name, code, msg)
		}
	}

	// Reload, as on SIGHUP (cmd/debi: TestWebhookSIGHUP): back to v1.
	testenv.WriteFile(t, cfgFile, v1)
	if err := srv.Reload(); err != nil || reloadOK() != 1 {
		t.Fatalf("Reload: %v, reload_successful %v", err, reloadOK())
	}
	if !math.IsNaN(info("api", "act", "apa")) || info("web", "shadow", "hpa") != 1 {
		t.Errorf("after Reload: api %v (want gone), web %v", info("api", "act", "apa"), info("web", "shadow", "hpa"))
	}
	if code, msg := testenv.Request(t, "POST", url+"/v1/tidal", "push-1", tidal); code != 404 {
		t.Errorf("after Reload, push: %d %s, want 404", code, msg)
	}
	if code, _ := testenv.Request(t, "GET", url+"/-/reload", "", ""); code != 404 && code != 405 {
		t.Errorf("GET /-/reload = %d, want 404 or 405", code)
	}
	// The metrics were created once (a second registration would have panicked) and lint.
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestRunKubeconfigFromEnv: without --kubeconfig, Run finds the cluster through $KUBECONFIG, as
// kubectl does: the API server it names (a fake over TLS: client-go sends credentials over https
// only) is asked for its version with the kubeconfig's
// credentials, and the webhook becomes ready.
func TestRunKubeconfigFromEnv(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	apiserver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	}))
	defer apiserver.Close()
	dir := t.TempDir()
	kubeconfig := func(server, token string) string {
		f := filepath.Join(dir, token+".kubeconfig")
		testenv.WriteFile(t, f, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: '"+server+"', insecure-skip-tls-verify: true}}]\n"+
			"users: [{name: u, user: {token: "+token+"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
		return f
	}
	t.Setenv("HOME", dir) // no ~/.kube/config of the machine
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", kubeconfig(apiserver.URL, "env-token"))

	// --kubeconfig wins over $KUBECONFIG; with neither, and outside a cluster, the error says where it looked.
	if rc, err := restConfig(webhookOptions{Kubeconfig: kubeconfig("https://explicit:6443", "flag-token")}); err != nil || rc.Host != "https://explicit:6443" {
		t.Errorf("--kubeconfig: %v, %v", rc, err)
	}
	if rc, err := restConfig(webhookOptions{}); err != nil || rc.Host != apiserver.URL || rc.BearerToken != "env-token" {
		t.Errorf("$KUBECONFIG: %+v, %v", rc, err)
	}

	cfgFile := filepath.Join(dir, "debi.yml")
	testenv.WriteFile(t, cfgFile, "policies:\n  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\n"+
		"webhook:\n  allow_unauthenticated: true\n  tidal: {enabled: false}\n")
	url := runWebhook(t, webhookOptions{ConfigFile: cfgFile}, prometheus.NewRegistry())
	testenv.Poll(t, 10*time.Second, "readyz through $KUBECONFIG", func() bool {
		code, _ := testenv.Request(t, "GET", url+"/readyz", "", "")
		return code == 200
	})
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 || auth[0] != "Bearer env-token" {
		t.Errorf("API server saw Authorization %q, want the kubeconfig's token", auth)
	}

	t.Setenv("KUBECONFIG", filepath.Join(dir, "absent"))
	if _, err := restConfig(webhookOptions{}); err == nil || !strings.Contains(err.Error(), "$KUBECONFIG") {
		t.Errorf("no kubeconfig anywhere: %v", err)
	}
}

// TestRunTokenFileOtherEndpoint: the token files of /v1/alertmanager and /v1/tidal must hold
// different tokens at run time too, as at start and reload. The Alertmanager token file rotated
// to the push token's value is refused: the old token still works on /v1/alertmanager, the push
// token is refused there, debi_webhook_token_reload_failures_total{endpoint="alertmanager"} goes
// up once (not per request). Rotated again to a token of its own, it is taken. The reverse, the
// push token file rotated to the Alertmanager token, is refused on /v1/tidal the same way; and a
// refused token comes into force once the other endpoint's token has moved away from it. Before
// the fix the rotated file was taken: the push token wrote through /v1/alertmanager.
func TestRunTokenFileOtherEndpoint(t *testing.T) {
	dir := t.TempDir()
	amVol := &testenv.SecretVolume{T: t, Dir: filepath.Join(dir, "am")}
	pushVol := &testenv.SecretVolume{T: t, Dir: filepath.Join(dir, "push")}
	for _, v := range []*testenv.SecretVolume{amVol, pushVol} {
		if err := os.Mkdir(v.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	amVol.Write("am-1\n")
	pushVol.Write("push-1\n")
	cfgFile := filepath.Join(dir, "debi.yml")
	testenv.WriteFile(t, cfgFile, "policies:\n  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\n"+
		"webhook:\n  bearer_token_file: "+filepath.Join(amVol.Dir, "token")+"\n  leader_election: {enabled: false}\n"+
		"  tidal: {enabled: false, push: {enabled: true, bearer_token_file: "+filepath.Join(pushVol.Dir, "token")+"}}\n")
	reg := prometheus.NewRegistry()
	rc := &rest.Config{Host: "https://127.0.0.1:1", Timeout: 200 * time.Millisecond}
	url := runWebhook(t, webhookOptions{ConfigFile: cfgFile, RestConfig: rc}, reg)

	alert := string(testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))
	tidal := `{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":3}}`
	paths := map[string]string{"alertmanager": "/v1/alertmanager", "tidal": "/v1/tidal"}
	bodies := map[string]string{"alertmanager": alert, "tidal": tidal}
	failures := func(endpoint string) float64 {
		return testenv.MetricValue(t, reg, "debi_webhook_token_reload_failures_total", map[string]string{"endpoint": endpoint})
	}
	// check: on endpoint, accepted is taken (anything but 401: the decision itself fails, the
	// API server is down) and refused is a 401; each endpoint's failures are as counted.
	check := func(step, endpoint, accepted, refused string, amFailed, pushFailed float64) {
		t.Helper()
		for range 2 { // a refused file is counted once per change, not per request
			if code, msg := testenv.Request(t, "POST", url+paths[endpoint], accepted, bodies[endpoint]); code == 401 || code == 404 {
				t.Errorf("%s: %s with %q: %d %s, want it taken", step, paths[endpoint], accepted, code, msg)
			}
			if code, msg := testenv.Request(t, "POST", url+paths[endpoint], refused, bodies[endpoint]); code != 401 {
				t.Errorf("%s: %s with %q: %d %s, want 401", step, paths[endpoint], refused, code, msg)
			}
		}
		if a, p := failures("alertmanager"), failures("tidal"); a != amFailed || p != pushFailed {
			t.Errorf("%s: token reload failures alertmanager %v tidal %v, want %v and %v", step, a, p, amFailed, pushFailed)
		}
	}
	check("start", "alertmanager", "am-1", "push-1", 0, 0)
	check("start", "tidal", "push-1", "am-1", 0, 0)

	amVol.Write("push-1\n")
	check("alertmanager file rotated to the push token", "alertmanager", "am-1", "push-1", 1, 0)
	check("alertmanager file rotated to the push token", "tidal", "push-1", "am-1", 1, 0)
	amVol.Write("am-2\n")
	check("alertmanager file rotated to a token of its own", "alertmanager", "am-2", "am-1", 1, 0)

	pushVol.Write("am-2\n")
	check("push file rotated to the alertmanager token", "tidal", "push-1", "am-2", 1, 1)
	check("push file rotated to the alertmanager token", "alertmanager", "am-2", "push-1", 1, 1)

	// The push file holds am-2, refused; the Alertmanager file moves on: am-2 is free, and the
	// push file's token comes into force without another change of its file.
	amVol.Write("am-3\n")
	check("alertmanager file rotated away", "alertmanager", "am-3", "am-2", 1, 1)
	check("alertmanager file rotated away", "tidal", "am-2", "push-1", 1, 1)
}
