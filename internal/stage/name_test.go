package stage

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/names.golden.json (renames released VectorDeployments: never for existing entries)")

type goldenName struct {
	Stage  string `json:"stage"`
	UID    string `json:"uid"`
	Vector string `json:"vector"`
	Name   string `json:"name"`
}

// TestVectorDeploymentNamesAreGolden pins the names of the VectorDeployments Stages create: a changed name would
// make an upgraded operator create every landscape's VectorDeployment a second time.
func TestVectorDeploymentNamesAreGolden(t *testing.T) {
	path := filepath.Join("testdata", "names.golden.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var golden []goldenName
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden) < 8 {
		t.Fatalf("%s has %d entries, want at least 8", path, len(golden))
	}
	for i, g := range golden {
		name, err := VectorDeploymentName(g.Stage, types.UID(g.UID), g.Vector)
		if err != nil {
			t.Fatalf("VectorDeploymentName(%q, %q, %q): %v", g.Stage, g.UID, g.Vector, err)
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("VectorDeploymentName(%q, %q, %q) = %q, not a DNS-1123 label: %v", g.Stage, g.UID, g.Vector, name, errs)
		}
		if *updateGolden {
			golden[i].Name = name
			continue
		}
		if name != g.Name {
			t.Errorf("VectorDeploymentName(%q, %q, %q) = %q, golden %q", g.Stage, g.UID, g.Vector, name, g.Name)
		}
	}
	if *updateGolden {
		out, _ := json.MarshalIndent(golden, "", "  ")
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVectorDeploymentNameSeparatesStagesAndVectors(t *testing.T) {
	base, _ := VectorDeploymentName("shop", "uid-1", "http://r:5000//acme.org/vectors/shop:1.0.0")
	for _, other := range [][3]string{
		{"shop", "uid-2", "http://r:5000//acme.org/vectors/shop:1.0.0"},
		{"shop", "uid-1", "http://r:5000//acme.org/vectors/shop:1.0.1"},
		{"shop", "uid-1", "http://s:5000//acme.org/vectors/shop:1.0.0"},
	} {
		name, err := VectorDeploymentName(other[0], types.UID(other[1]), other[2])
		if err != nil {
			t.Fatal(err)
		}
		if name == base {
			t.Errorf("%v is named %q like the base", other, name)
		}
	}
	long, err := VectorDeploymentName(strings.Repeat("s", 250), "u", "r//acme.org/v:"+strings.Repeat("1", 100))
	if err != nil || len(long) > 63 {
		t.Errorf("long inputs: %q (%d), %v", long, len(long), err)
	}
	if _, err := VectorDeploymentName("shop", "u", ""); err == nil {
		t.Error("an empty vector was named")
	}
}
