package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviousRelease follows a repository through two releases: the previous release is the newest CHANGELOG
// entry a commit before HEAD added, found at the commit that first added it, with the commit's time; on the commit
// that makes a release, the one before; before any release, none.
func TestPreviousRelease(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.org", "GIT_COMMITTER_DATE=2026-12-01T13:15:29Z", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := func(changelog ...string) string {
		t.Helper()
		text := "# Changelog\n\n## [Unreleased]\n\n" + strings.Join(changelog, "\n\n")
		if err := os.WriteFile(filepath.Join(root, "CHANGELOG.md"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		run("add", "CHANGELOG.md")
		run("commit", "-q", "-m", "change")
		return run("rev-parse", "HEAD")
	}
	want := func(version, commit string) {
		t.Helper()
		rel, err := PreviousRelease(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if rel != (Release{Version: version, Commit: commit, Created: "2026-12-01T13:15:29Z"}) {
			t.Errorf("PreviousRelease %+v, want %s at %s", rel, version, commit)
		}
	}
	run("init", "-q")

	commit("- a change")
	if rel, err := PreviousRelease(ctx, root); err == nil {
		t.Errorf("PreviousRelease %+v before any release, want an error", rel)
	}
	first := commit("## [0.1.0] - 2026-12-01\n\n- a change")
	if rel, err := PreviousRelease(ctx, root); err == nil {
		t.Errorf("PreviousRelease %+v on the first release's commit, want an error: no release before it", rel)
	}
	commit("- another", "## [0.1.0] - 2026-12-01\n\n- a change")
	want("0.1.0", first)
	commit("- another", "## [0.1.0] - 2026-12-01\n\n- a change, reworded")
	want("0.1.0", first)
	// The commit that releases 0.10.0 is upgraded from 0.1.0, the commits after it from 0.10.0.
	second := commit("## [0.10.0] - 2027-01-01\n\n- another", "## [0.1.0] - 2026-12-01\n\n- a change")
	want("0.1.0", first)
	commit("- a third", "## [0.10.0] - 2027-01-01\n\n- another", "## [0.1.0] - 2026-12-01\n\n- a change")
	want("0.10.0", second)
}
