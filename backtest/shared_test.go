package backtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/debi-scaler/debi/trace"
)

// TestSharedTraces reads every trace of the project's shared collection (../shared/traces, not
// shipped: only the CC-BY-4.0 ones are embedded) and backtests hpa and debi on the first 1,500
// steps of each: the reader accepts all of them and every policy scores them.
func TestSharedTraces(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "traces", "*_*.csv"))
	if len(files) == 0 {
		t.Skip("skipped: ../shared/traces is absent (the shared trace collection sits beside the clone in CI); the embedded traces are tested elsewhere")
	}
	var ts []trace.Trace
	for _, f := range files {
		tr, err := trace.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Class == "" {
			t.Errorf("%s: class unknown to package trace", tr.Name)
		}
		ts = append(ts, tr)
	}
	o := DefaultOptions()
	o.Policies, o.MaxSteps, o.SweepTargets = []string{"hpa", "debi"}, 1500, []float64{0.5, 0.7}
	rep, err := RunTraces(context.Background(), ts, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Traces {
		for _, r := range tr.Runs {
			if r.Ticks == 0 || r.Utilization <= 0 {
				t.Errorf("%s/%s: %d scored ticks, utilization %v", tr.Trace, r.Policy, r.Ticks, r.Utilization)
			}
		}
	}
	t.Logf("%d shared traces read and backtested", len(ts))
}
