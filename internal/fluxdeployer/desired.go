package fluxdeployer

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
)

// observe reads the cluster state the Flux objects of ad depend on: whether Secrets exist from the API server (see
// resolveReferences; answers are shared for presenceTTL unless fresh), the HelmRelease from the cache.
func (r *Reconciler) observe(ctx context.Context, ad *konfidencev1.ArtifactDeployment, fresh bool) observed {
	return observed{
		secretExists: r.secrets.lookup(ctx, ad.Namespace, fresh),
		helmRelease: func() (*helmv2.HelmRelease, error) {
			hr := &helmv2.HelmRelease{}
			err := r.client.Get(ctx, client.ObjectKeyFromObject(ad), hr)
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				return nil, nil
			}
			if err != nil {
				return nil, outcome.Retrying(konfidencev1.ApplyFailedReason, fmt.Errorf("reading HelmRelease %s/%s: %w", ad.Namespace, ad.Name, err))
			}
			return hr, nil
		},
	}
}

// desiredObjects decides the Flux objects of ad and what they refer to, from ad, the configuration and what is
// observed of the cluster; it reads nothing else, so `fluxdeployer render` builds with it too.
func desiredObjects(ad *konfidencev1.ArtifactDeployment, cfg config, cluster observed) ([]client.Object, references, error) {
	if err := checkName(ad.Name); err != nil {
		return nil, references{}, err
	}
	resource, err := selectResource(ad)
	if err != nil {
		return nil, references{}, err
	}
	a, err := resolveAccess(resource)
	if err != nil {
		return nil, references{}, err
	}
	refs, err := resolveReferences(cfg, ad, a, cluster.secretExists)
	if err != nil {
		return nil, references{}, err
	}
	if err := a.checkCredentialsTLS(cfg, refs.pullSecret); err != nil {
		return nil, references{}, err
	}
	if ad.Spec.Manifest.Type == KustomizeManifestType {
		objects, err := buildKustomize(ad, a, refs, cfg)
		return objects, refs, err
	}
	// Only a name too long for Helm (a Konfidence install taken over) takes its release name from the live
	// HelmRelease; reading it for every other name would fail while the HelmRelease CRD is missing.
	var live *helmv2.HelmRelease
	if len(ad.Name) > maxReleaseNameLength {
		if live, err = cluster.helmRelease(); err != nil {
			return nil, references{}, err
		}
	}
	release, err := releaseName(ad, live)
	if err != nil {
		return nil, references{}, err
	}
	return buildHelm(ad, a, refs, cfg, release), refs, nil
}
