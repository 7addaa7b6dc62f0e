package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func post(t testing.TB, h http.Handler, path, token string, body []byte) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(w.Body.Bytes(), &e) == nil && e.Error != "" {
		return w.Code, e.Error // unescaped, for the message checks
	}
	return w.Code, w.Body.String()
}

// TestBadInput sends malformed, hostile and oversized requests through the HTTP layer: each gets
// its status code under Alertmanager's contract and a clear message, and nothing is written.
func TestBadInput(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 10<<20) // 10 MB
	tidal := func(s string) []byte { return []byte(s) }
	for _, tc := range []struct {
		name, path, token string
		body              []byte
		code              int
		msg               string
	}{
		{"no token", "/v1/alertmanager", "-", amPayload("firing", map[string]any{"labels": labels("policy", "web")}), 401, "bearer token"},
		{"wrong token", "/v1/tidal", "nope", tidal(`{}`), 401, "bearer token"},
		{"malformed JSON", "/v1/alertmanager", "", []byte(`{"version":"4",`), 400, "malformed Alertmanager payload"},
		{"not an object", "/v1/alertmanager", "", []byte(`[1,2]`), 400, "malformed Alertmanager payload"},
		{"wrong version", "/v1/alertmanager", "", []byte(`{"version":"3","status":"firing","alerts":[{"status":"firing","labels":{"policy":"web"}}]}`), 400, `unsupported Alertmanager payload version "3"`},
		{"no version", "/v1/alertmanager", "", []byte(`{"status":"firing","alerts":[]}`), 400, "unsupported Alertmanager payload version"},
		{"bad status", "/v1/alertmanager", "", []byte(`{"version":"4","status":"pending","alerts":[{"status":"firing","labels":{"policy":"web"}}]}`), 400, `status must be "firing" or "resolved"`},
		{"no alerts", "/v1/alertmanager", "", []byte(`{"version":"4","status":"firing","alerts":[]}`), 400, "no alerts"},
		{"missing labels", "/v1/alertmanager", "", []byte(`{"version":"4","status":"firing","alerts":[{"status":"firing"}]}`), 400, "alerts[0] has no labels"},
		{"NaN literal", "/v1/alertmanager", "", []byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"policy":"web"},"value":NaN}]}`), 400, "malformed"},
		{"NaN annotation", "/v1/alertmanager", "", amPayload("firing", map[string]any{"labels": labels("policy", "web"), "annotations": map[string]string{"load": "NaN"}}), 503, "no fresh load"},
		{"unknown policy", "/v1/alertmanager", "", amPayload("firing", map[string]any{"labels": labels("policy", "kube-dns")}), 422, `unknown policy "kube-dns"`},
		{"label names another namespace", "/v1/alertmanager", "", amPayload("firing", map[string]any{"labels": labels("policy", "web", "namespace", "kube-system")}), 422, "does not match the policy's target namespace"},
		{"10 MB body", "/v1/alertmanager", "", big, 413, "exceeds the limit"},
		{"10 MB tidal", "/v1/tidal", "", big, 413, "exceeds the limit"},
		{"tidal malformed", "/v1/tidal", "", tidal(`{"namespace":`), 400, "malformed Tidal event"},
		{"tidal without name", "/v1/tidal", "", tidal(`{"namespace":"shop","status":{"desiredReplicas":3}}`), 400, "namespace and name"},
		{"tidal negative", "/v1/tidal", "", tidal(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":-3}}`), 422, "must not be negative"},
		{"tidal fractional", "/v1/tidal", "", tidal(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":2.5}}`), 422, "whole number"},
		{"tidal huge", "/v1/tidal", "", tidal(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":1e300}}`), 422, "out of range"},
		{"tidal string number", "/v1/tidal", "", tidal(`{"namespace":"shop","name":"t","status":{"desiredReplicas":"5"}}`), 400, "malformed Tidal event"},
		{"tidal no replicas", "/v1/tidal", "", tidal(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{}}`), 422, "neither status.desiredReplicas nor status.replicas"},
		{"tidal unknown policy", "/v1/tidal", "", tidal(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"other"},"status":{"desiredReplicas":3}}`), 422, `unknown policy "other"`},
		{"tidal from another namespace", "/v1/tidal", "", tidal(`{"namespace":"attacker","name":"t","labels":{"elasticscaler.io/name":"web","elasticscaler.io/namespace":"shop"},"status":{"desiredReplicas":3}}`), 422, "own namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := newFakeActuator(map[string]int32{"web": 4})
			c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(nil), nil)
			h := testRouter(c, "s3cret")
			token := "s3cret"
			switch tc.token {
			case "-":
				token = ""
			case "":
			default:
				token = tc.token
			}
			code, body := post(t, h, tc.path, token, tc.body)
			if code != tc.code || !strings.Contains(body, tc.msg) {
				t.Fatalf("got %d %s, want %d with %q", code, body, tc.code, tc.msg)
			}
			if w := act.Writes(); len(w) != 0 {
				t.Fatalf("wrote %v", w)
			}
		})
	}
}

