package config

import (
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/debi-scaler/debi/internal/kube"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// Webhook modes.
const (
	// ModeAct patches the target's scale subresource.
	ModeAct = "act"
	// ModeHPAFloor raises the minReplicas of the HPA that scales the target, as a predictive
	// floor, instead of fighting it.
	ModeHPAFloor = "hpa-floor"
	// ModeShadow decides, logs and exports, and patches nothing.
	ModeShadow = "shadow"
)

// WebhookConfig is the webhook's own section. The webhook acts only on the targets of the
// policies listed in this file, whatever an alert's labels say.
type WebhookConfig struct {
	// Mode is act (patch the scale subresource), hpa-floor (raise an HPA's minReplicas) or
	// shadow (decide, log and export; patch nothing). Default shadow: safe to point at production.
	Mode string `yaml:"mode"`
	// BearerTokenFile holds the token POST /v1/alertmanager must carry as "Authorization: Bearer
	// ..." (the scheme in any case). `debi webhook` refuses to start without it unless
	// AllowUnauthenticated is set (tests, or a mesh that authenticates); other components load
	// the file without a webhook section. The file is re-read when it changes (stat on each
	// request; a Kubernetes Secret volume swaps a symlink), so a rotated Secret takes effect
	// without a restart; an empty or unreadable file after a change keeps the last good token.
	// It is not accepted on /v1/tidal, which has its own (tidal.push.bearer_token_file).
	BearerTokenFile string `yaml:"bearer_token_file"`
	// AllowUnauthenticated disables the bearer token check. Off by default.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
	// MaxBodyBytes bounds a request body (default 1 MiB; Alertmanager groups are small).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// DecisionTimeout bounds one notification: Prometheus queries, reads and patches
	// (default 10s, below Alertmanager's webhook timeout).
	DecisionTimeout time.Duration `yaml:"decision_timeout"`
	// PolicyLabel is the alert label that names the policy (default "policy").
	PolicyLabel string `yaml:"policy_label"`
	// Queries read fresh inputs from Prometheus at decision time (METHOD §8).
	Queries WebhookQueries `yaml:"queries"`
	// Fallback names the alert annotations used when Prometheus cannot be read.
	Fallback WebhookFallback `yaml:"fallback"`
	// Tidal configures the watch on Tidal-like resources (status.desiredReplicas).
	Tidal TidalConfig `yaml:"tidal"`
	// LeaderElection makes only one replica act on watches.
	LeaderElection LeaderElectionConfig `yaml:"leader_election"`
	// Policies holds per-policy overrides, by policy name.
	Policies []WebhookPolicy `yaml:"policies"`
	// MaxInputAge is the oldest exporter step a decision may rest on (queries.age); older, the
	// webhook holds the size. Default 2m or 4 × global.interval, whichever is longer; at least
	// global.interval.
	MaxInputAge time.Duration `yaml:"max_input_age"`
}

// WebhookQueries are Go templates of PromQL expressions, executed with {{.Policy}}, {{.Namespace}},
// {{.Kind}} (lower case) and {{.Name}} of the policy's target. Each must return one series.
type WebhookQueries struct {
	// Load returns W, the load as utilization at LoadReplicas (or at the current size when
	// LoadReplicas is empty). Default: the exporter's effective-load series.
	Load string `yaml:"load"`
	// LoadReplicas returns the replica count the Load figure refers to, so that a W computed
	// before the last scale-up is converted to the current size instead of being applied twice.
	// Default: the exporter's debi_current_replicas. "none": W refers to the current size.
	LoadReplicas string `yaml:"load_replicas"`
	// WindowLoad returns the mean observed load over the debi window (METHOD §5.5), as
	// utilization at LoadReplicas. Default: the exporter's load="window" series. "none": no
	// window term.
	WindowLoad string `yaml:"window_load"`
	// NowLoad returns, for budget policies, the load observed now, as utilization at
	// LoadReplicas: the floor the algorithm never sizes below. Default: the exporter's
	// load="w1" series (W1 is the observed load the runner hands budget as its floor).
	// A missing or ambiguous answer holds the size: no decision without an observation.
	NowLoad string `yaml:"now_load"`
	// DownLoad returns, for budget policies, the calibrated quantile of the demand over the
	// lead time plus the hold, as utilization at LoadReplicas: a scale-down must still fit it.
	// Default: the exporter's load="down" series. A missing or ambiguous answer holds the size
	// (never a scale-down on missing data).
	DownLoad string `yaml:"down_load"`
	// Idle returns, for a policy that scales to zero (min_replicas 0), how long its wake
	// metrics have been at or below their activation, in seconds (0: one is above it): at
	// scale_to_zero_after the decision is zero, at 0 a workload at zero wakes. Default: the
	// exporter's debi_policy_idle_seconds. A missing answer holds the size.
	Idle string `yaml:"idle"`
	// Stale returns 1 when the exporter's published values are not from its latest step
	// (debi_policy_stale): the webhook then holds the size. "none": no check (not advised).
	Stale string `yaml:"stale"`
	// Age returns the age in seconds of the exporter's last step with every input present;
	// older than webhook.max_input_age, the webhook holds the size. "none": no check.
	Age string `yaml:"age"`
	// Floor and Ceiling return the range the policy's state (HPA stabilisation and rate
	// limits, the budget's hold) allows, as published by the exporter: the webhook clamps the
	// stateless rule's answer into it, so that no webhook replica keeps decision state.
	// Required by the stateful algorithms (hpa, budget); not read by the others.
	Floor   string `yaml:"floor"`
	Ceiling string `yaml:"ceiling"`
}

// WebhookFallback names the alert annotations read when Prometheus cannot answer. A decision
// taken from them is labelled source="annotation" in logs, events and metrics.
type WebhookFallback struct {
	// LoadAnnotation holds W (default "load").
	LoadAnnotation string `yaml:"load_annotation"`
	// ReplicasAnnotation holds the replica count W refers to (default "current_replicas").
	ReplicasAnnotation string `yaml:"replicas_annotation"`
	// Disabled turns the fallback off: no fresh data, no decision (5xx, Alertmanager retries).
	Disabled bool `yaml:"disabled"`
}

// TidalConfig configures the watch on resources that publish a desired replica count.
type TidalConfig struct {
	// Enabled turns the informer on (default true; it still needs leadership).
	Enabled *bool `yaml:"enabled"`
	// Resources to watch (default tidals.v1alpha1.tidal.io).
	Resources []WatchResource `yaml:"resources"`
	// ResyncPeriod of the informer (default 5m; 0 after defaults means never).
	ResyncPeriod time.Duration `yaml:"resync_period"`
	// Push configures POST /v1/tidal, through which something other than the watch delivers
	// Tidal events. Off by default: the watch needs none of it.
	Push TidalPushConfig `yaml:"push"`
}

// IsEnabled reports whether the Tidal watch runs.
func (t TidalConfig) IsEnabled() bool { return t.Enabled == nil || *t.Enabled }

// TidalPushConfig configures the push endpoint POST /v1/tidal. It has its own token so that
// whoever may notify through Alertmanager cannot push replica counts, and the other way round.
type TidalPushConfig struct {
	// Enabled serves POST /v1/tidal (default false: it answers 404 saying how to enable it).
	Enabled bool `yaml:"enabled"`
	// BearerTokenFile holds the token a pushed event must carry as "Authorization: Bearer ...";
	// required when Enabled unless webhook.allow_unauthenticated, and distinct from
	// webhook.bearer_token_file. Re-read when it changes, as that one is.
	BearerTokenFile string `yaml:"bearer_token_file"`
}

// validate checks the push section against the webhook's authentication settings.
func (p TidalPushConfig) validate(w *WebhookConfig) error {
	const path = "webhook.tidal.push.bearer_token_file"
	switch {
	case p.BearerTokenFile != "" && w.AllowUnauthenticated:
		return &fieldError{path, "conflicts with webhook.allow_unauthenticated; set one"}
	case p.Enabled && p.BearerTokenFile == "" && !w.AllowUnauthenticated:
		return &fieldError{path, "required when webhook.tidal.push.enabled is true (or set webhook.allow_unauthenticated: true)"}
	case p.BearerTokenFile != "" && p.BearerTokenFile == w.BearerTokenFile:
		return &fieldError{path, "must not be webhook.bearer_token_file: the Alertmanager token must not be accepted on /v1/tidal"}
	}
	return nil
}

// WatchResource is a group/version/resource.
type WatchResource struct {
	Group    string `yaml:"group"`
	Version  string `yaml:"version"`
	Resource string `yaml:"resource"`
}

// String is resource.version.group, as kubectl spells it.
func (w WatchResource) String() string { return w.Resource + "." + w.Version + "." + w.Group }

// LeaderElectionConfig configures the Lease that makes one webhook replica the one that acts on
// watches. HTTP notifications are served by every replica: they are idempotent.
type LeaderElectionConfig struct {
	// Enabled (default true). Disable only when one replica runs.
	Enabled *bool `yaml:"enabled"`
	// Namespace of the Lease (default "debi-system").
	Namespace string `yaml:"namespace"`
	// Name of the Lease (default "debi-webhook").
	Name string `yaml:"name"`
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go (15s, 10s, 2s).
	LeaseDuration time.Duration `yaml:"lease_duration"`
	RenewDeadline time.Duration `yaml:"renew_deadline"`
	RetryPeriod   time.Duration `yaml:"retry_period"`
}

// IsEnabled reports whether leader election runs.
func (l LeaderElectionConfig) IsEnabled() bool { return l.Enabled == nil || *l.Enabled }

// WebhookPolicy overrides webhook settings for one policy.
type WebhookPolicy struct {
	// Name of a policy in policies[].
	Name string `yaml:"name"`
	// Mode overrides webhook.mode for this policy.
	Mode string `yaml:"mode"`
	// Paused stops every write for this policy (decisions are still logged and exported).
	// An annotation debi.io/paused: "true" on the target does the same from the cluster.
	Paused bool `yaml:"paused"`
	// PausedReplicas pauses the policy held at this many replicas, as KEDA's paused-replicas
	// annotation: the webhook scales the target to it (mode act) and makes no load decision
	// while it is set, whatever paused says. It may lie outside min_replicas–max_replicas.
	PausedReplicas *int32 `yaml:"paused_replicas"`
}

// PausedFor reports whether a policy is paused by the configuration, at a count or not.
func (w *WebhookConfig) PausedFor(policy string) bool {
	for _, p := range w.Policies {
		if p.Name == policy {
			return p.Paused || p.PausedReplicas != nil
		}
	}
	return false
}

// PausedReplicasFor is the count a policy is paused at (webhook.policies[].paused_replicas), or
// nil.
func (w *WebhookConfig) PausedReplicasFor(policy string) *int32 {
	for _, p := range w.Policies {
		if p.Name == policy && p.PausedReplicas != nil {
			n := *p.PausedReplicas
			return &n
		}
	}
	return nil
}

// Defaults of the webhook section.
const (
	DefaultWebhookMaxBodyBytes      = 1 << 20
	DefaultWebhookDecisionTimeout   = 10 * time.Second
	DefaultWebhookLoadQuery         = `debi_load_ratio{policy="{{.Policy}}",load="w"}`
	DefaultWebhookLoadReplicasQuery = `debi_current_replicas{policy="{{.Policy}}"}`
	DefaultWebhookWindowLoadQuery   = `debi_load_ratio{policy="{{.Policy}}",load="window"}`
	DefaultWebhookNowLoadQuery      = `debi_load_ratio{policy="{{.Policy}}",load="w1"}`
	DefaultWebhookDownLoadQuery     = `debi_load_ratio{policy="{{.Policy}}",load="down"}`
	DefaultWebhookIdleQuery         = `debi_policy_idle_seconds{policy="{{.Policy}}"}`
	DefaultWebhookStaleQuery        = `debi_policy_stale{policy="{{.Policy}}"}`
	DefaultWebhookAgeQuery          = `time() - debi_policy_last_success_timestamp_seconds{policy="{{.Policy}}"}`
	DefaultWebhookFloorQuery        = `debi_decision_floor_replicas{policy="{{.Policy}}"}`
	DefaultWebhookCeilingQuery      = `debi_decision_ceiling_replicas{policy="{{.Policy}}"}`
	DefaultWebhookMaxInputAge       = 2 * time.Minute
	// QueryNone disables an optional query.
	QueryNone = "none"
)

// ModeFor returns the mode of a policy: its override or the webhook's mode.
func (w *WebhookConfig) ModeFor(policy string) string {
	for _, p := range w.Policies {
		if p.Name == policy && p.Mode != "" {
			return p.Mode
		}
	}
	return w.Mode
}

// QueryData is what the webhook query templates see: the values escaped for a PromQL string
// between double quotes (label="{{.Name}}"), so that no value can change the query's meaning.
type QueryData struct {
	Policy, Namespace, Kind, Name string
}

// promQLString escapes a value for a double-quoted PromQL string literal.
var promQLString = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)

