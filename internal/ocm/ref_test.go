package ocm

import (
	"errors"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/ocireftest"
)

func TestParseRef(t *testing.T) {
	const dig = "sha256:5b0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f1270"
	tests := []struct {
		in      string
		want    Ref
		printed string // "" means the input with the guessed type prepended
	}{
		{in: "github.com/open-component-model/ocm//ocm.software/ocmcli:0.23.0",
			want: Ref{Type: TypeOCI, BaseURL: "github.com", SubPath: "open-component-model/ocm", Component: "ocm.software/ocmcli", Version: "0.23.0"}},
		{in: "oci::http://github.com/open-component-model/ocm/component-descriptors/ocm.software/ocmcli:0.23.0",
			want:    Ref{Type: "oci", BaseURL: "http://github.com", SubPath: "open-component-model/ocm", Prefix: "component-descriptors", Component: "ocm.software/ocmcli", Version: "0.23.0"},
			printed: "oci::http://github.com/open-component-model/ocm/component-descriptors/ocm.software/ocmcli:0.23.0"},
		{in: "oci::github.com:8080/open-component-model/ocm/component-descriptors/ocm.software/ocmcli:0.23.0",
			want:    Ref{Type: "oci", BaseURL: "github.com:8080", SubPath: "open-component-model/ocm", Prefix: "component-descriptors", Component: "ocm.software/ocmcli", Version: "0.23.0"},
			printed: "oci::github.com:8080/open-component-model/ocm/component-descriptors/ocm.software/ocmcli:0.23.0"},
		{in: "localhost:5000/open-component-model/ocm/component-descriptors/ocm.software/test:1.2.3",
			want: Ref{Type: TypeOCI, BaseURL: "localhost:5000", SubPath: "open-component-model/ocm", Prefix: "component-descriptors", Component: "ocm.software/test", Version: "1.2.3"}},
		{in: "github.com/open-component-model/ocm//ocm.software/ocmcli:0.23.0@" + dig,
			want: Ref{Type: TypeOCI, BaseURL: "github.com", SubPath: "open-component-model/ocm", Component: "ocm.software/ocmcli", Version: "0.23.0", Digest: dig}},
		{in: "ctf::./my-path//ocm.software/ocmcli",
			want:    Ref{Type: "ctf", FilePath: "./my-path", Component: "ocm.software/ocmcli"},
			printed: "ctf::./my-path//ocm.software/ocmcli"},
		{in: "http://localhost:5000//konfidence.io/sample/drift/service1:edge",
			want: Ref{Type: TypeOCI, BaseURL: "http://localhost:5000", Component: "konfidence.io/sample/drift/service1", Version: "edge"}},
		{in: "https://registry.konfidence.cloud/ocm/vector//common.konfidence.cloud/example/vector:0.0.1",
			want: Ref{Type: TypeOCI, BaseURL: "https://registry.konfidence.cloud", SubPath: "ocm/vector", Component: "common.konfidence.cloud/example/vector", Version: "0.0.1"}},
		{in: "/abs/ctf//acme.org/vector:1.0.0+build.7",
			want: Ref{Type: TypeCTF, FilePath: "/abs/ctf", Component: "acme.org/vector", Version: "1.0.0+build.7"}},
		{in: "file:///abs/ctf//acme.org/vector:v1.2",
			want: Ref{Type: TypeCTF, FilePath: "file:///abs/ctf", Component: "acme.org/vector", Version: "v1.2"}},
		{in: "my-ctf-dir//acme.org/vector:1.0.0",
			want: Ref{Type: TypeCTF, FilePath: "my-ctf-dir", Component: "acme.org/vector", Version: "1.0.0"}},
		{in: "OCIRepository/v1::http://localhost:5000//konfidence.io/sample/vectors/drift-test:2024.6.10-153045123Z",
			want:    Ref{Type: TypeOCI, BaseURL: "http://localhost:5000", Component: "konfidence.io/sample/vectors/drift-test", Version: "2024.6.10-153045123Z"},
			printed: "OCIRepository/v1::http://localhost:5000//konfidence.io/sample/vectors/drift-test:2024.6.10-153045123Z"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("ParseRef = %+v, want %+v", got, tt.want)
			}
			want := tt.printed
			if want == "" {
				want = tt.want.Type + "::" + tt.in
			}
			if s := got.String(); s != want {
				t.Errorf("String() = %q, want %q", s, want)
			}
		})
	}
}

