package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator's namespace and ServiceAccount, as config/default installs them.
const (
	OperatorNamespace      = "fluxdeployer-system"
	OperatorServiceAccount = "fluxdeployer"
)

// Kustomize builds a kustomize directory of the repository (e.g. "config/default") with the real kustomize,
// pinned in hack/tools/kustomize, and returns the objects it renders.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	cmd := exec.Command("go", "tool", "-modfile=hack/tools/kustomize/go.mod", "kustomize", "build", dir)
	cmd.Dir = RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w\n%s", dir, err, stderr.String())
	}
	return Decode(out)
}

// Decode returns the objects of a multi-document YAML (or JSON) stream, skipping empty documents.
func Decode(manifests []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Deployments returns the Deployments among objs, typed, in their order.
func Deployments(objs []*unstructured.Unstructured) ([]*appsv1.Deployment, error) {
	var deployments []*appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			return nil, fmt.Errorf("decoding Deployment %s: %w", u.GetName(), err)
		}
		deployments = append(deployments, d)
	}
	return deployments, nil
}

// InstallOperator applies what config/default installs — namespace, CRDs, ServiceAccount, RBAC, Service —
// except the Deployment: no kubelet runs pods here, so the operator runs as a process under the ServiceAccount.
func InstallOperator(ctx context.Context, c client.Client) error {
	objs, err := Kustomize("config/default")
	if err != nil {
		return err
	}
	return Apply(ctx, c, slices.DeleteFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Deployment" }))
}

// Apply applies the objects in order with server-side apply, as `kubectl apply --server-side` would.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("controlplane"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// ServiceAccountKubeconfig returns a kubeconfig that authenticates as the ServiceAccount with a token from the
// TokenRequest API, as the kubelet mounts one into the operator's pod.
func (s *APIServer) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return nil, err
	}
	day := int64(24 * 60 * 60)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: s.Config.Host, CertificateAuthorityData: s.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}
