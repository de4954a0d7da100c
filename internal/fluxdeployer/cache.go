package fluxdeployer

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
)

// TrimFluxStatus is a cache transform that keeps, of a Flux object's status, what the deployer reads: the
// conditions and observedGeneration. The rest is Flux's record of its own work and can be most of the object: a
// Kustomization's inventory lists every object it applied, a HelmRelease's history its last releases, a source its
// artifact. The cache holds two Flux objects per ArtifactDeployment, and 10,000 ArtifactDeployments must fit in
// 150 MiB. Other objects pass unchanged.
func TrimFluxStatus(obj any) (any, error) {
	switch o := obj.(type) {
	case *helmv2.HelmRelease:
		o.Status = helmv2.HelmReleaseStatus{ObservedGeneration: o.Status.ObservedGeneration, Conditions: o.Status.Conditions}
	case *kustomizev1.Kustomization:
		o.Status = kustomizev1.KustomizationStatus{ObservedGeneration: o.Status.ObservedGeneration, Conditions: o.Status.Conditions}
	case *sourcev1.OCIRepository:
		o.Status = sourcev1.OCIRepositoryStatus{ObservedGeneration: o.Status.ObservedGeneration, Conditions: o.Status.Conditions}
	case *sourcev1.HelmRepository:
		o.Status = sourcev1.HelmRepositoryStatus{ObservedGeneration: o.Status.ObservedGeneration, Conditions: o.Status.Conditions}
	case *sourcev1.HelmChart:
		o.Status = sourcev1.HelmChartStatus{ObservedGeneration: o.Status.ObservedGeneration, Conditions: o.Status.Conditions}
	}
	return obj, nil
}
