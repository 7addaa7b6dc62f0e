package webhook

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/debi-scaler/debi/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
)

var update = flag.Bool("update", false, "rewrite the bad-input table of docs/webhook.md")

// Tokens of the bad-input router: each endpoint has its own.
const (
	badInputAMToken   = "am-token"
	badInputPushToken = "push-token"
)

// badInput is one row of the bad-input table: a request, the answer it must get, and nothing
// patched. To add a case, append a literal to badInputs and run
// `go test ./webhook/ -run TestBadInput -update` to regenerate docs/webhook.md.
type badInput struct {
	// name is the table's "case" column.
	name string
	// path is the endpoint (default /v1/alertmanager).
	path string
	// auth is the Authorization header: empty sends "Bearer <the endpoint's token>", "-" no
	// header, anything else is sent as is.
	auth string
	body []byte
	// setup, when set, prepares the environment before the request (rotate a token, turn the
	// push endpoint off, put objects in the fake cluster).
	setup func(t *testing.T, e *badInputEnv)
	// code is the expected status; msg a part of the expected message.
	code int
	msg  string
}

// badInputEnv is what a case's setup may change: the fake cluster (targets web=4, db=1,
// batch=1 of testConfigYAML), the endpoints in force and the token files.
type badInputEnv struct {
	act                        *fakeActuator
	ep                         *Endpoints
	amTokenFile, pushTokenFile string
}

// bigBody is over any max_body_bytes this table uses (the default, 1 MiB).
var bigBody = bytes.Repeat([]byte("x"), 10<<20)

func alertBody(status string, lbls map[string]string, ann map[string]string) []byte {
	a := map[string]any{"labels": lbls}
	if ann != nil {
		a["annotations"] = ann
	}
	return testenv.AMPayload(status, a)
}

