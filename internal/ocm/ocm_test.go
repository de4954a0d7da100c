package ocm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

const (
	vectorName = "acme.org/vectors/shop"
	subPath    = "konfidence/vectors"
)

// backend publishes component versions and names them by reference; the same tests run against a registry
// and a CTF directory.
type backend struct {
	name    string
	publish func(t *testing.T, cvs ...ocmtest.ComponentVersion)
	ref     func(component, version string) string
}

func backends(t *testing.T) []backend {
	reg := ocmtest.NewRegistry(t)
	dir := t.TempDir()
	return []backend{
		{
			name:    "registry",
			publish: func(t *testing.T, cvs ...ocmtest.ComponentVersion) { reg.Push(t, subPath, cvs...) },
			ref:     func(c, v string) string { return reg.Ref(subPath, c, v) },
		},
		{
			name:    "ctf",
			publish: func(t *testing.T, cvs ...ocmtest.ComponentVersion) { ocmtest.WriteCTF(t, dir, cvs...) },
			ref:     func(c, v string) string { return "ctf::" + dir + "//" + c + ":" + v },
		},
	}
}

func TestResolveVectorRoundTrip(t *testing.T) {
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	frontend.Resources = append(frontend.Resources,
		ocmtest.TaskResource(ocm.Task{Name: "migrate-db", Type: "k8s-job", Spec: json.RawMessage(`{"image":"migrate:1.0"}`)}),
		ocmtest.TaskResource(ocm.Task{Name: "seed-data", Type: "k8s-job", DependsOn: []string{"migrate-db"}, Spec: json.RawMessage(`{"image":"seed:1.0"}`)}))
	legacy := ocmtest.Artifact("acme.org/artifacts/legacy", "0.9.0", "cloud.konfidence.flux.kustomize", false)
	legacy.DescriptorMediaType = spec.MediaTypeDescriptorYAMLTar
	gardener := ocmtest.Artifact("acme.org/artifacts/gardener", "v2.0", "cloud.konfidence.flux.kustomize", false)
	gardener.DescriptorMediaType = spec.MediaTypeLegacyDescriptorJSON
	yamlDesc := ocmtest.Artifact("acme.org/artifacts/yaml", "3.0.0", "cloud.konfidence.flux.helm", true)
	yamlDesc.DescriptorMediaType = spec.MediaTypeDescriptorYAML
	indexed := ocmtest.Artifact("acme.org/artifacts/indexed", "4.0.0", "cloud.konfidence.flux.helm", true)
	indexed.Index = true
	build := ocmtest.Artifact("acme.org/artifacts/build", "1.0.0+ci.42", "cloud.konfidence.flux.helm", false)
	artifacts := []ocmtest.ComponentVersion{frontend, legacy, gardener, yamlDesc, indexed, build}
	vector := ocmtest.Vector(vectorName, "2024.6.10-153045123Z", artifacts...)
	vector.Index = true

	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.publish(t, append(artifacts, vector)...)
			v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), b.ref(vector.Name, vector.Version), ocm.Read{})
			if err != nil {
				t.Fatal(err)
			}
			if v.Component != vectorName || v.Version != vector.Version || !strings.HasPrefix(v.Digest, "sha256:") {
				t.Errorf("vector = %s:%s@%s", v.Component, v.Version, v.Digest)
			}
			if len(v.Artifacts) != len(artifacts) {
				t.Fatalf("%d artifacts, want %d", len(v.Artifacts), len(artifacts))
			}
			wantAccess := `{"imageReference":"ghcr.io/stefanprodan/charts/podinfo:6.9.1","type":"ociArtifact"}`
			for i, entry := range v.Artifacts {
				a, want := entry.Artifact, artifacts[i]
				var m struct {
					Type       string `json:"type"`
					AllowReuse bool   `json:"allowReuse"`
				}
				if err := json.Unmarshal(want.Resources[0].Blob, &m); err != nil {
					t.Fatal(err)
				}
				type artifact struct {
					Component, Version, Type string
					AllowReuse               bool
				}
				if diff := cmp.Diff(artifact{want.Name, want.Version, m.Type, m.AllowReuse}, artifact{a.Component, a.Version, a.Type, a.AllowReuse}); diff != "" {
					t.Errorf("artifact %d (-want +got):\n%s", i, diff)
				}
				type resource struct{ Name, Type, Access string }
				var resources []resource
				for _, r := range a.Resources {
					resources = append(resources, resource{r.Name, r.Type, string(r.Access)})
				}
				if diff := cmp.Diff([]resource{{"chart", "helmChart", wantAccess}}, resources); diff != "" {
					t.Errorf("artifact %d resources (-want +got):\n%s", i, diff)
				}
			}
			tasks := v.Artifacts[0].Artifact.Tasks
			if len(tasks) != 2 || tasks[1].Name != "seed-data" || tasks[1].DependsOn[0] != "migrate-db" || string(tasks[1].Spec) != `{"image":"seed:1.0"}` {
				t.Errorf("tasks = %+v", tasks)
			}
			if len(v.Artifacts[1].Artifact.Tasks) != 0 {
				t.Errorf("artifact without task manifests has tasks %+v", v.Artifacts[1].Artifact.Tasks)
			}
		})
	}
}

