package testenv

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Prometheus starts the prometheus binary of dir (DEBI_PROMETHEUS_DIR) on 127.0.0.1 over the
// TSDB data directory data — blocks backfilled with promtool tsdb create-blocks-from, say —
// with a 30-day retention and no scrape targets, waits until it is ready and returns its URL.
// It is stopped at cleanup (Start).
func Prometheus(t testing.TB, dir, data string) string {
	t.Helper()
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {scrape_interval: 15s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	Start(t, tmp, "prometheus", filepath.Join(dir, "prometheus"), "--config.file="+cfg,
		"--storage.tsdb.path="+data, "--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn")
	url := "http://" + addr
	WaitReady(t, url)
	return url
}

// WaitReady waits up to 30 s for the server at url (a Prometheus or Alertmanager) to answer
// /-/ready with 200, and fails the test if it does not.
func WaitReady(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
