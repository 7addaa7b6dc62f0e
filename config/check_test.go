package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCheckReportsEveryError checks that Check reports each error of a file holding several,
// in different sections and policies, with its field path and line, in the file's words.
func TestCheckReportsEveryError(t *testing.T) {
	b, err := os.ReadFile("testdata/check-errors.yml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(b); err == nil {
		t.Fatal("Load accepted the fixture")
	}
	errs := Check(b)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	// Lines as in the fixture; the duplicate name is found over the valid policies and
	// renumbered to the file's indexes (web is policies[0], its duplicate policies[4]).
	want := []string{
		`global.query_timeout (line 5): must be positive`,
		`policies[0].history_step (line 10): "abc" is not a duration`,
		`policies[1].target.namespace (line 12): required`,
		`policies[2].algorithm (line 16): unknown policy "crystalball"`,
		`policies[3].scaling.min_replica (line 22): unknown field "min_replica"`,
		`policies[4].name (line 23): "web" is already used by policies[0]`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("error %d = %q, want it to contain %q", i, got[i], w)
		}
	}
	for _, e := range errs {
		ce, ok := e.(*CheckError)
		if !ok || ce.Line == 0 || ce.Path == "" {
			t.Errorf("%q: want a *CheckError with a path and a line", e)
			continue
		}
		for _, goName := range []string{"time.Duration", "config.", "scaling.", "!!str", "unmarshal", "type "} {
			if strings.Contains(ce.Msg, goName) {
				t.Errorf("%q leaks %q", e, goName)
			}
		}
	}
}

// goTypeRe finds what only Go would say: a qualified type (config.Policy, time.Duration) or a
// pointer to one (*yaml.Node).
var goTypeRe = regexp.MustCompile(`\b[a-z]+\.[A-Z]\w+|\*[a-z]+\.`)

// checkNoGoTypes fails the test for every message that names a Go type.
func checkNoGoTypes(t *testing.T, errs []error) {
	t.Helper()
	for _, e := range errs {
		if m := goTypeRe.FindString(e.Error()); m != "" {
			t.Errorf("%q names the Go type %q", e, m)
		}
	}
}

