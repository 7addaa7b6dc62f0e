package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeTB records what a test would have done.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Skip(...any)  { f.skipped = true }
func (f *fakeTB) Fatal(...any) { f.failed = true }

func TestEnv(t *testing.T) {
	t.Setenv("DEBI_TESTENV_X", "/srv/x")
	if got := Env(&fakeTB{}, "DEBI_TESTENV_X", "x"); got != "/srv/x" {
		t.Fatalf("Env = %q", got)
	}
	t.Setenv("DEBI_TESTENV_X", "")
	t.Setenv("DEBI_REQUIRE_INTEGRATION", "")
	f := &fakeTB{}
	Env(f, "DEBI_TESTENV_X", "x")
	if !f.skipped || f.failed {
		t.Fatalf("unset, not required: skipped %v failed %v; want a skip", f.skipped, f.failed)
	}
	t.Setenv("DEBI_REQUIRE_INTEGRATION", "1")
	f = &fakeTB{}
	Env(f, "DEBI_TESTENV_X", "x")
	if !f.failed || f.skipped {
		t.Fatalf("unset, required: skipped %v failed %v; want a failure", f.skipped, f.failed)
	}
}

// TestStart: the process runs during the test and is stopped and reaped at its cleanup.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	var pid int
	var cmd interface{ String() string }
	t.Run("server", func(t *testing.T) {
		c := Start(t, dir, "sleeper", "/bin/sleep", "30")
		pid = c.Process.Pid
		cmd = c
		if c.ProcessState != nil {
			t.Fatal("process exited at once")
		}
	})
	c := cmd.(*exec.Cmd)
	if c.ProcessState == nil {
		t.Fatalf("process %d still running after the test's cleanup", pid)
	}
	if _, err := os.Stat(filepath.Join(dir, "sleeper.log")); err != nil {
		t.Fatalf("no log file: %v", err)
	}
}

// TestMainAPIServer: a running API server's kubeconfig is taken as is, none configured is no
// server (tests skip), and the script the helpers run exists.
func TestMainAPIServer(t *testing.T) {
	t.Setenv("KUBECONFIG_DEBI", "/some/kubeconfig")
	if k, stop, err := MainAPIServer(); k != "/some/kubeconfig" || stop == nil || err != nil {
		t.Fatalf("with KUBECONFIG_DEBI: %q %v", k, err)
	}
	t.Setenv("KUBECONFIG_DEBI", "")
	t.Setenv("DEBI_K8S_ASSETS", "")
	if k, stop, err := MainAPIServer(); k != "" || stop == nil || err != nil {
		t.Fatalf("with neither: %q %v", k, err)
	}
	if _, err := os.Stat(k8sEnvScript()); err != nil {
		t.Fatalf("hack/k8s-env.sh: %v", err)
	}
}
