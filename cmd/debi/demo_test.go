package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemoOpenMetrics: with no --trace, `debi demo openmetrics` writes the first embedded trace,
// ending at --end and starting one step (5 min) before --range, in OpenMetrics ending with # EOF.
func TestDemoOpenMetrics(t *testing.T) {
	code, out, stderr := runCmd("demo", "openmetrics", "--range", "1h", "--end", "2026-12-01T12:02:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasSuffix(out, "\n# EOF\n") || !strings.Contains(stderr, "trace azure_vm2017_vm1663289_avgcpu_5min from 2026-12-01T10:55:00Z to 2026-12-01T12:00:00Z") {
		t.Fatalf("stderr %q; output ends %q", stderr, out[max(0, len(out)-40):])
	}
	start, end := time.Date(2026, 12, 1, 10, 55, 0, 0, time.UTC).Unix(), time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Unix()
	first := strings.SplitN(out, "\n", 4)[2]
	if !strings.HasPrefix(first, `container_cpu_usage_seconds_total{container="app",cpu="total",image="web:demo",namespace="demo",pod="web-`) ||
		!strings.HasSuffix(first, " 1000 "+itoa(start)) {
		t.Errorf("first sample %q, want web's first pod at 1000 s of CPU at %d", first, start)
	}
	for _, want := range []string{`kube_deployment_spec_replicas{deployment="web",namespace="demo"} `, `kube_deployment_status_replicas_ready{deployment="web",namespace="demo"} `} {
		if !strings.Contains(out, want) || !strings.Contains(out[strings.LastIndex(out, want):], " "+itoa(end)+"\n") {
			t.Errorf("no %s… up to %d", want, end)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDemoOpenMetricsErrors: each bad flag or trace line is named, with exit 2 for a flag that
// does not parse and 1 for a value or a trace the demo refuses.
func TestDemoOpenMetricsErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("minute,value\n0,1\n5,x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--range", "a week"}, 2, `--range: "a week" is not a duration`},
		{[]string{"--end", "yesterday"}, 2, `--end: "yesterday" is not an RFC 3339 time`},
		{[]string{"--request", "half"}, 2, `--request: "half" is not a number`},
		{[]string{"--trace", bad}, 1, "bad.csv:3: value \"x\" is not a number"},
		{[]string{"--trace", filepath.Join(t.TempDir(), "none.csv")}, 1, "--trace: open"},
		{[]string{"--scrape-interval", "1m"}, 1, "--scrape-interval: must be a multiple of the HPA's sync period (15s) of at most 30s"},
		{[]string{"--hpa.target", "2"}, 1, "target must be in (0, 1]"},
		{[]string{"--request", "0"}, 1, "--request: must be a positive number of cores"},
		{[]string{"--namespace", ""}, 1, "namespace, deployment and container: must not be empty"},
	} {
		code, out, stderr := runCmd(append([]string{"demo", "openmetrics"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, %d bytes out; want exit %d saying %q and nothing out", c.args, code, stderr, len(out), c.code, c.want)
		}
	}
}
