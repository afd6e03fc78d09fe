// Package version says which build of the receiver is running: the version
// stamped into the binary when it was built, or, when nothing was stamped,
// what the Go toolchain recorded of the source it was built from.
//
// `make build` and the Dockerfile stamp it from git:
//
//	go build -ldflags "-X github.com/paywebhooks/receiver/internal/version.Version=$(git describe --tags --always --dirty)" ./cmd/server
//
// `server version` prints it, the start-up log line carries it, and
// /metrics exposes it as paywebhooks_build_info{version,goversion} 1.
package version

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is the version the binary was built as, set by the linker (-X);
// empty when the build stamped nothing. Read it through Get, which falls
// back to the build information.
var Version string

// Unknown is the version of a binary that was neither stamped nor built
// from a version-controlled checkout or a module version (go test's
// binaries, a build from a copied tree).
const Unknown = "unknown"

// Info identifies a build.
type Info struct {
	// Version is the stamped version; else the VCS revision Go recorded
	// (its first 12 hex digits, "-dirty" when the tree had changes); else
	// the module's version (go install …@v1.2.3); else Unknown.
	Version string `json:"version"`
	// GoVersion is the Go toolchain the binary was built with.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
	// Revision, RevisionTime and Modified are the vcs.revision, vcs.time
	// and vcs.modified Go recorded, when it did.
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revision_time,omitempty"`
	Modified     bool   `json:"modified,omitempty"`
}

// Get returns the running binary's Info.
func Get() Info { return get() }

var get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return build(Version, bi)
})

// build derives an Info from a stamped version and the build information
// (nil when the binary carries none).
func build(stamped string, bi *debug.BuildInfo) Info {
	info := Info{Version: stamped, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	var module string
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		module = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.RevisionTime = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	switch {
	case info.Version != "":
	case info.Revision != "":
		info.Version = info.Revision[:min(12, len(info.Revision))]
		if info.Modified {
			info.Version += "-dirty"
		}
	case module != "" && module != "(devel)":
		info.Version = module
	default:
		info.Version = Unknown
	}
	return info
}