func TestResolveVectorManyArtifactsKeepsOrder(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	var artifacts []ocmtest.ComponentVersion
	for i := range 40 {
		// Names sort differently from the reference order, so an order bug cannot hide.
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/a%02d", 39-i), "1.0.0", "cloud.konfidence.flux.helm", i%2 == 0))
	}
	reg.Push(t, "", artifacts...)
	reg.Push(t, "", ocmtest.Vector(vectorName, "1.0.0", artifacts...))
	v, err := ocm.NewClient(ocm.Options{Concurrency: 8}).ResolveVector(context.Background(), reg.Ref("", vectorName, "1.0.0"), ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	for i, entry := range v.Artifacts {
		if a := entry.Artifact; a.Component != artifacts[i].Name || a.AllowReuse != (i%2 == 0) {
			t.Fatalf("artifact %d = %s (reuse %v), want %s", i, a.Component, a.AllowReuse, artifacts[i].Name)
		}
	}
}

func TestResolveVectorNullArrays(t *testing.T) {
	// Konfidence writes "resources": null and friends; a vector without references resolves to no artifacts.
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, ocmtest.ComponentVersion{Name: vectorName, Version: "1.0.0"})
	data, err := os.ReadFile(filepath.Join(dir, spec.CTFIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), dir+"//"+vectorName+":1.0.0", ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Artifacts) != 0 {
		t.Errorf("artifacts = %v, want none", v.Artifacts)
	}
	if !strings.Contains(string(data), `"component-descriptors/`+vectorName+`"`) {
		t.Errorf("CTF index %s does not name the repository as OCM does", data)
	}
	descriptors, _ := filepath.Glob(filepath.Join(dir, spec.CTFBlobsDir, "*"))
	found := false
	for _, f := range descriptors {
		b, _ := os.ReadFile(f)
		found = found || strings.Contains(string(b), `"resources":null`)
	}
	if !found {
		t.Error("no descriptor with null resources was written, so the test proves nothing")
	}
}

