package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

func execute(args ...string) (stdout string, err error) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), err
}

func TestNamePrintsTheConstructedName(t *testing.T) {
	want, wantHash, err := naming.ArtifactDeploymentName("acme.org/x/app", "1.2.3", "uid-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	out, err := execute("name", "--component", "acme.org/x/app", "--version", "1.2.3", "--uid", "uid-1", "--collision-count", "2")
	if err != nil || out != want+"\n" {
		t.Fatalf("name = %q, %v; want %q", out, err, want)
	}
	out, err = execute("name", "--component", "acme.org/x/app", "--version", "1.2.3", "--uid", "uid-1", "--collision-count", "2", "-o", "json")
	var got struct{ Name, Hash string }
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Name != want || got.Hash != wantHash {
		t.Fatalf("name -o json = %q, %v; want name %q hash %q", out, err, want, wantHash)
	}
	out, err = execute("name", "--component", "acme.org/x/app", "--version", "1.2.3", "--uid", "uid-1", "--collision-count", "2", "-o", "yaml")
	if wantYAML := "hash: " + wantHash + "\nname: " + want + "\n"; err != nil || out != wantYAML {
		t.Fatalf("name -o yaml = %q, %v; want %q", out, err, wantYAML)
	}
}

func TestNameRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"name", "--component", " ", "--version", "1"},
		{"name", "--component", "a", "--version", ""},
		{"name", "--version", "1"},
		{"name", "--component", "a", "--version", "1", "--collision-count", "-1"},
		{"name", "--component", "a", "--version", "1", "-o", "xml"},
	} {
		if out, err := execute(args...); err == nil {
			t.Errorf("%v succeeded with %q", args, out)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error is not one line: %q", args, err)
		}
	}
}