// RenderQuery executes a query template for a policy.
func RenderQuery(tmpl string, p *Policy) (string, error) {
	t, err := template.New("q").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	e := promQLString.Replace
	err = t.Execute(&b, QueryData{Policy: e(p.Name), Namespace: e(p.Target.Namespace), Kind: e(strings.ToLower(p.Target.Kind)), Name: e(p.Target.Name)})
	return b.String(), err
}

func validMode(m string) bool { return m == ModeAct || m == ModeHPAFloor || m == ModeShadow }

// validate fills the webhook section's defaults and checks it against the policies, appending
// each independent error to errs in the order Load has always checked them.
func (w *WebhookConfig) validate(c *Config, errs *errList) {
	w.validateServer(errs)
	w.defaultQueries()
	if w.Queries.Load == QueryNone {
		errs.addField("webhook.queries.load", "cannot be none: W is what the decision needs")
	}
	w.validateBoundsQueries(c, errs)
	if w.MaxInputAge == 0 {
		w.MaxInputAge = max(DefaultWebhookMaxInputAge, 4*c.Global.Interval)
	}
	if w.MaxInputAge < c.Global.Interval && !c.intervalBad {
		errs.addField("webhook.max_input_age", fmt.Sprintf("must be at least global.interval (%v), got %v", c.Global.Interval, w.MaxInputAge))
	}
	w.validateQueryTemplates(errs)
	if w.Fallback.LoadAnnotation == "" {
		w.Fallback.LoadAnnotation = "load"
	}
	if w.Fallback.ReplicasAnnotation == "" {
		w.Fallback.ReplicasAnnotation = "current_replicas"
	}
	w.validateTidal(errs)
	w.validateLeaderElection(errs)
	w.validatePolicies(c, errs)
}

