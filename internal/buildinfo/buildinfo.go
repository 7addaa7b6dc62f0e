// Package buildinfo stamps prometheus/common/version from the Go toolchain's build information
// where the linker flags did not: `go build ./cmd/debi`, `go install …@v0.1.0` and `go run` then
// print a version, a revision and a date instead of empty strings. Values set with
// `-ldflags -X` (make build, make image, the Dockerfile) are never overwritten.
//
// Import it for its side effect, from package main only:
//
//	import _ "github.com/debi-scaler/debi/internal/buildinfo"
package buildinfo

import (
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/common/version"
)

// dateLayout is the layout of the Makefile's BuildDate (date -u +%Y%m%d-%H:%M:%S).
const dateLayout = "20060102-15:04:05"

func init() { fill(debug.ReadBuildInfo) }

// fill sets the empty fields of version from read's build information:
//
//	Version   main module version ("v0.1.0", or Go's pseudo-version "v0.0.0-20261201…-33a4badd9c77");
//	          "(devel)" when the toolchain knows none; "-dirty" appended when vcs.modified is true
//	Revision  vcs.revision, "-dirty" appended when vcs.modified is true
//	BuildDate vcs.time (the commit time), in the Makefile's layout
//	Branch    left alone: the build information does not record it
func fill(read func() (*debug.BuildInfo, bool)) {
	bi, ok := read()
	if !ok || bi == nil {
		return
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	dirty := s["vcs.modified"] == "true"
	if version.Version == "" {
		v := bi.Main.Version
		if v == "" {
			v = "(devel)"
		}
		// Go ≥ 1.24 already marks a modified tree "+dirty" in the pseudo-version.
		if dirty && !strings.Contains(v, "dirty") {
			v += "-dirty"
		}
		version.Version = v
	}
	if version.Revision == "" && s["vcs.revision"] != "" {
		r := s["vcs.revision"]
		if dirty {
			r += "-dirty"
		}
		version.Revision = r
	}
	if version.BuildDate == "" && s["vcs.time"] != "" {
		if t, err := time.Parse(time.RFC3339, s["vcs.time"]); err == nil {
			version.BuildDate = t.UTC().Format(dateLayout)
		} else {
			version.BuildDate = s["vcs.time"]
		}
	}
}
