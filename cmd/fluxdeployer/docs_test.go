package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// The docs are part of the product: these tests fail when a page falls behind the code, naming what is missing and
// where it belongs. They read the code's own lists (constants, the cobra command, the metrics registry), so an
// addition to the code needs no addition here.

// TestDocsNameEveryReason: every condition and event reason, of the API and of the registry reader, has its row in
// docs/troubleshooting.md.
func TestDocsNameEveryReason(t *testing.T) {
	page := readDoc(t, "docs/troubleshooting.md")
	reasons := constants(t, "api/v1alpha1", func(name, _ string) bool { return strings.HasSuffix(name, "Reason") })
	for name, value := range constants(t, "internal/ocm", func(_, typ string) bool { return typ == "Reason" }) {
		reasons[name] = value
	}
	if len(reasons) < 40 {
		t.Fatalf("found only %d reason constants: has their naming changed (api/v1alpha1: *Reason; internal/ocm: type Reason)?", len(reasons))
	}
	for name, value := range missingRows(page, reasons) {
		t.Errorf("docs/troubleshooting.md does not name reason `%s` (%s): add a row to the table of its section "+
			"(reason | retried or stalls | meaning | what to do)", value, name)
	}
}

// TestDocsNameEveryRunFlag: every flag of `fluxdeployer run`, as the command registers it, is in
// docs/configuration.md.
func TestDocsNameEveryRunFlag(t *testing.T) {
	page := readDoc(t, "docs/configuration.md")
	cmd := newRunCommand()
	n := 0
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		n++
		// A deprecated alias is described with the flag it stands for; every other flag has its own row.
		documented := strings.Contains(page, "| `--"+f.Name+"` |") || f.Deprecated != "" && strings.Contains(page, "`--"+f.Name+"`")
		if !documented {
			t.Errorf("docs/configuration.md does not document flag --%s of `fluxdeployer run` (default %q: %s): add a row "+
				"to a table under \"Flags of `fluxdeployer run`\"", f.Name, f.DefValue, f.Usage)
		}
	})
	if n < 30 {
		t.Fatalf("`fluxdeployer run` has only %d flags", n)
	}
}

// TestDocsNameEveryConfigMapKey: every key the Flux deployer reads from its ConfigMap has its row in
// docs/configuration.md.
func TestDocsNameEveryConfigMapKey(t *testing.T) {
	page := readDoc(t, "docs/configuration.md")
	keys := constants(t, "internal/fluxdeployer/config.go", func(name, _ string) bool { return strings.HasSuffix(name, "Key") })
	if len(keys) < 10 {
		t.Fatalf("found only %d ConfigMap key constants (*Key) in internal/fluxdeployer/config.go", len(keys))
	}
	for name, value := range missingRows(page, keys) {
		t.Errorf("docs/configuration.md does not document ConfigMap key %q (%s): add a row to the table under "+
			"\"The Flux deployer's ConfigMap\" (key | default | meaning)", value, name)
	}
}

// TestDocsNameEveryClusterCommand: every command that talks to a cluster (it takes --kubeconfig) has its item in
// docs/operating.md's section "The CLI against a cluster", which names each of its flags but the cluster flags the
// section describes once and the registry flags docs/vectors.md describes.
func TestDocsNameEveryClusterCommand(t *testing.T) {
	page := readDoc(t, "docs/operating.md")
	const heading = "## The CLI against a cluster\n"
	start := strings.Index(page, heading)
	if start < 0 {
		t.Fatalf("docs/operating.md has no section %q", strings.TrimSpace(heading))
	}
	section := page[start+len(heading):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	shared := pflag.NewFlagSet("shared", pflag.ContinueOnError)
	new(clusterFlags).bind(shared)
	new(registryFlags).bind(shared)
	n := 0
	for _, cmd := range newRootCommand().Commands() {
		if cmd.Flags().Lookup("kubeconfig") == nil {
			continue
		}
		n++
		if !strings.Contains(section, "`fluxdeployer "+cmd.Name()+" ") {
			t.Errorf("docs/operating.md, \"The CLI against a cluster\", has no item for `fluxdeployer %s` (%s): add one", cmd.Name(), cmd.Short)
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if shared.Lookup(f.Name) == nil && f.Name != "output" && !strings.Contains(section, "--"+f.Name) {
				t.Errorf("docs/operating.md, \"The CLI against a cluster\", does not name --%s of `fluxdeployer %s` (%s)", f.Name, cmd.Name(), f.Usage)
			}
		})
	}
	if n < 6 {
		t.Fatalf("only %d commands take --kubeconfig", n)
	}
}

// missingRows yields, in name order, the constants whose value is no table cell of the page (in backquotes).
func missingRows(page string, constants map[string]string) func(func(name, value string) bool) {
	return func(yield func(name, value string) bool) {
		for _, name := range slices.Sorted(maps.Keys(constants)) {
			if !strings.Contains(page, "| `"+constants[name]+"` |") && !yield(name, constants[name]) {
				return
			}
		}
	}
}

