package apis_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	es "github.com/debi-scaler/debi/apis/elasticscaler/v1alpha1"
	tidal "github.com/debi-scaler/debi/apis/tidal/v1alpha1"
)

// guideFixtures are the Elastic Scaler guide's five YAML examples, each copied byte for byte from
// the guide (../shared/seeds/003_6cde71ae476a1769.txt, lines 213–251, 271–301, 313–346,
// 371–395 and 397–412), with the kind each holds.
var guideFixtures = []struct{ file, kind, name string }{
	{"guide-metrics-policy.yaml", "ElasticScaler", "metrics-policy-example"},
	{"guide-hpa.yaml", "ElasticScaler", "hpa-scaling-example"},
	{"guide-custom-algorithm.yaml", "ElasticScaler", "custom-scaling-example"},
	{"guide-tidal.yaml", "Tidal", "tidal-frequent-test"},
	{"guide-state-trigger.yaml", "ElasticScaler", "state-scaling-example"},
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGuideFixturesVerbatim checks each fixture is a run of whole lines of the guide, when the
// guide is there (it sits beside the clone: DEBI_ELASTIC_SCALER_GUIDE overrides the path).
func TestGuideFixturesVerbatim(t *testing.T) {
	path := os.Getenv("DEBI_ELASTIC_SCALER_GUIDE")
	if path == "" {
		path = filepath.Join("..", "..", "shared", "seeds", "003_6cde71ae476a1769.txt")
	}
	guide, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("the Elastic Scaler guide is not at %s (set DEBI_ELASTIC_SCALER_GUIDE): %v", path, err)
	}
	for _, f := range guideFixtures {
		b := readFixture(t, f.file)
		if !bytes.Contains(guide, append([]byte("\n"), b...)) {
			t.Errorf("%s is not a verbatim run of lines of the guide", f.file)
		}
	}
}

// TestGuideFixtures decodes each example strictly (an unknown or duplicate field is an error)
// into debi's types and runs the admission checks, which must pass.
func TestGuideFixtures(t *testing.T) {
	for _, f := range guideFixtures {
		b := readFixture(t, f.file)
		switch f.kind {
		case "ElasticScaler":
			var s es.ElasticScaler
			if err := yaml.UnmarshalStrict(b, &s); err != nil {
				t.Fatalf("%s: %v", f.file, err)
			}
			if s.Kind != f.kind || s.APIVersion != "elasticscaler.io/v1alpha1" || s.Name != f.name {
				t.Errorf("%s: %s %s %s", f.file, s.APIVersion, s.Kind, s.Name)
			}
			if errs := s.Validate(); len(errs) != 0 {
				t.Errorf("%s: rejected: %v", f.file, errs.ToAggregate())
			}
			if _, warnings := es.ParseMetricsPolicy(s.Annotations); len(warnings) != 0 {
				t.Errorf("%s: annotation warnings %q", f.file, warnings)
			}
		case "Tidal":
			var td tidal.Tidal
			if err := yaml.UnmarshalStrict(b, &td); err != nil {
				t.Fatalf("%s: %v", f.file, err)
			}
			if td.Kind != f.kind || td.APIVersion != "tidal.io/v1alpha1" || td.Name != f.name {
				t.Errorf("%s: %s %s %s", f.file, td.APIVersion, td.Kind, td.Name)
			}
			if errs := td.Validate(); len(errs) != 0 {
				t.Errorf("%s: rejected: %v", f.file, errs.ToAggregate())
			}
		}
	}
}

