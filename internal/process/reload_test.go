package process

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReloader: a changed file is applied and the gauges say so; an unchanged one is skipped
// (Unchanged) without Apply; a file Apply refuses, or that cannot be read, sets the success gauge
// to 0, leaves the timestamp and is told to Failed; the next good one sets it back to 1.
func TestReloader(t *testing.T) {
	file := filepath.Join(t.TempDir(), "debi.yml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	reg := prometheus.NewRegistry()
	var applied []string
	var unchanged, failed int
	r := NewReloader(ReloaderOptions{File: file, Raw: []byte("a"), Component: "test", Registerer: reg,
		SuccessHelp: "ok", TimestampHelp: "ts",
		Apply: func(raw []byte) error {
			if string(raw) == "bad" {
				return errors.New("bad")
			}
			applied = append(applied, string(raw))
			return nil
		},
		Unchanged: func() { unchanged++ },
		Failed:    func(error) { failed++ }})
	ok := func() float64 { return testutil.ToFloat64(r.ok) }
	if ok() != 1 || testutil.ToFloat64(r.ts) <= 0 {
		t.Fatalf("at start-up: ok %v, timestamp %v", ok(), testutil.ToFloat64(r.ts))
	}
	if n, err := testutil.GatherAndCount(reg, "debi_test_config_last_reload_successful", "debi_test_config_last_reload_success_timestamp_seconds"); err != nil || n != 2 {
		t.Fatalf("gauges registered: %d, %v", n, err)
	}
	if err := r.Reload(); err != nil || unchanged != 1 || len(applied) != 0 {
		t.Fatalf("unchanged file: %v, unchanged %d, applied %v", err, unchanged, applied)
	}
	write("bad")
	if err := r.Reload(); err == nil || ok() != 0 || failed != 1 {
		t.Fatalf("refused file: %v, ok %v, failed %d", err, ok(), failed)
	}
	write("b")
	if err := r.Reload(); err != nil || ok() != 1 || len(applied) != 1 || applied[0] != "b" {
		t.Fatalf("changed file: %v, ok %v, applied %v", err, ok(), applied)
	}
	// "b" is what the last good load read: unchanged now.
	if err := r.Reload(); err != nil || unchanged != 2 {
		t.Fatalf("b again: %v, unchanged %d", err, unchanged)
	}
	_ = os.Remove(file)
	if err := r.Reload(); err == nil || ok() != 0 || failed != 2 {
		t.Fatalf("missing file: %v, ok %v, failed %d", err, ok(), failed)
	}
	// Without Unchanged every reload applies (the exporter's).
	write("b")
	r.o.Unchanged = nil
	if err := r.Reload(); err != nil || len(applied) != 2 {
		t.Fatalf("without Unchanged: %v, applied %v", err, applied)
	}
	r.Do(func() { applied = append(applied, "do") })
	if applied[2] != "do" {
		t.Fatalf("Do: %v", applied)
	}
}
