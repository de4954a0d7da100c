package controlplane

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// module is the fluxdeployer module's path, as its go.mod declares it.
const module = "github.com/fluxdeployer/fluxdeployer"

// RepoRoot is the root of the fluxdeployer module, so that tests of any package and the demo (run from the module
// root) agree. A plain build knows its source files' paths; the project's builds are -trimpath (one Go build
// cache entry per package for the host, the image and the release), so it is otherwise the nearest directory,
// from the working directory up, whose go.mod declares the module: tests run in their package's directory, the
// demo and the tools in the module root. Failing both, the working directory, whose missing files then name it.
func RepoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..")
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	if root, ok := moduleRootAbove(wd); ok {
		return root
	}
	return wd
}

// moduleRootAbove is the nearest directory, from dir up, whose go.mod declares the fluxdeployer module; the tools
// modules under hack/tools are passed over.
func moduleRootAbove(dir string) (string, bool) {
	for ; ; dir = filepath.Dir(dir) {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, true
		}
		if dir == filepath.Dir(dir) {
			return "", false
		}
	}
}

// declaresModule tells whether the go.mod file at path declares the fluxdeployer module.
func declaresModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if name, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(name), `"`) == module
		}
	}
	return false
}