// validateServer fills and checks the webhook's own settings: the mode, the authentication, the
// body size, the decision timeout and the policy label.
func (w *WebhookConfig) validateServer(errs *errList) {
	switch {
	case w.Mode == "":
		w.Mode = ModeShadow
	case !validMode(w.Mode):
		errs.addField("webhook.mode", `must be one of act, hpa-floor, shadow, got "`+w.Mode+`"`)
	}
	if w.BearerTokenFile != "" && w.AllowUnauthenticated {
		errs.addField("webhook.allow_unauthenticated", "conflicts with bearer_token_file; set one")
	}
	if w.MaxBodyBytes == 0 {
		w.MaxBodyBytes = DefaultWebhookMaxBodyBytes
	}
	if w.MaxBodyBytes < 1024 {
		errs.addField("webhook.max_body_bytes", fmt.Sprintf("must be at least 1024, got %d", w.MaxBodyBytes))
	}
	if w.DecisionTimeout == 0 {
		w.DecisionTimeout = DefaultWebhookDecisionTimeout
	}
	if w.DecisionTimeout < 0 {
		errs.addField("webhook.decision_timeout", fmt.Sprintf("must be positive, got %v", w.DecisionTimeout))
	}
	if w.PolicyLabel == "" {
		w.PolicyLabel = "policy"
	}
}

