package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/debi-scaler/debi/internal/testenv"
)

// TestSIGHUPReloads runs `debi exporter` and `debi webhook` as main runs them (their flags,
// their registry, the process's signals), with a Prometheus and an API server that do not
// answer: each serves /metrics with the Go and process collectors beside its own, a SIGHUP puts
// a rewritten configuration in force (one policy more), and each stops with exit code 0 when its
// context ends.
func TestSIGHUPReloads(t *testing.T) {
	web := "  - {name: web, target: {namespace: shop, name: web}, algorithm: hpa, request: 1}\n"
	api := "  - {name: api, target: {namespace: shop, name: api}, algorithm: apa, request: 1}\n"
	for _, tc := range []struct {
		cmd, rest     string
		before, after string // a series of /metrics before and after the reload
	}{
		{"exporter", "global: {prometheus_url: 'http://127.0.0.1:1', interval: 1s}\n",
			"debi_exporter_policies 1\n", "debi_exporter_policies 2\n"},
		{"webhook", "webhook:\n  allow_unauthenticated: true\n  leader_election: {enabled: false}\n  tidal: {enabled: false}\n",
			`debi_webhook_policy_info{algorithm="hpa",mode="shadow",policy="web"} 1` + "\n",
			`debi_webhook_policy_info{algorithm="apa",mode="shadow",policy="api"} 1` + "\n"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
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
			write(cfgFile, tc.rest+"policies:\n"+web)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()

			var out, logs testenv.Buffer
			app, _, actions := newApp(&out, &out)
			cmd, err := app.Parse([]string{tc.cmd, "--config.file=" + cfgFile, "--kubeconfig=" + kubeconfig, "--web.listen-address=" + addr})
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
			waitFor := func(what string, ok func(string) bool) {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); !ok(metrics()); time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%s: not within 10s; /metrics:\n%s\nlogs:\n%s", what, metrics(), logs.String())
					}
				}
			}
			waitFor("/metrics served", func(m string) bool { return strings.Contains(m, tc.before) })
			if m := metrics(); !strings.Contains(m, "go_goroutines") || !strings.Contains(m, "process_start_time_seconds") || strings.Contains(m, tc.after) {
				t.Fatalf("at start, /metrics lacks the Go or process collectors, or has %s already:\n%s", tc.after, m)
			}

			write(cfgFile, tc.rest+"policies:\n"+web+api)
			if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitFor("the SIGHUP reload", func(m string) bool { return strings.Contains(m, tc.after) })
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
				t.Fatalf("debi %s did not stop", tc.cmd)
			}
			if !strings.Contains(logs.String(), "shutting down") {
				t.Errorf("the shutdown is not logged:\n%s", logs.String())
			}
		})
	}
}
