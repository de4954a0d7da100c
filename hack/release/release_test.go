package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The release's architectures and the ELF machine of each one's binary.
var releasedMachines = map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}

// TestRelease checks every artifact of a release that `make release` wrote into $RELEASE_DIST (make test-release
// runs both): the checksums, the image index in the layout and the tarball, the binary of each architecture,
// install.yaml, the SBOMs, and the cosign signature, which must verify with cosign.pub and fail for another key,
// a changed payload and a changed index.
func TestRelease(t *testing.T) {
	dist := os.Getenv("RELEASE_DIST")
	if dist == "" {
		t.Skip("RELEASE_DIST names no release directory; make test-release runs make release and then this test")
	}
	version, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	releaseTag := "v" + strings.TrimSpace(string(version))
	tag, err := name.NewTag(os.Getenv("RELEASE_IMG"))
	if err != nil {
		t.Fatalf("RELEASE_IMG: %v", err)
	}
	if tag.TagStr() != releaseTag {
		t.Errorf("the release is tagged %s, want %s (v and the VERSION file's version)", tag.TagStr(), releaseTag)
	}

	index, desc, err := releasedIndex(filepath.Join(dist, layoutDir), tag)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("released %s@%s", tag, desc.Digest)

	t.Run("checksums", func(t *testing.T) { checkChecksums(t, dist) })
	var deps map[string]string
	t.Run("image index", func(t *testing.T) { deps = checkIndex(t, index) })
	t.Run("tarball", func(t *testing.T) { checkArchive(t, dist) })
	t.Run("install.yaml", func(t *testing.T) { checkInstaller(t, dist, tag.String()+"@"+desc.Digest.String()) })
	t.Run("SBOM", func(t *testing.T) { checkSBOMs(t, dist, tag, index, deps) })
	t.Run("signature", func(t *testing.T) { checkSignature(t, dist, tag, index, desc) })
}

// checkChecksums: checksums.txt lists every file of the release but itself, each with its SHA-256, and
// sha256sum -c accepts it.
func checkChecksums(t *testing.T, dist string) {
	body, err := os.ReadFile(filepath.Join(dist, checksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Errorf("checksums.txt: line %q is not `<sha256>  <file>`", sc.Text())
			continue
		}
		listed[m[2]] = true
		if sum, err := sha256File(filepath.Join(dist, m[2])); err != nil || sum != m[1] {
			t.Errorf("%s: sha256 %s (%v), checksums.txt says %s", m[2], sum, err, m[1])
		}
	}
	all, err := filesUnder(dist, ".")
	if err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(f string) bool { return f == checksumsFile })
	if got := slices.Sorted(maps.Keys(listed)); !slices.Equal(got, all) {
		t.Errorf("checksums.txt lists %q\nthe release holds %q", got, all)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--check", "--strict", "--quiet", checksumsFile)
		cmd.Dir = dist
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
}

// checkIndex: the index holds exactly one image per released platform, whose config says that platform and
// whose binary is an ELF of that architecture; it returns the Go modules the binaries are built from.
func checkIndex(t *testing.T, index v1.ImageIndex) map[string]string {
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	ps, err := platforms(index)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(maps.Keys(releasedMachines)); !slices.Equal(slices.Sorted(slices.Values(ps)), want) {
		t.Fatalf("index platforms %q, want %q", ps, want)
	}
	var deps map[string]string
	for _, d := range m.Manifests {
		platform := d.Platform.OS + "/" + d.Platform.Architecture
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.OS + "/" + cf.Architecture; got != platform {
			t.Errorf("%s: the config of %s says %s", platform, d.Digest, got)
		}
		binary := layerFile(t, img, strings.TrimPrefix(cf.Config.Entrypoint[0], "/"))
		f, err := elf.NewFile(bytes.NewReader(binary))
		if err != nil {
			t.Fatalf("%s: the entrypoint %s is no ELF file: %v", platform, cf.Config.Entrypoint[0], err)
		}
		if f.Machine != releasedMachines[platform] || f.Class != elf.ELFCLASS64 || f.OSABI != elf.ELFOSABI_NONE {
			t.Errorf("%s: the binary is %s %s %s, want %s ELFCLASS64", platform, f.Machine, f.Class, f.OSABI, releasedMachines[platform])
		}
		info, err := buildinfo.Read(bytes.NewReader(binary))
		if err != nil {
			t.Fatal(err)
		}
		modules := map[string]string{}
		for _, dep := range info.Deps {
			modules[dep.Path] = dep.Version
		}
		if deps != nil && !maps.Equal(deps, modules) {
			t.Errorf("%s: the binary's modules differ from the other architecture's", platform)
		}
		deps = modules
		t.Logf("%s: %s, %s binary of %d bytes, %d modules", platform, d.Digest, f.Machine, len(binary), len(modules))
	}
	if deps["sigs.k8s.io/controller-runtime"] == "" {
		t.Errorf("the binaries name no sigs.k8s.io/controller-runtime module: %v", deps)
	}
	return deps
}

