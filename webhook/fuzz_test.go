package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/debi-scaler/debi/internal/testenv"
)

// Fuzz targets of the two decoders. Properties, for any bytes:
//   - the decoder never panics;
//   - every error is an *Error with a 4xx code (a payload wrong now is wrong on every retry);
//   - a decoded message re-validates: marshalled again it decodes to the same message;
//   - through the real router, the answer is never a 500 and a refused request writes nothing.
//
// Seeds: the files of testdata/payloads/ (when present), the bodies of the bad-input table and
// a few hand-made edge cases. `make fuzz` runs each target for FUZZTIME (10m); hack/test.sh for
// 10 s.

// fuzzSeeds are the bodies of badInputs sent to path, and the files of testdata/payloads/.
func fuzzSeeds(f *testing.F, path string) {
	f.Helper()
	for _, tc := range badInputs {
		p := tc.path
		if p == "" {
			p = "/v1/alertmanager"
		}
		if p == path && len(tc.body) <= 1<<16 {
			f.Add(tc.body)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "payloads", "*"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
}

// checkDecodeError requires err to be an *Error with a 4xx code.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code < 400 || e.Code >= 500 {
		t.Fatalf("decode error %T with code %d, want an *Error with a 4xx code: %v", err, errorCode(err), err)
	}
}

// checkRouter posts b to path: never a 500, and a refused request writes nothing.
func checkRouter(t *testing.T, h http.Handler, act *fakeActuator, path string, b []byte) int {
	t.Helper()
	before := len(act.Writes())
	code, msg := post(t, h, path, "", b)
	if code == http.StatusInternalServerError || (code != http.StatusOK && len(act.Writes()) != before) {
		t.Fatalf("status %d (%s), writes %v", code, msg, act.Writes()[before:])
	}
	return code
}

func FuzzDecodeAlertmanager(f *testing.F) {
	fuzzSeeds(f, "/v1/alertmanager")
	f.Add(testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web")}))
	f.Add(testenv.AMPayload("resolved", map[string]any{"labels": testenv.AlertLabels("policy", "web", "namespace", "x")}))
	f.Add(testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web"), "annotations": map[string]string{"load": "1e308"}}))
	f.Add([]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{}}]}`))
	f.Add([]byte(`{"version":"4","status":"firing","truncatedAlerts":18446744073709551615,"alerts":[{"status":"firing","labels":{"policy":"web"},"startsAt":"9999-12-31T23:59:59.999999999+23:59"}]}`))
	f.Add([]byte(`{"VERSION":"4","Status":"firing","alerts":[{"status":"firing","labels":{"policy":"web","policy":"db"}}]}`))
	f.Add([]byte(`{"version":4}`))
	f.Add([]byte(`null`))
	act := newFakeActuator(map[string]int32{"web": 4, "db": 1, "batch": 1})
	c := newTestController(f, testConfig(f, testConfigYAML), act, staticQuery(map[string]float64{qWebLoad: 0.9}), nil)
	h := testRouter(c, "")
	f.Fuzz(func(t *testing.T, b []byte) {
		code := checkRouter(t, h, act, "/v1/alertmanager", b)
		m, err := DecodeAlertmanager(b)
		if err != nil {
			checkDecodeError(t, err)
			if code != errorCode(err) && int64(len(b)) <= c.cfg.Webhook.MaxBodyBytes {
				t.Fatalf("the decoder says %d, the router answered %d: %v", errorCode(err), code, err)
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
		again := reencode(t, m)
		m2, err := DecodeAlertmanager(again)
		if err != nil {
			t.Fatalf("accepted message refused once re-encoded: %v\n%s", err, again)
		}
		if third := reencode(t, m2); !bytes.Equal(again, third) {
			t.Fatalf("re-encoding changes the message:\n%s\n%s", again, third)
		}
	})
}

func FuzzDecodeTidal(f *testing.F) {
	fuzzSeeds(f, "/v1/tidal")
	f.Add([]byte(webTidal))
	f.Add([]byte(`{"namespace":"shop","name":"t","targetRef":{"kind":"Deployment","name":"web"},"status":{"replicas":2}}`))
	f.Add([]byte(`{"namespace":"shop","name":"t","status":{"desiredReplicas":-1e309}}`))
	f.Add([]byte(`{"namespace":"shop","name":"a.b-c","status":{"desiredReplicas":1e300}}`))
	f.Add([]byte(`{"namespace":"","status":null}`))
	act := newFakeActuator(map[string]int32{"web": 4, "db": 1, "batch": 1})
	act.tidals["shop/t"] = tidalObject("shop", "t", map[string]string{LabelScalerName: "web"}, nil, int64(3))
	c := newTestController(f, testConfig(f, testConfigYAML), act, nil, nil)
	h := pushTestRouter(c)
	f.Fuzz(func(t *testing.T, b []byte) {
		code := checkRouter(t, h, act, "/v1/tidal", b)
		e, err := DecodeTidal(b)
		if err != nil {
			checkDecodeError(t, err)
			if code != errorCode(err) && int64(len(b)) <= c.cfg.Webhook.MaxBodyBytes {
				t.Fatalf("the decoder says %d, the router answered %d: %v", errorCode(err), code, err)
			}
			return
		}
		if e.Namespace == "" || e.Name == "" {
			t.Fatalf("accepted %+v", e)
		}
		again := reencode(t, e)
		e2, err := DecodeTidal(again)
		if err != nil {
			t.Fatalf("accepted event refused once re-encoded: %v\n%s", err, again)
		}
		if third := reencode(t, e2); !bytes.Equal(again, third) {
			t.Fatalf("re-encoding changes the event:\n%s\n%s", again, third)
		}
	})
}

// pushTestRouter is testRouter with the push endpoint on, and no tokens.
func pushTestRouter(c *Controller) http.Handler {
	return NewRouter(RouterOptions{scaler: c, push: true, maxBodyBytes: c.cfg.Webhook.MaxBodyBytes,
		timeout: c.cfg.Webhook.DecisionTimeout, Ready: func() error { return nil }, Gatherer: prometheusRegistry(),
		Metrics: c.m, Logger: c.log})
}

func reencode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("a decoded value does not encode: %v (%+v)", err, v)
	}
	return b
}
