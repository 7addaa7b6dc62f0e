package config

import (
	"strings"
	"testing"
	"time"
)

const webhookBase = `
policies:
  - name: web
    target: {namespace: shop, name: web}
    algorithm: hpa
    request: 0.5
`

func TestWebhookDefaults(t *testing.T) {
	c, err := Load([]byte(webhookBase))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhook
	if w.Mode != ModeShadow {
		t.Errorf("mode = %q, want shadow (safe default)", w.Mode)
	}
	if w.MaxBodyBytes != DefaultWebhookMaxBodyBytes || w.DecisionTimeout != DefaultWebhookDecisionTimeout {
		t.Errorf("max_body_bytes %d, decision_timeout %v", w.MaxBodyBytes, w.DecisionTimeout)
	}
	if len(w.Tidal.Resources) != 1 || w.Tidal.Resources[0].String() != "tidals.v1alpha1.tidal.io" {
		t.Errorf("tidal resources = %v, want tidals.v1alpha1.tidal.io", w.Tidal.Resources)
	}
	if !w.Tidal.IsEnabled() || !w.LeaderElection.IsEnabled() {
		t.Error("tidal watch and leader election must default to on")
	}
	if w.Tidal.Push.Enabled || w.Tidal.Push.BearerTokenFile != "" {
		t.Errorf("tidal push must default to off, got %+v", w.Tidal.Push)
	}
	le := w.LeaderElection
	if le.Namespace != "debi-system" || le.Name != "debi-webhook" || le.LeaseDuration != 15*time.Second ||
		le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second {
		t.Errorf("leader election defaults: %+v", le)
	}
	if w.PolicyLabel != "policy" || w.Fallback.LoadAnnotation != "load" || w.Fallback.ReplicasAnnotation != "current_replicas" {
		t.Errorf("label/annotation defaults: %q %+v", w.PolicyLabel, w.Fallback)
	}
	p, _ := c.PolicyByName("web")
	q, err := RenderQuery(w.Queries.Load, p)
	if err != nil || q != `debi_load_ratio{policy="web",load="w"}` {
		t.Errorf("default load query = %q, %v", q, err)
	}
	if q, _ := RenderQuery(w.Queries.LoadReplicas, p); q != `debi_current_replicas{policy="web"}` {
		t.Errorf("default load_replicas query = %q", q)
	}
	if q, _ := RenderQuery(w.Queries.WindowLoad, p); q != `debi_load_ratio{policy="web",load="window"}` {
		t.Errorf("default window_load query = %q", q)
	}
	// The budget inputs: W1 is the observed floor the runner hands budget; down the quantile
	// over the lead time plus the hold.
	if q, _ := RenderQuery(w.Queries.NowLoad, p); q != `debi_load_ratio{policy="web",load="w1"}` {
		t.Errorf("default now_load query = %q", q)
	}
	if q, _ := RenderQuery(w.Queries.DownLoad, p); q != `debi_load_ratio{policy="web",load="down"}` {
		t.Errorf("default down_load query = %q", q)
	}
	for _, f := range []string{"now_load", "down_load"} {
		if _, err := Load([]byte(webhookBase + "webhook: {queries: {" + f + ": none}}\n")); err == nil || !strings.Contains(err.Error(), "webhook.queries."+f+": cannot be none") {
			t.Errorf("%s: none must be refused, got %v", f, err)
		}
	}
	c, err = Load([]byte(webhookBase + "webhook: {queries: {window_load: none}}\n"))
	if err != nil || c.Webhook.Queries.WindowLoad != QueryNone {
		t.Errorf("window_load: none = %q, %v", c.Webhook.Queries.WindowLoad, err)
	}
	if _, err := Load([]byte(webhookBase + "webhook: {queries: {load: none}}\n")); err == nil || !strings.Contains(err.Error(), "webhook.queries.load:") {
		t.Errorf("load: none must be refused, got %v", err)
	}
}

