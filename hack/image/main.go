// Command image builds the fluxdeployer container image without a container engine: it compiles a static
// binary and assembles a one-layer image from scratch with go-containerregistry, laid out like
// gcr.io/distroless/static:nonroot (the Dockerfile's base): the binary at /fluxdeployer, /etc/passwd and
// /etc/group with the nonroot user 65532, the build machine's CA certificates, and a config that runs as
// 65532:65532 with OCI labels. It writes a `docker load`-able tarball and/or an OCI image layout, and can push.
// Given several architectures (-arch amd64,arm64, as `make release` does) it cross-compiles one image per
// architecture and writes or pushes an OCI image index of them; a Docker tarball holds one image only.
//
// The image is reproducible: file times and the created time are the commit's time, the build is -trimpath
// with -buildvcs=false, and gzip is deterministic, so the same inputs give the same digest.
//
//	go run ./hack/image -img ghcr.io/fluxdeployer/fluxdeployer:v0.1.0 -tarball dist/image.tar -layout dist/image-layout [-push]
//	go run ./hack/image -arch amd64,arm64 -layout dist/image-layout
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// The nonroot user and group of distroless images.
	nonrootID = 65532
	// Where the binary lies in the image, and the image's entrypoint.
	entrypoint   = "/fluxdeployer"
	versionPkg   = "github.com/fluxdeployer/fluxdeployer/internal/version"
	defaultRepo  = "ghcr.io/fluxdeployer/fluxdeployer"
	sourceURL    = "https://github.com/fluxdeployer/fluxdeployer"
	hostCACerts  = "/etc/ssl/certs/ca-certificates.crt"
	labelPrefix  = "org.opencontainers.image."
	imageLicense = "Apache-2.0"
	// The release's tags are the VERSION file's version with a v, like Flux's (v0.1.0).
	tagPrefix = "v"
)

// built is what the command writes: an image or an index.
type built interface {
	remote.Taggable
	Digest() (v1.Hash, error)
}

type options struct {
	src, img, version, commit, created, caCerts, arch string
	tarball, layout                                   string
	push                                              bool
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log io.Writer) error {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.src, "src", "", "root of the fluxdeployer module (default: the module of the working directory)")
	fs.StringVar(&o.img, "img", "", "image reference with a tag (default "+defaultRepo+":"+tagPrefix+"<version>)")
	fs.StringVar(&o.version, "version", "", "release version (default: the VERSION file)")
	fs.StringVar(&o.commit, "commit", "", "git commit (default: git rev-parse HEAD)")
	fs.StringVar(&o.created, "created", "", "creation time, RFC 3339 (default: the commit's time)")
	fs.StringVar(&o.caCerts, "ca-certs", hostCACerts, "CA bundle copied to "+hostCACerts+" when it exists (empty: none)")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the linux image; several, comma-separated, make an image index")
	fs.StringVar(&o.tarball, "tarball", "", "write a `docker load`-able tarball here")
	fs.StringVar(&o.layout, "layout", "", "write an OCI image layout into this directory")
	fs.BoolVar(&o.push, "push", false, "push the image to -img (credentials from the Docker config)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.tarball == "" && o.layout == "" && !o.push {
		return errors.New("nothing to do: give -tarball, -layout or -push")
	}
	arches := strings.Split(o.arch, ",")
	if len(arches) > 1 && o.tarball != "" {
		return fmt.Errorf("-tarball holds one image (Docker's format has no index), -arch gives %d: use -layout", len(arches))
	}
	if err := o.complete(ctx); err != nil {
		return err
	}
	tag, err := name.NewTag(o.img, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-img: %w", err)
	}
	created, err := time.Parse(time.RFC3339, o.created)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	o.created = created.UTC().Format(time.RFC3339) // the label in UTC, whatever zone the time was given in

	tmp, err := os.MkdirTemp("", "fluxdeployer-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	images := make([]v1.Image, len(arches))
	for i, arch := range arches {
		if images[i], err = buildImage(ctx, o, arch, filepath.Join(tmp, arch), created, log); err != nil {
			return err
		}
	}
	// One architecture is one image, as `docker load` and the real node's import take it; several are an index.
	var result built = images[0]
	var index v1.ImageIndex
	if len(images) > 1 {
		index = indexOf(o, arches, images)
		result = index
	}
	digest, err := result.Digest()
	if err != nil {
		return err
	}
	if o.tarball != "" {
		if err := os.MkdirAll(filepath.Dir(o.tarball), 0o750); err != nil {
			return err
		}
		if err := tarball.WriteToFile(o.tarball, tag, images[0]); err != nil {
			return fmt.Errorf("writing %s: %w", o.tarball, err)
		}
		_, _ = fmt.Fprintf(log, "wrote %s (docker load -i %s)\n", o.tarball, o.tarball)
	}
	if o.layout != "" {
		if err := writeLayout(o.layout, tag, images[0], index); err != nil {
			return fmt.Errorf("writing %s: %w", o.layout, err)
		}
		_, _ = fmt.Fprintf(log, "wrote OCI image layout %s (%s@%s)\n", o.layout, tag, digest)
	}
	if o.push {
		if err := remote.Push(tag, result, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", tag, err)
		}
		_, _ = fmt.Fprintf(log, "pushed %s@%s\n", tag, digest)
	}
	return nil
}