var badInputs = []badInput{
	// Authentication.
	{name: "no Authorization header", auth: "-", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil), code: 401, msg: "missing bearer token"},
	{name: "wrong token", auth: "Bearer nope", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil), code: 401, msg: "wrong bearer token"},
	{name: "Basic instead of Bearer", auth: "Basic " + badInputAMToken, body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil), code: 401, msg: "missing bearer token"},
	{name: "old token after the token file rotated", auth: "Bearer " + badInputAMToken, body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: func(t *testing.T, e *badInputEnv) { writeToken(t, e.amTokenFile, "am-token-rotated") }, code: 401, msg: "wrong bearer token"},
	{name: "Tidal push token on /v1/alertmanager", auth: "Bearer " + badInputPushToken, body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil), code: 401, msg: "wrong bearer token"},
	{name: "Alertmanager token on /v1/tidal", path: "/v1/tidal", auth: "Bearer " + badInputAMToken, body: []byte(webTidal), code: 401, msg: "not Alertmanager's"},
	{name: "Tidal push disabled (the default)", path: "/v1/tidal", body: []byte(webTidal),
		setup: func(_ *testing.T, e *badInputEnv) { e.ep.push = false }, code: 404, msg: "POST /v1/tidal is disabled"},

	// The Alertmanager payload.
	{name: "malformed JSON", body: []byte(`{"version":"4",`), code: 400, msg: "malformed Alertmanager payload"},
	{name: "not an object", body: []byte(`[1,2]`), code: 400, msg: "malformed Alertmanager payload"},
	{name: "NaN literal", body: []byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"policy":"web"},"value":NaN}]}`), code: 400, msg: "malformed"},
	{name: "version 3", body: []byte(`{"version":"3","status":"firing","alerts":[{"status":"firing","labels":{"policy":"web"}}]}`), code: 400, msg: `unsupported Alertmanager payload version "3"`},
	{name: "no version", body: []byte(`{"status":"firing","alerts":[]}`), code: 400, msg: "unsupported Alertmanager payload version"},
	{name: "bad status", body: []byte(`{"version":"4","status":"pending","alerts":[{"status":"firing","labels":{"policy":"web"}}]}`), code: 400, msg: `status must be "firing" or "resolved"`},
	{name: "bad alert status", body: []byte(`{"version":"4","status":"firing","alerts":[{"status":"open","labels":{"policy":"web"}}]}`), code: 400, msg: `alerts[0].status must be`},
	{name: "no alerts", body: []byte(`{"version":"4","status":"firing","alerts":[]}`), code: 400, msg: "no alerts"},
	{name: "alert without labels", body: []byte(`{"version":"4","status":"firing","alerts":[{"status":"firing"}]}`), code: 400, msg: "alerts[0] has no labels"},
	{name: "body over max_body_bytes", body: bigBody, code: 413, msg: "exceeds the limit"},

	// What the alert names.
	{name: "no policy label", body: alertBody("firing", testenv.AlertLabels("namespace", "shop"), nil), code: 422, msg: `has no "policy" label`},
	{name: "unknown policy", body: alertBody("firing", testenv.AlertLabels("policy", "kube-dns"), nil), code: 422, msg: `unknown policy "kube-dns"`},
	{name: "namespace label of another namespace", body: alertBody("firing", testenv.AlertLabels("policy", "web", "namespace", "kube-system"), nil), code: 422, msg: "does not match the policy's target namespace"},
	{name: "workload label of another object", body: alertBody("firing", testenv.AlertLabels("policy", "web", "deployment", "coredns"), nil), code: 422, msg: `label deployment="coredns" does not match the policy's target "web"`},
	{name: "workload_type label of another kind", body: alertBody("firing", testenv.AlertLabels("policy", "web", "workload_type", "statefulset"), nil), code: 422, msg: "does not match the policy's target kind"},
	{name: "one bad alert among good ones", body: testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}, map[string]any{"labels": testenv.AlertLabels("policy", "nope")}), code: 422, msg: `alerts[1]: unknown policy "nope"`},

	// The Tidal push endpoint.
	{name: "Tidal: malformed JSON", path: "/v1/tidal", body: []byte(`{"namespace":`), code: 400, msg: "malformed Tidal event"},
	{name: "Tidal: no name", path: "/v1/tidal", body: []byte(`{"namespace":"shop","status":{"desiredReplicas":3}}`), code: 400, msg: "namespace and name"},
	{name: "Tidal: body over max_body_bytes", path: "/v1/tidal", body: bigBody, code: 413, msg: "exceeds the limit"},
	{name: "Tidal: namespace not a DNS label", path: "/v1/tidal", body: []byte(`{"namespace":"Shop/../kube-system","name":"t"}`), code: 400, msg: "is not a valid namespace"},
	{name: "Tidal: the object does not exist", path: "/v1/tidal", body: []byte(webTidal), code: 404, msg: "not found in 1 configured resources"},

	// Inputs the decision rests on (200: the size is held, nothing written). Each would scale
	// web (9 replicas, W = 0.1 asks for 3) down if taken at face value.
	{name: "the exporter's series are gone", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: queries(nil), code: 200, msg: "held: inputs missing or ambiguous: load: query"},
	{name: "the exporter is stale (demand query failing)", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: queries(map[string]float64{qWebLoad: 0.1, qWebReplicas: 9, qWebStale: 1}), code: 200, msg: "held: the exporter's values are stale"},
	{name: "the exporter's last step is an hour old", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: queries(map[string]float64{qWebLoad: 0.1, qWebReplicas: 9, qWebAge: 3600}), code: 200, msg: "above webhook.max_input_age"},
	{name: "two exporters publish the load", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: queries(map[string]float64{qWebLoad: -1, qWebReplicas: 9}), code: 200, msg: "several series"},
	{name: "the window load (scale-down guard) is missing", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: queries(map[string]float64{qWebLoad: 0.1, qWebReplicas: 9, qWebWindow: nan}), code: 200, msg: "window_load: query"},
	{name: "load_replicas is missing (the load would apply twice)", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: queries(map[string]float64{qWebLoad: 0.1}), code: 200, msg: "load_replicas: query"},
	{name: "hpa policy without the published bounds", body: alertBody("firing", testenv.AlertLabels("policy", "db"), nil),
		setup: queries(map[string]float64{qDBLoad: 0.1, qDBBasis: 1, qDBFloor: nan}), code: 200, msg: "floor: query"},
	{name: "Prometheus down, annotation load=0.1 (a scale-down)", body: alertBody("firing", testenv.AlertLabels("policy", "web"), map[string]string{"load": "0.1", "current_replicas": "9"}),
		setup: queries(nil, prometheusDown), code: 200, msg: "held: fallback (Prometheus unreachable): the annotations ask for 3"},
	{name: "Prometheus down, annotation load=1e308", body: alertBody("firing", testenv.AlertLabels("policy", "web"), map[string]string{"load": "1e308", "current_replicas": "9"}),
		setup: queries(nil, prometheusDown), code: 503, msg: `annotation load="1e308" is not a load`},
	{name: "Prometheus down, annotation without current_replicas", body: alertBody("firing", testenv.AlertLabels("policy", "web"), map[string]string{"load": "0.9"}),
		setup: queries(nil, prometheusDown), code: 503, msg: `annotation "current_replicas" missing`},
	{name: "target paused by debi.io/paused", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: func(t *testing.T, e *badInputEnv) {
			queries(map[string]float64{qWebLoad: 0.9, qWebReplicas: 9})(t, e)
			e.act.annotations["web"] = map[string]string{AnnotationPaused: "true"}
		}, code: 200, msg: "held: paused by the annotation"},
	{name: "target at 0 replicas (paused)", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: func(t *testing.T, e *badInputEnv) {
			queries(map[string]float64{qWebLoad: 0.9, qWebReplicas: 9})(t, e)
			e.act.replicas["web"] = 0
		}, code: 200, msg: "held: paused: the target is at 0 replicas"},
	{name: "mode act on a target an HPA scales", body: alertBody("firing", testenv.AlertLabels("policy", "web"), nil),
		setup: func(t *testing.T, e *badInputEnv) {
			queries(map[string]float64{qWebLoad: 0.9, qWebReplicas: 9})(t, e)
			e.act.hpas["web"] = "web-hpa"
		}, code: 409, msg: "mode act refused"},
}