func TestWebhookGoodFile(t *testing.T) {
	c, err := LoadFile("testdata/webhook-good.yml")
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhook
	if w.ModeFor("db") != ModeShadow || w.ModeFor("web") != ModeAct {
		t.Errorf("ModeFor: db %q (want shadow override), web %q (want act)", w.ModeFor("db"), w.ModeFor("web"))
	}
	if len(w.Tidal.Resources) != 2 || w.Tidal.Resources[1].String() != "schedules.v1.example.com" {
		t.Errorf("resources = %v", w.Tidal.Resources)
	}
	p, _ := c.PolicyByName("db")
	q, err := RenderQuery(w.Queries.LoadReplicas, p)
	if err != nil || q != `kube_statefulset_spec_replicas{namespace="shop",statefulset="db"}` {
		t.Errorf("load_replicas = %q, %v", q, err)
	}
	if w.MaxBodyBytes != 65536 || w.LeaderElection.Namespace != "debi" {
		t.Errorf("max_body_bytes %d, lease namespace %q", w.MaxBodyBytes, w.LeaderElection.Namespace)
	}
}

// TestWebhookTidalPush: POST /v1/tidal is off unless enabled, and then has its own token, or
// none when the whole webhook is unauthenticated.
func TestWebhookTidalPush(t *testing.T) {
	c, err := LoadFile("testdata/webhook-good-push.yml")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Webhook.Tidal.Push; !p.Enabled || p.BearerTokenFile != "/etc/debi/webhook/tidal-token" {
		t.Errorf("push = %+v", p)
	}
	if c.Webhook.BearerTokenFile != "/etc/debi/webhook/alertmanager-token" {
		t.Errorf("bearer_token_file = %q", c.Webhook.BearerTokenFile)
	}
	c, err = Load([]byte(webhookBase + "webhook:\n  allow_unauthenticated: true\n  tidal: {push: {enabled: true}}\n"))
	if err != nil || !c.Webhook.Tidal.Push.Enabled {
		t.Errorf("unauthenticated push: %+v, %v", c, err)
	}
}

func TestWebhookBadFiles(t *testing.T) {
	for file, want := range map[string]string{
		"webhook-bad-resource.yml":        "webhook.tidal.resources[0].version: required",
		"webhook-bad-floor-none.yml":      "webhook.queries.floor: cannot be none while policies[0] (web) uses hpa",
		"webhook-bad-max-input-age.yml":   "webhook.max_input_age: must be at least global.interval (1m0s), got 30s",
		"webhook-bad-override.yml":        `webhook.policies[0].name: no policy named "nope"`,
		"webhook-bad-unknown-field.yml":   "field listen_address not found",
		"webhook-bad-push-no-token.yml":   "webhook.tidal.push.bearer_token_file: required when webhook.tidal.push.enabled is true",
		"webhook-bad-push-same-token.yml": "webhook.tidal.push.bearer_token_file: must not be webhook.bearer_token_file",
	} {
		t.Run(file, func(t *testing.T) {
			_, err := LoadFile("testdata/" + file)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error = %v, want it to contain %q", err, want)
			}
		})
	}
}

