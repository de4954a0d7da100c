// Command release completes a release in a directory where `hack/image -arch amd64,arm64 -layout
// <dist>/image-index` has written the image index, as `make release` runs it:
//
//   - sbom-linux-<arch>.spdx.json: an SPDX 2.3 JSON SBOM of each architecture's image (sbom.go),
//   - a cosign signature of the index digest, added to image-index as cosign lays out a signed image (so that
//     `cosign verify --local-image` checks it offline and `cosign load` pushes image and signature together),
//     and cosign.pub, the public key that verifies it,
//   - image-index.tar: the signed layout as one file (an OCI archive),
//   - install.yaml: config/default for the image pinned to the index digest,
//   - checksums.txt: the SHA-256 of every file above, in the format of `sha256sum -c`.
//
// Signing: -key (default $COSIGN_KEY, with $COSIGN_PASSWORD) is a cosign key reference for a real release (a
// file, env://VAR or a KMS URI); without one an ephemeral key pair is generated in a temporary directory and
// only its public key is kept. Nothing goes to Fulcio, Rekor or Sigstore's TUF repository: cosign signs with the
// key, in its classic signature format, without a transparency log entry, the index pushed to a registry on
// loopback for the purpose. cosign is the version pinned in hack/tools/flux.
//
//	go run ./hack/release -dist dist -img ghcr.io/fluxdeployer/fluxdeployer:v0.1.0
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The release's files in the dist directory.
const (
	layoutDir     = "image-index"
	archiveFile   = "image-index.tar"
	installFile   = "install.yaml"
	publicKeyFile = "cosign.pub"
	checksumsFile = "checksums.txt"
	sbomPrefix    = "sbom-"
	sbomSuffix    = ".spdx.json"
)

// The annotations of the layout's entries: the OCI and containerd names of the index, and the kinds cosign
// reads from a layout it saved (the signed index and its signatures image).
const (
	refNameAnnotation    = "org.opencontainers.image.ref.name"
	cosignKindAnnotation = "kind"
	cosignKindIndex      = "dev.cosignproject.cosign/imageIndex"
	cosignKindSignatures = "dev.cosignproject.cosign/sigs"
)

type options struct {
	dist, img, key string
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, progress io.Writer) error {
	var o options
	flags := flag.NewFlagSet("release", flag.ContinueOnError)
	flags.StringVar(&o.dist, "dist", "dist", "the release directory; "+layoutDir+" in it holds the image index")
	flags.StringVar(&o.img, "img", "", "the released image with its tag, as hack/image named the index")
	flags.StringVar(&o.key, "key", os.Getenv("COSIGN_KEY"), "cosign key reference to sign with (default $COSIGN_KEY; empty: an ephemeral key pair)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	tag, err := name.NewTag(o.img, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-img: %w", err)
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	index, desc, err := releasedIndex(filepath.Join(o.dist, layoutDir), tag)
	if err != nil {
		return err
	}
	pinned := tag.String() + "@" + desc.Digest.String()
	_, _ = fmt.Fprintf(progress, "releasing %s\n", pinned)

	sboms, err := writeSBOMs(o.dist, tag, index)
	if err != nil {
		return err
	}
	if err := sign(ctx, root, o, tag, index, desc); err != nil {
		return err
	}
	if err := writeArchive(filepath.Join(o.dist, layoutDir), filepath.Join(o.dist, archiveFile)); err != nil {
		return err
	}
	if err := writeInstaller(ctx, root, filepath.Join(o.dist, installFile), pinned); err != nil {
		return err
	}
	layoutFiles, err := filesUnder(o.dist, layoutDir)
	if err != nil {
		return err
	}
	artifacts := slices.Concat([]string{installFile, archiveFile, publicKeyFile}, sboms, layoutFiles)
	if err := writeChecksums(o.dist, artifacts); err != nil {
		return err
	}
	for _, a := range slices.Concat([]string{installFile, archiveFile, publicKeyFile}, sboms, []string{layoutDir + "/", checksumsFile}) {
		_, _ = fmt.Fprintf(progress, "  %s\n", filepath.Join(o.dist, a))
	}
	return nil
}

func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := output(ctx, "", nil, "go", "env", "GOMOD")
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("finding the module root (run inside the fluxdeployer module): %w", err)
	}
	return filepath.Dir(gomod), nil
}

// layoutEntries opens an OCI image layout and reads its index.json.
func layoutEntries(dir string) (layout.Path, v1.ImageIndex, *v1.IndexManifest, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", nil, nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return "", nil, nil, err
	}
	m, err := top.IndexManifest()
	return p, top, m, err
}

// releasedIndex is the image index the layout names by the tag.
func releasedIndex(dir string, tag name.Tag) (v1.ImageIndex, v1.Descriptor, error) {
	_, top, m, err := layoutEntries(dir)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	for _, d := range m.Manifests {
		if d.Annotations[refNameAnnotation] == tag.TagStr() && d.MediaType.IsIndex() {
			index, err := top.ImageIndex(d.Digest)
			return index, d, err
		}
	}
	return nil, v1.Descriptor{}, fmt.Errorf("%s has no image index tagged %s", dir, tag.TagStr())
}