func TestResolveVectorErrors(t *testing.T) {
	good := ocmtest.Artifact("acme.org/artifacts/good", "1.0.0", "cloud.konfidence.flux.helm", true)
	missing := ocmtest.Artifact("acme.org/artifacts/missing", "1.0.0", "x", true)
	missing.Resources = missing.Resources[1:]
	duplicated := ocmtest.Artifact("acme.org/artifacts/duplicated", "1.0.0", "x", true)
	duplicated.Resources = append(duplicated.Resources, ocmtest.Resource{Name: "second-manifest", Type: ocm.ResourceTypeArtifactManifest, Blob: []byte(`{"type":"y"}`)})
	invalid := ocmtest.Artifact("acme.org/artifacts/invalid", "1.0.0", "x", true)
	invalid.Resources[0].Blob = []byte(`{"type": "x", "allowReuse": "yes"}`)
	untyped := ocmtest.Artifact("acme.org/artifacts/untyped", "1.0.0", "", true)
	badTask := ocmtest.Artifact("acme.org/artifacts/badtask", "1.0.0", "x", true)
	badTask.Resources = append(badTask.Resources, ocmtest.Resource{Name: "t", Type: ocm.ResourceTypeTaskManifest, Blob: []byte(`{"name":"t"}`)})
	tampered := ocmtest.Artifact("acme.org/artifacts/tampered", "1.0.0", "cloud.konfidence.flux.helm", true)
	tampered.Resources[0].Blob = []byte(`{"type":"cloud.konfidence.flux.helm","allowReuse":true,"note":"tampered"}`)
	huge := ocmtest.Artifact("acme.org/artifacts/huge", "1.0.0", "cloud.konfidence.flux.helm", true)
	huge.Resources[0].Blob = []byte(`{"type":"x","padding":"` + strings.Repeat("x", 64<<10) + `"}`)

	reg := ocmtest.NewRegistry(t)
	dir := t.TempDir()
	all := []ocmtest.ComponentVersion{good, missing, duplicated, invalid, untyped, badTask, tampered, huge}
	reg.Push(t, "", all...)
	ocmtest.WriteCTF(t, dir, all...)
	reg.Tamper(digest.FromBytes(tampered.Resources[0].Blob).String())
	tamperedCTF := filepath.Join(dir, spec.CTFBlobsDir, spec.CTFBlobName(digest.FromBytes(tampered.Resources[0].Blob).String()))
	if err := os.WriteFile(tamperedCTF, []byte(`{"type":"cloud.konfidence.flux.helm","allowReuse":true,"note":"TAMPERED"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		artifact  ocmtest.ComponentVersion
		want      *ocm.Error
		permanent bool
	}{
		{missing, ocm.ErrManifestMissing, true},
		{duplicated, ocm.ErrManifestDuplicated, true},
		{invalid, ocm.ErrManifestInvalid, true},
		{untyped, ocm.ErrManifestInvalid, true},
		{badTask, ocm.ErrManifestInvalid, true},
		{tampered, ocm.ErrDigestMismatch, false},
		{huge, ocm.ErrBlobTooLarge, false},
		{ocmtest.Artifact("acme.org/artifacts/absent", "1.0.0", "x", true), ocm.ErrNotFound, false},
	}
	for _, tt := range tests {
		vector := ocmtest.Vector(vectorName, "1.0.0-"+strings.TrimPrefix(tt.artifact.Name, "acme.org/artifacts/"), good, tt.artifact)
		reg.Push(t, "", vector)
		ocmtest.WriteCTF(t, dir, vector)
		for name, ref := range map[string]string{
			"registry": reg.Ref("", vector.Name, vector.Version),
			"ctf":      dir + "//" + vector.Name + ":" + vector.Version,
		} {
			t.Run(tt.artifact.Name+"/"+name, func(t *testing.T) {
				v, err := ocm.NewClient(ocm.Options{MaxBlobSize: 32 << 10}).ResolveVector(context.Background(), ref, ocm.Read{})
				assertError(t, err, tt.want, tt.permanent)
				if !strings.Contains(err.Error(), tt.artifact.Name) {
					t.Errorf("error %q does not name the failing artifact", err)
				}
				// The failure is the broken artifact's alone: the good one still resolves.
				if v == nil || v.Artifacts[0].Artifact == nil || v.Artifacts[0].Artifact.Component != good.Name || v.Artifacts[0].Err != nil {
					t.Fatalf("the good artifact did not resolve beside the broken one: %+v", v)
				}
				if v.Artifacts[1].Artifact != nil || !errors.Is(v.Artifacts[1].Err, tt.want) || v.Artifacts[1].Ref != tt.artifact.Name+":"+tt.artifact.Version {
					t.Errorf("broken artifact: %+v, error %v, reference %s", v.Artifacts[1].Artifact, v.Artifacts[1].Err, v.Artifacts[1].Ref)
				}
			})
		}
	}
}

func assertError(t *testing.T, err error, want *ocm.Error, permanent bool) {
	t.Helper()
	var e *ocm.Error
	switch {
	case !errors.Is(err, want):
		t.Fatalf("error = %v, want reason %s", err, want.Reason)
	case !errors.As(err, &e) || e.Reason != want.Reason || ocm.ReasonOf(err) != want.Reason:
		t.Fatalf("errors.As(%v) did not yield reason %s", err, want.Reason)
	case !strings.HasPrefix(err.Error(), string(want.Reason)+": "):
		t.Errorf("error %q does not start with its reason", err)
	case ocm.IsPermanent(err) != permanent:
		t.Errorf("IsPermanent(%v) = %v, want %v", err, !permanent, permanent)
	}
}

func TestResolveVectorNotFoundAndInvalid(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	c := ocm.NewClient(ocm.Options{})
	_, err := c.ResolveVector(context.Background(), reg.Ref("", vectorName, "9.9.9"), ocm.Read{})
	assertError(t, err, ocm.ErrNotFound, false)
	_, err = c.ResolveVector(context.Background(), "ctf::"+t.TempDir()+"//"+vectorName+":9.9.9", ocm.Read{})
	assertError(t, err, ocm.ErrNotFound, false)
	_, err = c.ResolveVector(context.Background(), reg.Ref("", vectorName, "")+"x/y", ocm.Read{})
	assertError(t, err, ocm.ErrReferenceInvalid, true)
	_, err = c.ResolveVector(context.Background(), strings.TrimSuffix(reg.Ref("", vectorName, "x"), ":x"), ocm.Read{})
	assertError(t, err, ocm.ErrReferenceInvalid, true)
	_, err = c.ResolveVector(context.Background(), "ctf::/tmp/x.tgz//"+vectorName+":1.0.0", ocm.Read{})
	assertError(t, err, ocm.ErrReferenceInvalid, true)
}

// TestErrorsNameTheRepositoryForAPerson: a failure names the component version and its repository in words
// ("in OCI registry http://…", "in CTF directory …"), never OCM's repository types, which read to a Flux user as
// Flux's OCIRepository kind.
func TestErrorsNameTheRepositoryForAPerson(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	dir := t.TempDir()
	c := ocm.NewClient(ocm.Options{})
	for ref, want := range map[string]string{
		reg.Ref("", vectorName, "9.9.9"):             vectorName + ":9.9.9 in OCI registry http://" + reg.Host,
		"ctf::" + dir + "//" + vectorName + ":9.9.9": vectorName + ":9.9.9 in CTF directory " + dir,
	} {
		_, err := c.ResolveVector(context.Background(), ref, ocm.Read{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Repository/v1") ||
			strings.Contains(err.Error(), "CommonTransportFormat") {
			t.Errorf("%s: error %v, want it to name %q and no OCM repository type", ref, err, want)
		}
	}
}

func TestResolveVectorBasicAuth(t *testing.T) {
	reg := ocmtest.NewRegistry(t, ocmtest.WithBasicAuth("robot", "s3cr3t-pw"), ocmtest.WithTLS())
	a := ocmtest.Artifact("acme.org/artifacts/a", "1.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, subPath, a, ocmtest.Vector(vectorName, "1.0.0", a))
	ref := reg.Ref(subPath, vectorName, "1.0.0")
	ctx := context.Background()

	_, err := ocm.NewClient(ocm.Options{RootCAs: reg.CertPool()}).ResolveVector(ctx, ref, ocm.Read{})
	assertError(t, err, ocm.ErrUnauthorized, false)

	wrong := ocm.Credentials{}
	if err := wrong.AddDockerConfigJSON([]byte(`{"auths":{"` + reg.Host + `":{"username":"robot","password":"wrong-pw"}}}`)); err != nil {
		t.Fatal(err)
	}
	_, err = ocm.NewClient(ocm.Options{Credentials: wrong, RootCAs: reg.CertPool()}).ResolveVector(ctx, ref, ocm.Read{})
	assertError(t, err, ocm.ErrUnauthorized, false)
	if strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("error %q leaks the password", err)
	}

	creds, err := ocm.CredentialsFromSecrets(corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pull"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfigJSON()},
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ocm.NewClient(ocm.Options{Credentials: creds, RootCAs: reg.CertPool()}).ResolveVector(ctx, ref, ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Artifacts) != 1 || v.Artifacts[0].Artifact.Component != a.Name {
		t.Errorf("artifacts = %+v", v.Artifacts)
	}
}

func TestResolveVectorTLS(t *testing.T) {
	reg := ocmtest.NewRegistry(t, ocmtest.WithTLS())
	a := ocmtest.Artifact("acme.org/artifacts/a", "1.0.0", "cloud.konfidence.flux.helm", true)
	reg.Push(t, "", a, ocmtest.Vector(vectorName, "1.0.0", a))
	ref := reg.Ref("", vectorName, "1.0.0")
	if strings.HasPrefix(ref, "http") {
		t.Fatalf("TLS registry reference %q should carry no scheme", ref)
	}
	ctx := context.Background()

	_, err := ocm.NewClient(ocm.Options{}).ResolveVector(ctx, ref, ocm.Read{})
	assertError(t, err, ocm.ErrTLS, false)

	v, err := ocm.NewClient(ocm.Options{RootCAs: reg.CertPool()}).ResolveVector(ctx, "oci://"+ref, ocm.Read{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Artifacts) != 1 {
		t.Errorf("artifacts = %+v", v.Artifacts)
	}

	// A plain-HTTP registry addressed without http:// is spoken to with TLS, which fails.
	plain := ocmtest.NewRegistry(t)
	_, err = ocm.NewClient(ocm.Options{}).ResolveVector(ctx, "https://"+plain.Host+"//"+vectorName+":1.0.0", ocm.Read{})
	assertError(t, err, ocm.ErrTLS, false)
}

func TestResolveVectorCache(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	var artifacts []ocmtest.ComponentVersion
	for i := range 5 {
		artifacts = append(artifacts, ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/a%d", i), "1.0.0", "cloud.konfidence.flux.helm", true))
	}
	reg.Push(t, "", artifacts...)
	reg.Push(t, "", ocmtest.Vector(vectorName, "1.0.0", artifacts...), ocmtest.Vector(vectorName, "1.1.0", artifacts...))
	c := ocm.NewClient(ocm.Options{})
	ctx := context.Background()

	resolve := func(version string) int64 {
		t.Helper()
		before := reg.Requests()
		if _, err := c.ResolveVector(ctx, reg.Ref("", vectorName, version), ocm.Read{}); err != nil {
			t.Fatal(err)
		}
		return reg.Requests() - before
	}
	if n := resolve("1.0.0"); n == 0 {
		t.Fatal("cold resolve made no requests")
	}
	if n := resolve("1.0.0"); n != 0 {
		t.Errorf("steady-state resync made %d registry requests, want 0", n)
	}
	// Only the vector is read: its artifacts are cached. manifest + config + descriptor = 3 requests.
	if n := resolve("1.1.0"); n != 3 {
		t.Errorf("new vector over cached artifacts made %d requests, want 3", n)
	}

	// A reconcile request re-reads the vector and its artifacts, and what it read serves the next resync.
	before := reg.Requests()
	if _, err := c.ResolveVector(ctx, reg.Ref("", vectorName, "1.0.0"), ocm.Read{BypassCache: true}); err != nil {
		t.Fatal(err)
	}
	if n := reg.Requests() - before; n < 3*6 {
		t.Errorf("resolve bypassing the cache made %d requests, want the vector's and 5 artifacts' reads", n)
	}
	if n := resolve("1.0.0"); n != 0 {
		t.Errorf("resync after a bypass made %d registry requests, want 0", n)
	}

	// Revalidating costs the tag's resolution while it points where it did; once the version is pushed again with
	// another artifact, the vector is read again and of its artifacts only the new one.
	revalidate := func() int64 {
		t.Helper()
		before := reg.Requests()
		if _, err := c.ResolveVector(ctx, reg.Ref("", vectorName, "1.0.0"), ocm.Read{Revalidate: true}); err != nil {
			t.Fatal(err)
		}
		return reg.Requests() - before
	}
	if n := revalidate(); n != 1 {
		t.Errorf("revalidating an unchanged vector made %d requests, want 1", n)
	}
	more := append(slices.Clone(artifacts), ocmtest.Artifact("acme.org/artifacts/a5", "1.0.0", "cloud.konfidence.flux.helm", true))
	reg.Push(t, "", more[5], ocmtest.Vector(vectorName, "1.0.0", more...))
	// The tag, the vector (manifest, config, descriptor), the new artifact (manifest, config, descriptor, its
	// artifact manifest).
	if n := revalidate(); n != 1+3+4 {
		t.Errorf("revalidating a moved vector made %d requests, want 8", n)
	}
	if n := resolve("1.0.0"); n != 0 {
		t.Errorf("resync after a revalidation made %d registry requests, want 0", n)
	}

	// Aliases move, so they are re-read every time.
	aliased := ocmtest.Vector(vectorName, "latest", artifacts...)
	reg.Push(t, "", aliased)
	resolve("latest")
	if n := resolve("latest"); n != 3 {
		t.Errorf("alias resolve made %d requests, want 3 (vector re-read, artifacts cached)", n)
	}

	disabled := ocm.NewClient(ocm.Options{CacheSize: -1})
	for range 2 {
		before := reg.Requests()
		if _, err := disabled.ResolveVector(ctx, reg.Ref("", vectorName, "1.0.0"), ocm.Read{}); err != nil {
			t.Fatal(err)
		}
		if reg.Requests() == before {
			t.Error("a client with caching disabled served from cache")
		}
	}
}

func TestCredentialsFromSecrets(t *testing.T) {
	secret := func(data string) corev1.Secret {
		return corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(data)},
		}
	}
	creds, err := ocm.CredentialsFromSecrets(
		secret(`{"auths":{"https://index.docker.io/v1/":{"auth":"dXNlcjpwYXNz"},"ghcr.io":{"username":"u","password":"p"}}}`),
		secret(`{"auths":{"localhost:5000":{"identitytoken":"tok"}}}`),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := ocm.Credentials{
		"index.docker.io": {Username: "user", Password: "pass"},
		"ghcr.io":         {Username: "u", Password: "p"},
		"localhost:5000":  {RefreshToken: "tok"},
	}
	if diff := cmp.Diff(want, creds); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"auths":{"h":{"auth":"not base64 s3cr3t"}}}`, `{"auths": s3cr3t`} {
		_, err := ocm.CredentialsFromSecrets(secret(bad))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("CredentialsFromSecrets(%s) error = %v, want an error that does not quote the secret", bad, err)
		}
	}
	opaque := secret(`{}`)
	opaque.Type = corev1.SecretTypeOpaque
	if _, err := ocm.CredentialsFromSecrets(opaque); err == nil {
		t.Error("an Opaque secret was accepted")
	}
}

