package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha1" //nolint:gosec // G505: SPDX 2.3 requires a SHA1 checksum of every file, beside the SHA256
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// The SPDX identifiers of the two packages every SBOM has: the image and the program it runs.
const (
	imageID  common.ElementID = "Package-image"
	binaryID common.ElementID = "Package-binary"
)

// notAsserted is SPDX's NOASSERTION: the field is required and the SBOM does not say.
const notAsserted = "NOASSERTION"

// writeSBOMs writes an SPDX 2.3 JSON SBOM of each architecture's image, named as the released repository (not the
// directory it was read from), its binary at the release's version (the tag's), and returns their file names. The image is a static Go binary on a file system
// of a few files, so what it is made of is known exactly: its files, and the binary's modules and Go standard
// library as the Go toolchain recorded them in the binary. Each SBOM is made from the image alone, its time the
// image's creation time, so that one commit gives the same SBOMs as it gives the same images.
func writeSBOMs(dist string, tag name.Tag, index v1.ImageIndex) ([]string, error) {
	m, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("index entry %s names no platform", d.Digest)
		}
		img, err := index.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		doc, err := imageSBOM(tag, d, img)
		if err != nil {
			return nil, fmt.Errorf("SBOM of the %s image: %w", d.Platform, err)
		}
		var buf bytes.Buffer
		if err := spdxjson.Write(doc, &buf, spdxjson.Indent(" ")); err != nil {
			return nil, err
		}
		file := sbomPrefix + d.Platform.OS + "-" + d.Platform.Architecture + sbomSuffix
		if err := os.WriteFile(filepath.Join(dist, file), buf.Bytes(), 0o644); err != nil { //nolint:gosec // G306: a published file
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

// imageSBOM describes the image of the index entry d: the image (by repository and digest) contains its files
// and the program it runs, which depends on the Go modules and the Go standard library it was built from.
func imageSBOM(tag name.Tag, d v1.Descriptor, img v1.Image) (*spdx.Document, error) {
	repo := tag.Context()
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if len(cf.Config.Entrypoint) == 0 {
		return nil, errors.New("the image names no entrypoint")
	}
	entrypoint := cf.Config.Entrypoint[0]
	files, program, err := imageFiles(img, entrypoint)
	if err != nil {
		return nil, err
	}
	if program == nil {
		return nil, fmt.Errorf("the entrypoint %s is not a file of the image", entrypoint)
	}
	info, err := buildinfo.Read(bytes.NewReader(program))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", entrypoint, err)
	}

	doc := &spdx.Document{
		SPDXVersion:    spdx.Version,
		DataLicense:    spdx.DataLicense,
		SPDXIdentifier: "DOCUMENT",
		DocumentName:   repo.Name() + "@" + d.Digest.String(),
		// Unique per image, as SPDX asks, and the same whenever the same image is described.
		DocumentNamespace: "https://" + repo.Name() + "/sbom/" + d.Platform.OS + "-" + d.Platform.Architecture + "/" + d.Digest.Hex,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "fluxdeployer-release"}},
			Created:  cf.Created.UTC().Format(time.RFC3339),
		},
	}
	image := &spdx.Package{
		PackageName:             repo.Name(),
		PackageSPDXIdentifier:   imageID,
		PackageVersion:          d.Digest.String(),
		PackageDownloadLocation: notAsserted,
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: d.Digest.Hex}},
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL,
			Locator: imagePURL(repo, d),
		}},
		PrimaryPackagePurpose: "CONTAINER",
	}
	binary := &spdx.Package{
		PackageName:             info.Path,
		PackageSPDXIdentifier:   binaryID,
		PackageVersion:          strings.TrimPrefix(tag.TagStr(), "v"),
		PackageFileName:         entrypoint,
		PackageDownloadLocation: notAsserted,
		PackageChecksums:        checksums(program),
		PrimaryPackagePurpose:   "APPLICATION",
	}
	doc.Packages = []*spdx.Package{image, binary}
	relate := func(a common.ElementID, kind string, b common.ElementID) {
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(a)), Relationship: kind, RefB: common.MakeDocElementID("", string(b)),
		})
	}
	relate("DOCUMENT", common.TypeRelationshipDescribe, imageID)
	relate(imageID, common.TypeRelationshipContains, binaryID)
	for _, f := range files {
		doc.Files = append(doc.Files, f)
		relate(imageID, common.TypeRelationshipContains, f.FileSPDXIdentifier)
	}
	for _, mod := range goModules(info) {
		doc.Packages = append(doc.Packages, mod)
		relate(binaryID, common.TypeRelationshipDependsOn, mod.PackageSPDXIdentifier)
	}
	return doc, nil
}

// imageFiles returns the regular files of the image's file system, in path order, with the content of the one
// at path.
func imageFiles(img v1.Image, path string) ([]*spdx.File, []byte, error) {
	fs := mutate.Extract(img)
	defer func() { _ = fs.Close() }()
	var files []*spdx.File
	var content []byte
	r := tar.NewReader(fs)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(r)
		if err != nil {
			return nil, nil, err
		}
		p := "/" + strings.TrimPrefix(h.Name, "/")
		if p == path {
			content = body
		}
		files = append(files, &spdx.File{
			FileName:           p,
			FileSPDXIdentifier: common.ElementID("File-" + elementID(p)),
			Checksums:          checksums(body),
			LicenseConcluded:   notAsserted,
			FileCopyrightText:  notAsserted,
		})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].FileName < files[j].FileName })
	return files, content, nil
}

// goModules are the packages of the modules the binary was built from, as it records them (a replaced module
// by its replacement), and of the Go standard library at the toolchain's version.
func goModules(info *buildinfo.BuildInfo) []*spdx.Package {
	mods := make([]*spdx.Package, 0, 1+len(info.Deps))
	mods = append(mods, goPackage("stdlib", info.GoVersion, "pkg:golang/stdlib@"+info.GoVersion))
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		mods = append(mods, goPackage(dep.Path, dep.Version, "pkg:golang/"+dep.Path+"@"+dep.Version))
	}
	return mods
}

func goPackage(path, version, purl string) *spdx.Package {
	return &spdx.Package{
		PackageName:             path,
		PackageSPDXIdentifier:   common.ElementID("Package-go-module-" + elementID(path+"-"+version)),
		PackageVersion:          version,
		PackageDownloadLocation: notAsserted,
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: purl,
		}},
		PrimaryPackagePurpose: "LIBRARY",
	}
}

// imagePURL is the image's package URL: pkg:oci/<name>@<digest>?arch=…&repository_url=<repository>.
func imagePURL(repo name.Repository, d v1.Descriptor) string {
	q := url.Values{"arch": {d.Platform.Architecture}, "repository_url": {repo.Name()}}
	return "pkg:oci/" + url.PathEscape(repo.RepositoryStr()[strings.LastIndex(repo.RepositoryStr(), "/")+1:]) +
		"@" + url.PathEscape(d.Digest.String()) + "?" + q.Encode()
}

func checksums(body []byte) []common.Checksum {
	s1, s256 := sha1.Sum(body), sha256.Sum256(body) //nolint:gosec // G401: see the import
	return []common.Checksum{
		{Algorithm: common.SHA1, Value: hex.EncodeToString(s1[:])},
		{Algorithm: common.SHA256, Value: hex.EncodeToString(s256[:])},
	}
}

// notInElementID is what an SPDX identifier may not hold: it is letters, digits, "." and "-".
var notInElementID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func elementID(s string) string {
	return notInElementID.ReplaceAllString(strings.TrimPrefix(s, "/"), "-")
}
