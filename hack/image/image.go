package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The non-root user of the image. It matches runAsUser/runAsGroup of the Helm chart
// (deploy/helm/debi/templates/_helpers.tpl) and the kustomize base (deploy/kustomize/base/*.yaml),
// and distroless's "nonroot".
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
)

// versionPkg is the package whose variables the ldflags stamp.
const versionPkg = "github.com/prometheus/common/version"

// Options say what to build and where to write it.
type Options struct {
	Root      string   // the debi module's root directory (where go build runs)
	Package   string   // the main package, relative to Root ("./cmd/debi")
	Platforms []string // "linux/amd64", "linux/arm64"
	LDFlags   string   // the Makefile's LDFLAGS; BuildDate is overridden from Created
	Version   string   // stamped version, also the tag and the version label
	Revision  string   // git commit, the revision label
	Created   time.Time
	Source    string // org.opencontainers.image.source
	Repo      string // the tag's repository: ghcr.io/debi-scaler/debi
	CACerts   string // the CA bundle copied into the image
	Layout    string // OCI image layout directory to (re)write
	Tarball   string // docker-loadable tarball to write; "" for none
	Stderr    io.Writer
	// WorkDir is where the binaries are built and kept; "" builds them in a temporary directory
	// that Build removes before it returns.
	WorkDir string
}

// Result describes what Build wrote.
type Result struct {
	Index  v1.Hash                 // digest of the multi-platform image index
	Images map[string]PlatformInfo // by platform
	TarRef string                  // the tag inside the tarball
	TarOf  string                  // the platform the tarball holds
}

// PlatformInfo is one platform's image.
type PlatformInfo struct {
	Digest     v1.Hash
	LayerBytes int64 // compressed layer
	ConfigSize int64
	Binary     string // path of the built binary in Options.WorkDir; "" when that was unset
}

// SourceDateEpoch returns $SOURCE_DATE_EPOCH, else the commit time of HEAD in root.
func SourceDateEpoch(ctx context.Context, root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("commit time (git log -1 --format=%%ct): %w", err)
		}
		s = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// Build compiles the binary for every platform, assembles one image per platform on an empty base
// and writes the OCI layout (index.json → one multi-platform image index) and the tarball.
func Build(ctx context.Context, o Options) (*Result, error) {
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platform")
	}
	if o.Created.IsZero() {
		return nil, errors.New("no creation time (SOURCE_DATE_EPOCH)")
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA bundle (install Debian's ca-certificates): %w", err)
	}
	tmp := o.WorkDir
	if tmp == "" {
		dir, err := os.MkdirTemp("", "debi-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		tmp = dir
	}
	res := &Result{Images: map[string]PlatformInfo{}}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var tarImg v1.Image
	for k, p := range o.Platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p, err)
		}
		bin := filepath.Join(tmp, "debi-"+plat.OS+"-"+plat.Architecture)
		// Progress: a cold cross-build compiles the standard library and every dependency for
		// the other architecture, many minutes on two cores, silent without this.
		t0 := time.Now()
		if o.Stderr != nil {
			note := ""
			if plat.Architecture != runtime.GOARCH {
				note = " (a cross-build: slow on a cold cache; IMAGE_PLATFORMS=linux/" + runtime.GOARCH + " skips it)"
			}
			fmt.Fprintf(o.Stderr, "image: [%d/%d] go build %s for %s%s\n", k+1, len(o.Platforms), o.Package, p, note)
		}
		done := make(chan struct{})
		if o.Stderr != nil {
			go func() {
				tick := time.NewTicker(30 * time.Second)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
						fmt.Fprintf(o.Stderr, "image:   … still building for %s (%s)\n", p, time.Since(t0).Round(time.Second))
					}
				}
			}()
		}
		err = goBuild(ctx, o, plat, bin)
		close(done)
		if err != nil {
			return nil, err
		}
		if o.Stderr != nil {
			fmt.Fprintf(o.Stderr, "image: [%d/%d] %s built in %s\n", k+1, len(o.Platforms), p, time.Since(t0).Round(time.Second))
		}
		img, err := assemble(o, plat, bin, ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		info, err := describe(img)
		if err != nil {
			return nil, err
		}
		if o.WorkDir != "" {
			info.Binary = bin
		}
		res.Images[p] = info
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: plat},
		})
		if tarImg == nil || (plat.OS == "linux" && plat.Architecture == runtime.GOARCH) {
			tarImg, res.TarOf = img, p
		}
	}
	if res.Index, err = idx.Digest(); err != nil {
		return nil, err
	}

	// The layout is rewritten from scratch so that no blob of an earlier build lingers.
	if err := os.RemoveAll(o.Layout); err != nil {
		return nil, err
	}
	lp, err := layout.Write(o.Layout, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", o.Layout, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", o.Layout, err)
	}

	if o.Tarball != "" {
		tag, err := name.NewTag(o.Repo + ":" + tagSafe(o.Version))
		if err != nil {
			return nil, fmt.Errorf("tag: %w", err)
		}
		res.TarRef = tag.String()
		if err := tarball.WriteToFile(o.Tarball, tag, tarImg); err != nil {
			return nil, fmt.Errorf("tarball %s: %w", o.Tarball, err)
		}
	}
	return res, nil
}

