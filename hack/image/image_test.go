package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const testVersion = "0.0.0-imagetest"

// testOptions builds the host's platform (DEBI_IMAGE_PLATFORMS overrides, e.g.
// "linux/amd64,linux/arm64") with ldflags shaped like the Makefile's.
func testOptions(t *testing.T, root, dir string) Options {
	t.Helper()
	created, err := SourceDateEpoch(context.Background(), "../..")
	if err != nil {
		t.Fatal(err)
	}
	platforms := []string{"linux/" + runtime.GOARCH}
	if p := os.Getenv("DEBI_IMAGE_PLATFORMS"); p != "" {
		platforms = strings.Split(p, ",")
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	return Options{
		Root:      root,
		Package:   "./cmd/debi",
		Platforms: platforms,
		LDFlags: "-X " + versionPkg + ".Version=" + testVersion + " -X " + versionPkg + ".Revision=" + rev +
			" -X " + versionPkg + ".Branch=image-test -X " + versionPkg + ".BuildUser=debi" +
			// The wall clock, as the Makefile's LDFLAGS: Build must replace it.
			" -X " + versionPkg + ".BuildDate=" + time.Now().UTC().Format("20060102-15:04:05.000000000"),
		Version:  testVersion,
		Revision: rev,
		Created:  created,
		Source:   "https://github.com/debi-scaler/debi",
		Repo:     "ghcr.io/debi-scaler/debi",
		CACerts:  "/etc/ssl/certs/ca-certificates.crt",
		Layout:   filepath.Join(dir, "image"),
		Tarball:  filepath.Join(dir, "debi-image.tar"),
		Stderr:   testWriter{t},
		WorkDir:  dir,
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestStampDate(t *testing.T) {
	created := time.Unix(1796128435, 0) // 2026-12-01T12:33:55Z
	for _, tc := range []struct{ in, want string }{
		{"", "-X " + versionPkg + ".BuildDate=20261201-12:33:55"},
		{"-X " + versionPkg + ".Version=1  -X " + versionPkg + ".BuildDate=20990101-00:00:00 -s",
			"-X " + versionPkg + ".Version=1 -s -X " + versionPkg + ".BuildDate=20261201-12:33:55"},
		{"-X=" + versionPkg + ".BuildDate=x", "-X " + versionPkg + ".BuildDate=20261201-12:33:55"},
	} {
		if got := stampDate(tc.in, created); got != tc.want {
			t.Errorf("stampDate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestImage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	ctx := context.Background()
	// Both builds compile one snapshot of the working tree, so that an edit made meanwhile (by
	// anyone) cannot pass for a reproducibility failure. -trimpath keeps its path out of the binary.
	root := snapshot(t)
	o := testOptions(t, root, t.TempDir())
	t0 := time.Now()
	res, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first build: %s, index %s", time.Since(t0).Round(time.Millisecond), res.Index)

	// The layout: index.json names one multi-platform index, tagged with the version; every blob
	// is there and hashes to its digest.
	outer, err := layout.ImageIndexFromPath(o.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(outer); err != nil {
		t.Fatalf("validate.Index(%s): %v", o.Layout, err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(om.Manifests) != 1 || !om.Manifests[0].MediaType.IsIndex() {
		t.Fatalf("index.json: want one image index, got %+v", om.Manifests)
	}
	if got := om.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != testVersion {
		t.Errorf("index.json ref.name = %q, want %q", got, testVersion)
	}
	if om.Manifests[0].Digest != res.Index {
		t.Errorf("index.json names %s, Build returned %s", om.Manifests[0].Digest, res.Index)
	}
	idx, err := outer.ImageIndex(res.Index)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(o.Platforms) {
		t.Fatalf("index has %d manifests, want %d (%v)", len(im.Manifests), len(o.Platforms), o.Platforms)
	}
	for _, d := range im.Manifests {
		plat := d.Platform.String()
		t.Run(plat, func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, o, img, d.Platform, res.Images[plat].Binary)
		})
	}

	// The tarball holds the host's image under the version's tag.
	tag, err := name.NewTag(o.Repo + ":" + testVersion)
	if err != nil {
		t.Fatal(err)
	}
	timg, err := tarball.ImageFromPath(o.Tarball, &tag)
	if err != nil {
		t.Fatalf("tarball %s: %v", o.Tarball, err)
	}
	if err := validate.Image(timg); err != nil {
		t.Fatalf("validate.Image(tarball): %v", err)
	}
	// A docker tarball keeps the config and the layers but no manifest (docker load writes its
	// own), so the config digest is what must match.
	limg, err := idx.Image(res.Images[res.TarOf].Digest)
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := timg.ConfigName()
	lc, _ := limg.ConfigName()
	if tc != lc {
		t.Errorf("tarball config %s, want the %s image's %s", tc, res.TarOf, lc)
	}

	// Reproducible: a second build of the same commit, into another directory, gives the same
	// index digest, the same index.json and the same tarball, byte for byte.
	// It builds in a temporary directory of its own, which it must leave removed.
	o2 := testOptions(t, root, t.TempDir())
	o2.WorkDir = ""
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t1 := time.Now()
	res2, err := Build(ctx, o2)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "debi-image-*")); len(left) > 0 {
		t.Errorf("Build with no WorkDir left %v behind", left)
	}
	t.Logf("second build: %s, index %s", time.Since(t1).Round(time.Millisecond), res2.Index)
	if res2.Index != res.Index {
		for p, i := range res.Images {
			t.Logf("%s: %s vs %s (binary %x)", p, i.Digest, res2.Images[p].Digest, fileSum(t, i.Binary))
		}
		t.Fatalf("two builds of the same tree: index %s vs %s", res.Index, res2.Index)
	}
	for _, f := range []string{"index.json", "oci-layout"} {
		if a, b := fileSum(t, filepath.Join(o.Layout, f)), fileSum(t, filepath.Join(o2.Layout, f)); a != b {
			t.Errorf("%s differs between two builds", f)
		}
	}
	if a, b := fileSum(t, o.Tarball), fileSum(t, o2.Tarball); a != b {
		t.Errorf("tarball differs between two builds: %x vs %x", a, b)
	}
}

func checkImage(t *testing.T, o Options, img v1.Image, plat *v1.Platform, built string) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != plat.OS || cf.Architecture != plat.Architecture {
		t.Errorf("config platform %s/%s, index says %s", cf.OS, cf.Architecture, plat)
	}
	if got, want := cf.Config.User, "65532:65532"; got != want {
		t.Errorf("User = %q, want %q (the chart's runAsUser/runAsGroup)", got, want)
	}
	if got, want := cf.Config.Entrypoint, []string{"/debi"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Entrypoint = %q, want %q", got, want)
	}
	if cf.Config.WorkingDir != "/" {
		t.Errorf("WorkingDir = %q, want /", cf.Config.WorkingDir)
	}
	if want := Labels(o); !reflect.DeepEqual(cf.Config.Labels, want) {
		t.Errorf("Labels = %v\nwant %v", cf.Config.Labels, want)
	}
	if cf.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("licenses label %q", cf.Config.Labels["org.opencontainers.image.licenses"])
	}
	if !cf.Created.Time.Equal(o.Created) {
		t.Errorf("config created %s, want SOURCE_DATE_EPOCH %s", cf.Created.Time, o.Created)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(o.Created) {
			t.Errorf("history created %s, want %s", h.Created.Time, o.Created)
		}
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	files := readLayer(t, layers[0], o.Created)
	for _, f := range []string{"debi", "etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt"} {
		if _, ok := files[f]; !ok {
			t.Errorf("layer lacks /%s", f)
		}
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", files["etc/passwd"])
	}
	if !strings.Contains(string(files["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot 65532:\n%s", files["etc/group"])
	}
	if !bytes.Contains(files["etc/ssl/certs/ca-certificates.crt"], []byte("BEGIN CERTIFICATE")) {
		t.Error("the CA bundle holds no certificate")
	}
	want, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["debi"], want) {
		t.Error("/debi in the layer is not the binary go build wrote")
	}

	if plat.OS != runtime.GOOS || plat.Architecture != runtime.GOARCH {
		t.Logf("not running the %s binary on %s/%s", plat, runtime.GOOS, runtime.GOARCH)
		return
	}
	bin := filepath.Join(t.TempDir(), "debi")
	if err := os.WriteFile(bin, files["debi"], 0o755); err != nil {
		t.Fatal(err)
	}
	out := runVersion(t, bin)
	for _, s := range []string{testVersion, o.Revision, o.Created.Format("20060102-15:04:05")} {
		if !strings.Contains(out, s) {
			t.Errorf("the image's debi prints no %q:\n%s", s, out)
		}
	}
}

// runVersion runs `debi --version`, or `debi version` where the CLI has no --version yet.
func runVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err == nil && strings.Contains(string(out), testVersion) {
		t.Logf("debi --version:\n%s", out)
		return string(out)
	}
	t.Logf("debi --version failed (%v), trying debi version", err)
	out, err = exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("debi version: %v\n%s", err, out)
	}
	t.Logf("debi version:\n%s", out)
	return string(out)
}

// readLayer returns the regular files of the layer and checks that every entry carries the
// build's time and root ownership (but nonroot's home).
func readLayer(t *testing.T, l v1.Layer, created time.Time) map[string][]byte {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(created) {
			t.Errorf("%s: mtime %s, want %s", h.Name, h.ModTime, created)
		}
		owner := 0
		if h.Name == "home/nonroot/" {
			owner = nonrootUID
		}
		if h.Uid != owner || h.Gid != owner {
			t.Errorf("%s: owner %d:%d, want %d:%d", h.Name, h.Uid, h.Gid, owner, owner)
		}
		if h.Name == "debi" && h.Mode != 0o755 {
			t.Errorf("/debi mode %o, want 755", h.Mode)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
	return files
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// snapshot copies the files git would see (tracked and untracked, not ignored) of the working
// tree into a temporary directory, without .git: the build then stamps no VCS information, and
// the ldflags carry the version.
func snapshot(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || strings.HasPrefix(f, "hack/image/") || strings.HasPrefix(f, "hack/hpadiff/") {
			continue
		}
		src := filepath.Join("../..", f)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