// pushRaw tags a hand-made manifest, for shapes the writer deliberately does not produce.
func pushRaw(t *testing.T, reg *ocmtest.Registry, component, tag, manifestMediaType string, config []byte, layers ...[]byte) {
	t.Helper()
	target, err := reg.Repository("")(component)
	if err != nil {
		t.Fatal(err)
	}
	repo := target.(*remote.Repository)
	ctx := context.Background()
	push := func(mediaType string, data []byte) map[string]any {
		desc := content.NewDescriptorFromBytes(mediaType, data)
		if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		return map[string]any{"mediaType": desc.MediaType, "digest": desc.Digest, "size": desc.Size}
	}
	m := map[string]any{"schemaVersion": 2, "mediaType": manifestMediaType, "config": push("application/json", config), "layers": []any{}}
	for _, l := range layers {
		m["layers"] = append(m["layers"].([]any), push(spec.MediaTypeDescriptorJSON, l))
	}
	data, _ := json.Marshal(m)
	desc := content.NewDescriptorFromBytes(manifestMediaType, data)
	if err := repo.PushReference(ctx, desc, bytes.NewReader(data), tag); err != nil {
		t.Fatal(err)
	}
}

func TestResolveVectorManifestShapes(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	c := ocm.NewClient(ocm.Options{})
	ctx := context.Background()

	// Docker manifests are not OCM component versions, even when tagged where one is expected.
	pushRaw(t, reg, vectorName, "1.0.0", "application/vnd.docker.distribution.manifest.v2+json", []byte(`{}`))
	_, err := c.ResolveVector(ctx, reg.Ref("", vectorName, "1.0.0"), ocm.Read{})
	assertError(t, err, ocm.ErrUnsupportedMediaType, true)

	// A config without componentDescriptorLayer falls back to the first layer.
	pushRaw(t, reg, vectorName, "2.0.0", "application/vnd.oci.image.manifest.v1+json", []byte(`{}`),
		[]byte(`{"meta":{"schemaVersion":"v2"},"component":{"name":"`+vectorName+`","version":"2.0.0","provider":"p","componentReferences":null}}`))
	v, err := c.ResolveVector(ctx, reg.Ref("", vectorName, "2.0.0"), ocm.Read{})
	if err != nil || v.Version != "2.0.0" {
		t.Errorf("fallback to layers[0]: %+v, %v", v, err)
	}

	// A descriptor of another component under this component's tag is refused.
	pushRaw(t, reg, vectorName, "3.0.0", "application/vnd.oci.image.manifest.v1+json", []byte(`{}`),
		[]byte(`{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/other","version":"3.0.0","provider":"p"}}`))
	_, err = c.ResolveVector(ctx, reg.Ref("", vectorName, "3.0.0"), ocm.Read{})
	assertError(t, err, ocm.ErrDescriptorMismatch, true)

	// Component references come from a descriptor and are validated like parsed references.
	bad := ocmtest.Vector(vectorName, "4.0.0", ocmtest.ComponentVersion{Name: "Not/A/Component", Version: "1.0.0"})
	reg.Push(t, "", bad)
	_, err = c.ResolveVector(ctx, reg.Ref("", vectorName, "4.0.0"), ocm.Read{})
	assertError(t, err, ocm.ErrReferenceInvalid, true)

	// A local blob whose localReference is not among the layers.
	dangling := ocmtest.Artifact("acme.org/artifacts/dangling", "1.0.0", "x", true)
	dangling.Resources[0].Blob = nil
	dangling.Resources[0].Access = spec.LocalBlobAccess{Type: "localBlob", LocalReference: digest.FromString("gone").String(), MediaType: "application/json"}
	reg.Push(t, "", dangling, ocmtest.Vector(vectorName, "5.0.0", dangling))
	_, err = c.ResolveVector(ctx, reg.Ref("", vectorName, "5.0.0"), ocm.Read{})
	assertError(t, err, ocm.ErrNotFound, false)
}

