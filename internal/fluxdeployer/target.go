package fluxdeployer

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
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
	// registry is the host (host[:port]) source-controller pulls the artifact from: an OCI registry, or a Helm
	// repository's.
	registry string
}

// secretLookup tells whether a Secret of this name exists in the ArtifactDeployment's namespace.
type secretLookup func(name string) (bool, error)

// observed is what the deployer reads from the cluster to decide an ArtifactDeployment's Flux objects.
type observed struct {
	secretExists secretLookup
	// helmRelease returns the HelmRelease named like the ArtifactDeployment, nil when there is none.
	helmRelease func() (*helmv2.HelmRelease, error)
}

// resolveReferences decides the target and the pull Secret of an ArtifactDeployment. Only Secrets that exist
// are referenced: Flux fails a source whose secretRef is missing, while an anonymous pull of a public
// registry works. The deployer reads Secrets from the API server directly: watching Secrets would need list and
// watch on every Secret of the cluster, which RBAC cannot limit to metadata, so the deployer may only get Secrets
// it names, and a Secret created or deleted later is noticed at the next interval (or reconcile request).
func resolveReferences(cfg config, ad *konfidencev1.ArtifactDeployment, a artifact, secretExists secretLookup) (references, error) {
	t, err := resolveTarget(cfg, ad, secretExists)
	if err != nil {
		return references{}, err
	}
	refs := references{target: t, registry: a.host}
	if name, ok := cfg.authenticationSecretRefs[a.host]; ok {
		exists, err := secretExists(name)
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
func resolveTarget(cfg config, ad *konfidencev1.ArtifactDeployment, secretExists secretLookup) (target, error) {
	t := target{namespace: targetNamespace(cfg, ad)}
	if ref, ok := cfg.deploymentTargets[ad.Namespace]; ok {
		t.kubeConfig = &ref
	} else if cfg.deploymentTargetSecretName != "" {
		exists, err := secretExists(cfg.deploymentTargetSecretName)
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

// objectExists reads only the metadata of a core object of kind: the operator never holds the data of a Secret it
// only refers to.
func objectExists(ctx context.Context, r client.Reader, kind, namespace, name string) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, m)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
}
