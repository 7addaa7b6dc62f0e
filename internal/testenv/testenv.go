// Package testenv gates debi's integration tests on the real servers hack/test.sh builds: a test
// whose server is not configured skips with a message saying how to run it — unless
// DEBI_REQUIRE_INTEGRATION=1 (set by `make test` and CI), where a skip would hide a broken setup
// and counts as a failure instead.
//
// It also holds the helpers the tests of several packages share — the clients and objects of a
// test API server (KubeEnv), a replica-history watch, a fake Prometheus, Alertmanager payloads,
// ElasticScaler objects, registry readers — written once here. It is test support only: no
// non-test code may import it (it imports package testing).
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Required reports whether integration tests must run rather than skip.
func Required() bool { return os.Getenv("DEBI_REQUIRE_INTEGRATION") == "1" }

// SkipOrFail skips the test with msg, or fails it when integration tests are required.
func SkipOrFail(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatal(msg + "; DEBI_REQUIRE_INTEGRATION=1 forbids skipping (run through `make test`)")
		return
	}
	t.Skip("skipped: " + msg)
}

// Env returns the environment variable name, which an integration test needs; what says what it
// holds. Unset, the test skips or fails as SkipOrFail does.
func Env(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		SkipOrFail(t, name+" is not set: "+what+" (hack/test.sh sets it)")
	}
	return v
}

// Start runs bin with args as a server for the test: its output goes to dir/name.log, it is
// stopped at cleanup (SIGINT, then SIGKILL after 10 s), and the end of its log is printed when
// the test failed.
func Start(t testing.TB, dir, name, bin string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("--- %s log (last 3000 bytes) ---\n%s", name, b)
		}
	})
	return cmd
}
