package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuild(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-01T20:50:28Z"}, {Key: "vcs.modified", Value: modified},
		}}
	}
	const rev = "153b1d7a9c1e0f2b3c4d5e6f708192a3b4c5d6e7"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    Info
	}{
		{"Stamped", "v0.4.0-3-g153b1d7-dirty", vcs(rev, "true"), Info{Version: "v0.4.0-3-g153b1d7-dirty", GoVersion: "go1.27.3",
			Platform: platform, Revision: rev, RevisionTime: "2026-12-01T20:50:28Z", Modified: true}},
		{"Revision", "", vcs(rev, "false"), Info{Version: "153b1d7a9c1e", GoVersion: "go1.27.3",
			Platform: platform, Revision: rev, RevisionTime: "2026-12-01T20:50:28Z"}},
		{"RevisionModified", "", vcs(rev, "true"), Info{Version: "153b1d7a9c1e-dirty", GoVersion: "go1.27.3",
			Platform: platform, Revision: rev, RevisionTime: "2026-12-01T20:50:28Z", Modified: true}},
		{"ModuleVersion", "", &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Version: "v0.4.0"}},
			Info{Version: "v0.4.0", GoVersion: "go1.27.3", Platform: platform}},
		{"Devel", "", &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Version: "(devel)"}},
			Info{Version: Unknown, GoVersion: "go1.27.3", Platform: platform}},
		{"NoBuildInfo", "", nil, Info{Version: Unknown, GoVersion: runtime.Version(), Platform: platform}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, build(c.stamped, c.bi)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
