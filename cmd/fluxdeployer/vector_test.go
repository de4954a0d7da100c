package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

type inspectOutput struct {
	Vector         string `json:"vector"`
	UID            string `json:"uid"`
	UIDPlaceholder bool   `json:"uidPlaceholder"`
	Artifacts      []struct {
		Component  string `json:"component"`
		Version    string `json:"version"`
		Type       string `json:"type"`
		AllowReuse bool   `json:"allowReuse"`
		Name       string `json:"name"`
		Hash       string `json:"hash"`
		Tasks      []struct {
			Name      string          `json:"name"`
			Type      string          `json:"type"`
			DependsOn []string        `json:"dependsOn"`
			Spec      json.RawMessage `json:"spec"`
		} `json:"tasks"`
		Resources []struct {
			Name   string         `json:"name"`
			Type   string         `json:"type"`
			Access map[string]any `json:"access"`
		} `json:"resources"`
	} `json:"artifacts"`
}

func fixtures() []ocmtest.ComponentVersion {
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true)
	frontend.Resources = append(frontend.Resources, ocmtest.TaskResource(ocm.Task{
		Name: "seed-data", Type: "k8s-job", DependsOn: []string{"migrate-db"}, Spec: json.RawMessage(`{"image":"seed:1.0"}`),
	}))
	backend := ocmtest.Artifact("acme.org/artifacts/backend", "2.0.0+build.5", "cloud.konfidence.flux.kustomize", false)
	return []ocmtest.ComponentVersion{frontend, backend, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, backend)}
}

func TestVectorInspectJSON(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	reg.Push(t, "demo", fixtures()...)
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, fixtures()...)

	for _, ref := range []string{reg.Ref("demo", "acme.org/vectors/shop", "1.0.0"), "ctf::" + dir + "//acme.org/vectors/shop:1.0.0"} {
		t.Run(ref, func(t *testing.T) {
			out, err := runCLI(t, "vector", "inspect", ref, "--uid", "vd-uid-1", "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var got inspectOutput
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			if dec.More() {
				t.Fatalf("output %q holds more than one JSON value", out)
			}
			if got.Vector != ref || len(got.Artifacts) != 2 {
				t.Fatalf("output = %+v", got)
			}
			front, back := got.Artifacts[0], got.Artifacts[1]
			wantFront, hashFront, _ := naming.ArtifactDeploymentName("acme.org/artifacts/frontend", "1.2.3", "", 0)
			wantBack, hashBack, _ := naming.ArtifactDeploymentName("acme.org/artifacts/backend", "2.0.0+build.5", "vd-uid-1", 0)
			// The tasks and resources are compared below; the backend's tasks only for being [], not null.
			type artifact struct {
				Component, Version, Type string
				AllowReuse               bool
				Name, Hash               string
			}
			if diff := cmp.Diff(artifact{"acme.org/artifacts/frontend", "1.2.3", "cloud.konfidence.flux.helm", true, wantFront, hashFront},
				artifact{front.Component, front.Version, front.Type, front.AllowReuse, front.Name, front.Hash}); diff != "" {
				t.Errorf("frontend (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(artifact{"acme.org/artifacts/backend", "2.0.0+build.5", "cloud.konfidence.flux.kustomize", false, wantBack, hashBack},
				artifact{back.Component, back.Version, back.Type, back.AllowReuse, back.Name, back.Hash}); diff != "" {
				t.Errorf("backend, named with the uid (-want +got):\n%s", diff)
			}
			if back.Tasks == nil {
				t.Errorf("backend tasks are null, want []")
			}
			var spec bytes.Buffer
			if len(front.Tasks) != 1 || front.Tasks[0].Name != "seed-data" || json.Compact(&spec, front.Tasks[0].Spec) != nil || spec.String() != `{"image":"seed:1.0"}` {
				t.Errorf("frontend tasks = %+v", front.Tasks)
			}
			if len(front.Resources) != 1 || front.Resources[0].Access["imageReference"] != "ghcr.io/stefanprodan/charts/podinfo:6.9.1" {
				t.Errorf("frontend resources = %+v", front.Resources)
			}
		})
	}
}

func TestVectorInspectTable(t *testing.T) {
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, fixtures()...)
	out, err := runCLI(t, "vector", "inspect", dir+"//acme.org/vectors/shop:1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	name, _, _ := naming.ArtifactDeploymentName("acme.org/artifacts/frontend", "1.2.3", "", 0)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "COMPONENT") ||
		!strings.Contains(lines[1], name) || !strings.Contains(lines[1], "seed-data") || !strings.Contains(lines[1], "chart(helmChart)") ||
		!strings.HasPrefix(lines[3], "Non-reusable artifacts are named for the placeholder VectorDeployment UID") {
		t.Errorf("table output:\n%s", out)
	}
}

func TestVectorInspectCredentialsAndCA(t *testing.T) {
	reg := ocmtest.NewRegistry(t, ocmtest.WithTLS(), ocmtest.WithBasicAuth("robot", "pw"))
	reg.Push(t, "", fixtures()...)
	ref := reg.Ref("", "acme.org/vectors/shop", "1.0.0")
	dir := t.TempDir()
	ca, config := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "config.json")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: reg.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, reg.DockerConfigJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "vector", "inspect", ref, "--ca-file", ca); err == nil || !strings.HasPrefix(err.Error(), "Unauthorized: ") {
		t.Errorf("without credentials: error = %v, want Unauthorized", err)
	}
	if _, err := runCLI(t, "vector", "inspect", ref, "--docker-config", config); err == nil || !strings.HasPrefix(err.Error(), "TLSError: ") {
		t.Errorf("without the CA: error = %v, want TLSError", err)
	}
	out, err := runCLI(t, "vector", "inspect", ref, "--ca-file", ca, "--docker-config", config, "-o", "json")
	if err != nil || !strings.Contains(out, `"acme.org/artifacts/backend"`) {
		t.Errorf("with CA and credentials: %v\n%s", err, out)
	}
}

func TestVectorInspectErrors(t *testing.T) {
	dir := t.TempDir()
	ocmtest.WriteCTF(t, dir, fixtures()...)
	for args, wantPrefix := range map[string]string{
		dir + "//acme.org/vectors/shop:9.9.9":    "NotFound: ",
		dir + "/acme.org/vectors/shop:1.0.0":     "ReferenceInvalid: ",
		dir + "//acme.org/vectors/shop:1.0.0 -o": "",
	} {
		fields := strings.Fields(args)
		out, err := runCLI(t, append([]string{"vector", "inspect"}, fields...)...)
		if err == nil {
			t.Errorf("inspect %s succeeded:\n%s", args, out)
			continue
		}
		if !strings.HasPrefix(err.Error(), wantPrefix) {
			t.Errorf("inspect %s: error %q, want prefix %q", args, err, wantPrefix)
		}
	}
	if _, err := runCLI(t, "vector", "inspect", dir+"//acme.org/vectors/shop:1.0.0", "-o", "xml"); err == nil {
		t.Error("-o xml was accepted")
	}
}
