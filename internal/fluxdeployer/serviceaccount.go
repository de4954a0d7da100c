package fluxdeployer

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// serviceAccountRecheck is how soon an ArtifactDeployment refused for a missing ServiceAccount looks again:
// ServiceAccounts are not watched (a watch would cache every account of the cluster), and creating the account
// is the platform's fix.
const serviceAccountRecheck = time.Minute

// checkServiceAccount refuses, before any Flux object names it, a ServiceAccount that does not exist in the
// ArtifactDeployment's namespace: helm-controller and kustomize-controller would fail with an impersonation
// error that names no account ("cannot list secrets"), and only this namespace's ArtifactDeployments are
// affected. A remote target's account lives on the remote cluster, which Flux asks, not the deployer.
func (r *Reconciler) checkServiceAccount(ctx context.Context, ad *konfidencev1.ArtifactDeployment, cfg config, t target) error {
	name := cfg.serviceAccountFor(ad.Namespace)
	if name == "" || t.kubeConfig != nil {
		return nil
	}
	account := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}}
	switch err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: name}, account); {
	case apierrors.IsNotFound(err):
		return outcome.Stallingf(konfidencev1.ServiceAccountNotFoundReason,
			"ServiceAccount %s/%s, which the Flux objects run as (the deployer's ConfigMap names it), does not exist", ad.Namespace, name)
	case err != nil:
		return fmt.Errorf("reading ServiceAccount %s/%s: %w", ad.Namespace, name, err)
	}
	return nil
}