// layerFile is the file at path in the image's only layer.
func layerFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := tarFiles(t, rc)
	if files[path] == nil {
		t.Fatalf("no %s in the layer", path)
	}
	return files[path]
}

func tarFiles(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkArchive: the tarball holds the layout, file for file, every blob matching its digest, so it names the
// same index.
func checkArchive(t *testing.T, dist string) {
	f, err := os.Open(filepath.Join(dist, archiveFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	archived := tarFiles(t, f)
	files, err := filesUnder(filepath.Join(dist, layoutDir), ".")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(archived)); !slices.Equal(got, files) {
		t.Fatalf("the tarball holds %q, the layout %q", got, files)
	}
	for _, file := range files {
		body, err := os.ReadFile(filepath.Join(dist, layoutDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(archived[file], body) {
			t.Errorf("%s differs in the tarball", file)
		}
		if hexDigest, ok := strings.CutPrefix(file, "blobs/sha256/"); ok {
			if sum := sha256.Sum256(archived[file]); hex.EncodeToString(sum[:]) != hexDigest {
				t.Errorf("blob %s has digest sha256:%x", file, sum)
			}
		}
	}
}

// checkInstaller: install.yaml is Kubernetes objects, the CRDs among them, and the manager runs the released
// index by tag and digest.
func checkInstaller(t *testing.T, dist, pinned string) {
	f, err := os.Open(filepath.Join(dist, installFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	kinds := map[string]int{}
	var images []string
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		kinds[obj.GetKind()]++
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range containers {
			images = append(images, c.(map[string]any)["image"].(string))
		}
	}
	if kinds["CustomResourceDefinition"] != 3 || kinds["Deployment"] != 1 {
		t.Errorf("install.yaml holds %v; want the 3 CRDs and the Deployment", kinds)
	}
	if !slices.Equal(images, []string{pinned}) {
		t.Errorf("the Deployment runs %q, want [%s]", images, pinned)
	}
}

// spdxDocument is what the test reads of an SPDX JSON document.
type spdxDocument struct {
	SPDXVersion string `json:"spdxVersion"`
	Name        string `json:"name"`
	Packages    []struct {
		ID                    string `json:"SPDXID"`
		Name                  string `json:"name"`
		VersionInfo           string `json:"versionInfo"`
		PrimaryPackagePurpose string `json:"primaryPackagePurpose"`
	} `json:"packages"`
	Files []struct {
		ID        string         `json:"SPDXID"`
		FileName  string         `json:"fileName"`
		Checksums []spdxChecksum `json:"checksums"`
	} `json:"files"`
	Relationships []struct {
		A    string `json:"spdxElementId"`
		Type string `json:"relationshipType"`
		B    string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

// checkSBOMs: each architecture's SBOM is SPDX JSON describing its image, by the released repository and the
// image's digest, which contains every file of the image (the binary's SHA256 that of the image's) and the
// binary, which depends on every Go module it is built from at its version and on the Go standard library of
// its toolchain. Written again from the same index, the SBOMs are the same bytes.
func checkSBOMs(t *testing.T, dist string, tag name.Tag, index v1.ImageIndex, deps map[string]string) {
	repo := tag.Context()
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if _, err := writeSBOMs(again, tag, index); err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		file := sbomPrefix + d.Platform.OS + "-" + d.Platform.Architecture + sbomSuffix
		body, err := os.ReadFile(filepath.Join(dist, file))
		if err != nil {
			t.Fatal(err)
		}
		if rewritten, err := os.ReadFile(filepath.Join(again, file)); err != nil || !bytes.Equal(rewritten, body) {
			t.Errorf("%s written again from the same index differs (%v)", file, err)
		}
		var doc spdxDocument
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if doc.SPDXVersion != "SPDX-2.3" {
			t.Errorf("%s: spdxVersion %q", file, doc.SPDXVersion)
		}
		packages, ids := map[string]string{}, map[string]string{}
		var images []string
		for _, p := range doc.Packages {
			packages[p.Name], ids[p.ID] = p.VersionInfo, p.Name
			if p.PrimaryPackagePurpose == "CONTAINER" {
				images = append(images, p.Name+"@"+p.VersionInfo)
			}
		}
		if want := repo.Name() + "@" + d.Digest.String(); !slices.Equal(images, []string{want}) {
			t.Errorf("%s describes the images %q, want [%s]", file, images, want)
		}
		dependsOn, contains := map[string]bool{}, map[string]bool{}
		for _, r := range doc.Relationships {
			switch {
			case r.A == "SPDXRef-DOCUMENT" && r.Type == "DESCRIBES" && ids[r.B] != repo.Name():
				t.Errorf("%s describes %s, not the image", file, r.B)
			case r.Type == "DEPENDS_ON":
				dependsOn[ids[r.B]] = true
			case r.Type == "CONTAINS":
				contains[r.B] = true
			}
		}
		for path, version := range deps {
			if packages[path] != version || !dependsOn[path] {
				t.Errorf("%s: module %s is %q (a dependency: %t), the binary's is %s", file, path, packages[path], dependsOn[path], version)
			}
		}
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		binary := layerFile(t, img, "fluxdeployer")
		info, err := buildinfo.Read(bytes.NewReader(binary))
		if err != nil {
			t.Fatal(err)
		}
		if packages["stdlib"] != info.GoVersion || !dependsOn["stdlib"] {
			t.Errorf("%s: stdlib %q (a dependency: %t), the binary's Go is %s", file, packages["stdlib"], dependsOn["stdlib"], info.GoVersion)
		}
		sum := sha256.Sum256(binary)
		var listed bool
		for _, f := range doc.Files {
			if !contains[f.ID] {
				t.Errorf("%s: the image does not contain the file %s", file, f.FileName)
			}
			if f.FileName == "/fluxdeployer" {
				listed = slices.Contains(f.Checksums, spdxChecksum{Algorithm: "SHA256", Value: hex.EncodeToString(sum[:])})
			}
		}
		if !listed {
			t.Errorf("%s lists no /fluxdeployer with the binary's SHA256 %x", file, sum)
		}
		t.Logf("%s: %s, %d packages, %d files", file, doc.SPDXVersion, len(doc.Packages), len(doc.Files))
	}
}

// checkSignature runs the pinned cosign as a user would: `cosign verify --local-image` on the layout with
// cosign.pub, and on the index loaded into a registry; and it must fail for another key, for a signature payload
// that names another digest, and for another index in the layout.
func checkSignature(t *testing.T, dist string, tag name.Tag, index v1.ImageIndex, desc v1.Descriptor) {
	ctx := context.Background()
	cosign, err := cosignBinary(ctx, "../..")
	if err != nil {
		t.Fatal(err)
	}
	// No trusted root from the Sigstore TUF repository (verification with a key needs none): its mirror is a
	// closed loopback port, and no root is cached.
	env := []string{"TUF_ROOT=" + t.TempDir(), "TUF_MIRROR=http://127.0.0.1:1", "COSIGN_PASSWORD="}
	pub := filepath.Join(dist, publicKeyFile)
	verify := func(key, dir string) (string, error) {
		return output(ctx, "", env, cosign, "verify", "--key", key, "--insecure-ignore-tlog=true", "--local-image", dir)
	}

	out, err := verify(pub, filepath.Join(dist, layoutDir))
	if err != nil {
		t.Fatalf("cosign verify: %v", err)
	}
	checkVerified(t, out, tag, desc.Digest)

	// The documented way into a registry: cosign load pushes the index and its signature, cosign verify checks it.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	pushed := strings.TrimPrefix(srv.URL, "http://") + "/" + tag.RepositoryStr()
	if _, err := output(ctx, "", env, cosign, "load", "--allow-http-registry", "--dir", filepath.Join(dist, layoutDir), pushed+":"+tag.TagStr()); err != nil {
		t.Fatal(err)
	}
	out, err = output(ctx, "", env, cosign, "verify", "--key", pub, "--insecure-ignore-tlog=true", "--allow-http-registry", pushed+"@"+desc.Digest.String())
	if err != nil {
		t.Fatalf("cosign verify of the loaded image: %v", err)
	}
	checkVerified(t, out, tag, desc.Digest)

	keys := t.TempDir()
	if _, err := output(ctx, keys, env, cosign, "generate-key-pair", "--output-key-prefix", "other"); err != nil {
		t.Fatal(err)
	}
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	other := m.Manifests[0]
	for _, red := range []struct {
		name, key string
		tamper    func(t *testing.T, dir string)
	}{
		{name: "another key", key: filepath.Join(keys, "other.pub"), tamper: func(*testing.T, string) {}},
		{name: "a payload naming another digest", key: pub, tamper: func(t *testing.T, dir string) {
			replaceSignaturePayload(t, dir, func(payload []byte) []byte {
				return bytes.ReplaceAll(payload, []byte(desc.Digest.String()), []byte(other.Digest.String()))
			})
		}},
		{name: "another index", key: pub, tamper: func(t *testing.T, dir string) {
			img, err := index.Image(other.Digest)
			if err != nil {
				t.Fatal(err)
			}
			forged := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
				mutate.IndexAddendum{Add: img, Descriptor: other})
			p, err := layout.FromPath(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.ReplaceIndex(forged, match.Digests(desc.Digest),
				layout.WithAnnotations(map[string]string{cosignKindAnnotation: cosignKindIndex})); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(red.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), layoutDir)
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(dist, layoutDir))); err != nil {
				t.Fatal(err)
			}
			red.tamper(t, dir)
			if out, err := verify(red.key, dir); err == nil {
				t.Fatalf("cosign verify accepted it:\n%s", out)
			} else {
				t.Logf("cosign verify failed as it must: %v", err)
			}
		})
	}
}

// checkVerified: cosign's output is the verified payload, naming the released repository and the index digest.
func checkVerified(t *testing.T, out string, tag name.Tag, digest v1.Hash) {
	t.Helper()
	var payloads []struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				DockerManifestDigest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	if err := json.Unmarshal([]byte(out), &payloads); err != nil || len(payloads) != 1 {
		t.Fatalf("cosign verify printed %d payloads (%v):\n%s", len(payloads), err, out)
	}
	c := payloads[0].Critical
	if c.Identity.DockerReference != tag.Context().Name() || c.Image.DockerManifestDigest != digest.String() {
		t.Errorf("the signature is of %s@%s, want %s@%s", c.Identity.DockerReference, c.Image.DockerManifestDigest, tag.Context().Name(), digest)
	}
}

// replaceSignaturePayload rewrites the payload of the layout's signature (keeping the signature itself) and the
// manifest and index entry that name it.
func replaceSignaturePayload(t *testing.T, dir string, change func([]byte) []byte) {
	t.Helper()
	p, _, im, err := layoutEntries(dir)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(im.Manifests, func(d v1.Descriptor) bool { return d.Annotations[cosignKindAnnotation] == cosignKindSignatures })
	if i < 0 {
		t.Fatal("the layout has no signatures image")
	}
	sigsDesc := im.Manifests[i]
	manifest, err := p.Bytes(sigsDesc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	old, err := p.Bytes(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	payload := change(old)
	if bytes.Equal(payload, old) {
		t.Fatal("the change left the payload as it was")
	}
	m.Layers[0].Digest, m.Layers[0].Size = writeBlob(t, p, payload)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	oldDigest := sigsDesc.Digest
	sigsDesc.Digest, sigsDesc.Size = writeBlob(t, p, raw)
	if err := p.RemoveDescriptors(match.Digests(oldDigest)); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendDescriptor(sigsDesc); err != nil {
		t.Fatal(err)
	}
}

func writeBlob(t *testing.T, p layout.Path, body []byte) (v1.Hash, int64) {
	t.Helper()
	h, _, err := v1.SHA256(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteBlob(h, io.NopCloser(bytes.NewReader(body))); err != nil {
		t.Fatal(err)
	}
	return h, int64(len(body))
}

// platforms are the index's platforms, os/arch, in its order.
func platforms(index v1.ImageIndex) ([]string, error) {
	m, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	var ps []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("index entry %s names no platform", d.Digest)
		}
		ps = append(ps, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	return ps, nil
}
