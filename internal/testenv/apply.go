package testenv

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync/atomic"
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
)

// CRDResource is apiextensions.k8s.io/v1 customresourcedefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// APIServerConfig starts a real etcd + kube-apiserver of the test's own (APIServer) and returns
// its client configuration. No controller-manager runs: no garbage collector, no HPA controller.
func APIServerConfig(t testing.TB) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", APIServer(t))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	return rc
}

// DecodeYAML decodes one YAML document into an object, or fails the test.
func DecodeYAML(t testing.TB, b []byte) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// SSA applies obj as a user would (kubectl apply --server-side), strictly.
func SSA(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "kubectl", Force: new(true), FieldValidation: "Strict"})
}

// LogTo is a slog handler's writer logging to t until t's end (client-go's klog, which the
// webhook points at its first logger for the life of the process, may log later).
func LogTo(t testing.TB) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return w
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// InstallCRD applies the CRD of file (deploy/crds/…, found from the test's package by its path),
// creates the namespaces and, unless served is the zero resource, waits until the API server
// serves it in the first of them (or fails the test when ctx ends): a watch started after it
// sees the resource at once.
func InstallCRD(ctx context.Context, t testing.TB, dyn dynamic.Interface, file string, served schema.GroupVersionResource, namespaces ...string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SSA(ctx, dyn.Resource(CRDResource), DecodeYAML(t, b)); err != nil {
		t.Fatal(err)
	}
	for _, n := range namespaces {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": n}}}
		if _, err := SSA(ctx, dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), ns); err != nil {
			t.Fatal(err)
		}
	}
	for served.Resource != "" {
		if _, err := dyn.Resource(served).Namespace(namespaces[0]).List(ctx, metav1.ListOptions{}); err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s not served", served.Resource)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
