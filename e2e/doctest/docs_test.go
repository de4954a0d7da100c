// Package doctest_test runs the shell blocks of README.md and docs/ as a user pastes them, in order, against
// the embedded control plane with the real Flux controllers and fluxdeployer running, and a registry named as the
// documents name it (see netns_test.go). A block that cannot run here says why above its fence
// (internal/doctest); every other block runs, and a transcript's output is compared with the document's.
package doctest_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/doctest"
)

// pages are the user documents whose shell blocks run, in the order a user reads them: each starts from a
// cluster without the namespaces the one before created.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(controlplane.RepoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(docs)
	return append([]string{filepath.Join(controlplane.RepoRoot(), "README.md")}, docs...)
}

// TestEveryShellBlockRunsOrSaysWhy reads every user document's shell blocks: a doctest comment that is malformed,
// or that marks no shell block, fails here, without a cluster, and so does a block for a real node on a page that
// TestNodeDocs does not run.
func TestEveryShellBlockRunsOrSaysWhy(t *testing.T) {
	var run, onNode, skipped int
	for _, page := range pages(t) {
		rel := relative(t, page)
		for _, b := range readBlocks(t, page) {
			switch {
			case b.Skip != "":
				skipped++
			case b.Node:
				onNode++
				if !slices.Contains(nodePages, rel) {
					t.Errorf("%s:%d runs on a real node, but TestNodeDocs runs only %v", b.File, b.Line, nodePages)
				}
			default:
				run++
			}
		}
	}
	if run < 10 {
		t.Fatalf("only %d shell blocks run: have the documents' fences changed (```sh)?", run)
	}
	t.Logf("%d shell blocks run, %d more on a real node, %d say why they cannot", run, onNode, skipped)
}

// TestDocs runs every shell block of the user documents that neither says why it cannot run nor needs a real
// node, on the embedded control plane.
func TestDocs(t *testing.T) {
	if !inside() {
		runInside(t, buildTools(t), buildRelease(t), loopback)
		return
	}
	ctx := context.Background()
	landscape := startLandscape(ctx, t)
	for _, page := range pages(t) {
		landscape.runPageIfAny(ctx, t, relative(t, page))
	}
}

// runPageIfAny runs the page's shell blocks as a subtest, unless none of them runs where the landscape is.
func (l *landscape) runPageIfAny(ctx context.Context, t *testing.T, page string) {
	blocks := readBlocks(t, filepath.Join(controlplane.RepoRoot(), page))
	if !slices.ContainsFunc(blocks, l.runs) {
		t.Logf("%s: no shell block to run here (%d say why they cannot or need a real node)", page, len(blocks))
		return
	}
	t.Run(page, func(t *testing.T) { l.runPage(ctx, t, page, blocks) })
}

// runs tells whether a block runs where the landscape is: every block that does not say why it cannot, except,
// on the embedded control plane, those that need a real node.
func (l *landscape) runs(b doctest.Block) bool { return b.Skip == "" && (l.onNode || !b.Node) }

