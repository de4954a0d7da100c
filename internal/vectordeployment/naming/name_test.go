package naming

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/names.golden.json (renames released ArtifactDeployments: never for existing entries)")

type goldenName struct {
	Component      string `json:"component"`
	Version        string `json:"version"`
	UID            string `json:"uid,omitempty"`
	CollisionCount int32  `json:"collisionCount,omitempty"`
	Name           string `json:"name"`
	Hash           string `json:"hash"`
}

// TestArtifactDeploymentNameGolden pins the names of released inputs. A failure here means a change would rename
// ArtifactDeployments, Flux objects, Helm releases and workloads that already run: revert it.
func TestArtifactDeploymentNameGolden(t *testing.T) {
	path := filepath.Join("testdata", "names.golden.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var golden []goldenName
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden) < 30 {
		t.Fatalf("%s has %d vectors, want at least 30", path, len(golden))
	}
	for i, g := range golden {
		name, h, err := ArtifactDeploymentName(g.Component, g.Version, g.UID, g.CollisionCount)
		if err != nil {
			t.Errorf("%+v: %v", g, err)
			continue
		}
		if *updateGolden {
			golden[i].Name, golden[i].Hash = name, h
			continue
		}
		if name != g.Name || h != g.Hash {
			t.Errorf("ArtifactDeploymentName(%q, %q, %q, %d) = (%q, %q), golden (%q, %q).\n"+
				"Names are a persistence format: released names must never change, or deployed workloads are renamed.",
				g.Component, g.Version, g.UID, g.CollisionCount, name, h, g.Name, g.Hash)
		}
	}
	if *updateGolden {
		out, _ := json.MarshalIndent(golden, "", "  ")
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArtifactDeploymentNameShape(t *testing.T) {
	long := strings.Repeat("very-long-component-name", 4)
	for _, tc := range []struct {
		component, version string
		wantPrefix         string // the name without its hash
	}{
		{"acme.org/x/app", "1.2.3", "app-1-2-3-"},
		{"app", "v1.0.0+build.7", "app-v1-0-0-build-7-"},
		{"acme.org/x/" + long, "1.2.3", "very-long-component-namevery-long-co-1-2-3-"}, // basename shortened
		{"acme.org/x/app", strings.Repeat("1", 42), strings.Repeat("1", 42) + "-"},     // basename dropped
		{"acme.org/x/app", strings.Repeat("1", 43), ""},                                // too long a version: the hash alone
		{"acme.org/x/ÄÖÜ", "1.0", "1-0-"},                                              // nothing of the basename survives
		{"acme.org/x/app", "+++", "app-"},                                              // nothing of the version survives
	} {
		name, h, err := ArtifactDeploymentName(tc.component, tc.version, "", 0)
		if err != nil {
			t.Fatalf("(%q, %q): %v", tc.component, tc.version, err)
		}
		if name != tc.wantPrefix+h || len(h) != HashLength || len(name) > MaxNameLength {
			t.Errorf("(%q, %q) = %q (hash %q), want %q+hash, at most %d characters", tc.component, tc.version, name, h, tc.wantPrefix, MaxNameLength)
		}
	}
}

func TestArtifactDeploymentNameSaltsChangeTheHash(t *testing.T) {
	base, _, _ := ArtifactDeploymentName("acme.org/x/app", "1.2.3", "", 0)
	seen := map[string]string{base: "unsalted"}
	for _, salt := range []struct {
		uid   string
		count int32
	}{{"uid-1", 0}, {"uid-2", 0}, {"", 1}, {"", 2}, {"uid-1", 1}, {"uid-11", 0}, {"uid-1", 11}} {
		name, _, err := ArtifactDeploymentName("acme.org/x/app", "1.2.3", salt.uid, salt.count)
		if err != nil {
			t.Fatal(err)
		}
		key := salt.uid + "/" + strconv.Itoa(int(salt.count))
		if other, dup := seen[name]; dup {
			t.Errorf("salt %s gives %s, the same name as %s", key, name, other)
		}
		seen[name] = key
	}
}

func TestArtifactDeploymentNameRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		component, version string
		count              int32
	}{{"", "1.0.0", 0}, {"  \t", "1.0.0", 0}, {"acme.org/x", "", 0}, {"acme.org/x", " \n", 0}, {"acme.org/x", "1.0", -1}} {
		if name, _, err := ArtifactDeploymentName(tc.component, tc.version, "", tc.count); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("(%q, %q, %d) = %q, %v; want ErrInvalidInput", tc.component, tc.version, tc.count, name, err)
		}
	}
}

// decodeHashInput inverts appendHashInput. That it can, for every tuple, is what makes the encoding unambiguous.
func decodeHashInput(t *testing.T, in string) (fields map[byte]string) {
	fields = map[byte]string{}
	for in != "" {
		tag := in[0]
		colon := strings.IndexByte(in, ':')
		n, err := strconv.Atoi(in[1:colon])
		if err != nil || colon+1+n > len(in) {
			t.Fatalf("undecodable hash input %q", in)
		}
		if _, dup := fields[tag]; dup {
			t.Fatalf("field %c twice in %q", tag, in)
		}
		fields[tag] = in[colon+1 : colon+1+n]
		in = in[colon+1+n:]
	}
	return fields
}

func FuzzArtifactDeploymentName(f *testing.F) {
	f.Add("acme.org/x/app", "1.2.3", "", int32(0))
	f.Add("acme.org/x/app1", ".2.3", "c3f1", int32(5))
	f.Add("ÄÖÜ/ß", "1.0.0+build.1", "", int32(1))
	f.Fuzz(func(t *testing.T, component, version, uid string, count int32) {
		name, h, err := ArtifactDeploymentName(component, version, uid, count)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 || len(name) > MaxNameLength {
			t.Fatalf("%q is not a DNS-1123 label of at most %d characters: %v", name, MaxNameLength, errs)
		}
		if len(h) != HashLength || !strings.HasSuffix(name, h) {
			t.Fatalf("%q does not end with its %d-character hash %q", name, HashLength, h)
		}
		if again, _, _ := ArtifactDeploymentName(component, version, uid, count); again != name {
			t.Fatalf("not deterministic: %q then %q", name, again)
		}
		got := decodeHashInput(t, string(appendHashInput(nil, component, version, uid, count)))
		want := map[byte]string{'c': component, 'v': version}
		if uid != "" {
			want['u'] = uid
		}
		if count > 0 {
			want['n'] = strconv.Itoa(int(count))
		}
		if len(got) != len(want) {
			t.Fatalf("hash input decodes to %q, want %q", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("hash input decodes to %q, want %q", got, want)
			}
		}
	})
}

func BenchmarkArtifactDeploymentName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = ArtifactDeploymentName("acme.org/artifacts/shop-frontend", "1.24.3+build.17", "", 0)
	}
}

func BenchmarkArtifactDeploymentNameSalted(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = ArtifactDeploymentName("acme.org/artifacts/shop-frontend", "1.24.3+build.17", "0b3f6c2e-8d4a-4a8e-9d5e-6f1e2d3c4b5a", 3)
	}
}