// stampDate replaces the ldflags' BuildDate (the Makefile's is the wall clock) with created.
// Appending would not do: go build records the whole -ldflags string in the binary's build
// information, so the wall-clock date would still change the binary.
func stampDate(ldflags string, created time.Time) string {
	f := strings.Fields(ldflags)
	out := make([]string, 0, len(f)+2)
	for i := 0; i < len(f); i++ {
		if f[i] == "-X" && i+1 < len(f) && strings.HasPrefix(f[i+1], versionPkg+".BuildDate=") {
			i++
			continue
		}
		if strings.HasPrefix(f[i], "-X="+versionPkg+".BuildDate=") {
			continue
		}
		out = append(out, f[i])
	}
	out = append(out, "-X", versionPkg+".BuildDate="+created.UTC().Format("20060102-15:04:05"))
	return strings.Join(out, " ")
}

// tagSafe turns a version into a valid tag ("+" is not allowed in tags).
func tagSafe(v string) string { return strings.ReplaceAll(v, "+", "_") }

func goBuild(ctx context.Context, o Options, plat *v1.Platform, out string) error {
	ldflags := stampDate(o.LDFlags, o.Created)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, o.Package)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture)
	if plat.Variant != "" && plat.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = o.Stderr, o.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w", o.Package, plat.OS, plat.Architecture, err)
	}
	return nil
}

// assemble builds the image: one layer on empty.Image, OCI media types, every time = o.Created.
func assemble(o Options, plat *v1.Platform, bin string, ca []byte) (v1.Image, error) {
	debi, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(o.Created, debi, ca)
	if err != nil {
		return nil, err
	}
	// Compressed once, here, with the standard library's gzip (deterministic for the same input);
	// the layer is then only read back.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(layerTar); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := gz.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created},
			CreatedBy: "hack/image: debi binary, CA certificates, nonroot user",
			Comment:   "built without Docker by go-containerregistry",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: o.Created}
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Config.User = fmt.Sprintf("%d:%d", nonrootUID, nonrootUID)
	cf.Config.Entrypoint = []string{"/debi"}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = Labels(o)
	return mutate.ConfigFile(img, cf)
}

// Labels are the image's OCI annotations-as-labels.
func Labels(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.title":       "debi",
		"org.opencontainers.image.description": "Predictive Kubernetes autoscaler on Prometheus and Alertmanager: exporter, webhook and backtest in one static binary.",
	}
}

// rootfs is the layer's tar: directories, /debi, the CA bundle, /etc/passwd and /etc/group, all
// owned by root except nonroot's home, every mtime = created, in a fixed order.
func rootfs(created time.Time, debi, ca []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%[1]s:x:%[2]d:%[2]d:%[1]s:/home/%[1]s:/sbin/nologin\n", nonrootName, nonrootUID)
	group := fmt.Sprintf("root:x:0:\n%[1]s:x:%[2]d:\n", nonrootName, nonrootUID)
	type entry struct {
		name     string
		mode     int64
		uid      int
		dir      bool
		contents []byte
	}
	entries := []entry{
		{name: "debi", mode: 0o755, contents: debi},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, contents: []byte(group)},
		{name: "etc/passwd", mode: 0o644, contents: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, contents: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/" + nonrootName + "/", mode: 0o700, uid: nonrootUID, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: created,
			Format:  tar.FormatUSTAR,
		}
		if e.uid == nonrootUID {
			h.Uname, h.Gname = nonrootName, nonrootName
		} else {
			h.Uname, h.Gname = "root", "root"
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func describe(img v1.Image) (PlatformInfo, error) {
	var info PlatformInfo
	var err error
	if info.Digest, err = img.Digest(); err != nil {
		return info, err
	}
	layers, err := img.Layers()
	if err != nil {
		return info, err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return info, err
		}
		info.LayerBytes += n
	}
	m, err := img.Manifest()
	if err != nil {
		return info, err
	}
	info.ConfigSize = m.Config.Size
	return info, nil
}
