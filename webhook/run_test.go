package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestPrometheusQuery(t *testing.T) {
	prom := fakePrometheus(t, map[string]float64{"good": 0.75, "neg": -1, "nan": nanValue()})
	q, err := PrometheusQuery(prom.URL, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := q(context.Background(), "good"); err != nil || v != 0.75 {
		t.Errorf("good = %v, %v", v, err)
	}
	for expr, want := range map[string]string{"absent": "want one series, got 0", "neg": "not a usable load", "nan": "not a usable load"} {
		if _, err := q(context.Background(), expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", expr, err, want)
		}
	}
}

func nanValue() float64 { var z float64; return z / z }

func TestRegisterFlags(t *testing.T) {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	o := RegisterFlags(fs)
	if err := fs.Parse([]string{"--config.file=x.yml", "--web.config.file=web.yml"}); err != nil {
		t.Fatal(err)
	}
	if o.ConfigFile != "x.yml" || o.ListenAddress != ":9108" || o.WebConfigFile != "web.yml" || o.Kubeconfig != "" {
		t.Errorf("options = %+v", o)
	}
}

// TestRunTLSAndToken starts Run with an exporter-toolkit web config (TLS) and a token file, with
// an unreachable API server: it serves /healthz over TLS only, is not ready, and stops on ctx.
// Without a token file it refuses to start.
func TestRunTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	webCfg := filepath.Join(dir, "web.yml")
	_ = os.WriteFile(webCfg, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), 0o600)
	base := "policies:\n  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\nwebhook:\n  tidal: {enabled: false}\n"
	cfgFile := filepath.Join(dir, "debi.yml")
	_ = os.WriteFile(cfgFile, []byte(base), 0o600)
	rc := &rest.Config{Host: "https://127.0.0.1:1", Timeout: 200 * time.Millisecond}

	err := Run(context.Background(), Options{ConfigFile: cfgFile, RestConfig: rc}, testLogger(t), nil)
	if err == nil || !strings.Contains(err.Error(), "webhook.bearer_token_file: required") {
		t.Fatalf("Run without token = %v", err)
	}

	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte("tok\n"), 0o600)
	_ = os.WriteFile(cfgFile, []byte(base+"  bearer_token_file: "+tokenFile+"\n"), 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{ConfigFile: cfgFile, WebConfigFile: webCfg, Listener: l, RestConfig: rc}, testLogger(t), prometheusRegistry())
	}()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://" + l.Addr().String()
	poll(t, 10*time.Second, "healthz over TLS", func() bool {
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if resp, err := client.Get(url + "/readyz"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz with the API server down: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := client.Post(url+"/v1/tidal", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tidal without token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + l.Addr().String() + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP served although TLS is configured")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func selfSigned(t *testing.T, dir string) (string, string) {
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
