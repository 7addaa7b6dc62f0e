// Command image builds debi's container image without Docker: the static binary (CGO_ENABLED=0,
// -trimpath, the Makefile's ldflags) for each platform, one layer on an empty base with the CA
// bundle of the build machine and a non-root user 65532, written as an OCI image layout and a
// docker-loadable tarball. Every timestamp is SOURCE_DATE_EPOCH (default: the commit time of
// HEAD), so two builds of the same commit give the same digest. Run it through hack/image.sh or
// `make image`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
)

func main() { os.Exit(run()) }

func run() int {
	var o Options
	var platforms string
	flag.StringVar(&o.Root, "root", "../..", "debi's module root (where go build runs)")
	flag.StringVar(&o.Package, "package", "./cmd/debi", "the main package to build, relative to --root")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	flag.StringVar(&o.LDFlags, "ldflags", "", "linker flags (the Makefile's LDFLAGS); BuildDate is set from SOURCE_DATE_EPOCH")
	flag.StringVar(&o.Version, "version", "", "the version the ldflags stamp: the tag and the version label")
	flag.StringVar(&o.Revision, "revision", "", "the git commit: the revision label")
	flag.StringVar(&o.Source, "source", "https://github.com/debi-scaler/debi", "the source label")
	flag.StringVar(&o.Repo, "repository", "ghcr.io/debi-scaler/debi", "the repository of the tarball's tag")
	flag.StringVar(&o.CACerts, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the image (Debian's ca-certificates)")
	flag.StringVar(&o.Layout, "layout", "../../bin/image", "the OCI image layout directory to write")
	flag.StringVar(&o.Tarball, "tarball", "../../bin/debi-image.tar", "the docker-loadable tarball to write (empty: none)")
	flag.Parse()
	if o.Version == "" {
		fmt.Fprintln(os.Stderr, "image: --version is required")
		return 2
	}
	o.Platforms = strings.Split(platforms, ",")
	o.Stderr = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if o.Created, err = SourceDateEpoch(ctx, o.Root); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		return 1
	}
	res, err := Build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		return 1
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	fmt.Printf("image %s (created %s)\n", o.Version, o.Created.Format("2006-01-02T15:04:05Z"))
	fmt.Printf("  index   %s  (OCI layout %s)\n", res.Index, abs(o.Layout))
	keys := make([]string, 0, len(res.Images))
	for p := range res.Images {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		i := res.Images[p]
		fmt.Printf("  %-12s %s  %.1f MiB (layer %d B + config %d B)\n", p, i.Digest,
			float64(i.LayerBytes+i.ConfigSize)/(1<<20), i.LayerBytes, i.ConfigSize)
	}
	if o.Tarball != "" {
		fmt.Printf("  tarball %s: %s (%s)\n", abs(o.Tarball), res.TarRef, res.TarOf)
	}
	return 0
}
