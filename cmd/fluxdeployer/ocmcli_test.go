package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// ocmCLIFixture is a vector as the real OCM CLI wrote it: its component constructor (shown in docs/vectors.md) and
// the CTF `ocm add componentversions --create --file ctf component-constructor.yaml` made of it.
var ocmCLIFixture = filepath.Join("internal", "ocm", "testdata", "ocmcli")

// docsUID is the VectorDeployment UID docs/vectors.md previews the fixture with.
const docsUID = "3f0c1b2a-0000-4000-8000-000000000001"

type constructor struct {
	Components []struct {
		Name      string `json:"name"`
		Version   string `json:"version"`
		Resources []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Input struct {
				JSON map[string]any `json:"json"`
			} `json:"input"`
			Access map[string]any `json:"access"`
		} `json:"resources"`
		ComponentReferences []struct {
			ComponentName string `json:"componentName"`
			Version       string `json:"version"`
		} `json:"componentReferences"`
	} `json:"components"`
}

// TestOCMCLIVector: the vector docs/vectors.md tells a platform team to write, as the OCM CLI published it, is read
// by `vector inspect` and `render` as the constructor says, and the doc shows that very constructor and the names
// inspect gives. A change of the CLI's output format, of the reader, or of the doc fails here.
func TestOCMCLIVector(t *testing.T) {
	root := testenv.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, ocmCLIFixture, "component-constructor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := readDoc(t, "docs/vectors.md")
	if !strings.Contains(doc, "```yaml\n"+string(raw)+"```") {
		t.Errorf("docs/vectors.md does not show %s verbatim in a yaml block: copy it into \"A component constructor\"",
			filepath.Join(ocmCLIFixture, "component-constructor.yaml"))
	}
	var want constructor
	if err := yaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	vector := want.Components[len(want.Components)-1]
	ref := "ctf::" + filepath.Join(root, ocmCLIFixture, "ctf") + "//" + vector.Name + ":" + vector.Version

	out, err := runCLI(t, "vector", "inspect", ref, "--uid", docsUID, "-o", "json")
	if err != nil {
		t.Fatalf("vector inspect: %v\n%s", err, out)
	}
	var got inspectOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("vector inspect output %q: %v", out, err)
	}
	if len(got.Artifacts) != len(vector.ComponentReferences) {
		t.Fatalf("inspect found %d artifacts, the vector references %d: %s", len(got.Artifacts), len(vector.ComponentReferences), out)
	}
	names := map[string]bool{}
	for i, a := range got.Artifacts {
		c := want.Components[i]
		if a.Component != c.Name || a.Version != c.Version {
			t.Errorf("artifact %d is %s:%s, the constructor's %s:%s", i, a.Component, a.Version, c.Name, c.Version)
			continue
		}
		manifest, deployed := c.Resources[0], c.Resources[1]
		if a.Type != manifest.Input.JSON["type"] || a.AllowReuse != manifest.Input.JSON["allowReuse"] {
			t.Errorf("%s: type %q, reuse %v; the constructor's manifest says %v", a.Component, a.Type, a.AllowReuse, manifest.Input.JSON)
		}
		if len(a.Resources) != 1 || a.Resources[0].Name != deployed.Name || a.Resources[0].Type != deployed.Type ||
			a.Resources[0].Access["imageReference"] != deployed.Access["imageReference"] {
			t.Errorf("%s: resources %+v, the constructor's %s %s at %v", a.Component, a.Resources, deployed.Name, deployed.Type, deployed.Access)
		}
		if !strings.Contains(doc, a.Name) {
			t.Errorf("docs/vectors.md does not show ArtifactDeployment name %s of %s: update the inspect output under \"Publishing with the OCM CLI\"", a.Name, a.Component)
		}
		names[a.Name] = true
	}

	out, err = runCLI(t, "render", ref, "-n", "shop", "--uid", docsUID, "-o", "json")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("render output %q: %v", out, err)
	}
	kinds := map[string]int{}
	for _, item := range list.Items {
		kinds[item.Kind]++
		if !names[item.Metadata.Name] {
			t.Errorf("render made %s %s, named after no artifact inspect shows", item.Kind, item.Metadata.Name)
		}
	}
	// Two charts (HelmRepository + HelmRelease in the default helmSource) and one bundle (OCIRepository + Kustomization).
	wantKinds := map[string]int{"ArtifactDeployment": 3, "HelmRepository": 2, "HelmRelease": 2, "OCIRepository": 1, "Kustomization": 1}
	for kind, n := range wantKinds {
		if kinds[kind] != n {
			t.Errorf("render made %d %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
}