// queries puts web at 9 replicas and answers the decision's queries from vals (staticQuery),
// or with q when given.
func queries(vals map[string]float64, q ...QueryFunc) func(*testing.T, *badInputEnv) {
	return func(t *testing.T, e *badInputEnv) {
		e.act.replicas["web"] = 9
		qf := staticQuery(vals)
		if len(q) > 0 {
			qf = q[0]
		}
		c := e.ep.scaler.(*Controller)
		nc, err := NewController(c.cfg, ControllerOptions{Actuator: e.act, Query: qf, Metrics: c.m, Logger: c.log, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		e.ep.scaler = nc
	}
}

// writeToken replaces a token file's content (another size, so that the change shows whatever
// the file system's time resolution).
func writeToken(t *testing.T, file, token string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// badInputRouter is the real router on a Controller of testConfigYAML over a fake actuator,
// with token files for both endpoints and the push endpoint on.
func badInputRouter(t *testing.T) (http.Handler, *badInputEnv) {
	t.Helper()
	dir := t.TempDir()
	e := &badInputEnv{act: newFakeActuator(map[string]int32{"web": 4, "db": 1, "batch": 1}),
		amTokenFile: filepath.Join(dir, "am-token"), pushTokenFile: filepath.Join(dir, "push-token")}
	writeToken(t, e.amTokenFile, badInputAMToken)
	writeToken(t, e.pushTokenFile, badInputPushToken)
	c := newTestController(t, testConfig(t, testConfigYAML), e.act, staticQuery(nil), nil)
	am, err := newTokenFile(e.amTokenFile, "webhook.bearer_token_file", c.log, c.m.tokenReloadFailures.WithLabelValues("alertmanager"))
	if err != nil {
		t.Fatal(err)
	}
	push, err := newTokenFile(e.pushTokenFile, "webhook.tidal.push.bearer_token_file", c.log, c.m.tokenReloadFailures.WithLabelValues("tidal"))
	if err != nil {
		t.Fatal(err)
	}
	e.ep = &Endpoints{scaler: c, alertmanager: am, tidal: push, push: true,
		maxBodyBytes: c.cfg.Webhook.MaxBodyBytes, timeout: c.cfg.Webhook.DecisionTimeout}
	live := new(atomic.Pointer[Endpoints])
	live.Store(e.ep)
	h := NewRouter(RouterOptions{Live: live, Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(), Metrics: c.m, Logger: c.log})
	return h, e
}

// badInputResult is what a case got.
type badInputResult struct {
	code    int
	msg     string
	patched []string
}

func runBadInput(t *testing.T, tc badInput) badInputResult {
	t.Helper()
	h, e := badInputRouter(t)
	if tc.setup != nil {
		tc.setup(t, e)
	}
	path := tc.path
	if path == "" {
		path = "/v1/alertmanager"
	}
	auth := tc.auth
	switch {
	case auth == "-":
		auth = ""
	case auth == "" && path == "/v1/tidal":
		auth = "Bearer " + badInputPushToken
	case auth == "":
		auth = "Bearer " + badInputAMToken
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(tc.body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	code, msg := answer(w)
	return badInputResult{code: code, msg: msg, patched: e.act.Writes()}
}

// answer is the status and the error message (or the body) of a recorded answer.
func answer(w *httptest.ResponseRecorder) (int, string) {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(w.Body.Bytes(), &e) == nil && e.Error != "" {
		return w.Code, e.Error
	}
	var ok struct {
		Outcomes []Outcome `json:"outcomes"`
	}
	if json.Unmarshal(w.Body.Bytes(), &ok) == nil && len(ok.Outcomes) == 1 && ok.Outcomes[0].Held != "" {
		return w.Code, "held: " + ok.Outcomes[0].Held
	}
	return w.Code, w.Body.String()
}

// TestBadInput sends every bad input of badInputs through the real router: each gets its status
// code under Alertmanager's contract and a clear message, and nothing is patched. The table in
// docs/webhook.md is generated from the results (-update), so the documentation cannot drift.
func TestBadInput(t *testing.T) {
	var rows strings.Builder
	rows.WriteString("| case | status | message | patched |\n| --- | --- | --- | --- |\n")
	seen := map[string]bool{}
	for _, tc := range badInputs {
		if seen[tc.name] {
			t.Fatalf("two cases named %q", tc.name)
		}
		seen[tc.name] = true
		var res badInputResult
		t.Run(tc.name, func(t *testing.T) {
			res = runBadInput(t, tc)
			if res.code != tc.code || !strings.Contains(res.msg, tc.msg) {
				t.Errorf("got %d %q, want %d with %q", res.code, res.msg, tc.code, tc.msg)
			}
			if len(res.patched) != 0 {
				t.Errorf("patched %v", res.patched)
			}
		})
		patched := "no"
		if len(res.patched) > 0 {
			patched = strings.Join(res.patched, ", ")
		}
		fmt.Fprintf(&rows, "| %s | %d | %s | %s |\n", mdCell(tc.name), res.code, mdCode(res.msg), patched)
	}
	if t.Failed() {
		return // a table of failures is no documentation
	}
	const file = "../docs/webhook.md"
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := replaceBetween(string(doc), "<!-- bad-input-table:begin -->\n", "<!-- bad-input-table:end -->", rows.String())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(doc) {
		t.Error("the bad-input table of docs/webhook.md is stale: run go test ./webhook/ -run TestBadInput -update")
	}
}

// replaceBetween replaces what lies between the begin and end markers of doc.
func replaceBetween(doc, begin, end, content string) (string, error) {
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("markers %q and %q not found in order", strings.TrimSpace(begin), end)
	}
	return doc[:i+len(begin)] + content + doc[j:], nil
}

// mdCell escapes a table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// mdCode renders a message as code in a table cell, cut at 300 characters.
func mdCode(s string) string {
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, "`", "'"), "\n", " ")
	return "`" + mdCell(s) + "`"
}
