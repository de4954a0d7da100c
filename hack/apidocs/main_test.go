package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPagesAreCurrent: docs/api holds exactly the pages the CRDs give, so a changed Go type comment or marker fails
// the tests until `make api-docs` has been run (make verify-generated checks the same through git).
func TestPagesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := render(filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join(root, "docs", "api", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range committed {
		if _, ok := pages[filepath.Base(file)]; !ok {
			t.Errorf("docs/api/%s belongs to no CRD: delete it", filepath.Base(file))
		}
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, "docs", "api", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/api/%s is stale or missing: run 'make api-docs' and commit it", name)
		}
	}
}

// TestFieldFacts: a field's line says what the API server enforces on it.
func TestFieldFacts(t *testing.T) {
	pages, err := render(filepath.Join("..", "..", "config", "crd", "bases"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	page := string(pages["vectordeployment.md"])
	for _, want := range []string{
		"### `.spec.vector`\n\nstring, required, at least 1 character, at most 1024 characters.",
		"- `self.vector == oldSelf.vector`: VectorDeployment spec is immutable",
		"### `.status.conditions`\n\narray of object, optional, list type `map` by `type`.",
		"### `.status.resultingArtifactDeployments[key].name`",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("vectordeployment.md lacks %q", want)
		}
	}
	if pages["artifactdeployment.md"] == nil {
		t.Error("no page for ArtifactDeployment")
	}
}
