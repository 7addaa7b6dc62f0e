package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestWebhookSIGHUP runs `debi webhook` as main runs it (its flags, its registry, the process's
// signals), with an API server that does not answer: it serves /metrics with the Go and process
// collectors beside its own, a SIGHUP puts a rewritten configuration in force, and it stops
// with exit code 0 when its context ends.
func TestWebhookSIGHUP(t *testing.T) {
	dir := t.TempDir()
	kubeconfig, cfgFile := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "debi.yml")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
	web := "  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\n"
	api := "  - {name: api, target: {namespace: shop, name: api}, algorithm: apa, request: 1}\n"
	rest := "webhook:\n  allow_unauthenticated: true\n  leader_election: {enabled: false}\n  tidal: {enabled: false}\n"
	write(cfgFile, "policies:\n"+web+rest)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	var out, logs syncBuffer
	app, _, actions := newApp(&out, &out)
	cmd, err := app.Parse([]string{"webhook", "--config.file=" + cfgFile, "--kubeconfig=" + kubeconfig, "--web.listen-address=" + addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- actions[cmd](ctx, slog.New(slog.NewTextHandler(&logs, nil)), io.Discard, io.Discard) }()
	metrics := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	apiInfo := `debi_webhook_policy_info{algorithm="apa",mode="shadow",policy="api"} 1`
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(metrics()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s; logs:\n%s", what, logs.String())
			}
		}
	}
	waitFor("/metrics served", func(m string) bool {
		return strings.Contains(m, `debi_webhook_policy_info{algorithm="hpa",mode="shadow",policy="web"} 1`)
	})
	if m := metrics(); !strings.Contains(m, "go_goroutines") || !strings.Contains(m, "process_start_time_seconds") || strings.Contains(m, apiInfo) {
		t.Fatalf("at start, /metrics lacks the Go or process collectors, or has api already:\n%s", m)
	}

	write(cfgFile, "policies:\n"+web+api+rest)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("the SIGHUP reload", func(m string) bool { return strings.Contains(m, apiInfo) })
	if !strings.Contains(logs.String(), "SIGHUP received; reloading the configuration") {
		t.Errorf("the reload is not logged:\n%s", logs.String())
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d; logs:\n%s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("debi webhook did not stop")
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("the shutdown is not logged:\n%s", logs.String())
	}
}