func TestResolveVectorTimeout(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	a := ocmtest.Artifact("acme.org/artifacts/a", "1.0.0", "x", true)
	reg.Push(t, "", a, ocmtest.Vector(vectorName, "1.0.0", a))
	_, err := ocm.NewClient(ocm.Options{Timeout: time.Nanosecond}).ResolveVector(context.Background(), reg.Ref("", vectorName, "1.0.0"), ocm.Read{})
	assertError(t, err, ocm.ErrUnavailable, false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap the deadline", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ocm.NewClient(ocm.Options{}).ResolveVector(ctx, reg.Ref("", vectorName, "1.0.0"), ocm.Read{})
	assertError(t, err, ocm.ErrUnavailable, false)
}

func BenchmarkResolveVector(b *testing.B) {
	reg := ocmtest.NewRegistry(b)
	var artifacts []ocmtest.ComponentVersion
	for i := range 50 {
		a := ocmtest.Artifact(fmt.Sprintf("acme.org/artifacts/a%02d", i), "1.0.0", "cloud.konfidence.flux.helm", i%2 == 0)
		a.Resources = append(a.Resources, ocmtest.TaskResource(ocm.Task{Name: "migrate", Type: "k8s-job", Spec: json.RawMessage(`{"image":"m:1"}`)}))
		artifacts = append(artifacts, a)
	}
	reg.Push(b, "", artifacts...)
	reg.Push(b, "", ocmtest.Vector(vectorName, "1.0.0", artifacts...))
	ref := reg.Ref("", vectorName, "1.0.0")
	ctx := context.Background()
	resolve := func(b *testing.B, c *ocm.Client) {
		v, err := c.ResolveVector(ctx, ref, ocm.Read{})
		if err != nil || len(v.Artifacts) != 50 {
			b.Fatalf("%d artifacts, %v", len(v.Artifacts), err)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			resolve(b, ocm.NewClient(ocm.Options{}))
		}
	})
	b.Run("warm", func(b *testing.B) {
		c := ocm.NewClient(ocm.Options{})
		resolve(b, c)
		before := reg.Requests()
		for b.Loop() {
			resolve(b, c)
		}
		if n := reg.Requests() - before; n != 0 {
			b.Fatalf("warm resolves made %d registry requests", n)
		}
	})
}

