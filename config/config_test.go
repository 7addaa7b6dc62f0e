package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/debi-scaler/debi/forecast"
	"github.com/debi-scaler/debi/policy"
)

// TestBadFixtures loads every testdata/bad-*.yml; each starts with "# error: PATH" and must
// fail with an error naming that field path.
func TestBadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.yml")
	if err != nil || len(files) < 10 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(b), "\n")
			want, ok := strings.CutPrefix(first, "# error: ")
			if !ok {
				t.Fatalf("fixture must start with '# error: PATH', got %q", first)
			}
			_, err = LoadFile(f)
			if err == nil {
				t.Fatalf("loaded without error; want one at %s", want)
			}
			var fe *FieldError
			switch {
			case errors.As(err, &fe):
				if fe.Path != want {
					t.Fatalf("error at %q, want %q: %v", fe.Path, want, err)
				}
			case !strings.Contains(err.Error(), want+" (line "): // decoder errors: unknown field, wrong type
				t.Fatalf("error does not name %s: %v", want, err)
			}
			if !strings.Contains(err.Error(), f) {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestMinimalPolicyDefaults(t *testing.T) {
	if !forecast.Known(policy.DefaultDebiModel) {
		t.Skipf("default model %q not registered yet", policy.DefaultDebiModel)
	}
	c, err := LoadFile("testdata/good-minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policies[0]
	if p.Algorithm != "debi" || p.Model != policy.DefaultDebiModel || p.Target.Kind != "Deployment" {
		t.Errorf("algorithm %q model %q kind %q", p.Algorithm, p.Model, p.Target.Kind)
	}
	wantQ := Queries{
		Demand:        `sum(namespace_workload:debi_cpu_usage_cores:rate1m{namespace="shop",workload_type="deployment",workload="web"})`,
		Replicas:      `max(kube_deployment_spec_replicas{namespace="shop",deployment="web"})`,
		ReadyReplicas: `max(kube_deployment_status_replicas_ready{namespace="shop",deployment="web"})`,
		Request:       `max(namespace_workload:debi_cpu_request_per_pod_cores:avg{namespace="shop",workload_type="deployment",workload="web"})`,
	}
	if p.Queries != wantQ {
		t.Errorf("queries = %+v\nwant %+v", p.Queries, wantQ)
	}
	if c.Global.Interval.Seconds() != 15 || c.Exporter.Concurrency != 8 || c.Exporter.MAEWindow != 60 || p.History != 760 {
		t.Errorf("defaults: interval %v concurrency %d mae %d history %d", c.Global.Interval, c.Exporter.Concurrency, c.Exporter.MAEWindow, p.History)
	}
	rc, err := p.RunnerConfig(c.Global.Interval)
	if err != nil {
		t.Fatal(err)
	}
	if rc.LeadSteps != 1 || rc.POT.Q != 0.1 || rc.POT.Tau != 0.2 {
		t.Errorf("runner config: lead %d, evt %+v", rc.LeadSteps, rc.POT)
	}
}

// TestMetricsFallback: an invalid metrics setting falls back to its default with a warning that
// names the field path.
func TestMetricsFallback(t *testing.T) {
	c, err := LoadFile("testdata/good-metrics-fallback.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := c.Policies[0].Metrics
	if m.Aggregation != "Average" || m.MissingData != "Ignore" || m.OutlierThreshold != 1.5 || m.Window.Minutes() != 2 || !m.OutlierFilter {
		t.Errorf("metrics = %+v", m)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{"policies[0].metrics.aggregation", "policies[0].metrics.missing_data", "policies[0].metrics.outlier_threshold"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %s:\n%s", want, w)
		}
	}
}

// TestLeadTime: the lead time is rounded up to whole steps, at least one.
func TestLeadTime(t *testing.T) {
	for _, c := range []struct {
		lead string
		want int
	}{{"0s", 1}, {"15s", 1}, {"16s", 2}, {"45s", 3}} {
		cfg, err := Load([]byte("policies:\n  - {name: w, target: {namespace: s, name: w}, algorithm: hpa, request: 1, lead_time: " + c.lead + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := cfg.Policies[0].RunnerConfig(cfg.Global.Interval)
		if err != nil || rc.LeadSteps != c.want {
			t.Errorf("lead_time %s at 15s: %d steps (%v), want %d", c.lead, rc.LeadSteps, err, c.want)
		}
	}
}

// TestExampleConfig keeps the annotated example of deploy/ loadable.
func TestExampleConfig(t *testing.T) {
	c, err := LoadFile("../deploy/examples/debi.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Policies) < 2 {
		t.Fatalf("example has %d policies", len(c.Policies))
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("example config has warnings: %v", c.Warnings())
	}
}