// defaultQueries fills the queries left empty with their defaults.
func (w *WebhookConfig) defaultQueries() {
	for _, q := range []struct {
		dst *string
		def string
	}{
		{&w.Queries.Load, DefaultWebhookLoadQuery}, {&w.Queries.LoadReplicas, DefaultWebhookLoadReplicasQuery},
		{&w.Queries.WindowLoad, DefaultWebhookWindowLoadQuery}, {&w.Queries.NowLoad, DefaultWebhookNowLoadQuery},
		{&w.Queries.DownLoad, DefaultWebhookDownLoadQuery}, {&w.Queries.Idle, DefaultWebhookIdleQuery},
		{&w.Queries.Stale, DefaultWebhookStaleQuery}, {&w.Queries.Age, DefaultWebhookAgeQuery},
		{&w.Queries.Floor, DefaultWebhookFloorQuery}, {&w.Queries.Ceiling, DefaultWebhookCeilingQuery},
	} {
		if *q.dst == "" {
			*q.dst = q.def
		}
	}
}

// validateBoundsQueries refuses floor or ceiling none while a policy uses a stateful
// algorithm: one error for each such field, naming the first of those policies.
func (w *WebhookConfig) validateBoundsQueries(c *Config, errs *errList) {
	for _, q := range []struct{ field, tmpl string }{{"floor", w.Queries.Floor}, {"ceiling", w.Queries.Ceiling}} {
		if q.tmpl != QueryNone {
			continue
		}
		for i := range c.Policies {
			p := &c.Policies[i]
			spec, err := policy.Parse(p.Algorithm, p.Model)
			if err != nil {
				continue // reported at the policy
			}
			if alg, err := scaling.New(spec.Algorithm, p.Scaling); err == nil {
				if _, ok := alg.(scaling.Stateful); ok {
					errs.addField("webhook.queries."+q.field, fmt.Sprintf("cannot be none while policies[%d] (%s) uses %s, a stateful algorithm: its stabilisation and rate limits come from the exporter's published bounds", i, p.Name, alg.Name()))
					break // one error for the field
				}
			}
		}
	}
}

