package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
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

// stubScaler answers every decoded notification with a fixed outcome: the HTTP layer's tests do
// not depend on the decisions.
type stubScaler struct {
	mu     sync.Mutex
	alerts []*AlertmanagerMessage
	tidals []*TidalEvent
}

func (s *stubScaler) Alerts(_ context.Context, m *AlertmanagerMessage) ([]Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alerts = append(s.alerts, m)
	return []Outcome{{Policy: m.Alerts[0].Labels["policy"], Before: 4, After: 6, Written: true}}, nil
}

func (s *stubScaler) Tidal(_ context.Context, e *TidalEvent) (Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tidals = append(s.tidals, e)
	return Outcome{Policy: e.Namespace + "/" + e.Name, Trigger: "tidal", Before: 4, After: 3, Written: true}, nil
}

func (s *stubScaler) calls() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.alerts), len(s.tidals)
}

// stubRouter serves s with Alertmanager token amToken and, when pushToken is not "-", the push
// endpoint on pushToken.
func stubRouter(s Scaler, amToken, pushToken string) http.Handler {
	return NewRouter(RouterOptions{scaler: s, token: amToken, push: pushToken != "-", pushToken: strings.TrimPrefix(pushToken, "-"),
		maxBodyBytes: config.DefaultWebhookMaxBodyBytes, timeout: config.DefaultWebhookDecisionTimeout,
		Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(), Metrics: NewMetrics(nil), Logger: slog.New(slog.DiscardHandler)})
}

