package fluxdeployer

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// target is where an artifact's workloads go.
type target struct {
	namespace  string
	kubeConfig *meta.KubeConfigReference // nil: the cluster the Flux objects live on
}

// references are the Secrets and the target the Flux objects refer to, resolved against the cluster.
type references struct {
	target     target
	pullSecret *meta.LocalObjectReference // nil: anonymous pulls
}

// resolveReferences decides the target and the pull Secret of an ArtifactDeployment. Only Secrets that exist
// are referenced: Flux fails a source whose secretRef is missing, while an anonymous pull of a public
// registry works. r reads the API server directly: watching Secrets would need list and watch on every Secret of
// the cluster, which RBAC cannot limit to metadata, so the deployer may only get Secrets it names, and a Secret
// created or deleted later is noticed at the next interval (or reconcile request).
func resolveReferences(ctx context.Context, r client.Reader, cfg config, ad *konfidencev1.ArtifactDeployment, a artifact) (references, error) {
	t, err := resolveTarget(ctx, r, cfg, ad)
	if err != nil {
		return references{}, err
	}
	refs := references{target: t}
	if name, ok := cfg.authenticationSecretRefs[a.host]; ok {
		exists, err := secretExists(ctx, r, ad.Namespace, name)
		if err != nil {
			return references{}, err
		}
		if exists {
			refs.pullSecret = &meta.LocalObjectReference{Name: name}
		}
	}
	return refs, nil
}

// resolveTarget decides where an ArtifactDeployment's workloads go.
func resolveTarget(ctx context.Context, r client.Reader, cfg config, ad *konfidencev1.ArtifactDeployment) (target, error) {
	t := target{namespace: targetNamespace(cfg, ad)}
	if ref, ok := cfg.deploymentTargets[ad.Namespace]; ok {
		t.kubeConfig = &ref
	} else if cfg.deploymentTargetSecretName != "" {
		exists, err := secretExists(ctx, r, ad.Namespace, cfg.deploymentTargetSecretName)
		if err != nil {
			return target{}, err
		}
		if exists {
			t.kubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: cfg.deploymentTargetSecretName}}
		}
	}
	return t, nil
}

// targetNamespace is the namespace an ArtifactDeployment's workloads go to, on whichever cluster.
func targetNamespace(cfg config, ad *konfidencev1.ArtifactDeployment) string {
	if cfg.targetNamespace != "" {
		return cfg.targetNamespace
	}
	return ad.Namespace
}

// secretExists reads only the Secret's metadata: the operator never holds the data of a Secret it only refers to.
func secretExists(ctx context.Context, r client.Reader, namespace, name string) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, m)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
}
