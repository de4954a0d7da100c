package main

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/version"
)

// The values come from -ldflags in real builds (hack/image's test checks that on the image's binary); here they
// are set directly.
func TestVersionPrintsVersionCommitAndGoVersion(t *testing.T) {
	defer func(v, c string) { version.Version, version.Commit = v, c }(version.Version, version.Commit)
	version.Version, version.Commit = "1.2.3", "0123abcd"

	out, err := execute("version")
	if want := "version: 1.2.3\ncommit: 0123abcd\ngo: " + runtime.Version() + "\n"; err != nil || out != want {
		t.Fatalf("version = %q, %v; want %q", out, err, want)
	}
	out, err = execute("version", "-o", "json")
	var got version.Info
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got != (version.Info{Version: "1.2.3", Commit: "0123abcd", GoVersion: runtime.Version()}) {
		t.Fatalf("version -o json = %q, %v", out, err)
	}
	out, err = execute("version", "-o", "yaml")
	if want := "commit: 0123abcd\ngoVersion: " + runtime.Version() + "\nversion: 1.2.3\n"; err != nil || out != want {
		t.Fatalf("version -o yaml = %q, %v; want %q", out, err, want)
	}
	if out, err := execute("version", "-o", "xml"); err == nil {
		t.Fatalf("version -o xml succeeded with %q", out)
	}
}

// Without -ldflags the commit is the toolchain's VCS stamp, and "unknown" where there is none (as in test binaries).
func TestVersionCommitFallsBack(t *testing.T) {
	defer func(c string) { version.Commit = c }(version.Commit)
	version.Commit = ""
	if got := version.Get().Commit; got == "" {
		t.Fatal("empty commit")
	}
}
