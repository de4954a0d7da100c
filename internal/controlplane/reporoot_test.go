package controlplane

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModuleRootAbove(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(root, "checkout")
	write(filepath.Join(repo, "go.mod"), "// comment\nmodule github.com/fluxdeployer/fluxdeployer\n\ngo 1.26\n")
	write(filepath.Join(repo, "hack", "tools", "prometheus", "go.mod"), "module github.com/fluxdeployer/fluxdeployer/hack/tools/prometheus\n")
	write(filepath.Join(root, "other", "go.mod"), "module example.com/other\n")
	for _, tc := range []struct {
		from   string
		want   string
		wantOK bool
	}{
		{from: repo, want: repo, wantOK: true},
		{from: filepath.Join(repo, "internal", "node"), want: repo, wantOK: true},
		{from: filepath.Join(repo, "hack", "tools", "helm"), want: repo, wantOK: true},
		{from: filepath.Join(root, "other", "pkg"), wantOK: false},
		{from: root, wantOK: false},
	} {
		got, ok := moduleRootAbove(tc.from)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("moduleRootAbove(%s) = %q, %v; want %q, %v", tc.from, got, ok, tc.want, tc.wantOK)
		}
	}
}

// The tests run in their package's directory, -trimpath or not: either way the module root is two levels up.
func TestRepoRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RepoRoot(), filepath.Join(wd, "..", ".."); filepath.Clean(got) != filepath.Clean(want) {
		t.Errorf("RepoRoot() = %s, want %s", got, want)
	}
}
