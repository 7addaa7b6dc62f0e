package apis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/debi-scaler/debi/internal/testenv"
)

var (
	crdGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	esGVR    = schema.GroupVersionResource{Group: "elasticscaler.io", Version: "v1alpha1", Resource: "elasticscalers"}
	tidalGVR = schema.GroupVersionResource{Group: "tidal.io", Version: "v1alpha1", Resource: "tidals"}
)

// startAPIServer starts a real etcd + kube-apiserver with hack/k8s-env.sh, as deploy's tests do
// (the recipe is theirs; their helper is in a _test.go file of another package).
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", testenv.APIServer(t))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	return rc
}

func decodeYAML(t *testing.T, b []byte) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func ssa(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "debi-apis-test", Force: new(true), FieldValidation: "Strict"})
}

// TestCRDsOnAPIServer installs the generated CRDs on a real kube-apiserver, creates the guide's
// examples with a strict server-side apply (the structural schemas must accept them unchanged),
// checks the schema's own rules reject what they should, writes a status through the status
// subresource, and reads the objects back as kubectl get does (the Table format), checking the
// printer columns.
func TestCRDsOnAPIServer(t *testing.T) {
	rc := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	for _, f := range []string{"elasticscaler.io_elasticscalers.yaml", "tidal.io_tidals.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ssa(ctx, dyn.Resource(crdGVR), decodeYAML(t, b)); err != nil {
			t.Fatalf("CRD %s: %v", f, err)
		}
	}
	// Established, then served: creating an object right after Established can still answer
	// 404 while the new group version is wired in, so poll a list until it answers.
	for _, gvr := range []schema.GroupVersionResource{esGVR, tidalGVR} {
		for {
			_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s not served: %v", gvr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ai-inference"}}}
	if _, err := ssa(ctx, dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), ns); err != nil {
		t.Fatal(err)
	}

	for _, f := range guideFixtures {
		obj := decodeYAML(t, readFixture(t, f.file))
		gvr := esGVR
		if f.kind == "Tidal" {
			gvr = tidalGVR
		}
		got, err := ssa(ctx, dyn.Resource(gvr).Namespace(obj.GetNamespace()), obj)
		if err != nil {
			t.Errorf("%s: %v", f.file, err)
			continue
		}
		// Nothing pruned: the stored spec is the fixture's spec.
		if want, have := obj.Object["spec"], got.Object["spec"]; fmt.Sprint(want) != fmt.Sprint(have) {
			t.Errorf("%s: stored spec differs (pruned?)\n got %v\nwant %v", f.file, have, want)
		}
	}

	t.Run("schema rejects", func(t *testing.T) {
		for _, c := range []struct{ name, file, from, to, want string }{
			{"unknown field", "guide-hpa.yaml", "scalingAlgorithm", "scalingAlgorythm", "scalingAlgorythm"},
			{"max < min", "guide-hpa.yaml", "maxReplicas: 10", "maxReplicas: 1", "spec.maxReplicas: Invalid value: maxReplicas must be greater than or equal to minReplicas"},
			{"trigger.type", "guide-hpa.yaml", "type: MetricsTrigger", "type: EventTrigger", "spec.trigger.type"},
			{"metric type", "guide-hpa.yaml", "type: Resource", "type: Pods", "spec.trigger.metricsTrigger.metrics[0].type"},
			{"target type", "guide-hpa.yaml", "type: Utilization", "type: Percent", "spec.trigger.metricsTrigger.metrics[0].resource.target.type"},
			{"negative minReplicas", "guide-hpa.yaml", "minReplicas: 2", "minReplicas: -1", "spec.minReplicas"},
			{"no targetRef.name", "guide-hpa.yaml", "    name: vllm-inference\n", "", "spec.targetRef.name"},
			{"debi.mode", "guide-hpa.yaml", "spec:\n", "spec:\n  debi: {mode: dry-run}\n", "spec.debi.mode"},
			{"ExternalServer target a number", "guide-custom-algorithm.yaml", `target: "100"`, "target: 100", "spec.trigger.metricsTrigger.metrics[0].externalServer.target"},
			{"duplicate Tidal rule", "guide-tidal.yaml", "name: time2", "name: time1", `duplicate entries for key [name="time1"]`},
			{"negative Tidal replicas", "guide-tidal.yaml", "replicas: 5", "replicas: -5", "spec.triggers.times.rules[1].replicas"},
		} {
			obj := decodeYAML(t, []byte(strings.Replace(string(readFixture(t, c.file)), c.from, c.to, 1)))
			obj.SetName("bad")
			gvr := esGVR
			if obj.GetKind() == "Tidal" {
				gvr = tidalGVR
			}
			_, err := ssa(ctx, dyn.Resource(gvr).Namespace("ai-inference"), obj)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: want an error containing %q, got %v", c.name, c.want, err)
			} else {
				t.Logf("%s: %v", c.name, err)
			}
		}
	})

	// A status as the controller will write it: the status subresource takes it, the spec
	// endpoint would not.
	now := metav1.Now().Rfc3339Copy()
	status := map[string]any{
		"apiVersion": "elasticscaler.io/v1alpha1", "kind": "ElasticScaler",
		"metadata": map[string]any{"name": "hpa-scaling-example", "namespace": "ai-inference"},
		"status": map[string]any{
			"observedGeneration": int64(1), "currentReplicas": int64(3), "desiredReplicas": int64(4),
			"lastScaleTime": now.Format(time.RFC3339), "lastLoad": "2.75", "lastTarget": "0.7",
			"conditions": []any{map[string]any{
				"type": "Validated", "status": "True", "reason": "Valid", "message": "spec and cluster checks passed",
				"lastTransitionTime": now.Format(time.RFC3339), "observedGeneration": int64(1),
			}},
		},
	}
	data, _ := json.Marshal(status)
	if _, err := dyn.Resource(esGVR).Namespace("ai-inference").Patch(ctx, "hpa-scaling-example", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "debi-apis-test", Force: new(true), FieldValidation: "Strict"}, "status"); err != nil {
		t.Fatalf("status: %v", err)
	}
	tdStatus := map[string]any{
		"apiVersion": "tidal.io/v1alpha1", "kind": "Tidal",
		"metadata": map[string]any{"name": "tidal-frequent-test", "namespace": "ai-inference"},
		"status":   map[string]any{"desiredReplicas": int64(3), "replicas": int64(3), "activeRule": "time1", "lastScheduleTime": now.Format(time.RFC3339)},
	}
	data, _ = json.Marshal(tdStatus)
	if _, err := dyn.Resource(tidalGVR).Namespace("ai-inference").Patch(ctx, "tidal-frequent-test", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "debi-apis-test", Force: new(true), FieldValidation: "Strict"}, "status"); err != nil {
		t.Fatalf("tidal status: %v", err)
	}

	// spec.debi on one object, for the MODE, PAUSED and PAUSED-REPLICAS (-o wide) columns.
	if _, err := dyn.Resource(esGVR).Namespace("ai-inference").Patch(ctx, "custom-scaling-example", types.MergePatchType,
		[]byte(`{"spec":{"debi":{"mode":"shadow","paused":true,"pausedReplicas":3}}}`), metav1.PatchOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("spec.debi: %v", err)
	}

	// kubectl get elasticscalers -n ai-inference, as the API server renders it.
	esTable := getTable(ctx, t, rc, "/apis/elasticscaler.io/v1alpha1/namespaces/ai-inference/elasticscalers")
	t.Logf("kubectl get elasticscalers -n ai-inference:\n%s", render(esTable))
	wantColumns(t, esTable, "NAME", "TARGET", "ALGORITHM", "MIN", "MAX", "CURRENT", "DESIRED", "MODE", "PAUSED", "PAUSED-REPLICAS", "VALIDATED", "AGE")
	wantRows(t, esTable, map[string][]any{
		// name: target, algorithm, min, max, current, desired, mode, paused, paused replicas,
		// validated (AGE is checked apart).
		"custom-scaling-example": {"vllm-inference", "APA", 2, 10, nil, nil, "shadow", true, 3, nil},
		"hpa-scaling-example":    {"vllm-inference", "HPA", 2, 10, 3, 4, nil, nil, nil, "True"},
		"metrics-policy-example": {"vllm-inference", "APA", 2, 10, nil, nil, nil, nil, nil, nil},
		"state-scaling-example":  {"tidal-frequent-test", nil, nil, nil, nil, nil, nil, nil, nil, nil},
	})
	tdTable := getTable(ctx, t, rc, "/apis/tidal.io/v1alpha1/namespaces/ai-inference/tidals")
	t.Logf("kubectl get tidals -n ai-inference:\n%s", render(tdTable))
	wantColumns(t, tdTable, "NAME", "TARGET", "DESIRED", "ACTIVE RULE", "AGE")
	wantRows(t, tdTable, map[string][]any{"tidal-frequent-test": {"elastic-scaler-state-test", 3, "time1"}})

	// The short name and the category are discoverable, as kubectl get escaler / kubectl get debi
	// use (not es: ECK's Elasticsearch has it).
	b := getRaw(ctx, t, rc, "/apis/elasticscaler.io/v1alpha1", "application/json")
	var rl metav1.APIResourceList
	if err := json.Unmarshal(b, &rl); err != nil {
		t.Fatal(err)
	}
	for _, r := range rl.APIResources {
		if r.Name == "elasticscalers" && (strings.Join(r.ShortNames, ",") != "escaler" || strings.Join(r.Categories, ",") != "debi") {
			t.Errorf("elasticscalers: shortNames %v categories %v", r.ShortNames, r.Categories)
		}
	}
}