func TestHTTPHappyPathAndProbes(t *testing.T) {
	s := &stubScaler{}
	h := stubRouter(s, "s3cret", "push")
	code, body := post(t, h, "/v1/alertmanager", "s3cret", testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))
	var resp struct {
		Status   string    `json:"status"`
		Outcomes []Outcome `json:"outcomes"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 || resp.Status != "ok" {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if len(resp.Outcomes) != 1 || resp.Outcomes[0].After != 6 || !resp.Outcomes[0].Written || resp.Outcomes[0].Policy != "web" {
		t.Fatalf("outcomes = %+v", resp.Outcomes)
	}
	code, body = post(t, h, "/v1/tidal", "push", []byte(webTidal))
	if n, m := s.calls(); code != 200 || n != 1 || m != 1 || !strings.Contains(body, `"policy":"shop/t"`) {
		t.Fatalf("tidal: %d %s, calls %d %d", code, body, n, m)
	}
	for _, p := range []string{"/-/healthy", "/-/ready", "/healthz", "/readyz", "/metrics"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
		if w.Code != 200 {
			t.Errorf("GET %s = %d", p, w.Code)
		}
	}
	// Probes and metrics need no token; the notification endpoints do. Without a reload
	// function there is no /-/reload.
	for _, r := range []*http.Request{httptest.NewRequest(http.MethodGet, "/v1/alertmanager", nil), httptest.NewRequest(http.MethodPost, "/-/reload", nil)} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s = %d", r.Method, r.URL.Path, w.Code)
		}
	}
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

// pushRouter is testRouter with POST /v1/tidal enabled on its own token.
func pushRouter(c *Controller, amToken, pushToken string) http.Handler {
	return NewRouter(RouterOptions{scaler: c, token: amToken, push: true, pushToken: pushToken,
		maxBodyBytes: c.cfg.Webhook.MaxBodyBytes, timeout: c.cfg.Webhook.DecisionTimeout, Ready: func() error { return nil },
		Gatherer: prometheus.NewRegistry(), Metrics: c.m, Logger: c.log})
}

func postAuth(t testing.TB, h http.Handler, path, authorization string, body []byte) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

const webTidal = `{"namespace":"shop","name":"t","labels":{"elasticscaler.io/name":"web"},"status":{"desiredReplicas":3}}`

// TestBearerScheme: the scheme is case-insensitive (RFC 7235 §2.1), the token is not, and
// anything but Bearer is refused.
func TestBearerScheme(t *testing.T) {
	h := stubRouter(&stubScaler{}, "s3cret", "-")
	body := testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})
	for header, want := range map[string]int{
		"Bearer s3cret": 200, "bearer s3cret": 200, "BEARER s3cret": 200, "bEaReR   s3cret ": 200,
		"Bearer S3CRET": 401, "Basic s3cret": 401, "Bearer": 401, "s3cret": 401, "Bearers3cret": 401, "": 401,
	} {
		if got := postAuth(t, h, "/v1/alertmanager", header, body); got != want {
			t.Errorf("Authorization %q: %d, want %d", header, got, want)
		}
	}
}

// TestTidalPushOwnToken: POST /v1/tidal is off by default (404 saying how to enable it); once
// on it takes its own token only, and the Alertmanager endpoint refuses that token.
func TestTidalPushOwnToken(t *testing.T) {
	s := &stubScaler{}
	code, msg := post(t, stubRouter(s, "am", "-"), "/v1/tidal", "am", []byte(webTidal))
	if code != 404 || !strings.Contains(msg, "webhook.tidal.push.enabled: true") {
		t.Errorf("push off: %d %s", code, msg)
	}
	h := stubRouter(s, "am", "push")
	firing := testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})
	for _, tc := range []struct {
		path, token string
		body        []byte
		code        int
	}{
		{"/v1/tidal", "am", []byte(webTidal), 401},
		{"/v1/tidal", "", []byte(webTidal), 401},
		{"/v1/alertmanager", "push", firing, 401},
		{"/v1/alertmanager", "am", firing, 200},
		{"/v1/tidal", "push", []byte(webTidal), 200},
	} {
		if code, msg := post(t, h, tc.path, tc.token, tc.body); code != tc.code {
			t.Errorf("%s with %q: %d %s, want %d", tc.path, tc.token, code, msg, tc.code)
		}
	}
	if n, m := s.calls(); n != 1 || m != 1 {
		t.Errorf("the scaler saw %d notifications and %d events, want one each (with their own tokens)", n, m)
	}
	// Unauthenticated (webhook.allow_unauthenticated): no token on either.
	if code, _ := post(t, stubRouter(s, "", ""), "/v1/tidal", "", []byte(webTidal)); code != 200 {
		t.Errorf("unauthenticated push: %d", code)
	}
}

// TestTokenFileRotation: a rotated Secret takes effect on the next request, the old token is
// refused; a file that turns empty, unreadable or absent keeps the last good token in force and
// is counted once per change.
func TestTokenFileRotation(t *testing.T) {
	vol := &testenv.SecretVolume{T: t, Dir: t.TempDir()}
	vol.Write("first\n")
	m := NewMetrics(nil)
	failures := m.tokenReloadFailures.WithLabelValues("alertmanager")
	path := filepath.Join(vol.Dir, "token")
	tf, err := newTokenFile(path, "webhook.bearer_token_file", testenv.Logger(t), failures)
	if err != nil {
		t.Fatal(err)
	}
	ep := &Endpoints{scaler: &stubScaler{}, alertmanager: tf, maxBodyBytes: config.DefaultWebhookMaxBodyBytes, timeout: time.Second}
	live := new(atomic.Pointer[Endpoints])
	live.Store(ep)
	h := NewRouter(RouterOptions{Live: live, Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(), Metrics: m, Logger: testenv.Logger(t)})
	body := testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})
	check := func(step string, accepted, refused string, failed float64) {
		t.Helper()
		if code, msg := post(t, h, "/v1/alertmanager", accepted, body); code != 200 {
			t.Errorf("%s: token %q: %d %s, want 200", step, accepted, code, msg)
		}
		if refused != "" {
			if code, _ := post(t, h, "/v1/alertmanager", refused, body); code != 401 {
				t.Errorf("%s: token %q: %d, want 401", step, refused, code)
			}
		}
		if got := testutil.ToFloat64(failures); got != failed {
			t.Errorf("%s: %v reload failures, want %v", step, got, failed)
		}
	}
	check("start", "first", "second", 0)
	vol.Write("second\n")
	check("rotated", "second", "first", 0)
	vol.Write("  \n")
	check("rotated to an empty file", "second", "", 1)
	check("empty, again", "second", "", 1) // counted once per change, not per request
	vol.Write("third")
	check("rotated again", "third", "second", 1)
	failed := 1.0
	if os.Getuid() != 0 { // root reads a file of mode 0
		if err := os.Chmod(filepath.Join(vol.Dir, "..data", "token"), 0); err != nil {
			t.Fatal(err)
		}
		failed++
		check("unreadable", "third", "", failed)
	}
	if err := os.Remove(filepath.Join(vol.Dir, "..data")); err != nil {
		t.Fatal(err)
	}
	failed++
	check("absent", "third", "", failed)
	check("absent, again", "third", "", failed)
	vol.Write("fourth") // the kubelet writes the volume anew
	check("back", "fourth", "third", failed)

	if _, err := newTokenFile(filepath.Join(vol.Dir, "nope"), "webhook.bearer_token_file", testenv.Logger(t), failures); err == nil ||
		!strings.HasPrefix(err.Error(), "webhook.bearer_token_file: ") {
		t.Errorf("absent at start: %v, want an error naming the field", err)
	}
}

// TestLatencyBuckets: a notification that runs into webhook.decision_timeout still lands in a
// finite bucket.
func TestLatencyBuckets(t *testing.T) {
	top := latencyBuckets[len(latencyBuckets)-1]
	if top <= 3*config.DefaultWebhookDecisionTimeout.Seconds() {
		t.Errorf("top bucket %v s, want past three times the decision timeout (%v)", top, config.DefaultWebhookDecisionTimeout)
	}
	if latencyBuckets[0] > 0.001 {
		t.Errorf("first bucket %v s: a decision without the API server takes well under a millisecond", latencyBuckets[0])
	}
}

// blockingScaler holds each notification until release is closed.
type blockingScaler struct {
	stubScaler
	started, release chan struct{}
}

func (b *blockingScaler) Alerts(ctx context.Context, m *AlertmanagerMessage) ([]Outcome, error) {
	b.started <- struct{}{}
	<-b.release
	return b.stubScaler.Alerts(ctx, m)
}

// TestLiveSwap: a request in flight when the endpoints are swapped (a reload) finishes on the
// Controller it started with; the next one is served by the new one, with the new tokens.
func TestLiveSwap(t *testing.T) {
	old := &blockingScaler{started: make(chan struct{}, 1), release: make(chan struct{})}
	live := new(atomic.Pointer[Endpoints])
	live.Store(&Endpoints{scaler: old, alertmanager: staticToken("old"), maxBodyBytes: 1 << 20, timeout: time.Second})
	h := NewRouter(RouterOptions{Live: live, Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(),
		Metrics: NewMetrics(nil), Logger: testenv.Logger(t)})
	body := testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")})
	done := make(chan int, 1)
	go func() { code, _ := post(t, h, "/v1/alertmanager", "old", body); done <- code }()
	<-old.started
	next := &stubScaler{}
	live.Store(&Endpoints{scaler: next, alertmanager: staticToken("new"), maxBodyBytes: 1 << 20, timeout: time.Second})
	if code, _ := post(t, h, "/v1/alertmanager", "old", body); code != 401 {
		t.Errorf("old token after the swap: %d, want 401", code)
	}
	if code, _ := post(t, h, "/v1/alertmanager", "new", body); code != 200 {
		t.Errorf("new token after the swap: %d", code)
	}
	close(old.release)
	if code := <-done; code != 200 {
		t.Errorf("request in flight: %d, want 200 from the old Controller", code)
	}
	if a, _ := old.calls(); a != 1 {
		t.Errorf("old scaler served %d, want the request in flight", a)
	}
	if a, _ := next.calls(); a != 1 {
		t.Errorf("new scaler served %d, want the request after the swap", a)
	}
}

// unencodable is a Scaler whose outcome JSON cannot hold.
type unencodable struct{ Scaler }

func (unencodable) Alerts(context.Context, *AlertmanagerMessage) ([]Outcome, error) {
	inf := math.Inf(1)
	return []Outcome{{Policy: "web", W: &inf}}, nil
}

// TestAnswerNeverEmpty: an answer that cannot be encoded is a 500 with a message, not a 200
// with an empty body (a +Inf load once did that).
func TestAnswerNeverEmpty(t *testing.T) {
	c := newTestController(t, testConfig(t, testConfigYAML), newFakeActuator(nil), nil, nil)
	h := NewRouter(RouterOptions{scaler: unencodable{c}, maxBodyBytes: 1 << 20, timeout: time.Second,
		Ready: func() error { return nil }, Gatherer: prometheusRegistry(), Metrics: c.m, Logger: c.log})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/alertmanager", bytes.NewReader(testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "could not be encoded") {
		t.Fatalf("answer %d %q, want 500 with a message", rec.Code, rec.Body.String())
	}
}

// TestProbePaths checks that /-/healthy and /-/ready (the Prometheus family's paths, as the
// exporter serves them) and their deprecated aliases /healthz and /readyz answer alike, ready or
// not.
func TestProbePaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready func() error
		want  map[string]int
	}{
		{"ready", func() error { return nil }, map[string]int{"/-/healthy": 200, "/healthz": 200, "/-/ready": 200, "/readyz": 200}},
		{"not ready", func() error { return errors.New("API server unreachable") },
			map[string]int{"/-/healthy": 200, "/healthz": 200, "/-/ready": http.StatusServiceUnavailable, "/readyz": http.StatusServiceUnavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewRouter(RouterOptions{Ready: tc.ready, Gatherer: prometheus.NewRegistry(), Metrics: NewMetrics(nil), Logger: testenv.Logger(t)})
			for path, want := range tc.want {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				if w.Code != want {
					t.Errorf("GET %s = %d %q, want %d", path, w.Code, w.Body.String(), want)
				}
			}
		})
	}
}

// TestLifecycleFlag: /-/reload reloads only with --web.enable-lifecycle, as Prometheus's; off,
// it answers 403 and reloads nothing.
func TestLifecycleFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		reloads := 0
		h := NewRouter(RouterOptions{Reload: func() error { reloads++; return nil }, Lifecycle: on,
			Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(), Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.DiscardHandler)})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/-/reload", nil))
		want, wantN := http.StatusForbidden, 0
		if on {
			want, wantN = http.StatusOK, 1
		}
		if w.Code != want || reloads != wantN {
			t.Errorf("lifecycle %v: POST /-/reload = %d with %d reloads, want %d and %d (%s)", on, w.Code, reloads, want, wantN, w.Body)
		}
	}
}
