package ocmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/yaml"
)

// The deployable artifacts an OCM resource's access points at: Helm charts as Helm pushes them and Kustomize
// bundles as `flux push artifact` does.

// Media types of Helm's OCI charts and Flux's OCI artifacts.
const (
	MediaTypeHelmConfig  = "application/vnd.cncf.helm.config.v1+json"
	MediaTypeHelmChart   = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	MediaTypeFluxConfig  = "application/vnd.cncf.flux.config.v1+json"
	MediaTypeFluxContent = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// Chart is a Helm chart: Chart.yaml is generated from Name, Version and KubeVersion (the constraint Helm checks
// against the version the API server reports, left out when empty), Files are the rest (templates/…,
// values.yaml) by their path inside the chart.
type Chart struct {
	Name, Version, KubeVersion string
	Files                      map[string]string
}

// PublicKubeVersion is the kubeVersion constraint most public charts carry: the test charts carry it too, so a
// control plane that reports no real version (Helm refuses such charts against it) fails the tests that install
// them.
const PublicKubeVersion = ">=1.23.0-0"

type chartMetadata struct {
	APIVersion  string `json:"apiVersion"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	KubeVersion string `json:"kubeVersion,omitempty"`
	Type        string `json:"type"`
}

// PushHelmChart pushes the chart to host/repository/<name> as `helm push` does (the tag is the version with "+"
// written "_") and returns the reference an OCM ociArtifact access names it by, with http:// for plain HTTP.
func PushHelmChart(ctx context.Context, host, repository string, c Chart) (string, error) {
	path, tag := chartPath(repository, c)
	if _, err := pushChart(ctx, plainRepository(host, path), c); err != nil {
		return "", err
	}
	return fmt.Sprintf("http://%s/%s:%s", host, path, tag), nil
}

// chartPath is where `helm push` puts a chart below repository, and its tag.
func chartPath(repository string, c Chart) (path, tag string) {
	return strings.TrimSuffix(repository, "/") + "/" + c.Name, strings.ReplaceAll(c.Version, "+", "_")
}

// pushChart pushes and tags the chart in repo and returns its manifest.
func pushChart(ctx context.Context, repo *remote.Repository, c Chart) (ocispec.Descriptor, error) {
	// Chart.yaml and Helm's OCI config blob hold the same metadata, as YAML and as JSON.
	meta := chartMetadata{APIVersion: "v2", Name: c.Name, Version: c.Version, KubeVersion: c.KubeVersion, Type: "application"}
	chartYAML, err := yaml.Marshal(meta)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	files := map[string]string{c.Name + "/Chart.yaml": string(chartYAML)}
	for path, content := range c.Files {
		files[c.Name+"/"+path] = content
	}
	config, err := json.Marshal(meta)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	_, tag := chartPath("", c)
	return pushTarGz(ctx, repo, tag, MediaTypeHelmConfig, config, MediaTypeHelmChart, files, nil)
}

// PushKustomizeBundle pushes files (kustomization.yaml and what it lists) as a Flux OCI artifact to
// host/path:tag and returns its reference with http://.
func PushKustomizeBundle(ctx context.Context, host, path, tag string, files map[string]string) (string, error) {
	_, err := pushTarGz(ctx, plainRepository(host, path), tag, MediaTypeFluxConfig, []byte("{}"), MediaTypeFluxContent, files, map[string]string{
		ocispec.AnnotationCreated:  "2026-11-29T00:00:00Z",
		ocispec.AnnotationSource:   "https://example.org/acme/" + path,
		ocispec.AnnotationRevision: tag + "@sha1:0000000000000000000000000000000000000000",
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://%s/%s:%s", host, path, tag), nil
}

// plainRepository is a repository of a plain-HTTP registry, written anonymously.
func plainRepository(host, path string) *remote.Repository {
	return &remote.Repository{Reference: registry.Reference{Registry: host, Repository: path}, PlainHTTP: true}
}

// pushTarGz pushes to repo an image manifest with one config blob and one layer holding files as a gzipped tar,
// tags it and returns it.
func pushTarGz(ctx context.Context, repo *remote.Repository, tag, configType string, config []byte, layerType string,
	files, annotations map[string]string) (ocispec.Descriptor, error) {
	layer, err := tarGz(files)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	configDesc, err := push(ctx, repo, configType, config)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layerDesc, err := push(ctx, repo, layerType, layer)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		Layers: []ocispec.Descriptor{layerDesc}, ConfigDescriptor: &configDesc, ManifestAnnotations: annotations,
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return manifest, repo.Tag(ctx, manifest, tag)
}

// tarGz writes files in name order with fixed metadata, so the same files always give the same digest.
func tarGz(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WebChart renders, from the release name alone, a ConfigMap and a Service that reports itself as the
// deployment result "web": what the authoring rules ask of a chart deployed more than once. The
// demo and the end-to-end tests install it.
func WebChart(name, version string) Chart {
	return Chart{Name: name, Version: version, KubeVersion: PublicKubeVersion, Files: map[string]string{
		"values.yaml": "greeting: hello\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  release: {{ .Release.Name | quote }}
  greeting: {{ .Values.greeting | quote }}
`,
		"templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
  annotations:
    konfidence.cloud/deployment-result: web
spec:
  selector:
    app.kubernetes.io/instance: {{ .Release.Name }}
  ports:
    - name: http
      port: 80
      protocol: TCP
`,
	}}
}

// workloadDeployment is a Deployment of one container serving HTTP on 8080 whose readiness the kubelet probes
// on /readyz, as a non-root user on a read-only root filesystem. NAME, IMAGE and ARGS are replaced.
const workloadDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/instance: NAME
  template:
    metadata:
      labels:
        app.kubernetes.io/instance: NAME
    spec:
      terminationGracePeriodSeconds: 5
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
      containers:
        - name: app
          image: IMAGE
          imagePullPolicy: IfNotPresent
          args: ARGS
          ports:
            - name: http
              containerPort: 8080
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: 1
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
---
apiVersion: v1
kind: Service
metadata:
  name: NAME
  annotations:
    konfidence.cloud/deployment-result: web
spec:
  selector:
    app.kubernetes.io/instance: NAME
  ports:
    - name: http
      port: 80
      targetPort: http
      protocol: TCP
`

func workload(name, image string, args []string) string {
	quoted, _ := json.Marshal(append([]string{}, args...))
	return strings.NewReplacer("NAME", name, "IMAGE", image, "ARGS", string(quoted)).Replace(workloadDeployment)
}

// WorkloadChart renders a Deployment of image (run with args) named after the release, and its Service as the
// deployment result "web": a workload that really starts on a node, whose readiness Helm waits for.
func WorkloadChart(name, version, image string, args ...string) Chart {
	return Chart{Name: name, Version: version, KubeVersion: PublicKubeVersion, Files: map[string]string{
		"templates/workload.yaml": workload("{{ .Release.Name }}", image, args),
	}}
}

// WorkloadBundle is a Kustomize bundle of the same Deployment and Service, named name, which also selects the
// pods. The deployer's name suffix makes each deployment's object names unique but leaves selectors alone, so two
// versions of a bundle that run side by side in a namespace (a Stage moving from one to the other) need names of
// their own, or each one's Service selects the other's pods too.
func WorkloadBundle(name, image string, args ...string) map[string]string {
	return map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - workload.yaml\n",
		"workload.yaml":      workload(name, image, args),
	}
}

// ConfigBundle is a Kustomize bundle with one ConfigMap, app-config.
var ConfigBundle = map[string]string{
	"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - configmap.yaml\n",
	"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  greeting: hello\n",
}

// ManifestDigest resolves an image reference as PushHelmChart and PushKustomizeBundle return it to the digest of
// the manifest it names.
func ManifestDigest(ctx context.Context, imageReference string) (string, error) {
	rest, plainHTTP := strings.CutPrefix(imageReference, "http://")
	ref, err := registry.ParseReference(rest)
	if err != nil {
		return "", err
	}
	repo := &remote.Repository{Reference: ref, PlainHTTP: plainHTTP}
	desc, err := repo.Resolve(ctx, ref.Reference)
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// PushPinnedChart pushes a chart as PushHelmChart does and returns the helmChart resource naming it, with the
// manifest digest recorded as OCM records it, so the artifact pins the chart's content.
func PushPinnedChart(ctx context.Context, host, repository string, c Chart) (Resource, error) {
	ref, err := PushHelmChart(ctx, host, repository, c)
	if err != nil {
		return Resource{}, err
	}
	digest, err := ManifestDigest(ctx, ref)
	if err != nil {
		return Resource{}, err
	}
	return ChartResource(c.Version, ref).WithOCIDigest(digest), nil
}
