package testenv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestConfigDefaultIsAcceptedByTheAPIServer builds the kustomize base an installation uses, config/default, with
// the real kustomize, and has the API server validate every object it renders (server-side apply, dry run).
func TestConfigDefaultIsAcceptedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	cmd := exec.Command("go", "tool", "-modfile=hack/tools/kustomize/go.mod", "kustomize", "build", "config/default")
	cmd.Dir = RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v\n%s", err, stderr.String())
	}

	kinds := map[string]int{}
	var deployment *appsv1.Deployment
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		kinds[u.GetKind()]++
		opts := []client.ApplyOption{client.FieldOwner("config-test"), client.ForceOwnership}
		if u.GetKind() != "Namespace" { // namespaced objects need their namespace to exist, even in a dry run
			opts = append(opts, client.DryRunAll)
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
			t.Errorf("%s %s/%s rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		if u.GetKind() == "Deployment" {
			deployment = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, deployment); err != nil {
				t.Fatal(err)
			}
		}
	}
	for kind, want := range map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Deployment": 1,
	} {
		if kinds[kind] != want {
			t.Errorf("config/default renders %d %s, want %d (all: %v)", kinds[kind], kind, want, kinds)
		}
	}
	if deployment == nil {
		t.Fatal("no Deployment")
	}
	pod := deployment.Spec.Template.Spec
	if deployment.Namespace != "fluxdeployer-system" || pod.ServiceAccountName != "fluxdeployer" || pod.Containers[0].Args[0] != "run" {
		t.Errorf("Deployment %s/%s: service account %q, args %v", deployment.Namespace, deployment.Name, pod.ServiceAccountName, pod.Containers[0].Args)
	}
}