// TestGuideFixtureValues pins what the examples decode to, so a misnamed json tag (which strict
// decoding would report) or a wrong type cannot slip through as a zero value.
func TestGuideFixtureValues(t *testing.T) {
	dec := func(name string) *es.ElasticScaler {
		var s es.ElasticScaler
		if err := yaml.UnmarshalStrict(readFixture(t, name), &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	p := dec("guide-metrics-policy.yaml")
	policy, _ := es.ParseMetricsPolicy(p.Annotations)
	if want := (es.MetricsPolicy{WindowSeconds: 120, AggregationType: "Max", MissingDataPolicy: "Ignore", GCFactor: 8, EnableOutlierFilter: true, OutlierThreshold: 2.5}); policy != want {
		t.Errorf("metrics policy %+v, want %+v", policy, want)
	}
	r := p.Spec.Trigger.MetricsTrigger.Metrics[0].Resource
	if *p.Spec.MinReplicas != 2 || *p.Spec.MaxReplicas != 10 || r.MetricsName != "cpu" || r.Target.Type != es.UtilizationMetricType || *r.Target.AverageUtilization != 70 {
		t.Errorf("metrics-policy spec %+v", p.Spec)
	}
	if h := dec("guide-hpa.yaml"); !h.Spec.Trigger.MetricsTrigger.IsHPA() {
		t.Error("hpa example is not HPA")
	}
	c := dec("guide-custom-algorithm.yaml")
	m := c.Spec.Trigger.MetricsTrigger
	x := m.Metrics[0].ExternalServer
	if m.Algorithm() != "APA" || m.AlgorithmConfig["maxScaleUpRate"] != "2.0" || len(m.AlgorithmConfig) != 4 ||
		x.MetricsName != "inference_qps" || x.Target != "100" || x.Protocol != "http" ||
		x.Query != `sum(rate(http_requests_total{job="vllm"}[1m]))` || x.Endpoint != "http://prometheus.monitoring.svc:9090/api/v1/query" {
		t.Errorf("custom algorithm spec %+v %+v", m, x)
	}
	st := dec("guide-state-trigger.yaml")
	if st.Spec.Trigger.StateTrigger == nil || st.Spec.Trigger.MetricsTrigger != nil || st.Spec.MaxReplicas != nil || st.Spec.TargetRef.Kind != "Tidal" {
		t.Errorf("state trigger spec %+v", st.Spec)
	}
	var td tidal.Tidal
	if err := yaml.UnmarshalStrict(readFixture(t, "guide-tidal.yaml"), &td); err != nil {
		t.Fatal(err)
	}
	rules := td.Spec.Triggers.Times.Rules
	if len(rules) != 2 || rules[0].Cron != "CRON_TZ=Asia/Shanghai 0 50 16 * * *" || rules[1].Replicas != 5 || td.Labels["elasticscaler.io/name"] != "state-scaling-example" || td.Spec.TargetRef.Namespace != "ai-inference" {
		t.Errorf("tidal %+v", td)
	}
}

// TestStrictDecoding shows the decoding has teeth: a misspelt field is an error.
func TestStrictDecoding(t *testing.T) {
	b := bytes.Replace(readFixture(t, "guide-hpa.yaml"), []byte("scalingAlgorithm"), []byte("scalingAlgorythm"), 1)
	var s es.ElasticScaler
	if err := yaml.UnmarshalStrict(b, &s); err == nil || !strings.Contains(err.Error(), "scalingAlgorythm") {
		t.Errorf("misspelt field: %v", err)
	}
}

// TestCRDsCurrent regenerates the CRDs with hack/crds.sh into a temporary directory and
// compares them with deploy/crds/: run hack/crds.sh when it fails. (The first run builds
// controller-gen, ≈30 s; later runs take ≈3 s.)
func TestCRDsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips running controller-gen")
	}
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command("bash", filepath.Join("..", "hack", "crds.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/crds.sh: %v\n%s", err, b)
	}
	t.Logf("controller-gen: %v", time.Since(start).Round(time.Millisecond))
	for _, name := range []string{"elasticscaler.io_elasticscalers.yaml", "tidal.io_tidals.yaml"} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "deploy", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/crds/%s is stale: run hack/crds.sh", name)
		}
	}
	generated, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	if len(generated) != 2 {
		t.Errorf("controller-gen wrote %v, want the two CRDs", generated)
	}
}
