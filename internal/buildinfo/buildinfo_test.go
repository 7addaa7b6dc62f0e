package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/prometheus/common/version"
)

func TestFill(t *testing.T) {
	type stamp struct{ Version, Revision, BuildDate, Branch string }
	const rev = "33a4badd9c77f89bcb5f92926f97c015cfd58d78"
	info := func(v string, kv ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/debi-scaler/debi", Version: v}}
			for i := 0; i+1 < len(kv); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
			}
			return bi, true
		}
	}
	for _, tc := range []struct {
		name   string
		ldflag stamp // what -ldflags -X set
		read   func() (*debug.BuildInfo, bool)
		want   stamp
	}{{
		name: "go install at a tag",
		read: info("v0.1.0", "vcs.revision", rev, "vcs.time", "2026-12-01T08:33:55Z", "vcs.modified", "false"),
		// vcs.time 2026-12-01T08:33:55Z in the Makefile's date -u +%Y%m%d-%H:%M:%S.
		want: stamp{Version: "v0.1.0", Revision: rev, BuildDate: "20261201-08:33:55"},
	}, {
		name: "go build in a modified clone (Go's pseudo-version already says +dirty)",
		read: info("v0.0.0-20261201083355-33a4badd9c77+dirty", "vcs.revision", rev, "vcs.time", "2026-12-01T08:33:55Z", "vcs.modified", "true"),
		want: stamp{Version: "v0.0.0-20261201083355-33a4badd9c77+dirty", Revision: rev + "-dirty", BuildDate: "20261201-08:33:55"},
	}, {
		name: "go run: no VCS stamping",
		read: info("(devel)"),
		want: stamp{Version: "(devel)"},
	}, {
		name: "devel version of a modified tree",
		read: info("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
		want: stamp{Version: "(devel)-dirty", Revision: rev + "-dirty"},
	}, {
		name: "vcs.time in an unexpected layout is kept as is",
		read: info("", "vcs.time", "yesterday"),
		want: stamp{Version: "(devel)", BuildDate: "yesterday"},
	}, {
		name:   "ldflags win",
		ldflag: stamp{Version: "0.1.0", Revision: "abc", BuildDate: "20260101-00:00:00", Branch: "main"},
		read:   info("v9.9.9", "vcs.revision", rev, "vcs.time", "2026-12-01T08:33:55Z", "vcs.modified", "true"),
		want:   stamp{Version: "0.1.0", Revision: "abc", BuildDate: "20260101-00:00:00", Branch: "main"},
	}, {
		name: "no build information",
		read: func() (*debug.BuildInfo, bool) { return nil, false },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			saved := stamp{version.Version, version.Revision, version.BuildDate, version.Branch}
			t.Cleanup(func() {
				version.Version, version.Revision, version.BuildDate, version.Branch = saved.Version, saved.Revision, saved.BuildDate, saved.Branch
			})
			version.Version, version.Revision, version.BuildDate, version.Branch = tc.ldflag.Version, tc.ldflag.Revision, tc.ldflag.BuildDate, tc.ldflag.Branch
			fill(tc.read)
			if got := (stamp{version.Version, version.Revision, version.BuildDate, version.Branch}); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestInit: the test binary itself was built by the go tool, so init has at least a version.
func TestInit(t *testing.T) {
	if version.Version == "" {
		t.Error("version.Version is empty after init")
	}
}