// validateQueryTemplates refuses now_load and down_load none and checks that every query
// renders and parses as PromQL for a probe policy.
func (w *WebhookConfig) validateQueryTemplates(errs *errList) {
	for _, q := range []struct{ field, tmpl, why string }{{"now_load", w.Queries.NowLoad, "a budget policy holds its size without it"},
		{"down_load", w.Queries.DownLoad, "a budget policy holds its size without it"},
		{"idle", w.Queries.Idle, "a policy that scales to zero holds its size without it"}} {
		if q.tmpl == QueryNone {
			errs.addField("webhook.queries."+q.field, "cannot be none: "+q.why)
		}
	}
	probe := &Policy{Name: "p", Target: Target{Kind: "Deployment", Namespace: "ns", Name: "n"}}
	for _, q := range []struct{ field, tmpl string }{
		{"load", w.Queries.Load}, {"load_replicas", w.Queries.LoadReplicas}, {"window_load", w.Queries.WindowLoad},
		{"now_load", w.Queries.NowLoad}, {"down_load", w.Queries.DownLoad}, {"idle", w.Queries.Idle},
		{"stale", w.Queries.Stale}, {"age", w.Queries.Age}, {"floor", w.Queries.Floor}, {"ceiling", w.Queries.Ceiling},
	} {
		if q.tmpl == QueryNone {
			continue // load: none is reported above
		}
		expr, err := RenderQuery(q.tmpl, probe)
		if err == nil {
			_, err = parser.NewParser(parser.Options{}).ParseExpr(expr)
		}
		if err != nil {
			errs.addField("webhook.queries."+q.field, err.Error())
		}
	}
}