func TestWebhookValidation(t *testing.T) {
	for _, tc := range []struct {
		name, section, want string
	}{
		{"bad mode", "mode: yolo", `webhook.mode: must be one of act, hpa-floor, shadow, got "yolo"`},
		{"token and unauthenticated", "bearer_token_file: /t\n  allow_unauthenticated: true", "webhook.allow_unauthenticated: conflicts"},
		{"tiny body", "max_body_bytes: 10", "webhook.max_body_bytes: must be at least 1024"},
		{"negative timeout", "decision_timeout: -1s", "webhook.decision_timeout: must be positive"},
		{"bad template", `queries: {load: 'x{{.Nope}}'}`, "webhook.queries.load:"},
		{"bad promql", `queries: {window_load: 'sum(('}`, "webhook.queries.window_load:"},
		{"bad now_load", `queries: {now_load: 'sum(('}`, "webhook.queries.now_load:"},
		{"bad down_load", `queries: {down_load: 'x{{.Nope}}'}`, "webhook.queries.down_load:"},
		{"resource with slash", "tidal: {resources: [{group: a/b, version: v1, resource: r}]}", "webhook.tidal.resources[0]: group, version and resource must not contain"},
		{"missing resource", "tidal: {resources: [{group: g, version: v1}]}", "webhook.tidal.resources[0].resource: required"},
		{"duplicate resource", "tidal: {resources: [{group: g, version: v1, resource: r}, {group: g, version: v1, resource: r}]}", "webhook.tidal.resources[1]: r.v1.g is already listed at webhook.tidal.resources[0]"},
		{"negative resync", "tidal: {resync_period: -1m}", "webhook.tidal.resync_period: must be positive"},
		{"renew above lease", "leader_election: {lease_duration: 5s, renew_deadline: 10s}", "webhook.leader_election.lease_duration: must be above renew_deadline"},
		{"retry above renew", "leader_election: {renew_deadline: 2s, retry_period: 3s}", "webhook.leader_election.renew_deadline: must be above retry_period"},
		{"override without name", "policies: [{mode: act}]", "webhook.policies[0].name: required"},
		{"override bad mode", "policies: [{name: web, mode: fight}]", `webhook.policies[0].mode: must be one of act, hpa-floor, shadow, got "fight"`},
		{"push without token", "tidal: {push: {enabled: true}}", "webhook.tidal.push.bearer_token_file: required when webhook.tidal.push.enabled is true"},
		{"push token and unauthenticated", "allow_unauthenticated: true\n  tidal: {push: {enabled: true, bearer_token_file: /p}}", "webhook.tidal.push.bearer_token_file: conflicts with webhook.allow_unauthenticated"},
		{"push with Alertmanager's token", "bearer_token_file: /t\n  tidal: {push: {enabled: true, bearer_token_file: /t}}", "webhook.tidal.push.bearer_token_file: must not be webhook.bearer_token_file"},
		{"override twice", "policies: [{name: web}, {name: web}]", `webhook.policies[1].name: "web" is already overridden by webhook.policies[0]`},
		{"negative paused_replicas", "policies: [{name: web, paused_replicas: -1}]", "webhook.policies[0].paused_replicas: must not be negative, got -1"},
		{"paused_replicas with hpa-floor", "mode: hpa-floor\n  policies: [{name: web, paused_replicas: 3}]", "webhook.policies[0].paused_replicas: not with mode hpa-floor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(webhookBase + "webhook:\n  " + tc.section + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestPausedReplicas: paused_replicas pauses the policy (PausedFor, which the exporter reads)
// and gives the count, 0 and counts outside min_replicas–max_replicas included (as KEDA's
// paused-replicas); an ElasticScaler's spec.debi.pausedReplicas becomes the same override.
func TestPausedReplicas(t *testing.T) {
	for _, tc := range []struct {
		section string
		paused  bool
		pin     int32 // -1: none
	}{
		{"policies: [{name: web, paused_replicas: 3}]", true, 3},
		{"policies: [{name: web, paused_replicas: 0}]", true, 0},
		{"policies: [{name: web, paused_replicas: 500}]", true, 500},
		{"policies: [{name: web, paused: true}]", true, -1},
		{"policies: [{name: web, paused: true, paused_replicas: 2}]", true, 2},
		{"policies: [{name: web}]", false, -1},
	} {
		c, err := Load([]byte(webhookBase + "webhook:\n  " + tc.section + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.section, err)
		}
		pin := c.Webhook.PausedReplicasFor("web")
		if c.Webhook.PausedFor("web") != tc.paused || (pin == nil) != (tc.pin < 0) || (pin != nil && *pin != tc.pin) {
			t.Errorf("%s: PausedFor %v, PausedReplicasFor %v; want %v, %d", tc.section, c.Webhook.PausedFor("web"), pin, tc.paused, tc.pin)
		}
	}
}
