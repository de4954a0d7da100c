package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestImage builds the image the way `make image image-push` does (a tarball, an OCI layout and a push to an
// in-process registry), reads all three back, checks the config and the file system, and runs the binary from
// the layer. A second build of the same inputs must give the same digest.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator binary")
	}
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	const (
		ver     = "9.8.7-test.1"
		commit  = "0123456789abcdef0123456789abcdef01234567"
		created = "2026-01-02T03:04:05Z"
	)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/fluxdeployer/fluxdeployer:" + ver
	dir := t.TempDir()
	args := []string{"-src", "../..", "-img", ref, "-version", ver, "-commit", commit, "-created", created}
	var logs bytes.Buffer
	if err := run(ctx, slices.Concat(args, []string{"-tarball", filepath.Join(dir, "image.tar"), "-layout", filepath.Join(dir, "layout"), "-push"}), &logs); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	t.Log(strings.TrimSpace(logs.String()))

	img := layoutImage(t, filepath.Join(dir, "layout"), ver)
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	size, err := compressedSize(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image size: %s compressed (%d bytes)", mib(size), size)

	// The pushed image is the same image; the tarball (Docker's format, which has no manifest) has its config.
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := remote.Image(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := pushed.Digest(); err != nil || d != digest {
		t.Errorf("pushed digest %v (%v), layout %v", d, err, digest)
	}
	loaded, err := tarball.ImageFromPath(filepath.Join(dir, "image.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if got, err := loaded.ConfigName(); err != nil || got != want {
		t.Errorf("tarball config %v (%v), layout %v", got, err, want)
	}

	checkManifestAndConfig(t, img, ver, commit, created)
	binary := checkFiles(t, img)

	if runtime.GOOS != "linux" {
		t.Skipf("the image's binary is for linux, this is %s", runtime.GOOS)
	}
	bin := filepath.Join(t.TempDir(), "fluxdeployer")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "version: "+ver+"\n") || !strings.Contains(string(out), "commit: "+commit+"\n") ||
		!strings.Contains(string(out), "go: go1.") {
		t.Errorf("fluxdeployer version: %v\n%s", err, out)
	}
	t.Logf("fluxdeployer version (from the image's layer):\n%s", out)

	// Same inputs, same image.
	logs.Reset()
	if err := run(ctx, slices.Concat(args, []string{"-layout", filepath.Join(dir, "again")}), &logs); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if again, _ := layoutImage(t, filepath.Join(dir, "again"), ver).Digest(); again != digest {
		t.Errorf("rebuilding gave %v, first build %v: the image is not reproducible", again, digest)
	}
}

func layoutImage(t *testing.T, dir, tag string) v1.Image {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag {
		t.Fatalf("layout index: %+v", m.Manifests)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func checkManifestAndConfig(t *testing.T, img v1.Image, ver, commit, created string) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest: %s, config %s, layers %+v; want OCI media types and one layer", m.MediaType, m.Config.MediaType, m.Layers)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/fluxdeployer" || len(c.Cmd) != 0 {
		t.Errorf("config: user %q, entrypoint %q, cmd %q; want 65532:65532, [/fluxdeployer], none", c.User, c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || cf.Created.UTC().Format("2006-01-02T15:04:05Z") != created {
		t.Errorf("config: %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	for key, want := range map[string]string{
		"title": "fluxdeployer", "version": ver, "revision": commit, "created": created,
		"source": "https://github.com/fluxdeployer/fluxdeployer", "licenses": "Apache-2.0",
	} {
		key = "org.opencontainers.image." + key
		if got := c.Labels[key]; got != want {
			t.Errorf("label %s = %q, want %q", key, got, want)
		}
		if got := m.Annotations[key]; got != want {
			t.Errorf("annotation %s = %q, want %q", key, got, want)
		}
	}
}

// checkFiles walks the layer: the binary is root's and executable by all; the nonroot user exists, owns only its
// home and can write nowhere else but /tmp; nothing is setuid or setgid. It returns the binary.
func checkFiles(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		headers[p] = h
		if h.Mode&0o6000 != 0 {
			t.Errorf("%s is setuid or setgid (mode %o)", p, h.Mode)
		}
		if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
			t.Errorf("%s has type %c; want only files and directories", p, h.Typeflag)
		}
		nonrootWritable := (h.Uid == nonrootID && h.Mode&0o200 != 0) || h.Mode&0o002 != 0
		switch {
		case p == "/tmp":
			if h.Mode != 0o1777 {
				t.Errorf("/tmp has mode %o, want 1777", h.Mode)
			}
		case p == "/home/nonroot":
			if h.Uid != nonrootID || h.Gid != nonrootID {
				t.Errorf("/home/nonroot is owned by %d:%d", h.Uid, h.Gid)
			}
		case nonrootWritable || h.Uid != 0 || h.Gid != 0:
			t.Errorf("%s: owner %d:%d mode %o; want root's, not writable by others", p, h.Uid, h.Gid, h.Mode)
		}
		if h.Typeflag == tar.TypeReg {
			if files[p], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if h := headers["/fluxdeployer"]; h == nil || h.Mode != 0o755 {
		t.Fatalf("/fluxdeployer: %+v; want mode 755", h)
	}
	if !strings.Contains(string(files["/etc/passwd"]), "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") ||
		!strings.Contains(string(files["/etc/group"]), "\nnonroot:x:65532:\n") {
		t.Errorf("no nonroot user 65532:\n%s\n%s", files["/etc/passwd"], files["/etc/group"])
	}
	if host, err := os.ReadFile(hostCACerts); err == nil && !bytes.Equal(files[hostCACerts], host) {
		t.Errorf("%s is not the build machine's", hostCACerts)
	}
	return files["/fluxdeployer"]
}

func TestImageNeedsSomethingToDo(t *testing.T) {
	if err := run(context.Background(), []string{"-version", "1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "nothing to do") {
		t.Fatalf("run without outputs: %v", err)
	}
	args := []string{"-src", "../..", "-img", "no/tag@sha256:00", "-layout", t.TempDir(), "-commit", "c", "-created", "2026-01-02T03:04:05Z"}
	if err := run(context.Background(), args, io.Discard); err == nil {
		t.Fatal("an image reference without a tag was accepted")
	}
	// An index of several architectures has no Docker tarball; refused before anything is built.
	args = []string{"-src", "../..", "-arch", "amd64,arm64", "-tarball", filepath.Join(t.TempDir(), "image.tar"), "-commit", "c", "-created", "2026-01-02T03:04:05Z"}
	if err := run(context.Background(), args, io.Discard); err == nil || !strings.Contains(err.Error(), "-tarball holds one image") {
		t.Fatalf("a tarball of two architectures: %v", err)
	}
}