// TestCheckReportsEveryErrorOfASection checks that Check does not stop at the first error of a
// section: two in global, two in exporter, three independent ones in one policy and one in
// another, two pairs of duplicate names, two targets with a second acting policy, and four in
// the webhook section (two in one webhook.policies entry), each at its path and line.
func TestCheckReportsEveryErrorOfASection(t *testing.T) {
	b, err := os.ReadFile("testdata/check-every-error.yml")
	if err != nil {
		t.Fatal(err)
	}
	// Load reports the first, as it always has.
	if _, err := Load(b); err == nil || err.Error() != "global.query_timeout: must be positive, got -1s" {
		t.Errorf("Load: %v, want the first error, at global.query_timeout", err)
	}
	want := []struct {
		path string
		line int
		msg  string // a part of the message
	}{
		{"global.query_timeout", 5, "must be positive"},
		{"global.lookback_delta", 6, "must be at least 1s"},
		{"exporter.mae_window", 8, "must be positive"},
		{"exporter.concurrency", 9, "must be positive"},
		{"policies[0].history_step", 14, "multiple of global.interval (15s), got 7s"},
		{"policies[0].lead_time", 15, "must not be negative"},
		{"policies[0].scaling.target", 17, "must be in (0, 1]"},
		{"policies[1].retrain", 21, "must not be negative"},
		{"policies[2].name", 22, `"web" is already used by policies[0]`},
		{"policies[4].name", 28, `"cart" is already used by policies[3]`},
		{"policies[5].target", 32, "shop/Deployment/cart is already scaled by policies[3] (mode act)"},
		{"policies[6].target", 35, "shop/Deployment/api is already scaled by policies[1] (mode act)"},
		{"webhook.max_body_bytes", 40, "must be at least 1024"},
		{"webhook.decision_timeout", 41, "must be positive"},
		{"webhook.policies[0].name", 43, `no policy named "nosuch"`},
		{"webhook.policies[0].mode", 43, `got "maybe"`},
	}
	errs := Check(b)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if len(errs) != len(want) {
		t.Errorf("got %d errors, want %d:\n%s", len(errs), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		found := false
		for _, e := range errs {
			ce, ok := e.(*CheckError)
			if ok && ce.Path == w.path && strings.Contains(ce.Msg, w.msg) {
				found = true
				if ce.Line != w.line {
					t.Errorf("%s: line %d, want %d", w.path, ce.Line, w.line)
				}
			}
		}
		if !found {
			t.Errorf("no error at %s saying %q; got:\n%s", w.path, w.msg, strings.Join(got, "\n"))
		}
	}
	checkNoGoTypes(t, errs)

	// The same file with every error fixed passes.
	fixed := strings.NewReplacer(
		"query_timeout: -1s", "query_timeout: 5s", "lookback_delta: 100ms", "lookback_delta: 1m",
		"mae_window: -1", "mae_window: 30", "concurrency: -2", "concurrency: 2",
		"history_step: 7s", "history_step: 30s", "lead_time: -1m", "lead_time: 1m", "target: 2", "target: 0.5",
		"retrain: -5", "retrain: 5", "name: web\n    target: {namespace: shop, name: web-canary}", "name: web-canary\n    target: {namespace: shop, name: web-canary}",
		"name: cart\n    target: {namespace: shop, name: cart-canary}", "name: cart-canary\n    target: {namespace: shop, name: cart-canary}",
		"max_body_bytes: 10", "max_body_bytes: 4096", "decision_timeout: -1s", "decision_timeout: 5s",
		"{name: nosuch, mode: maybe}", "{name: cart-v2, mode: shadow}\n    - {name: api-v2, mode: shadow}",
	).Replace(string(b))
	if errs := Check([]byte(fixed)); len(errs) != 0 {
		t.Errorf("the fixed file: %v\n%s", errs, fixed)
	}
	if _, err := Load([]byte(fixed)); err != nil {
		t.Errorf("Load of the fixed file: %v", err)
	}
}

// TestCheckReportsEverySubfieldError checks that the sections validated by other packages
// (scaling, scaling.budget, budget, evt) report every bad field, each at its path and line, and
// that Load still reports the first: fixing the errors one by one in the order of the checks,
// Load reports each next one.
func TestCheckReportsEverySubfieldError(t *testing.T) {
	b, err := os.ReadFile("testdata/check-every-subfield-error.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		path string
		line int
		msg  string // a part of the message
		fix  [2]string
	}{
		{"policies[0].scaling.min_replicas", 9, "must not be negative, got -1", [2]string{"min_replicas: -1", "min_replicas: 2"}},
		{"policies[0].scaling.tolerance", 10, "must be in [0, 1), got 1.5", [2]string{"tolerance: 1.5", "tolerance: 0.2"}},
		{"policies[0].scaling.budget.u_sla", 12, "must be in (0, 1], got 2", [2]string{"u_sla: 2", "u_sla: 0.8"}},
		{"policies[0].scaling.budget.hold", 13, "must not be negative", [2]string{"hold: -1m", "hold: 1m"}},
		{"policies[0].budget.overload_budget", 15, "must be in (0, 0.5), got 0.7", [2]string{"overload_budget: 0.7", "overload_budget: 0.05"}},
		{"policies[0].budget.quantile_method", 16, `got "magic"`, [2]string{"quantile_method: magic", "quantile_method: pot"}},
		{"policies[0].evt.q", 19, "q (0.4) must be below tau (0.3)", [2]string{"q: 0.4", "q: 0.1"}},
		{"policies[0].evt.method", 20, `method "mle" unknown`, [2]string{"method: mle", "method: grimshaw"}},
	}
	errs := Check(b)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if len(errs) != len(want) {
		t.Errorf("got %d errors, want %d:\n%s", len(errs), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if i >= len(errs) {
			break
		}
		ce, ok := errs[i].(*CheckError)
		if !ok || ce.Path != w.path || ce.Line != w.line || !strings.Contains(ce.Msg, w.msg) {
			t.Errorf("error %d = %q, want %s (line %d) saying %q", i, errs[i], w.path, w.line, w.msg)
		}
	}
	checkNoGoTypes(t, errs)

	// Load reports the first error left, path and message as before the validators reported
	// every field; with all fixed, both accept the file.
	text := string(b)
	for _, w := range want {
		_, err := Load([]byte(text))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != w.path || !strings.Contains(fe.Err.Error(), w.msg) {
			t.Errorf("Load: %v, want the error at %s saying %q", err, w.path, w.msg)
		}
		if strings.Count(text, w.fix[0]) != 1 {
			t.Fatalf("fix %q: not once in the fixture", w.fix[0])
		}
		text = strings.Replace(text, w.fix[0], w.fix[1], 1)
	}
	if _, err := Load([]byte(text)); err != nil {
		t.Errorf("Load of the fixed file: %v\n%s", err, text)
	}
	if errs := Check([]byte(text)); len(errs) != 0 {
		t.Errorf("Check of the fixed file: %v", errs)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings, one per error, in order
	}{
		{"valid", "policies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1}\n", nil},
		{"empty", "", []string{"empty configuration"}},
		{"syntax", "policies:\n  - name: web\n   target: x\n", []string{"line 3: did not find expected"}}, // the line of the problem (TestSyntaxErrorLine)
		{"wrong types", "global:\n  interval: [1s]\npolicies:\n  - name: web\n    target: {namespace: shop, name: web}\n    request: lots\n    history: many\n",
			[]string{"global.interval (line 2): must be a duration (e.g. 30s, 5m, 1h), not a list", `policies[0].request (line 6): "lots" is not a number`, `policies[0].history (line 7): "many" is not an integer`}},
		{"unknown top-level field", "polices: []\n", []string{`polices (line 1): unknown field "polices"`}},
		{"target a scalar", "policies:\n  - name: web\n    target: web\n    request: 1\n", []string{`policies[0].target (line 3): "web" is not a mapping`}},
		{"webhook", "policies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1}\nwebhook:\n  mode: yolo\n", []string{"webhook.mode (line 4): must be one of"}},
		{"every error of a policy", "policies:\n  - name: web\n    target: {namespace: shop, name: web, kind: deploy ment}\n    request: -1\n    history: 1\n    evt: {tau: 0.99, q: 0.999}\n    queries: {demand: 'sum(x'}\n",
			[]string{`policies[0].target.kind (line 3): "deploy ment" is not a Kind`, "policies[0].request (line 4): must be a positive number", "policies[0].history (line 5): must be in [2, 11000]", "policies[0].evt.q (line 6):", "policies[0].queries.demand (line 7): 1:6: parse error"}},
		{"target required twice", "policies:\n  - name: web\n    target: {kind: Deployment}\n    request: 1\n",
			[]string{"policies[0].target.namespace (line 3): required", "policies[0].target.name (line 3): required"}},
		{"no echo of an invalid interval", "global:\n  interval: 500ms\nexporter:\n  query_offset: 1s\npolicies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1, history_step: 7s}\nwebhook:\n  max_input_age: 1s\n",
			[]string{"global.interval (line 2): must be at least 1s"}},
		{"no echo of an undecodable interval", "global:\n  interval: [1s]\npolicies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1, history_step: 7s}\nwebhook:\n  max_input_age: 1s\n",
			[]string{"global.interval (line 2): must be a duration"}},
		{"no clash over a target that could not be read", "policies:\n  - {name: a, target: {namespace: shop, name: web}, request: 1}\n  - {name: b, target: {namespace: shop, name: web, kind: [x]}, request: 1}\nwebhook: {mode: act, allow_unauthenticated: true}\n",
			[]string{"policies[1].target.kind (line 3): must be a string"}},
		{"no clash over an invalid mode", "policies:\n  - {name: a, target: {namespace: shop, name: web}, request: 1}\n  - {name: b, target: {namespace: shop, name: web}, request: 1}\nwebhook:\n  mode: yolo\n",
			[]string{"webhook.mode (line 5): must be one of"}},
		{"every error of the webhook section", "policies:\n  - {name: web, target: {namespace: shop, name: web}, request: 1}\nwebhook:\n  mode: yolo\n  queries: {age: 'x{{.Nope}}', now_load: none}\n  tidal:\n    resources: [{group: g}]\n    resync_period: -1s\n  leader_election: {retry_period: -1s, lease_duration: 5s}\n  policies:\n    - {name: web}\n    - {name: web, mode: fight}\n",
			[]string{"webhook.mode (line 4): must be one of", "webhook.queries.now_load (line 5): cannot be none", "webhook.queries.age (line 5): template: q:1:3: executing \"q\" at <.Nope>: unknown field .Nope (a query template has .Policy",
				"webhook.tidal.resources[0].version (line 7): required", "webhook.tidal.resources[0].resource (line 7): required", "webhook.tidal.resync_period (line 8): must be positive",
				"webhook.leader_election.retry_period (line 9): must be positive", "webhook.leader_election.lease_duration (line 9): must be above renew_deadline",
				`webhook.policies[1].name (line 12): "web" is already overridden by webhook.policies[0]`, "webhook.policies[1].mode (line 12): must be one of"}},
		{"override of an invalid policy is not an echo", "policies:\n  - {name: web, target: {name: web}, request: 1}\nwebhook:\n  policies:\n    - {name: web, mode: act}\n",
			[]string{"policies[0].target.namespace (line 2): required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check([]byte(tc.yaml))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %d errors %q", errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want %q", i, errs[i], w)
				}
			}
			checkNoGoTypes(t, errs)
			// Check and Load agree on validity.
			if _, err := Load([]byte(tc.yaml)); (err == nil) != (len(errs) == 0) {
				t.Errorf("Load: %v, Check: %v", err, errs)
			}
		})
	}
}

// TestCheckGoodFixtures checks that every file Load accepts passes Check.
func TestCheckGoodFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lerr := Load(b)
		errs := Check(b)
		if (lerr == nil) != (len(errs) == 0) {
			t.Errorf("%s: Load %v, Check %v", f, lerr, errs)
		}
		if name := filepath.Base(f); strings.Contains(name, "good") && len(errs) != 0 {
			t.Errorf("%s: Check %v, want no error", f, errs)
		}
		checkNoGoTypes(t, errs)
	}
}

// FuzzCheck checks that Check never panics and agrees with Load on whether a file is valid.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		errs := Check(b)
		if _, err := Load(b); (err == nil) != (len(errs) == 0) {
			t.Fatalf("Load: %v, Check: %v", err, errs)
		}
	})
}