// TestResolveVectorDescriptorMismatch: a component version whose descriptor names another version than the tag
// it is read through is refused, permanently, instead of resolving as the version it claims to be; the vector's
// other artifact resolves, with its source pinned by digest.
func TestResolveVectorDescriptorMismatch(t *testing.T) {
	good := ocmtest.Artifact("acme.org/artifacts/good", "1.0.0", "cloud.konfidence.flux.helm", true)
	impostor := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3+build.5", "cloud.konfidence.flux.helm", true)
	impostor.Tag = "2.0.0"
	vector := ocmtest.Vector(vectorName, "2.0.0", good, impostor)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.publish(t, good, impostor, vector)
			v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), b.ref(vector.Name, vector.Version), ocm.Read{})
			assertError(t, err, ocm.ErrDescriptorMismatch, true)
			if v == nil || v.Artifacts[1].Ref != "acme.org/artifacts/frontend:2.0.0" || v.Artifacts[1].Component != impostor.Name {
				t.Fatalf("vector %+v does not list the impostor's reference", v)
			}
			if v.Artifacts[1].Artifact != nil || !strings.Contains(v.Artifacts[1].Err.Error(), "descriptor is for acme.org/artifacts/frontend:1.2.3+build.5") {
				t.Errorf("impostor resolved as %+v (error %v)", v.Artifacts[1].Artifact, v.Artifacts[1].Err)
			}
			a := v.Artifacts[0].Artifact
			if a == nil || !strings.HasSuffix(a.Source, "//"+good.Name+":"+good.Version+"@"+a.Digest) ||
				b.name == "registry" && a.Source != b.ref(good.Name, good.Version)+"@"+a.Digest {
				t.Errorf("good artifact %+v: want its source pinned by its digest", a)
			}
		})
	}
}

