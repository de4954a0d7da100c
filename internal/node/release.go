package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Release is a released version of the operator: its version and the commit that released it.
type Release struct {
	Version string
	Commit  string
	// Created is the commit's time as `make image` stamps it into the image (UTC, RFC 3339).
	Created string
}

// changelogEntry is a released version's heading in CHANGELOG.md, "## [0.1.0] - 2026-12-01"; [Unreleased] does not
// match.
var changelogEntry = regexp.MustCompile(`^## \[(\d+\.\d+\.\d+)\]`)

// PreviousRelease finds, in the git repository at root, the release the tree at root is upgraded from: the newest
// version with an entry in root's CHANGELOG.md whose entry a commit before HEAD added. Its release commit is the
// first commit that added the heading "## [X.Y.Z]" (git log -S): releasing moves [Unreleased] under the new
// version's heading, sets VERSION and tags that commit (docs/release.md). A version whose entry HEAD itself adds
// is the release HEAD makes, not a previous one; a version no commit added yet is this tree's, uncommitted.
// Rule-based rather than tag-based, so that a clone without tags (CI's shallow fetches) finds it too.
func PreviousRelease(ctx context.Context, root string) (Release, error) {
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return Release{}, err
	}
	var versions []*semver.Version
	for line := range strings.Lines(string(changelog)) {
		if m := changelogEntry.FindStringSubmatch(line); m != nil {
			v, err := semver.StrictNewVersion(m[1])
			if err != nil {
				return Release{}, fmt.Errorf("CHANGELOG.md heading %q: %w", strings.TrimSpace(line), err)
			}
			versions = append(versions, v)
		}
	}
	slices.SortFunc(versions, func(a, b *semver.Version) int { return b.Compare(a) })
	head, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return Release{}, err
	}
	for _, v := range versions {
		out, err := git(ctx, root, "log", "--reverse", "--format=%H", "-S", "## ["+v.Original()+"]", "HEAD", "--", "CHANGELOG.md")
		if err != nil {
			return Release{}, err
		}
		commit, _, _ := strings.Cut(out, "\n")
		if commit == "" || commit == head {
			continue
		}
		// The Makefile's CREATED.
		created, err := git(ctx, root, "-c", "log.showSignature=false", "show", "-s", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", commit)
		if err != nil {
			return Release{}, err
		}
		return Release{Version: v.Original(), Commit: commit, Created: created}, nil
	}
	return Release{}, fmt.Errorf("no release before HEAD in %s: no commit before HEAD added any of the versions of "+
		"CHANGELOG.md %v (a shallow clone lacks them: fetch the history)", root, versions)
}

// ExtractTree writes the files of commit in the git repository at root into dir, as `git archive` exports them
// (no .git: nothing in dir can move the repository's HEAD or worktrees), and downloads the modules its go.mod
// names from the module proxy, so that its builds run as in a clone of that commit.
func ExtractTree(ctx context.Context, root, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	archive.Dir = root
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var archiveErr, untarErr strings.Builder
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := errors.Join(archive.Run(), untar.Wait()); err != nil {
		return fmt.Errorf("git archive %s | tar -x -C %s: %w\n%s%s", commit, dir, err, archiveErr.String(), untarErr.String())
	}
	download := exec.CommandContext(ctx, "go", "mod", "download")
	download.Dir = dir
	if out, err := download.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod download in the tree of %s: %w\n%s", commit, err, out)
	}
	return nil
}

// git runs git in the repository at root and returns its output without the trailing newline.
func git(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimRight(string(out), "\n"), nil
}