func getRaw(ctx context.Context, t *testing.T, rc *rest.Config, path, accept string) []byte {
	t.Helper()
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(rc.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, b)
	}
	return b
}

func getTable(ctx context.Context, t *testing.T, rc *rest.Config, path string) *metav1.Table {
	t.Helper()
	b := getRaw(ctx, t, rc, path, "application/json;as=Table;v=v1;g=meta.k8s.io")
	var tab metav1.Table
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if tab.Kind != "Table" {
		t.Fatalf("GET %s: kind %q, not a Table", path, tab.Kind)
	}
	return &tab
}

func wantColumns(t *testing.T, tab *metav1.Table, want ...string) {
	t.Helper()
	var got []string
	for _, c := range tab.ColumnDefinitions {
		got = append(got, strings.ToUpper(c.Name))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("columns %v, want %v", got, want)
	}
}

// wantRows checks each row's cells after NAME against want (numbers compare by value, nil is
// an empty cell, kubectl's <none>), and that the last cell, AGE, is filled.
func wantRows(t *testing.T, tab *metav1.Table, want map[string][]any) {
	t.Helper()
	if len(tab.Rows) != len(want) {
		t.Errorf("%d rows, want %d", len(tab.Rows), len(want))
	}
	for _, r := range tab.Rows {
		name := fmt.Sprint(r.Cells[0])
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected row %v", r.Cells)
			continue
		}
		for i, v := range w {
			if got := r.Cells[1+i]; fmt.Sprint(got) != fmt.Sprint(v) {
				t.Errorf("%s: column %s = %v, want %v", name, tab.ColumnDefinitions[1+i].Name, got, v)
			}
		}
		if age := r.Cells[len(r.Cells)-1]; age == nil || fmt.Sprint(age) == "" {
			t.Errorf("%s: no AGE", name)
		}
	}
}

// render prints a Table as kubectl get does, for the test log.
func render(tab *metav1.Table) string {
	rows := [][]string{{}}
	for _, c := range tab.ColumnDefinitions {
		rows[0] = append(rows[0], strings.ToUpper(c.Name))
	}
	for _, r := range tab.Rows {
		var cells []string
		for _, c := range r.Cells {
			s := fmt.Sprint(c)
			if c == nil {
				s = "<none>"
			}
			cells = append(cells, s)
		}
		rows = append(rows, cells)
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var sb strings.Builder
	for _, r := range rows {
		for i, c := range r {
			fmt.Fprintf(&sb, "%-*s   ", width[i], c)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
