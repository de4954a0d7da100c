package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fluxdeployer/fluxdeployer/internal/controlplane"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
)

// The image config/manager names, tagged with the release tag (v and the VERSION file's version).
const releaseImageName = "ghcr.io/fluxdeployer/fluxdeployer"

// TestConfigDefaultIsAcceptedByTheAPIServer builds the kustomize base an installation uses, config/default, with
// the real kustomize, and has the API server validate every object it renders (server-side apply, dry run).
func TestConfigDefaultIsAcceptedByTheAPIServer(t *testing.T) {
	kinds := map[string]int{}
	var deployment *appsv1.Deployment
	var service *corev1.Service
	for _, u := range kustomizeBuild(t, "config/default") {
		kinds[u.GetKind()]++
		apply(t, u)
		switch u.GetKind() {
		case "Deployment":
			deployment = &appsv1.Deployment{}
			fromUnstructured(t, u, deployment)
		case "Service":
			service = &corev1.Service{}
			fromUnstructured(t, u, service)
		}
	}
	for kind, want := range map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 3, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 1, "NetworkPolicy": 1, "PriorityClass": 1,
	} {
		if kinds[kind] != want {
			t.Errorf("config/default renders %d %s, want %d (all: %v)", kinds[kind], kind, want, kinds)
		}
	}
	if deployment == nil || service == nil {
		t.Fatal("no Deployment or no Service")
	}
	pod := deployment.Spec.Template.Spec
	if deployment.Namespace != controlplane.OperatorNamespace || pod.ServiceAccountName != "fluxdeployer" || pod.Containers[0].Args[0] != "run" {
		t.Errorf("Deployment %s/%s: service account %q, args %v", deployment.Namespace, deployment.Name, pod.ServiceAccountName, pod.Containers[0].Args)
	}

	// The release image, never :latest: the release tag, the VERSION file's version with a v, is the tag
	// (hack/image and the Dockerfile stamp the version into the binary and the labels).
	version, err := os.ReadFile(filepath.Join(RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if want, got := releaseImageName+":v"+strings.TrimSpace(string(version)), pod.Containers[0].Image; got != want {
		t.Errorf("manager image %q, want %q (the VERSION file's)", got, want)
	}

	// The image's nonroot user, spelled out for the kubelet.
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		sc.RunAsGroup == nil || *sc.RunAsGroup != 65532 {
		t.Errorf("pod securityContext %+v; want runAsNonRoot, runAsUser and runAsGroup 65532", sc)
	}

	// The metrics Service selects the manager's pods and reaches its metrics port.
	if service.Namespace != deployment.Namespace || len(service.Spec.Selector) == 0 ||
		!labels.SelectorFromSet(service.Spec.Selector).Matches(labels.Set(deployment.Spec.Template.Labels)) {
		t.Errorf("Service %s/%s selects %v; the manager's pods in %s are labelled %v", service.Namespace, service.Name,
			service.Spec.Selector, deployment.Namespace, deployment.Spec.Template.Labels)
	}
	type port struct {
		Name string
		Port int32
	}
	var ports []port
	for _, p := range service.Spec.Ports {
		ports = append(ports, port{p.Name, p.Port})
	}
	if diff := cmp.Diff([]port{{"http-metrics", 8080}}, ports); diff != "" {
		t.Fatalf("Service ports (-want +got):\n%s", diff)
	}
	manager := pod.Containers[0]
	target := service.Spec.Ports[0].TargetPort.String()
	if !slices.ContainsFunc(manager.Ports, func(p corev1.ContainerPort) bool { return p.Name == target && p.ContainerPort == 8080 }) ||
		!slices.Contains(manager.Args, "--metrics-addr=:8080") {
		t.Errorf("Service targets port %s; the manager serves metrics with %v on %+v", target, manager.Args, manager.Ports)
	}

	// The Go runtime's soft memory limit is the container's limit, so that garbage collection tightens before an OOM kill.
	if !slices.ContainsFunc(manager.Env, func(e corev1.EnvVar) bool {
		return e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" && e.ValueFrom.ResourceFieldRef.ContainerName == manager.Name
	}) || manager.Resources.Limits.Memory().IsZero() {
		t.Errorf("manager env %+v, limits %v; want GOMEMLIMIT from limits.memory", manager.Env, manager.Resources.Limits)
	}
}

// TestConfigSamplesAreAcceptedByTheAPIServer: config/samples renders a VectorDeployment and the Flux deployer's
// ConfigMap in the operator's namespace, and the API server accepts both.
func TestConfigSamplesAreAcceptedByTheAPIServer(t *testing.T) {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(controlplane.OperatorNamespace)
	apply(t, ns)
	kinds := map[string]int{}
	for _, u := range kustomizeBuild(t, "config/samples") {
		kinds[u.GetKind()]++
		switch u.GetKind() {
		case "ConfigMap":
			if u.GetNamespace() != controlplane.OperatorNamespace || u.GetName() != "flux-deployer-configuration" {
				t.Errorf("sample ConfigMap %s/%s: the Flux deployer reads fluxdeployer-system/flux-deployer-configuration",
					u.GetNamespace(), u.GetName())
			}
		case "VectorDeployment":
			if u.GetNamespace() == "" { // kubectl apply puts it into the current namespace
				u.SetNamespace("default")
			}
			// The CRD takes any string; the reconciler would refuse a malformed reference or a CTF directory.
			vector, _, _ := unstructured.NestedString(u.Object, "spec", "vector")
			if ref, err := ocm.ParseRef(vector); err != nil || ref.IsCTF() {
				t.Errorf("sample VectorDeployment's spec.vector %q: %v; want a registry reference", vector, err)
			}
		}
		apply(t, u)
	}
	if !reflect.DeepEqual(kinds, map[string]int{"ConfigMap": 1, "VectorDeployment": 1}) {
		t.Errorf("config/samples renders %v, want a ConfigMap and a VectorDeployment", kinds)
	}
}

// TestStageSampleIsAcceptedByTheAPIServer: config/samples/stage.yaml, which kustomization.yaml leaves out (beside
// the sample VectorDeployment it would deploy the same vector twice) and docs/api/stage.md shows, is a Stage the
// API server accepts, naming the vector the sample VectorDeployment names.
func TestStageSampleIsAcceptedByTheAPIServer(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "samples", "stage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Stage" {
		t.Fatalf("config/samples/stage.yaml holds a %s, want a Stage", u.GetKind())
	}
	vector, _, _ := unstructured.NestedString(u.Object, "spec", "vector")
	for _, s := range kustomizeBuild(t, "config/samples") {
		if s.GetKind() == "VectorDeployment" {
			if sample, _, _ := unstructured.NestedString(s.Object, "spec", "vector"); sample != vector {
				t.Errorf("the sample Stage names vector %q, the sample VectorDeployment %q", vector, sample)
			}
		}
	}
	u.SetNamespace("default")
	apply(t, u)
}

// TestInstallerIsConfigDefaultWithTheImage: what make deploy applies and make build-installer writes
// (hack/kustomize-with-image.sh) is config/default with the manager's image replaced, and nothing else changed.
func TestInstallerIsConfigDefaultWithTheImage(t *testing.T) {
	want := kustomizeBuild(t, "config/default")
	for _, img := range []string{
		"registry.test:5000/team/fluxdeployer:1.2.3",
		"registry.test/fluxdeployer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	} {
		cmd := exec.Command(filepath.Join("hack", "kustomize-with-image.sh"), img)
		cmd.Dir = RepoRoot()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/kustomize-with-image.sh %s: %v\n%s", img, err, stderr.String())
		}
		got, err := controlplane.Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range want {
			if u.GetKind() == "Deployment" {
				containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				containers[0].(map[string]any)["image"] = img
				if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("hack/kustomize-with-image.sh %s renders %d objects, config/default %d", img, len(got), len(want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i].Object, want[i].Object) {
				t.Errorf("hack/kustomize-with-image.sh %s: %s %s is\n%v\nwant\n%v", img, got[i].GetKind(), got[i].GetName(), got[i].Object, want[i].Object)
			}
		}
	}
}

// kustomizeBuild builds a kustomization of this repository with the real kustomize and decodes its objects.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := controlplane.Kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// apply has the API server validate an object: a server-side apply in a dry run, except for namespaces, which
// are created since namespaced objects need theirs to exist even in a dry run.
func apply(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	opts := []client.ApplyOption{client.FieldOwner("config-test"), client.ForceOwnership}
	if u.GetKind() != "Namespace" {
		opts = append(opts, client.DryRunAll)
	}
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		t.Errorf("%s %s/%s rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, obj any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		t.Fatal(err)
	}
}