func relative(t *testing.T, page string) string {
	t.Helper()
	rel, err := filepath.Rel(controlplane.RepoRoot(), page)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func readBlocks(t *testing.T, page string) []doctest.Block {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(controlplane.RepoRoot(), page)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := doctest.Parse(rel, string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// runPage runs the page's blocks in one shell, in a fresh copy of the repository (the release's files for the
// page that installs a release), so that what one block sets
// (a variable, a background process, the kubeconfig's namespace) holds for the next, as for a user. A script
// block stops the page at its first failing command; a transcript's commands must succeed too, and print what
// the page shows.
func (l *landscape) runPage(ctx context.Context, t *testing.T, page string, blocks []doctest.Block) {
	work := l.workdir(t)
	if page == filepath.Join("docs", "release.md") {
		// "In the directory of the release's files".
		work = os.Getenv(releaseEnv)
	}
	out := t.TempDir()
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	type expectation struct {
		file string
		at   string
		want []string
	}
	var expected []expectation
	for _, b := range blocks {
		if !l.runs(b) {
			t.Logf("%s:%d not run: %s", b.File, b.Line, cmp.Or(b.Skip, "it needs a real node (TestNodeDocs runs it)"))
			continue
		}
		for i, s := range b.Steps() {
			at := fmt.Sprintf("%s:%d", b.File, b.Line)
			if b.Transcript() {
				at = fmt.Sprintf("%s:%d, command %d (%s)", b.File, b.Line, i+1, firstLine(s.Command))
			}
			fmt.Fprintf(&script, "echo %s >\"$DOCTEST_OUT/at\"\n", shellQuote(at))
			if s.Output == nil {
				script.WriteString(s.Command + "\n")
				continue
			}
			file := filepath.Join(out, fmt.Sprintf("step-%d", len(expected)))
			fmt.Fprintf(&script, "{\n%s\n} >%s 2>&1\n", s.Command, shellQuote(file))
			expected = append(expected, expectation{file: file, at: at, want: s.Output})
		}
	}
	scriptFile := filepath.Join(out, "page.sh")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	namespaces := l.namespaces(ctx, t)
	maps.Copy(namespaces, l.keep)
	t.Cleanup(func() { l.deleteNamespacesBut(ctx, t, namespaces) })
	pageCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(pageCtx, "bash", scriptFile)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "DOCTEST_OUT="+out, "HOME="+t.TempDir(), "GOMODCACHE="+goEnv(t, "GOMODCACHE"), "GOCACHE="+goEnv(t, "GOCACHE"),
		"PATH="+l.tools+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+l.kubeconfig(t))
	// The page's background processes (a registry it serves, say) end with it: the shell leads a process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		at, _ := os.ReadFile(filepath.Join(out, "at"))
		printed := log.String()
		for _, e := range expected {
			if e.at == strings.TrimSpace(string(at)) {
				step, _ := os.ReadFile(e.file)
				printed = string(step)
			}
		}
		t.Fatalf("%s failed: %v\n%s", strings.TrimSpace(string(at)), err, tail(printed, 60))
	}
	for _, e := range expected {
		got, err := os.ReadFile(e.file)
		if err != nil {
			t.Fatal(err)
		}
		if err := doctest.Match(e.want, string(got)); err != nil {
			t.Errorf("%s: %v", e.at, err)
		}
	}
}

// goEnv is a setting of the go command: a page's HOME is new, its Go caches stay the machine's, since no module
// can be downloaded inside the test's namespaces.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// workdir copies the repository's files (tracked, and new ones not ignored) into a new git repository with the
// operator's binary in bin/, as `make build` leaves it: the documents' commands write (a CTF, a kubeconfig) where a
// user's clone would take it.
func (l *landscape) workdir(t *testing.T) string {
	t.Helper()
	root := controlplane.RepoRoot()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	work := t.TempDir()
	for name := range strings.SplitSeq(strings.TrimRight(string(list), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, name), filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A clone is a git repository: make stamps the commit and its time into the binary and the image.
	commit := exec.Command("sh", "-c", "git init -q && git add -A && git commit -q -m checkout")
	commit.Dir = work
	commit.Env = append(os.Environ(), "GIT_AUTHOR_NAME=doctest", "GIT_AUTHOR_EMAIL=doctest@registry.example",
		"GIT_COMMITTER_NAME=doctest", "GIT_COMMITTER_EMAIL=doctest@registry.example")
	if out, err := commit.CombinedOutput(); err != nil {
		t.Fatalf("committing the copy: %v\n%s", err, out)
	}
	if err := copyFile(filepath.Join(l.tools, "fluxdeployer"), filepath.Join(work, "bin", "fluxdeployer")); err != nil {
		t.Fatal(err)
	}
	return work
}

func copyFile(from, to string) error {
	info, err := os.Lstat(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted in the working tree, not yet in the index
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	outFile, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(outFile, in); err != nil {
		_ = outFile.Close()
		return err
	}
	return outFile.Close()
}
