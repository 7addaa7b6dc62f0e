package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/elasticscaler"
	"github.com/debi-scaler/debi/internal/testenv"
)

// review wraps an object (YAML) in an AdmissionReview request.
func review(t *testing.T, obj string, op admissionv1.Operation) []byte {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name, Namespace string }
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	group, version, _ := strings.Cut(meta.APIVersion, "/")
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid-1"), Kind: metav1.GroupVersionKind{Group: group, Version: version, Kind: meta.Kind},
			Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, Operation: op,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func postReview(t *testing.T, h http.Handler, body []byte) (int, *admissionv1.AdmissionResponse) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, elasticscaler.AdmissionPath, bytes.NewReader(body)))
	if w.Code != http.StatusOK {
		return w.Code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("answer is not an AdmissionReview: %v %s", err, w.Body)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response.UID != "uid-1" {
		t.Fatalf("answer %+v: want admission.k8s.io/v1 AdmissionReview with the request's UID", out)
	}
	return w.Code, out.Response
}

// TestAdmission: the guide's examples are admitted; every invalid variant is denied with its
// field path; deletions, kinds the webhook does not know and metrics-policy annotations that fall
// back to defaults (a warning) are allowed; what is not an AdmissionReview is a 400.
func TestAdmission(t *testing.T) {
	h := NewRouter(RouterOptions{Ready: func() error { return nil }, Gatherer: prometheus.NewRegistry(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: testenv.Logger(t)})
	files, err := filepath.Glob("../apis/testdata/guide-*.yaml")
	if err != nil || len(files) != 5 {
		t.Fatalf("guide fixtures: %v %v", files, err)
	}
	guide := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		guide[strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "guide-"), ".yaml")] = string(b)
		code, resp := postReview(t, h, review(t, string(b), admissionv1.Create))
		if code != 200 || !resp.Allowed {
			t.Errorf("%s: %d %+v, want allowed", f, code, resp)
		}
	}

	for _, tc := range []struct {
		name, base, from, to, want string
	}{
		{"hpa with externalServer", "hpa", "      - type: Resource\n        resource:\n          metricsName: cpu\n          target:\n            type: Utilization\n            averageUtilization: 70",
			"      - type: ExternalServer\n        externalServer: {metricsName: qps, target: \"100\", endpoint: \"http://p:9090/api/v1/query\", query: \"sum(x)\", protocol: http}",
			"spec.trigger.metricsTrigger.metrics[0]"},
		{"max below min", "hpa", "maxReplicas: 10", "maxReplicas: 1", "spec.maxReplicas"},
		{"no targetRef name", "hpa", "    name: vllm-inference", "", "spec.targetRef.name"},
		{"state trigger with metricsTrigger", "state-trigger", "    stateTrigger: {}", "    stateTrigger: {}\n    metricsTrigger: {scalingAlgorithm: APA}", "only stateTrigger"},
		{"bad trigger type", "hpa", "type: MetricsTrigger", "type: Sometimes", "spec.trigger.type"},
		{"tidal bad cron", "tidal", `"CRON_TZ=Asia/Shanghai 0 0 8 * * *"`, `"CRON_TZ=Asia/Shanghai 0 0 25 * * *"`, "spec.triggers.times.rules[1].cron"},
		{"tidal bad zone", "tidal", `"CRON_TZ=Asia/Shanghai 0 50 16 * * *"`, `"CRON_TZ=Mars/Olympus 0 50 16 * * *"`, "spec.triggers.times.rules[0].cron"},
	} {
		obj := guide[tc.base]
		if !strings.Contains(obj, tc.from) {
			t.Fatalf("%s: fixture %s lacks %q", tc.name, tc.base, tc.from)
		}
		obj = strings.Replace(obj, tc.from, tc.to, 1)
		code, resp := postReview(t, h, review(t, obj, admissionv1.Update))
		if code != 200 || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.want) {
			t.Errorf("%s: %d %+v, want denied naming %s", tc.name, code, resp, tc.want)
			continue
		}
		// Deleting the same invalid object is allowed.
		if _, resp := postReview(t, h, review(t, obj, admissionv1.Delete)); !resp.Allowed {
			t.Errorf("%s: deletion denied: %+v", tc.name, resp)
		}
	}

	// An invalid metrics-policy annotation is a warning, never a denial (the guide's rule).
	obj := strings.Replace(guide["metrics-policy"], `elasticscaler.io/metrics.windowSeconds: "120"`, `elasticscaler.io/metrics.windowSeconds: "soon"`, 1)
	if _, resp := postReview(t, h, review(t, obj, admissionv1.Create)); !resp.Allowed || len(resp.Warnings) == 0 || !strings.Contains(strings.Join(resp.Warnings, " "), "windowSeconds") {
		t.Errorf("bad annotation: %+v, want allowed with a warning about windowSeconds", resp)
	}
	if _, resp := postReview(t, h, review(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", admissionv1.Create)); !resp.Allowed {
		t.Errorf("unknown kind: %+v, want allowed", resp)
	}
	for _, body := range []string{"", "{}", "not json", `{"request": null}`} {
		if code, _ := postReview(t, h, []byte(body)); code != http.StatusBadRequest {
			t.Errorf("body %q: %d, want 400", body, code)
		}
	}
}