func TestRefHostAndScheme(t *testing.T) {
	r, err := ParseRef("http://localhost:5000/sub//acme.org/x:1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if r.Host() != "localhost:5000" || !r.PlainHTTP() || r.IsCTF() {
		t.Errorf("host %q plainHTTP %v ctf %v", r.Host(), r.PlainHTTP(), r.IsCTF())
	}
	for _, in := range []string{"localhost:5000//acme.org/x:1", "oci://localhost:5000//acme.org/x:1", "https://localhost:5000//acme.org/x:1"} {
		if r, err := ParseRef(in); err != nil || r.PlainHTTP() || r.Host() != "localhost:5000" {
			t.Errorf("%s: plainHTTP %v host %q err %v; want TLS to localhost:5000", in, r.PlainHTTP(), r.Host(), err)
		}
	}
	// Hand-built refs without Type print like Konfidence's stored VectorTemplate status, and parse back.
	hand := Ref{BaseURL: "http://localhost:5000", Component: "konfidence.io/sample/vectors/drift-test", Version: "2024.6.10-153045123Z"}
	if got := hand.String(); got != "http://localhost:5000//konfidence.io/sample/vectors/drift-test:2024.6.10-153045123Z" {
		t.Errorf("String() = %q", got)
	}
}

func TestParseRefInvalid(t *testing.T) {
	for _, in := range []string{
		"",
		"ghcr.io/org/x/acme.org/app:1.0", // missing component separator
		"ghcr.io/org//acme.org:1.0",      // component needs a path segment
		"ghcr.io/org//Acme.org/app:1.0",  // upper case
		"ghcr.io/org//konfidence-project/sample:1", // no dot in the first segment
		"ghcr.io/org//acme.org/app:1.0@sha256:abc", // digest too short
		"ghcr.io/org//acme.org/app:",               // empty version
		"ghcr.io/org//acme.org/app:1+a+b",          // not an OCI tag
		"foo::ghcr.io/org//acme.org/app:1.0",       // unknown type
		"ftp://ghcr.io//acme.org/app:1.0",          // unknown scheme
		"http://user:pw@ghcr.io//acme.org/app:1.0", // credentials do not belong in references
		"ghcr.io/Org//acme.org/app:1.0",            // subPath not an OCI path
		"//acme.org/app:1.0",                       // empty repository
	} {
		_, err := ParseRef(in)
		if !errors.Is(err, ErrReferenceInvalid) || !IsPermanent(err) {
			t.Errorf("ParseRef(%q) error = %v, want permanent ReferenceInvalid", in, err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"github.com/open-component-model/ocm//ocm.software/ocmcli:0.23.0",
		"oci::http://github.com/open-component-model/ocm/component-descriptors/ocm.software/ocmcli:0.23.0",
		"localhost:5000/a/component-descriptors/ocm.software/test:1.2.3@sha256:5b0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d",
		"ctf::./my-path//ocm.software/ocmcli",
		"file:///x//acme.org/a:v1+b",
		"http://user@h//a.bc/d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		printed := r.String()
		r2, err := ParseRef(printed)
		if err != nil {
			t.Fatalf("ParseRef(%q) ok, but its print %q fails: %v", s, printed, err)
		}
		if r2 != r {
			t.Fatalf("round trip of %q via %q: %+v != %+v", s, printed, r2, r)
		}
		if r2.String() != printed {
			t.Fatalf("print is not stable: %q != %q", r2.String(), printed)
		}
	})
}

// TestOCIReferenceGrammarAgreesWithFluxDeployer feeds the OCI references of internal/ocireftest, which the Flux
// deployer's test feeds to its image reference parser, as registry path and version of a component reference.
func TestOCIReferenceGrammarAgreesWithFluxDeployer(t *testing.T) {
	for _, c := range ocireftest.Cases {
		want := c.Valid || c.OCMDigestOnly
		in := c.ComponentReference("acme.org/app")
		if _, err := ParseRef(in); (err == nil) != want {
			t.Errorf("ParseRef(%q): %v; want valid=%v", in, err, want)
		}
	}
}

func TestIsVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"1.0.0": true, "v1.2": true, "1": true, "1.2.3+build.5": true, "1.0.0-rc.1+b": true, "2024.6.10-153045123Z": true,
		"latest": false, "edge": false, "1.2.3.4": false, "1.2.3-": false, "1.2.3-01": false, "": false,
	} {
		if isVersion(v) != want {
			t.Errorf("isVersion(%q) = %v, want %v", v, !want, want)
		}
	}
}