// buildImage compiles the binary for arch into dir and assembles its image.
func buildImage(ctx context.Context, o options, arch, dir string, created time.Time, log io.Writer) (v1.Image, error) {
	if err := os.Mkdir(dir, 0o750); err != nil {
		return nil, err
	}
	binary := filepath.Join(dir, "fluxdeployer")
	if err := buildBinary(ctx, o, arch, binary); err != nil {
		return nil, err
	}
	img, err := assemble(o, arch, binary, created)
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	size, err := compressedSize(img)
	if err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(log, "image linux/%s %s: %s compressed (%d bytes)\n", arch, digest, mib(size), size)
	return img, nil
}

// indexOf is the OCI image index of the images, one per architecture, each descriptor naming its platform so
// that a container runtime pulls its own; it carries the images' annotations.
func indexOf(o options, arches []string, images []v1.Image) v1.ImageIndex {
	adds := make([]mutate.IndexAddendum, len(images))
	for i, img := range images {
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "linux", Architecture: arches[i]},
		}}
	}
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(index, labels(o)).(v1.ImageIndex)
}

// complete fills the defaults from the module: its root, the VERSION file, and git.
func (o *options) complete(ctx context.Context) error {
	if o.src == "" {
		gomod, err := output(ctx, "", "go", "env", "GOMOD")
		if err != nil || gomod == "" || gomod == os.DevNull {
			return fmt.Errorf("finding the module root (run inside the fluxdeployer module or give -src): %w", err)
		}
		o.src = filepath.Dir(gomod)
	}
	if o.version == "" {
		v, err := os.ReadFile(filepath.Join(o.src, "VERSION"))
		if err != nil {
			return err
		}
		o.version = strings.TrimSpace(string(v))
	}
	if o.commit == "" {
		c, err := output(ctx, o.src, "git", "rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("no -commit and no git commit: %w", err)
		}
		o.commit = c
	}
	if o.created == "" {
		// The commit's time, so that rebuilding a commit gives the same image.
		ct, err := output(ctx, o.src, "git", "show", "-s", "--format=%ct", o.commit)
		if err != nil {
			return fmt.Errorf("no -created and no time for commit %s: %w", o.commit, err)
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return err
		}
		o.created = time.Unix(sec, 0).UTC().Format(time.RFC3339)
	}
	if o.img == "" {
		o.img = defaultRepo + ":" + tagPrefix + o.version
	}
	return nil
}

func output(ctx context.Context, dir, program string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", program, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// ldflags are the linker flags of a release build: no symbol table or DWARF (stack traces keep their function
// names and lines), and the version and commit `fluxdeployer version` prints. The Makefile and the Dockerfile
// pass the same -X flags.
func ldflags(version, commit string) string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPkg, version, versionPkg, commit)
}

// buildBinary compiles a static linux binary of cmd/fluxdeployer for arch (cross-compiled: no cgo).
func buildBinary(ctx context.Context, o options, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", ldflags(o.version, o.commit), "-o", out, "./cmd/fluxdeployer")
	cmd.Dir = o.src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// labels are the image's OCI labels (config) and annotations (manifest).
func labels(o options) map[string]string {
	return map[string]string{
		labelPrefix + "title":       "fluxdeployer",
		labelPrefix + "description": "Kubernetes operator that deploys OCM vectors through Flux",
		labelPrefix + "version":     o.version,
		labelPrefix + "revision":    o.commit,
		labelPrefix + "source":      sourceURL,
		labelPrefix + "url":         sourceURL,
		labelPrefix + "licenses":    imageLicense,
		labelPrefix + "created":     o.created,
	}
}

// assemble makes the image: one layer on nothing, OCI media types, the config of a distroless nonroot image.
func assemble(o options, arch, binary string, created time.Time) (v1.Image, error) {
	layerTar, err := rootfs(binary, o.caCerts, created)
	if err != nil {
		return nil, err
	}
	// Compressed once here: a layer made from uncompressed bytes would be compressed again on every read (digest,
	// tarball, layout, push).
	var compressed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&compressed, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(layerTar); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(compressed.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/image: fluxdeployer " + o.version + " (" + o.commit + ")",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.Config.User = fmt.Sprintf("%d:%d", nonrootID, nonrootID)
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Labels = labels(o)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(o)).(v1.Image), nil
}

// rootfs is the layer's tar: the directories and files of a distroless static nonroot image that fluxdeployer
// needs, owned by root except the nonroot user's home. Times are the creation time.
func rootfs(binary, caCerts string, created time.Time) ([]byte, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		uname    string
		body     []byte // nil: a directory
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
	}
	if caCerts != "" {
		switch certs, err := os.ReadFile(caCerts); {
		case err == nil:
			entries = append(entries, entry{name: "etc/ssl/", mode: 0o755}, entry{name: "etc/ssl/certs/", mode: 0o755},
				entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: certs})
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	entries = append(entries,
		entry{name: strings.TrimPrefix(entrypoint, "/"), mode: 0o755, body: bin},
		entry{name: "home/", mode: 0o755},
		entry{name: "home/nonroot/", mode: 0o700, uid: nonrootID, gid: nonrootID, uname: "nonroot"},
		entry{name: "tmp/", mode: 0o1777},
	)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := created.UTC().Truncate(time.Second)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, Uname: "root", Gname: "root",
			ModTime: mtime}
		if e.uname != "" {
			h.Uname, h.Gname = e.uname, e.uname
		}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout writes an OCI image layout holding just this image, or the index when there is one, named by its
// tag.
func writeLayout(dir string, tag name.Tag, img v1.Image, index v1.ImageIndex) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	named := layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.String(),
	})
	if index != nil {
		return p.AppendIndex(index, named)
	}
	return p.AppendImage(img, named)
}

// compressedSize is what a pull transfers: manifest, config and the compressed layers.
func compressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	size := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