// TestDocsNameEveryMetric: every metric the binary serves is in docs/operating.md, the operator's and Flux's by
// name, the libraries' by name or by a documented `prefix_*`. The metrics are read from the registry the binary
// serves, after registering Flux's as the binary does.
func TestDocsNameEveryMetric(t *testing.T) {
	page := readDoc(t, "docs/operating.md")
	reconcileMetrics()
	names := registeredMetrics(t)
	var prefixes []string
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9_]*)_\\*`").FindAllStringSubmatch(page, -1) {
		prefixes = append(prefixes, m[1]+"_")
	}
	own := 0
	for _, name := range names {
		if strings.HasPrefix(name, "fluxdeployer_") || strings.HasPrefix(name, "gotk_") {
			own++
			if !strings.Contains(page, "| `"+name+"`") {
				t.Errorf("docs/operating.md does not name metric %s: add a row to the first table under \"Metrics\" "+
					"(metric | labels | meaning)", name)
			}
			continue
		}
		if !strings.Contains(page, "`"+name+"`") && !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			t.Errorf("docs/operating.md names neither metric %s nor its family: add `%s*` to the libraries' table under \"Metrics\"",
				name, name[:strings.Index(name, "_")+1])
		}
	}
	if own < 10 {
		t.Fatalf("only %d fluxdeployer_ and gotk_ metrics registered: %v", own, names)
	}
}

// TestDocsCiteNothingOutsideTheRepository: the README and every Markdown page link only to files of the
// repository that exist (and to headings that exist), and cite no issue, finding or ADR numbers, which a reader of
// the repository cannot look up.
func TestDocsCiteNothingOutsideTheRepository(t *testing.T) {
	root := testenv.RepoRoot()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan := regexp.MustCompile("`[^`]*`")
	parentPath := regexp.MustCompile(`(?:^|[\s(` + "`" + `'"])((?:\.\./)+[\w./-]*)`)
	for _, file := range markdownFiles(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			at := fmt.Sprintf("%s:%d", file, i+1)
			if m := historyCitation.FindString(line); m != "" {
				t.Errorf("%s cites %q: say what it means instead (readers cannot look up issue, finding or ADR numbers)", at, m)
			}
			for _, m := range parentPath.FindAllStringSubmatch(line, -1) {
				if outside(root, file, m[1]) {
					t.Errorf("%s names %s, outside the repository: describe it, or bring it in", at, m[1])
				}
			}
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				if err := checkLink(root, file, m[1]); err != nil {
					t.Errorf("%s: link %s: %v", at, m[1], err)
				}
			}
		}
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// constants returns the string constants of a package directory (or one file) whose name and declared type the
// filter accepts, by name, read from the source so that a new constant is found without a list to keep.
func constants(t *testing.T, path string, keep func(name, typ string) bool) map[string]string {
	t.Helper()
	full := filepath.Join(testenv.RepoRoot(), path)
	files, err := filepath.Glob(filepath.Join(full, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".go") {
		files = []string{full}
	}
	found := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !keep(name.Name, typ) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						value, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						found[name.Name] = value
					}
				}
			}
		}
	}
	return found
}

// registeredMetrics lists the names of every metric in controller-runtime's registry, which --metrics-addr serves,
// whether or not it has a series yet.
func registeredMetrics(t *testing.T) []string {
	t.Helper()
	collector, ok := metrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatalf("controller-runtime's registry is a %T, which cannot describe its metrics", metrics.Registry)
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		collector.Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// markdownFiles are the repository's Markdown files, relative to root, outside .git and test data.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "README.md") {
		t.Fatalf("no README.md among %v", files)
	}
	return files
}

// outside reports whether a relative path written in file leaves the repository.
func outside(root, file, rel string) bool {
	target := filepath.Join(root, filepath.Dir(file), rel)
	r, err := filepath.Rel(root, target)
	return err != nil || r == ".." || strings.HasPrefix(r, "../")
}

// checkLink checks a Markdown link: a web address passes, a relative one must name an existing file of the
// repository and, with a #fragment into a Markdown file, one of its headings.
func checkLink(root, file, target string) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, fragment, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		if outside(root, file, path) {
			return fmt.Errorf("outside the repository")
		}
		dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
		if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
			return fmt.Errorf("no such file %s", dest)
		}
	}
	if fragment == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(root, dest))
	if err != nil {
		return err
	}
	if !slices.Contains(headingAnchors(string(raw)), fragment) {
		return fmt.Errorf("%s has no heading #%s", dest, fragment)
	}
	return nil
}

// headingAnchors are the anchors GitHub gives a page's headings: lower case, punctuation but - and _ dropped,
// spaces as -.
func headingAnchors(page string) []string {
	var anchors []string
	inCode := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		anchors = append(anchors, b.String())
	}
	return anchors
}

// historyCitation matches what a reader of the repository cannot look up: issue, finding and ADR numbers.
var historyCitation = regexp.MustCompile(`(?i)\b(issues? #?\d+|findings? \d+|ADR-\d+)`)

// TestCodeCommentsCiteNoHistory: the comments of every Go file of the repository state requirements, not history:
// no issue, finding or ADR numbers, which a reader cannot look up.
func TestCodeCommentsCiteNoHistory(t *testing.T) {
	root := testenv.RepoRoot()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		// This file names the patterns.
		if !strings.HasSuffix(path, ".go") || d.Name() == "docs_test.go" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			_, comment, ok := strings.Cut(line, "//")
			if m := historyCitation.FindString(comment); ok && m != "" {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d cites %q: say what it means instead", filepath.ToSlash(rel), i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
