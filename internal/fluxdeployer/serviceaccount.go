package fluxdeployer

import (
	"context"
	"time"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// serviceAccountRecheck is how soon an ArtifactDeployment refused for a missing ServiceAccount looks again:
// ServiceAccounts are not watched (a watch would cache every account of the cluster), and creating the account is
// the platform's fix; a reconcile request looks at once.
const serviceAccountRecheck = time.Minute

// checkServiceAccount refuses, before any Flux object names it, a ServiceAccount that does not exist in the
// ArtifactDeployment's namespace: helm-controller and kustomize-controller would fail with an impersonation error
// that names no account ("cannot list secrets"), and only this namespace's ArtifactDeployments are affected. The
// answer is shared by the namespace's ArtifactDeployments for a few seconds, as for Secrets, unless fresh (a
// requested reconcile). A remote target's account lives on the remote cluster, which Flux asks, not the deployer.
func (r *Reconciler) checkServiceAccount(ctx context.Context, ad *konfidencev1.ArtifactDeployment, cfg config, t target, fresh bool) error {
	name := cfg.serviceAccountFor(ad.Namespace)
	if name == "" || t.kubeConfig != nil {
		return nil
	}
	exists, err := r.serviceAccounts.lookup(ctx, ad.Namespace, fresh)(name)
	switch {
	case err != nil:
		return err
	case !exists:
		return outcome.Stallingf(konfidencev1.ServiceAccountNotFoundReason,
			"ServiceAccount %s/%s, which the Flux objects run as (the deployer's ConfigMap names it), does not exist", ad.Namespace, name)
	}
	return nil
}