// TestAmbiguousAccessIsRefused: an artifact whose chart access has imageReference twice, or in two cases
// (imagereference naming another chart), is refused as DescriptorInvalid, permanently, in JSON and YAML
// descriptors, so no reader can verify one value while another deploys the other; the vector's other artifact
// resolves. Before, both were read, and the verifier and the deployer each picked a different key.
func TestAmbiguousAccessIsRefused(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	good := ocmtest.Artifact("acme.org/artifacts/good", "1.0.0", "cloud.konfidence.flux.helm", true)
	const verified, deployed = "good.example/charts/app:1.0.0", "evil.example/charts/app:1.0.0"
	for _, tc := range []struct {
		name, mediaType string
		access          any
	}{
		{"json-case-variant", spec.MediaTypeDescriptorJSON, map[string]string{"type": "ociArtifact", "imageReference": verified, "imagereference": deployed}},
		{"json-duplicate", spec.MediaTypeDescriptorJSON, json.RawMessage(`{"type":"ociArtifact","imageReference":"` + verified + `","imageReference":"` + deployed + `"}`)},
		{"yaml-case-variant", spec.MediaTypeDescriptorYAML, map[string]string{"type": "ociArtifact", "imageReference": verified, "imagereference": deployed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ocmtest.Artifact("acme.org/artifacts/"+tc.name, "1.0.0", "cloud.konfidence.flux.helm", true)
			a.DescriptorMediaType = tc.mediaType
			a.Resources[1].Access = tc.access
			vector := ocmtest.Vector(vectorName, "1.0.0-"+tc.name, good, a)
			reg.Push(t, "", good, a, vector)
			v, err := ocm.NewClient(ocm.Options{}).ResolveVector(context.Background(), reg.Ref("", vectorName, vector.Version), ocm.Read{})
			assertError(t, err, ocm.ErrDescriptorInvalid, true)
			if !strings.Contains(err.Error(), "keys may appear once") {
				t.Errorf("error %q does not say why", err)
			}
			if v == nil || v.Artifacts[0].Artifact == nil || v.Artifacts[1].Artifact != nil {
				t.Fatalf("vector %+v: want the good artifact resolved and the ambiguous one refused", v)
			}
		})
	}
}
