package node

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Image is a one-layer image of programs from this machine, written without a container engine as an OCI image
// archive that `ctr images import` reads. Dynamically linked programs get the shared libraries they load (from
// ldd), at the same paths, so the binaries the test assets built run unchanged in a pod.
type Image struct {
	// Ref is the name the image is imported under, e.g. "ghcr.io/fluxcd/source-controller:v1.9.6".
	Ref string
	// Files maps a path in the image to a file on this machine.
	Files map[string]string
	// Entrypoint and User are the image config's.
	Entrypoint []string
	User       string
}

// The OCI media types of an image with one uncompressed layer: the layer is imported once on the same machine,
// where compressing hundreds of megabytes of binaries would only cost time.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Platform    map[string]string `json:"platform,omitempty"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WriteArchive writes the image as an OCI image archive (an image layout in a tar) to w.
func (im Image) WriteArchive(w io.Writer) error {
	files, err := im.withLibraries()
	if err != nil {
		return err
	}
	// The layer is written twice, identically: once to learn its digest, once into the archive.
	h := sha256.New()
	size, err := writeLayer(h, files)
	if err != nil {
		return err
	}
	layer := descriptor{MediaType: mediaTypeLayer, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: size}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": im.Entrypoint, "User": im.User, "Env": []string{"PATH=/usr/bin:/bin"}},
		//nolint:goconst // "type" is the OCI config's field name
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.Digest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaTypeManifest,
		"config": blobDescriptor(mediaTypeConfig, config), "layers": []descriptor{layer},
	})
	if err != nil {
		return err
	}
	m := blobDescriptor(mediaTypeManifest, manifest)
	m.Platform = map[string]string{"architecture": "amd64", "os": "linux"}
	m.Annotations = map[string]string{"io.containerd.image.name": im.Ref, "org.opencontainers.image.ref.name": im.Ref}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaTypeIndex, "manifests": []descriptor{m}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(m.Digest), manifest},
		{blobPath(blobDescriptor(mediaTypeConfig, config).Digest), config},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: blobPath(layer.Digest), Mode: 0o644, Size: layer.Size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := writeLayer(tw, files); err != nil {
		return err
	}
	return tw.Close()
}

func blobDescriptor(mediaType string, body []byte) descriptor {
	sum := sha256.Sum256(body)
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(body))}
}

func blobPath(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

// withLibraries adds the shared libraries of every dynamically linked file, as ldd resolves them here.
func (im Image) withLibraries() (map[string]string, error) {
	files := make(map[string]string, len(im.Files))
	for dst, src := range im.Files {
		files[dst] = src
		libs, err := sharedLibraries(src)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			files[lib] = lib
		}
	}
	return files, nil
}

// sharedLibraries lists the absolute paths ldd prints for a program; none for a static one.
func sharedLibraries(program string) ([]string, error) {
	out, err := exec.Command("ldd", program).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", program, err, out)
	}
	var libs []string
	for line := range strings.Lines(string(out)) {
		for field := range strings.FieldsSeq(line) {
			if strings.HasPrefix(field, "/") {
				libs = append(libs, field)
			}
		}
	}
	return libs, nil
}

// writeLayer writes the layer's tar: the files (following symbolic links) with their parent directories, and a
// world-writable /tmp, all owned by root with a fixed time, so the same files give the same digest.
func writeLayer(w io.Writer, files map[string]string) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{"tmp": true}
	for dst := range files {
		for d := path.Dir(strings.TrimPrefix(dst, "/")); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: mtime}); err != nil {
			return 0, err
		}
	}
	for _, dst := range slices.Sorted(maps.Keys(files)) {
		if err := writeFile(tw, strings.TrimPrefix(dst, "/"), files[dst], mtime); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

func writeFile(tw *tar.Writer, name, src string, mtime time.Time) error {
	f, err := os.Open(filepath.Clean(src))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: mtime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
