package testenv

import "testing"

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
