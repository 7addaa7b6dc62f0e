package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/debi-scaler/debi/internal/testenv"
)

// root is the repository root, seen from this package's directory (where go test runs).
const root = ".."

// integrationEnv returns the value of an environment variable an integration test needs. Unset,
// the test skips — unless DEBI_REQUIRE_INTEGRATION=1 (hack/test.sh), where a skip would hide a
// broken setup and fails instead.
func integrationEnv(t *testing.T, name, what string) string {
	t.Helper()
	return testenv.Env(t, name, what)
}

// decodeObjects splits a multi-document YAML stream into objects, dropping empty documents.
func decodeObjects(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// renderKustomize builds a kustomization directory in process, as `kubectl kustomize` does.
func renderKustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, b)
}

// helmBin returns the helm binary of DEBI_HELM_DIR (hack/servers.sh helm).
func helmBin(t *testing.T) string {
	t.Helper()
	dir := integrationEnv(t, "DEBI_HELM_DIR", "the helm binary built by hack/servers.sh helm")
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("DEBI_HELM_DIR=%s: %v", dir, err)
	}
	return bin
}

// helm runs the helm binary with a private home, so the user's repositories and plugins play
// no part.
func helm(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// hashSuffix is the content hash kustomize's configMapGenerator appends to a name.
var hashSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

// inventory lists objects as "Kind/name", sorted, with kustomize's hash suffix removed.
func inventory(objs []*unstructured.Unstructured, skipKinds ...string) []string {
	skip := map[string]bool{}
	for _, k := range skipKinds {
		skip[k] = true
	}
	var out []string
	for _, o := range objs {
		if skip[o.GetKind()] {
			continue
		}
		name := o.GetName()
		if o.GetKind() == "ConfigMap" {
			name = hashSuffix.ReplaceAllString(name, "")
		}
		out = append(out, o.GetKind()+"/"+name)
	}
	sort.Strings(out)
	return out
}

func find(objs []*unstructured.Unstructured, kind, namePrefix string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasPrefix(o.GetName(), namePrefix) {
			return o
		}
	}
	return nil
}

func findAll(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func toString(v any) string { return fmt.Sprint(v) }