func TestHTTPHappyPathAndProbes(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9, qWebReplicas: 4}), nil)
	h := testRouter(c, "s3cret")
	code, body := post(t, h, "/v1/alertmanager", "s3cret", amPayload("firing", map[string]any{"labels": labels("policy", "web")}))
	var resp struct {
		Status   string    `json:"status"`
		Outcomes []Outcome `json:"outcomes"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if len(resp.Outcomes) != 1 || resp.Outcomes[0].After != 6 || !resp.Outcomes[0].Written {
		t.Fatalf("outcomes = %+v", resp.Outcomes)
	}
	code, body = post(t, h, "/v1/tidal", "s3cret", []byte(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":3}}`))
	if code != 200 || act.replicas["web"] != 3 {
		t.Fatalf("tidal: %d %s, replicas %d", code, body, act.replicas["web"])
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
		if w.Code != 200 {
			t.Errorf("GET %s = %d", p, w.Code)
		}
	}
	// Probes and metrics need no token; the notification endpoints do.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/alertmanager", nil))
	if w.Code != http.StatusUnauthorized && w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/alertmanager = %d", w.Code)
	}
}

// FuzzDecodeAlertmanager: the decoder never panics, and whatever it accepts is well formed.
func FuzzDecodeAlertmanager(f *testing.F) {
	f.Add(amPayload("firing", map[string]any{"labels": labels("policy", "web")}))
	f.Add(amPayload("resolved", map[string]any{"labels": labels("policy", "web", "namespace", "x")}))
	f.Add([]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{}}]}`))
	f.Add([]byte(`{"version":4}`))
	f.Add([]byte(`null`))
	act := newFakeActuator(map[string]int32{"web": 4, "db": 1})
	c := newTestController(f, testConfig(f, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9}), nil)
	h := testRouter(c, "")
	f.Fuzz(func(t *testing.T, b []byte) {
		// Through the HTTP layer: never a 500 (a panic), and a refused notification writes nothing.
		before := len(act.Writes())
		code, msg := post(t, h, "/v1/alertmanager", "", b)
		if code == http.StatusInternalServerError || (code != http.StatusOK && len(act.Writes()) != before) {
			t.Fatalf("status %d (%s), writes %v", code, msg, act.Writes()[before:])
		}
		m, err := DecodeAlertmanager(b)
		if err != nil {
			if errorCode(err) != http.StatusBadRequest || code != http.StatusBadRequest {
				t.Fatalf("decode error with code %d (HTTP %d): %v", errorCode(err), code, err)
			}
			return
		}
		if m.Version != "4" || len(m.Alerts) == 0 {
			t.Fatalf("accepted %+v", m)
		}
		for _, a := range m.Alerts {
			if len(a.Labels) == 0 || (a.Status != StatusFiring && a.Status != StatusResolved) {
				t.Fatalf("accepted alert %+v", a)
			}
		}
	})
}

// FuzzDecodeTidal: the decoder never panics, rejects with 4xx, and what it accepts has a usable
// replica count.
func FuzzDecodeTidal(f *testing.F) {
	f.Add([]byte(`{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":3}}`))
	f.Add([]byte(`{"namespace":"shop","name":"t","targetRef":{"kind":"Deployment","name":"web"},"status":{"replicas":2}}`))
	f.Add([]byte(`{"namespace":"shop","name":"t","status":{"desiredReplicas":-1e309}}`))
	f.Add([]byte(`{"namespace":"","status":null}`))
	act := newFakeActuator(map[string]int32{"web": 4, "db": 1})
	c := newTestController(f, testConfig(f, testConfigYAML), act, nil, nil)
	h := testRouter(c, "")
	f.Fuzz(func(t *testing.T, b []byte) {
		before := len(act.Writes())
		code, msg := post(t, h, "/v1/tidal", "", b)
		if code == http.StatusInternalServerError || (code != http.StatusOK && len(act.Writes()) != before) {
			t.Fatalf("status %d (%s), writes %v", code, msg, act.Writes()[before:])
		}
		e, err := DecodeTidal(b)
		if err != nil {
			if c := errorCode(err); c < 400 || c >= 500 {
				t.Fatalf("decode error with code %d: %v", c, err)
			}
			return
		}
		n, err := e.Desired()
		if err != nil || n < 0 || e.Namespace == "" || e.Name == "" {
			t.Fatalf("accepted %+v (n=%d, %v)", e, n, err)
		}
	})
}

// The 10 MB limit holds over a real connection too, where the body arrives chunked.
func TestBodyLimitOverHTTP(t *testing.T) {
	act := newFakeActuator(map[string]int32{"web": 4})
	c := newTestController(t, testConfig(t, testConfigYAML), act, nil, nil)
	srv := httptest.NewServer(testRouter(c, ""))
	defer srv.Close()
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte(" "), 1<<20)
		for range 10 {
			if _, err := pw.Write(chunk); err != nil {
				break
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/alertmanager", pr) // no Content-Length
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}