// validateTidal fills and checks webhook.tidal: the resources watched, the resync period and
// the push.
func (w *WebhookConfig) validateTidal(errs *errList) {
	if len(w.Tidal.Resources) == 0 {
		w.Tidal.Resources = []WatchResource{{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}}
	}
	for i, r := range w.Tidal.Resources {
		path := fmt.Sprintf("webhook.tidal.resources[%d]", i)
		ok := true
		if r.Version == "" {
			errs.addField(path+".version", "required")
			ok = false
		}
		if r.Resource == "" {
			errs.addField(path+".resource", "required")
			ok = false
		}
		if ok && strings.ContainsAny(r.Group+r.Version+r.Resource, "/ ") {
			errs.addField(path, fmt.Sprintf("group, version and resource must not contain '/' or spaces, got %q", r.String()))
			ok = false
		}
		for j := range i {
			if ok && w.Tidal.Resources[j] == r {
				errs.addField(path, fmt.Sprintf("%s is already listed at webhook.tidal.resources[%d]", r, j))
				break
			}
		}
	}
	if w.Tidal.ResyncPeriod == 0 {
		w.Tidal.ResyncPeriod = 5 * time.Minute
	}
	if w.Tidal.ResyncPeriod < 0 {
		errs.addField("webhook.tidal.resync_period", fmt.Sprintf("must be positive, got %v", w.Tidal.ResyncPeriod))
	}
	errs.add(w.Tidal.Push.validate(w))
}

// validateLeaderElection fills and checks webhook.leader_election: each bound is checked
// against the one below it when that one is valid.
func (w *WebhookConfig) validateLeaderElection(errs *errList) {
	le := &w.LeaderElection
	if le.Namespace == "" {
		le.Namespace = "debi-system"
	}
	if le.Name == "" {
		le.Name = "debi-webhook"
	}
	kube.LeaseDefaults(&le.LeaseDuration, &le.RenewDeadline, &le.RetryPeriod)
	renewOK := true
	if le.RetryPeriod < 0 {
		errs.addField("webhook.leader_election.retry_period", fmt.Sprintf("must be positive, got %v", le.RetryPeriod))
	} else if le.RenewDeadline <= le.RetryPeriod {
		errs.addField("webhook.leader_election.renew_deadline", fmt.Sprintf("must be above retry_period (%v), got %v", le.RetryPeriod, le.RenewDeadline))
		renewOK = false
	}
	if renewOK && le.LeaseDuration <= le.RenewDeadline {
		errs.addField("webhook.leader_election.lease_duration", fmt.Sprintf("must be above renew_deadline (%v), got %v", le.RenewDeadline, le.LeaseDuration))
	}
}

// validatePolicies checks webhook.policies: each names a policy once, with a valid mode and a
// paused count the mode can hold.
func (w *WebhookConfig) validatePolicies(c *Config, errs *errList) {
	seen := map[string]int{}
	for i, p := range w.Policies {
		path := fmt.Sprintf("webhook.policies[%d]", i)
		if p.Name == "" {
			errs.addField(path+".name", "required")
		} else if _, ok := c.PolicyByName(p.Name); !ok {
			errs.addField(path+".name", fmt.Sprintf("no policy named %q in policies[]", p.Name))
		} else if j, dup := seen[p.Name]; dup {
			errs.addField(path+".name", fmt.Sprintf("%q is already overridden by webhook.policies[%d]", p.Name, j))
		} else {
			seen[p.Name] = i
		}
		if p.Mode != "" && !validMode(p.Mode) {
			errs.addField(path+".mode", `must be one of act, hpa-floor, shadow, got "`+p.Mode+`"`)
		}
		if n := p.PausedReplicas; n != nil {
			switch {
			case *n < 0:
				errs.addField(path+".paused_replicas", fmt.Sprintf("must not be negative, got %d", *n))
			case p.Name != "" && w.ModeFor(p.Name) == ModeHPAFloor:
				errs.addField(path+".paused_replicas", "not with mode hpa-floor: the HPA scales the target, and a floor does not hold it at a count")
			}
		}
	}
}

type fieldError struct{ path, msg string }

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

// addField appends the webhook section's error msg at path.
func (l *errList) addField(path, msg string) { l.add(&fieldError{path, msg}) }
