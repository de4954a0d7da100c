package fluxdeployer

import (
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// maxNameSuffixLength keeps a suffixed name within the 63 characters of a Service name for workload names of up
// to 27 characters; longer suffixes fall back to the hash alone.
const maxNameSuffixLength = 36

// buildKustomize returns the OCIRepository and the Kustomization of a kustomize artifact.
func buildKustomize(ad *konfidencev1.ArtifactDeployment, a artifact, refs references, cfg config) ([]client.Object, error) {
	if !a.isOCI() {
		return nil, outcome.Stallingf(konfidencev1.UnsupportedAccessTypeReason, "a kustomize bundle is pulled from an OCI registry, not from Helm repository %s", a.helmRepositoryURL)
	}
	suffix, err := nameSuffix(ad)
	if err != nil {
		return nil, err
	}
	repo := ociRepository(ad, a, refs, cfg)
	ks := &kustomizev1.Kustomization{
		TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: fluxMeta(ad),
		Spec: kustomizev1.KustomizationSpec{
			SourceRef:       kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: repo.Name},
			Path:            "./",
			Prune:           true,
			Wait:            cfg.wait,
			Interval:        metav1.Duration{Duration: cfg.interval},
			Timeout:         &metav1.Duration{Duration: cfg.timeout},
			TargetNamespace: refs.target.namespace,
			KubeConfig:      refs.target.kubeConfig,
			// Applied with this account's rights, not kustomize-controller's.
			ServiceAccountName: cfg.serviceAccountFor(ad.Namespace),
			NameSuffix:         suffix,
			CommonMetadata:     &kustomizev1.CommonMetadata{Labels: workloadLabels(ad)},
		},
	}
	return []client.Object{repo, ks}, nil
}

// nameSuffix makes every rendered object of one artifact instance unique: -<version>-<hash>, or -<hash> alone when
// that is too long. It is derived from what cannot change, the name's hash (nameHash) and spec.component.version,
// as the name itself was: an annotation a tenant edits would rename the workloads, or take another instance's
// names. For the names this project and Konfidence give, that is the suffix their annotations say. The deployer
// owns nameSuffix: Flux replaces whatever the bundle's kustomization.yaml says.
func nameSuffix(ad *konfidencev1.ArtifactDeployment) (string, error) {
	hash := nameHash(ad.Name)
	if v, err := sanitize.DNSLabelName(ad.Spec.Component.Version, sanitize.MaxDNSLabelLength); err == nil {
		if suffix := "-" + v + "-" + hash; len(suffix) <= maxNameSuffixLength {
			return suffix, nil
		}
	}
	if len(hash)+1 > maxNameSuffixLength {
		return "", outcome.Stallingf(konfidencev1.InvalidNameReason, "name %q ends in %q, longer than a name suffix allows", ad.Name, hash)
	}
	return "-" + hash, nil
}
