package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
	"github.com/debi-scaler/debi/scaling"
)

// TestBadFixtures loads every testdata/bad-*.yml; each starts with "# error: PATH" and must
// fail with an error naming that field path.
func TestBadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.yml")
	if err != nil || len(files) < 10 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			want, ok := strings.CutPrefix(first, "# error: ")
			if !ok {
				t.Fatalf("fixture must start with '# error: PATH', got %q", first)
			}
			_, err = LoadFile(f)
			if err == nil {
				t.Fatalf("loaded without error; want one at %s", want)
			}
			var fe *FieldError
			switch {
			case errors.As(err, &fe):
				if fe.Path != want {
					t.Fatalf("error at %q, want %q: %v", fe.Path, want, err)
				}
			case !strings.Contains(err.Error(), want+" (line "): // decoder errors: unknown field, wrong type
				t.Fatalf("error does not name %s: %v", want, err)
			}
			if !strings.Contains(err.Error(), f) {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestMinimalPolicyDefaults(t *testing.T) {
	if !forecast.Known(policy.DefaultDebiModel) {
		t.Skipf("default model %q not registered yet", policy.DefaultDebiModel)
	}
	c, err := LoadFile("testdata/good-minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policies[0]
	// No algorithm: budget (DefaultAlgorithm), with its default model.
	if p.Algorithm != "budget" || p.Model != policy.DefaultBudgetModel || p.Target.Kind != "Deployment" {
		t.Errorf("algorithm %q model %q kind %q", p.Algorithm, p.Model, p.Target.Kind)
	}
	wantQ := Queries{
		Demand:        `sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload_type="deployment",workload="web"})`,
		Replicas:      `max(kube_deployment_spec_replicas{namespace="shop",deployment="web"})`,
		ReadyReplicas: `max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"})`,
		Request:       `max(namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace="shop",workload_type="deployment",workload="web"})`,
	}
	if p.Queries != wantQ {
		t.Errorf("queries = %+v\nwant %+v", p.Queries, wantQ)
	}
	if c.Global.Interval.Seconds() != 15 || c.Exporter.Concurrency != 8 || c.Exporter.MAEWindow != 60 || p.History != 760 {
		t.Errorf("defaults: interval %v concurrency %d mae %d history %d", c.Global.Interval, c.Exporter.Concurrency, c.Exporter.MAEWindow, p.History)
	}
	if p.HistoryStep != 5*time.Minute || p.LeadTime != 2*time.Minute || p.Season != 24*time.Hour || p.Retrain != 120 {
		t.Errorf("defaults: history_step %v lead_time %v season %v retrain %d", p.HistoryStep, p.LeadTime, p.Season, p.Retrain)
	}
	rc, err := p.RunnerConfig()
	if err != nil {
		t.Fatal(err)
	}
	// h = ceil(2m / 5m) + 1 = 2 history steps of 5m.
	if rc.Step != 5*time.Minute || rc.LeadSteps != 2 || rc.History != 760 || rc.Retrain != 120 || rc.Season != 24*time.Hour ||
		rc.Model.Season != 0 || rc.POT.Q != 0.1 || rc.POT.Tau != 0.2 {
		t.Errorf("runner config: step %v lead %d history %d retrain %d season %v (model %d), evt %+v",
			rc.Step, rc.LeadSteps, rc.History, rc.Retrain, rc.Season, rc.Model.Season, rc.POT)
	}
	// The budget policy's actuation delay and observation window reach the runner as durations,
	// as the backtest sets them: lead_time 2m, the 1m rate window of the default demand query.
	if rc.LeadTime != 2*time.Minute || rc.ObservationWindow != time.Minute {
		t.Errorf("runner config: lead time %v, observation window %v; want 2m and 1m", rc.LeadTime, rc.ObservationWindow)
	}
}

// TestMetricsFallback: an invalid metrics setting falls back to its default with a warning that
// names the field path.
func TestMetricsFallback(t *testing.T) {
	c, err := LoadFile("testdata/good-metrics-fallback.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := c.Policies[0].Metrics
	if m.Aggregation != "Average" || m.MissingData != "Ignore" || m.OutlierThreshold != 1.5 || m.Window.Minutes() != 2 || !m.OutlierFilter {
		t.Errorf("metrics = %+v", m)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{"policies[0].metrics.aggregation", "policies[0].metrics.missing_data", "policies[0].metrics.outlier_threshold"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %s:\n%s", want, w)
		}
	}
}

// TestLeadTime: the horizon covers the lead time (decision delay + start-up) in history steps,
// h = ceil(lead_time / history_step) + 1 (METHOD §2), whatever the interval.
func TestLeadTime(t *testing.T) {
	for _, c := range []struct {
		interval, historyStep, lead string
		want                        int
	}{
		{"15s", "15s", "15s", 2}, {"15s", "15s", "16s", 3}, {"15s", "15s", "45s", 4},
		{"15s", "5m", "2m", 2}, {"15s", "5m", "5m", 2}, {"15s", "5m", "6m", 3},
		{"15s", "1m", "90s", 3}, {"1s", "1s", "4s", 5}, {"1m", "", "", 2}, // defaults: 2m over 5m
	} {
		yml := "global: {interval: " + c.interval + "}\npolicies:\n  - {name: w, target: {namespace: s, name: w}, algorithm: hpa, request: 1"
		if c.historyStep != "" {
			yml += ", history_step: " + c.historyStep
		}
		if c.lead != "" {
			yml += ", lead_time: " + c.lead
		}
		cfg, err := Load([]byte(yml + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := cfg.Policies[0].RunnerConfig()
		if err != nil || rc.LeadSteps != c.want || rc.LeadSteps != policy.Horizon(cfg.Policies[0].LeadTime, rc.Step) {
			t.Errorf("interval %s, history_step %s, lead_time %s: %d steps (%v), want %d", c.interval, c.historyStep, c.lead, rc.LeadSteps, err, c.want)
		}
	}
}

// TestHistoryStep: history_step is the runner's step, its default is 5m rounded up to whole
// intervals, and season (a duration) reaches the runner, where forecast.season overrides it.
func TestHistoryStep(t *testing.T) {
	c, err := LoadFile("testdata/good-history-step.yml")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.Policies[0].RunnerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.Step != time.Minute || rc.LeadSteps != 3 || rc.History != 200 || rc.Retrain != 30 || rc.Season != time.Hour || rc.Model.Season != 0 {
		t.Errorf("web: step %v lead %d history %d retrain %d season %v (model %d)", rc.Step, rc.LeadSteps, rc.History, rc.Retrain, rc.Season, rc.Model.Season)
	}
	r, err := policy.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	// One hour of 1m steps is 60; Holt-Winters needs two seasons.
	if need, _ := r.ModelHistory(); r.Config().Model.Season != 60 || need != 120 {
		t.Errorf("web: model season %d steps, needs %d steps; want 60 and 120", r.Config().Model.Season, need)
	}
	rc, err = c.Policies[1].RunnerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if r, err = policy.New(rc); err != nil {
		t.Fatal(err)
	}
	if got := r.Config().Model.Season; got != 48 {
		t.Errorf("api: model season %d steps; forecast.season 48 must override season 1h", got)
	}

	for iv, want := range map[string]time.Duration{"1s": 5 * time.Minute, "15s": 5 * time.Minute, "45s": 315 * time.Second, "10m": 10 * time.Minute} {
		cfg, err := Load([]byte("global: {interval: " + iv + "}\npolicies:\n  - {name: w, target: {namespace: s, name: w}, algorithm: hpa, request: 1}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Policies[0].HistoryStep; got != want {
			t.Errorf("interval %s: default history_step %v, want %v", iv, got, want)
		}
	}
}

// TestExampleConfig keeps the annotated example of deploy/ loadable.
func TestExampleConfig(t *testing.T) {
	c, err := LoadFile("../deploy/examples/debi.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Policies) < 2 {
		t.Fatalf("example has %d policies", len(c.Policies))
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("example config has warnings: %v", c.Warnings())
	}
	budget := false
	for _, p := range c.Policies {
		rc, err := p.RunnerConfig()
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		budget = budget || rc.Spec.Load == policy.LoadBudget
	}
	if !budget {
		t.Error("the example shows no budget policy")
	}
}

// TestExampleDefaultAlgorithm keeps the example's word on the default algorithm in step with
// DefaultAlgorithm: every comment that says "default X" of an algorithm name X (one
// policy.Parse accepts) names DefaultAlgorithm, at least one does, and the example's policy
// that names no algorithm loads with it.
func TestExampleDefaultAlgorithm(t *testing.T) {
	const file = "../deploy/examples/debi.yml"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	said := 0
	for i, line := range strings.Split(string(b), "\n") {
		_, comment, ok := strings.Cut(line, "#")
		if !ok {
			continue
		}
		words := strings.Fields(comment)
		for j := 0; j+1 < len(words); j++ {
			if strings.Trim(words[j], "(") != "default" {
				continue
			}
			name := strings.TrimRight(words[j+1], ",.;:)")
			if _, err := policy.Parse(name, ""); err != nil {
				continue // not an algorithm: a model, a number, a kind
			}
			said++
			if name != DefaultAlgorithm {
				t.Errorf("%s:%d says the default algorithm is %q; config.DefaultAlgorithm is %q", file, i+1, name, DefaultAlgorithm)
			}
		}
	}
	if said == 0 {
		t.Errorf("%s names no default algorithm (want a comment saying \"default %s\")", file, DefaultAlgorithm)
	}

	c, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Policies []map[string]any `yaml:"policies"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	omitted := 0
	for i, p := range raw.Policies {
		if _, ok := p["algorithm"]; ok {
			continue
		}
		omitted++
		if got := c.Policies[i].Algorithm; got != DefaultAlgorithm {
			t.Errorf("%s: policy %s names no algorithm and loads as %q, want %q", file, c.Policies[i].Name, got, DefaultAlgorithm)
		}
	}
	if omitted == 0 {
		t.Errorf("%s: every policy names its algorithm; want one showing the default", file)
	}
}

// TestBudgetPolicy: budget policies load; a budget setting the file leaves out takes its
// default from forecast.DefaultCalibratorConfig and scaling.DefaultBudgetParams, a setting it
// gives (zeros included, through anchors and merge keys) is kept, and RunnerConfig hands the
// calibration to the runner.
func TestBudgetPolicy(t *testing.T) {
	c, err := LoadFile("testdata/good-budget.yml")
	if err != nil {
		t.Fatal(err)
	}
	defCal, defDec := forecast.DefaultCalibratorConfig(), scaling.DefaultBudgetParams()

	web := c.Policies[0]
	if web.Algorithm != "budget" || web.Model != policy.DefaultBudgetModel {
		t.Errorf("web: algorithm %q model %q, want budget with %q", web.Algorithm, web.Model, policy.DefaultBudgetModel)
	}
	if rc, err := web.RunnerConfig(); err != nil || rc.Fallback != "" {
		t.Errorf("web: runner fallback %q (%v), want none", rc.Fallback, err)
	}
	if rc, err := c.Policies[2].RunnerConfig(); err != nil || rc.Fallback != "arima" {
		t.Errorf("cart: runner fallback %q (%v), want arima from fallback_model", rc.Fallback, err)
	}
	if api := c.Policies[1]; api.FallbackModel != "" {
		t.Errorf("api: fallback_model %q, want none by default", api.FallbackModel)
	}
	if web.Budget != defCal || web.Scaling.Budget != defDec {
		t.Errorf("web: budget %+v, scaling.budget %+v; want the defaults %+v, %+v", web.Budget, web.Scaling.Budget, defCal, defDec)
	}

	api := c.Policies[1]
	wantCal := defCal
	wantCal.Budget, wantCal.Gain, wantCal.Method = 0.005, 0, forecast.QuantileEmpirical
	if api.Budget != wantCal {
		t.Errorf("api: budget %+v, want %+v (calibration_gain 0 kept, the rest defaulted)", api.Budget, wantCal)
	}
	wantDec := defDec
	wantDec.SLAUtilization, wantDec.Hold, wantDec.MinSaving = 0.8, 0, 0
	if api.Scaling.Budget != wantDec {
		t.Errorf("api: scaling.budget %+v, want %+v (hold 0s and min_saving 0 kept)", api.Scaling.Budget, wantDec)
	}

	cart := c.Policies[2]
	wantCal.Errors, wantCal.MinErrors = forecast.ErrorsAdditive, 50
	if cart.Algorithm != "seasonal-naive-budget" || cart.Model != "seasonal-naive" || cart.Budget != wantCal {
		t.Errorf("cart: algorithm %q model %q budget %+v; want seasonal-naive-budget with %+v (merged from api's)", cart.Algorithm, cart.Model, cart.Budget, wantCal)
	}

	if defCal.Neighbours != forecast.DefaultNeighbours || web.Budget.Neighbours != forecast.DefaultNeighbours {
		t.Errorf("web: quantile_neighbours %v (default %v), want %v", web.Budget.Neighbours, defCal.Neighbours, forecast.DefaultNeighbours)
	}
	search := c.Policies[3]
	wantCal = defCal
	wantCal.Method, wantCal.Neighbours = forecast.QuantilePOT, 0
	if search.Budget != wantCal {
		t.Errorf("search: budget %+v, want %+v (quantile_neighbours 0 under pot)", search.Budget, wantCal)
	}

	for i, p := range c.Policies {
		rc, err := p.RunnerConfig()
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if rc.Spec.Load != policy.LoadBudget || rc.Spec.Algorithm != "budget" || rc.Calibration != p.Budget || rc.Params.Budget != p.Scaling.Budget ||
			rc.LeadTime != p.LeadTime {
			t.Errorf("policies[%d]: runner spec %+v calibration %+v params.budget %+v lead time %v", i, rc.Spec, rc.Calibration, rc.Params.Budget, rc.LeadTime)
		}
		r, err := policy.New(rc)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		r.Close()
	}
}

// TestFillUnset: a key the file gives keeps its value, zero included; a key it leaves out takes
// the default, whatever the default is (the defaults are still being tuned); a field without a
// YAML key is left alone.
func TestFillUnset(t *testing.T) {
	type params struct {
		U     float64       `yaml:"u"`
		Hold  time.Duration `yaml:"hold"`
		Save  float64       `yaml:"save,omitempty"`
		On    bool          `yaml:"on"`
		Inner int           `yaml:"-"`
	}
	def := params{U: 0.85, Hold: 3 * time.Minute, Save: 0.1, On: true, Inner: 7}
	var p params
	fillUnset(&p, def, map[string]any{"save": 0, "on": false})
	if want := (params{U: 0.85, Hold: 3 * time.Minute}); p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	p = params{Hold: time.Minute}
	fillUnset(&p, def, nil)
	if want := (params{U: 0.85, Hold: time.Minute, Save: 0.1, On: true}); p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
}

// TestBudgetMinimalDefaults: a policy of any algorithm carries the default calibration, so that
// the configuration reference shows it.
func TestBudgetMinimalDefaults(t *testing.T) {
	c, err := LoadFile("testdata/good-minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Policies[0]; p.Budget != forecast.DefaultCalibratorConfig() || p.Scaling.Budget != scaling.DefaultBudgetParams() {
		t.Errorf("budget %+v, scaling.budget %+v: want the defaults", p.Budget, p.Scaling.Budget)
	}
}

// TestWindowZeroDisables: scaling.window: 0s turns debi's window term off (scaling.Params says
// 0 disables it); left out, it is the 5m default.
func TestWindowZeroDisables(t *testing.T) {
	const tmpl = "policies:\n  - {name: web, target: {namespace: shop, name: web}, algorithm: debi, request: 1%s}\n"
	for _, tc := range []struct {
		scaling string
		want    time.Duration
	}{{"", 5 * time.Minute}, {", scaling: {window: 0s}", 0}, {", scaling: {window: 2m}", 2 * time.Minute}, {", scaling: {min_replicas: 2}", 5 * time.Minute}} {
		c, err := Load([]byte(fmt.Sprintf(tmpl, tc.scaling)))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Policies[0].Scaling.Window; got != tc.want {
			t.Errorf("%q: window %v, want %v", tc.scaling, got, tc.want)
		}
	}
}

// TestShadowBeside: one policy acts on a target; shadow policies may sit beside it (a live
// baseline), and the error names the second acting policy and its mode.
func TestShadowBeside(t *testing.T) {
	const pols = `
policies:
  - {name: web, target: {namespace: shop, name: web}, request: 1}
  - {name: web-hpa, target: {namespace: shop, kind: deployment, name: web}, algorithm: hpa, request: 1}
  - {name: web-apa, target: {namespace: shop, name: web}, algorithm: apa, request: 1}
`
	for _, tc := range []struct {
		name, webhook, want string
	}{
		{"all shadow by default", "", ""},
		{"one acts, two shadow", "webhook: {mode: shadow, allow_unauthenticated: true, policies: [{name: web, mode: act}]}", ""},
		{"hpa-floor beside shadow", "webhook: {mode: shadow, allow_unauthenticated: true, policies: [{name: web-apa, mode: hpa-floor}]}", ""},
		{"two act", "webhook: {mode: shadow, allow_unauthenticated: true, policies: [{name: web, mode: act}, {name: web-apa, mode: act}]}",
			"policies[2].target: shop/Deployment/web is already scaled by policies[0] (mode act); a second policy on a target must be shadow"},
		{"act by default", "webhook: {mode: act, allow_unauthenticated: true, policies: [{name: web-hpa, mode: shadow}]}",
			"policies[2].target: shop/Deployment/web is already scaled by policies[0] (mode act)"},
		{"act and hpa-floor", "webhook: {mode: hpa-floor, allow_unauthenticated: true, policies: [{name: web-hpa, mode: shadow}, {name: web-apa, mode: act}]}",
			"policies[2].target: shop/Deployment/web is already scaled by policies[0] (mode hpa-floor)"},
	} {
		_, err := Load([]byte(tc.webhook + pols))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestExplicitZeros: a zero the file sets is a setting where zero means something and an error
// at its path where it does not; only what the file leaves out takes its default.
func TestExplicitZeros(t *testing.T) {
	base := "policies:\n  - name: web\n    target: {namespace: shop, name: web}\n    request: 1\n    algorithm: hpa\n    scaling: {%s}\n"
	c, err := Load([]byte(fmt.Sprintf(base, "tolerance: 0, scale_down_stabilization: 0s, up_tolerance: 0, down_tolerance: 0, window: 0s, scale_up_pods: 0")))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policies[0].Scaling
	if p.Tolerance != 0 || p.ScaleDownStabilization != 0 || p.UpTolerance != 0 || p.DownTolerance != 0 || p.Window != 0 || p.ScaleUpPods != 0 {
		t.Errorf("explicit zeros replaced by defaults: %+v", p)
	}
	def := scaling.DefaultParams()
	if p.Target != def.Target || p.MaxReplicas != def.MaxReplicas || p.ScaleUpPercent != def.ScaleUpPercent || p.Budget != def.Budget {
		t.Errorf("fields left out did not take their defaults: %+v", p)
	}
	for _, bad := range []struct{ set, path string }{
		{"min_replicas: 0", "policies[0].scaling.min_replicas"},
		{"target: 0", "policies[0].scaling.target"},
		{"scale_up_period: 0s", "policies[0].scaling.scale_up_period"},
		{"max_scale_up_rate: 0", "policies[0].scaling.max_scale_up_rate"},
	} {
		_, err := Load([]byte(fmt.Sprintf(base, bad.set)))
		if err == nil || !strings.Contains(err.Error(), bad.path) {
			t.Errorf("%s: err %v, want one at %s", bad.set, err, bad.path)
		}
	}
}
