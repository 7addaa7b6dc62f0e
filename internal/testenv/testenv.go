// Package testenv gates debi's integration tests on the real servers hack/test.sh builds: a test
// whose server is not configured skips with a message saying how to run it — unless
// DEBI_REQUIRE_INTEGRATION=1 (set by `make test` and CI), where a skip would hide a broken setup
// and counts as a failure instead.
package testenv

import (
	"os"
	"testing"
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
