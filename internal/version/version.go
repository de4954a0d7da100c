// Package version holds what a build of fluxdeployer reports about itself. The Makefile, the Dockerfile and
// hack/image set Version and Commit with -ldflags "-X ..."; a plain `go build` leaves the defaults, except that
// Commit falls back to the VCS revision the Go toolchain stamps into binaries built inside a git checkout.
package version

import (
	"runtime"
	"runtime/debug"
)

// Set at build time: go build -ldflags "-X github.com/fluxdeployer/fluxdeployer/internal/version.Version=0.1.0 ...".
var (
	// Version is the release version, from the repository's VERSION file.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = ""
)

// Info is what `fluxdeployer version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// Get returns the version, the commit ("unknown" when neither -ldflags nor the toolchain recorded one) and the
// Go version the binary was built with.
func Get() Info {
	commit := Commit
	if commit == "" {
		commit = vcsRevision()
	}
	return Info{Version: Version, Commit: commit, GoVersion: runtime.Version()}
}

func vcsRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, modified := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			if modified {
				rev += "-dirty"
			}
			return rev
		}
	}
	return "unknown"
}
