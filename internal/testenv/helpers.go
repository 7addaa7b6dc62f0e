package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Logger logs through t.Log when -v, else discards.
func Logger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// Request sends method url with an optional bearer token and returns the status and the error
// message of the answer (or its body).
func Request(t testing.TB, method, url, token string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return resp.StatusCode, e.Error
	}
	return resp.StatusCode, string(b)
}

// MetricValue is the value of the series name{labels} in g, NaN when absent.
func MetricValue(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return math.NaN()
}

// GaugeValue reads an unlabelled gauge from a registry (NaN when absent).
func GaugeValue(t testing.TB, g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return math.NaN()
}

// WriteFile writes content to the file name, or fails the test.
func WriteFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SelfSigned writes a self-signed certificate for 127.0.0.1 and its key into dir (tls.crt,
// tls.key) and returns their paths.
func SelfSigned(t testing.TB, dir string) (string, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "debi-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	cert, keyf := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, keyf
}

// FakePrometheus serves /api/v1/query with one sample per known query; it is closed at cleanup.
func FakePrometheus(t testing.TB, values map[string]float64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		res := []any{}
		if v, ok := values[q]; ok {
			res = append(res, map[string]any{"metric": map[string]string{}, "value": []any{float64(time.Now().Unix()), fmt.Sprint(v)}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// AMPayload builds an Alertmanager version 4 notification with one alert per label set.
func AMPayload(status string, alerts ...map[string]any) []byte {
	var as []map[string]any
	for _, a := range alerts {
		al := map[string]any{"status": status, "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
			"fingerprint": "abc", "generatorURL": "http://prom/graph"}
		for k, v := range a {
			al[k] = v
		}
		as = append(as, al)
	}
	b, _ := json.Marshal(map[string]any{"version": "4", "status": status, "receiver": "debi", "groupKey": "{}:{policy=\"web\"}",
		"groupLabels": map[string]string{}, "commonLabels": map[string]string{}, "commonAnnotations": map[string]string{},
		"externalURL": "http://am", "truncatedAlerts": 0, "alerts": as, "someFutureField": true})
	return b
}

// AlertLabels are the labels of debi's alert DebiScaleRecommended and the pairs kv.
func AlertLabels(kv ...string) map[string]string {
	m := map[string]string{"alertname": "DebiScaleRecommended"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// ESObject is an ExternalServer ElasticScaler ns/name on the Deployment target, created at
// created, with spec.debi.mode mode (none when empty).
func ESObject(ns, name, target string, created time.Time, mode string) *unstructured.Unstructured {
	spec := map[string]any{
		"targetRef":   map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
		"minReplicas": int64(1), "maxReplicas": int64(10),
		"trigger": map[string]any{"type": "MetricsTrigger", "metricsTrigger": map[string]any{
			"scalingAlgorithm": "APA",
			"metrics": []any{map[string]any{"type": "ExternalServer", "externalServer": map[string]any{
				"metricsName": "qps", "target": "100", "endpoint": "http://prometheus:9090/api/v1/query",
				"query": `sum(rate(http_requests_total{job="` + target + `"}[1m]))`}}},
		}},
	}
	if mode != "" {
		spec["debi"] = map[string]any{"mode": mode}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": name, "namespace": ns, "generation": int64(1), "resourceVersion": "1",
			"uid": "uid-" + name, "creationTimestamp": created.UTC().Format(time.RFC3339)},
		"spec": spec,
	}}
	return u
}