// cosignBinary is the path of the cosign pinned in hack/tools/flux, built into bin/ as hack/flux-assets.sh builds
// the Flux controllers (static and -trimpath), whose build compiles most of its packages (go tool takes no build
// flags, and its build would share none of them); go build relinks it only when it changed.
func cosignBinary(ctx context.Context, root string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(root, "bin", "cosign"))
	if err != nil {
		return "", err
	}
	_, err = output(ctx, root, []string{"CGO_ENABLED=0"}, "go", "build", "-C", "hack/tools/flux", "-trimpath", "-o", bin,
		"github.com/sigstore/cosign/v3/cmd/cosign")
	return bin, err
}

func output(ctx context.Context, dir string, env []string, program string, args ...string) (string, error) {
	// The programs are go, the cosign pinned in hack/tools/flux and a script of hack/.
	cmd := exec.CommandContext(ctx, program, args...) //nolint:gosec // G702: see above
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", filepath.Base(program), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// sign signs the index digest with cosign and adds the signatures image to the layout. cosign signs images in
// registries, so the index is pushed to an in-process registry on loopback first; the signature names the
// released repository (-img's), not the loopback one. Without a key it generates one for this run.
func sign(ctx context.Context, root string, o options, tag name.Tag, index v1.ImageIndex, desc v1.Descriptor) error {
	cosign, err := cosignBinary(ctx, root)
	if err != nil {
		return err
	}
	key, env := o.key, []string(nil)
	if key == "" {
		tmp, err := os.MkdirTemp("", "fluxdeployer-release-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		// The ephemeral private key never reaches the dist directory; its password is empty.
		env = []string{"COSIGN_PASSWORD="}
		if _, err := output(ctx, tmp, env, cosign, "generate-key-pair", "--output-key-prefix", "cosign"); err != nil {
			return err
		}
		key = filepath.Join(tmp, "cosign.key")
	}
	pub := filepath.Join(o.dist, publicKeyFile)
	if _, err := output(ctx, "", env, cosign, "public-key", "--key", key, "--outfile", pub); err != nil {
		return err
	}
	// cosign writes the key for its owner only; this one is published.
	if err := os.Chmod(pub, 0o644); err != nil { //nolint:gosec // G302: see above
		return err
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://")+"/"+tag.RepositoryStr(), name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(repo.Tag(tag.TagStr()), index, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing the index to the loopback registry: %w", err)
	}
	// cosign v3 would sign in the Sigstore bundle format, stored as an OCI referrer, with the services of a signing
	// config it fetches from Sigstore's TUF repository. --use-signing-config=false and --new-bundle-format=false
	// keep it offline and to the classic signature, the sha256-<hex>.sig image read back below, which cosign v2
	// verifies too; --tlog-upload=false (deprecated in v3, still honoured) leaves Rekor out.
	if _, err := output(ctx, "", env, cosign, "sign", "--yes", "--key", key,
		"--use-signing-config=false", "--new-bundle-format=false", "--tlog-upload=false", "--allow-http-registry",
		"--sign-container-identity", tag.Context().Name(), repo.Digest(desc.Digest.String()).String()); err != nil {
		return err
	}
	// cosign's tag for the signatures of a digest: sha256-<hex>.sig.
	sigs, err := remote.Image(repo.Tag(desc.Digest.Algorithm+"-"+desc.Digest.Hex+".sig"), remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading the signature back: %w", err)
	}
	return addSignatures(filepath.Join(o.dist, layoutDir), index, desc, sigs)
}

// addSignatures marks the index the way `cosign save` does and adds the signatures image beside it, so that the
// layout is both an OCI layout of the tagged index and a signed image for cosign.
func addSignatures(dir string, index v1.ImageIndex, desc v1.Descriptor, sigs v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	annotations := map[string]string{cosignKindAnnotation: cosignKindIndex}
	for k, v := range desc.Annotations {
		annotations[k] = v
	}
	if err := p.ReplaceIndex(index, match.Digests(desc.Digest), layout.WithAnnotations(annotations)); err != nil {
		return err
	}
	return p.AppendImage(sigs, layout.WithAnnotations(map[string]string{cosignKindAnnotation: cosignKindSignatures}))
}

// writeInstaller writes config/default for the image ref, as `make build-installer` does.
func writeInstaller(ctx context.Context, root, out, ref string) error {
	manifest, err := output(ctx, root, nil, filepath.Join(root, "hack", "kustomize-with-image.sh"), ref)
	if err != nil {
		return err
	}
	return writePublished(out, []byte(manifest+"\n"))
}

// filesUnder lists the regular files under dir (relative to base), sorted. The directories are the release's,
// which -dist chose.
func filesUnder(base, dir string) ([]string, error) {
	var files []string
	root := filepath.Join(base, dir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error { //nolint:gosec // G703: see above
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(base, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	slices.Sort(files)
	return files, err
}

// writeArchive writes the layout directory as a tar with the layout at its root (an OCI archive). Entries are
// sorted and carry no times or owners, so the same layout gives the same archive.
func writeArchive(dir, out string) error {
	files, err := filesUnder(dir, ".")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		body, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return writePublished(out, buf.Bytes())
}

// writeChecksums writes "<sha256>  <file>" for each file, relative to dist, as sha256sum does.
func writeChecksums(dist string, files []string) error {
	var b strings.Builder
	for _, f := range files {
		sum, err := sha256File(filepath.Join(dist, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	return writePublished(filepath.Join(dist, checksumsFile), []byte(b.String()))
}

// writePublished writes a file of the release, which is published: readable by all.
func writePublished(path string, body []byte) error {
	return os.WriteFile(path, body, 0o644) //nolint:gosec // G306: see above
}

// sha256File is the hex SHA-256 of a file of the release (-dist chose its directory).
func sha256File(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // G703: see above
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
