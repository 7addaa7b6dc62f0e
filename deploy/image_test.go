package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneImageTag: the image tag is one string from one source, the chart's appVersion — the tag
// the chart pulls (image.tag empty), the kustomize base's newTag, the tag `make image` gives a
// local build (make image-tag, passed as hack/image's --version, which tags the tarball), and
// what the release workflow publishes (it refuses a git tag that is not v<appVersion>).
func TestOneImageTag(t *testing.T) {
	want := chartAppVersion(t)
	kust, err := os.ReadFile("kustomize/base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\s*newTag:\s*"?([^"\s]+)"?\s*$`).FindSubmatch(kust); m == nil || string(m[1]) != want {
		t.Errorf("kustomize base newTag %q, the chart's appVersion %q", m, want)
	}
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^  tag: ""`).Match(values) {
		t.Error(`values.yaml image.tag is not "" (the chart's appVersion)`)
	}
	out, err := exec.Command("make", "-s", "-C", "..", "image-tag").Output()
	if err != nil {
		t.Fatalf("make image-tag: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("make image tags %q, the chart's appVersion is %q", got, want)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), `hack/image.sh build --version '$(IMAGE_TAG)'`) {
		t.Error("make image does not pass IMAGE_TAG as the image's --version (its tag)")
	}
	wf, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`IMAGE_TAG="$VERSION"`, "appVersion", `crane push bin/image "$IMAGE:$VERSION"`, `helm push`} {
		if !strings.Contains(string(wf), s) {
			t.Errorf("the release workflow lacks %s", s)
		}
	}
}
